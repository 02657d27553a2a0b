#!/usr/bin/env bash
# What one redb commit costs, for two builds side by side (issue 13):
# pages and bytes written per commit (strace; which tree each page belongs
# to and how many contiguous runs, scripts/redb-commit-pages.py), also with
# a deep entries tree (1,000 groups of 20 entries preloaded); instructions
# per commit (callgrind, two run lengths subtracted; the per-function
# breakdown goes to OUT_DIR/callgrind-*.txt); commit latency and CPU alone
# and with three processes at once, against a bare fdatasync and against
# the same fdatasync behind the store's two thread hand-offs
# (commit_latency), in alternating rounds so both builds see the same
# machine. BEFORE_DIR may equal AFTER_DIR: one build twice shows the
# machine's spread.
#
#   scripts/redb-commit-cost.sh BEFORE_DIR AFTER_DIR OUT_DIR [ROUNDS] [DISK_DIR]
#
# BEFORE_DIR and AFTER_DIR hold the release examples commit_cost and
# commit_latency of each build (cargo build -p ramqpd-store-redb --release
# --examples, then copy target/release/examples/{commit_cost,commit_latency}).
# DISK_DIR is a directory on the real disk (default: OUT_DIR). Writes JSON
# lines to OUT_DIR: pages.jsonl, instructions.jsonl, cost.jsonl,
# latency.jsonl, and callgrind-*.txt. Needs strace, valgrind
# (callgrind_annotate), python3.
set -euo pipefail

if [[ $# -lt 3 ]]; then
    echo "usage: $0 BEFORE_DIR AFTER_DIR OUT_DIR [ROUNDS] [DISK_DIR]" >&2
    exit 2
fi
before="$1"
after="$2"
out="$3"
rounds="${4:-5}"
mkdir -p "$out"
disk="${5:-$out}"
here="$(cd "$(dirname "$0")" && pwd)"
work="$(mktemp -d "$disk/redb-commit-cost.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# 20 entries per group when more than one group: the measured group's rows
# then sit between other groups' rows, in a deeper tree.
preload_for() {
    if [[ "$1" -gt 1 ]]; then echo 20; else echo 0; fi
}

# Pages and bytes per commit: every pwrite64 of the writer between two
# fdatasyncs is one commit's write set; each page is told apart by its
# content (scripts/redb-commit-pages.py).
pages() {
    local build="$1" dir="$2" committed="$3" groups="$4"
    strace -f -xx -s 4096 -e trace=pwrite64,fdatasync,ftruncate -o "$work/trace" \
        "$dir/commit_cost" --appends 500 --committed "$committed" \
        --groups "$groups" --preload "$(preload_for "$groups")" --dir "$work" >/dev/null
    python3 "$here/redb-commit-pages.py" "$work/trace" \
        "$build committed=$committed groups=$groups" $((groups + 20))
}

# Instructions per commit: callgrind's total for 3000 commits minus 1000,
# over 2000 (start-up, preload and close cancel out).
instructions() {
    local build="$1" dir="$2" committed="$3" groups="$4" n
    declare -A ir
    for n in 1000 3000; do
        valgrind --tool=callgrind --callgrind-out-file="$work/cg.$n" \
            "$dir/commit_cost" --appends "$n" --committed "$committed" \
            --groups "$groups" --preload "$(preload_for "$groups")" --dir "$work" \
            >/dev/null 2>"$work/cg.$n.err"
        ir[$n]="$(sed -n 's/^summary: //p' "$work/cg.$n")"
    done
    python3 "$here/callgrind-delta.py" "$work/cg.1000" "$work/cg.3000" 2000 \
        >"$out/callgrind-$build-committed=$committed-groups=$groups.txt"
    echo "{\"build\":\"$build\",\"committed\":$committed,\"groups\":$groups,\"ir_1000\":${ir[1000]},\"ir_3000\":${ir[3000]},\"instructions_per_commit\":$(((ir[3000] - ir[1000]) / 2000))}"
}

# commit_cost's text line as JSON.
cost() {
    local build="$1" dir="$2" committed="$3" round="$4"
    "$dir/commit_cost" --appends 2000 --committed "$committed" --dir "$work" |
        python3 -c '
import json, re, sys
line = sys.stdin.read()
kv = dict(re.findall(r"(mean commit|commits|write_bytes|wchar)=([0-9.]+)", line))
print(json.dumps({"build": sys.argv[1], "round": int(sys.argv[2]), "committed": sys.argv[3] == "true",
    "commits": int(kv["commits"]), "mean_commit_us": float(kv["mean commit"]),
    "write_bytes_per_commit": float(kv["write_bytes"]), "wchar_per_commit": float(kv["wchar"])}))
' "$build" "$round" "$committed"
}

latency() {
    local build="$1" dir="$2" mode="$3" procs="$4" round="$5"
    "$dir/commit_latency" --mode "$mode" --procs "$procs" --seconds 5 --dir "$work" |
        python3 -c '
import json, sys
r = json.loads(sys.stdin.read()); r["build"] = sys.argv[1]; r["round"] = int(sys.argv[2])
print(json.dumps(r))' "$build" "$round"
}

# ONLY_ROUNDS=1 skips the strace and callgrind part (already in OUT_DIR).
for shape in "false 1" "true 1" "true 1000"; do
    [[ -n "${ONLY_ROUNDS:-}" ]] && break
    read -r committed groups <<<"$shape"
    pages before "$before" "$committed" "$groups" >>"$out/pages.jsonl"
    pages after "$after" "$committed" "$groups" >>"$out/pages.jsonl"
    instructions before "$before" "$committed" "$groups" >>"$out/instructions.jsonl"
    instructions after "$after" "$committed" "$groups" >>"$out/instructions.jsonl"
done
for round in $(seq 1 "$rounds"); do
    for committed in false true; do
        cost before "$before" "$committed" "$round" >>"$out/cost.jsonl"
        cost after "$after" "$committed" "$round" >>"$out/cost.jsonl"
    done
    for procs in 1 3; do
        latency floor "$after" fsync "$procs" "$round" >>"$out/latency.jsonl"
        latency handoff "$after" fsync-thread "$procs" "$round" >>"$out/latency.jsonl"
        latency before "$before" redb "$procs" "$round" >>"$out/latency.jsonl"
        latency after "$after" redb "$procs" "$round" >>"$out/latency.jsonl"
    done
done
echo "results in $out"
