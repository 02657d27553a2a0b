#!/usr/bin/env bash
# 3 runs of many_queues 10k; keep the stopping node's hand-off figures, then drop the data.
set -u
bins="$1"; out="$2"; mkdir -p "$out"
for i in 1 2 3; do
  "$bins/many_queues" --bin-dir "$bins" --queues 10000 --idle-secs 20 --keep --base-port 9600 > "$out/run$i.json" 2> "$out/run$i.log"
  data=$(grep -o '/tmp/ramqp-many-[0-9]*' "$out/run$i.log" | head -1)
  /usr/bin/python3 - "$data/node3/log" "$out/run$i.json" "$i" >> "$out/stop-summary.txt" <<'PY'
import json, sys, datetime
log, js, i = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(js))
lines = open(log, errors="replace").read().splitlines()
ts = lambda l: datetime.datetime.fromisoformat(l[:26])
sig = next(l for l in lines if "shutting down: closing connections" in l)
t0 = ts(sig)
end = t0 + datetime.timedelta(seconds=d["stop_sigterm_exit_s"])
window = [l for l in lines if l[:4] == "2026" and t0 <= ts(l) <= end]
handed = sum("handed off before stopping" in l for l in window)
none = sum("no hand-off before stopping" in l for l in window)
again = sum("leadership_watch: leading" in l for l in window)
print(f"run {i}: stop exit {d['stop_sigterm_exit_s']} s, all led by others {d['stop_all_led_by_others_s']} s; "
      f"handed off {handed}, no hand-off {none}, node 3 led again while stopping {again}")
PY
  rm -rf "$data"
done
