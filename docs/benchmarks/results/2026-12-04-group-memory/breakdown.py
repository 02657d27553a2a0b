#!/usr/bin/env python3
"""Group heaptrack's peak heap by call site, per Raft group replica.

heaptrack -o /tmp/ht300 target/release/examples/many_quorum_queues 300
heaptrack_print -f /tmp/ht300.zst -p 0 -a 0 -T 0 -l 0 \
    -F /tmp/ht300.flame --flamegraph-cost-type peak
python3 breakdown.py /tmp/ht300.flame 900
"""
import collections
import re
import sys

path, groups = sys.argv[1], int(sys.argv[2])
rows = []
for line in open(path):
    stack, _, n = line.rstrip().rpartition(" ")
    rows.append((stack.split(";"), int(n)))


def clean(frame):
    return re.sub(r"::h[0-9a-f]{16}", "", frame).split(" (")[0]


def category(frames):
    s = ";".join(frames)
    if "ClientResponderQueue" in s:
        return "[capacity] openraft ClientResponderQueue::with_capacity(8192)"
    if "PendingResponds" in s:
        return "[capacity] openraft PendingResponds::new (4 x VecDeque 1024)"
    if "EngineOutput" in s:
        return "[capacity] openraft EngineOutput::new (VecDeque<Command> 4096)"
    if "RangeMap" in s:
        return "[capacity] openraft LogStages (MultiRangeMap, log_stage_capacity 1024)"
    if "base2histogram" in s:
        return "openraft runtime-stats histograms (base2histogram, zeroed)"
    if "tokio::sync::mpsc" in s or "TokioMpsc" in s:
        return "tokio mpsc channel blocks"
    if "tokio::runtime::task::core::Cell" in s:
        return "tokio task cells (spawned futures)"
    if "tokio::sync::watch" in s:
        return "tokio watch channels (metrics, io progress)"
    if "redb" in s:
        return "redb / store-redb"
    leaf = [f for f in frames if re.search(r"openraft|ramqpd", f)]
    if leaf and re.search(r"Raft\$LT\$C\$C\$SM\$GT\$::(new|build)::", leaf[-1]):
        return "[capacity] openraft Raft::build (inlined with_capacity)"
    for f in reversed(frames):
        if "ramqpd_" in f:
            return "ours: " + clean(f)[:70]
        if "openraft" in f:
            return "openraft other"
    return "other"


cats = collections.Counter()
for frames, n in rows:
    cats[category(frames)] += n
cap = sum(v for k, v in cats.items() if k.startswith("[capacity]"))
total = sum(cats.values())
print(f"peak heap {total / 2**20:.1f} MiB over {groups} replicas: "
      f"{total / groups / 1024:.1f} KiB each; preallocated capacity "
      f"{cap / groups / 1024:.1f} KiB, the rest {(total - cap) / groups / 1024:.1f} KiB")
ours = sum(v for k, v in cats.items() if k.startswith("ours:"))
print(f"ours (all ramqpd_* leaf sites): {ours / groups / 1024:.1f} KiB")
for k, v in cats.most_common(30):
    print(f"{v / groups / 1024:8.1f} KiB  {k}")
