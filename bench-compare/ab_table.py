#!/usr/bin/env python3
"""One markdown row per set of bench-compare/ab.sh.

usage: ab_table.py NAME:LABEL:DIR[,DIR...] ...

The floor is three concurrent 256 B fdatasyncs (p50) plus two loopback
round trips (p50), the median of the runs before and after the set.
Every other column is the median (min-max) over the set's trials.
"""
import glob
import json
import statistics as st
import sys


def med(xs):
    if not xs:
        return "n/a"
    return f"{st.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"


def ratio(a, b):
    return f"{st.median(a) / st.median(b):.2f}" if a and b else "n/a"


print("| set | variant | load (start/end) | floor µs | leader closed-loop p50 (p99) µs | / floor "
      "| fixed 1,000 msg/s p50 (p99) µs | / closed | blast publish msg/s | rig msg/s "
      "| follower closed-loop p50 µs | leader changes |")
print("|---|---|---|---|---|---:|---|---:|---|---|---|---|")
for arg in sys.argv[1:]:
    name, label, dirs = arg.split(":", 2)
    dirs = dirs.split(",")

    def files(pattern):
        return [f for d in dirs for f in sorted(glob.glob(f"{d}/{pattern}"))]

    def load(pattern):
        return [json.load(open(f)) for f in files(pattern)]

    floors = load("floor-*.json")
    floor = [f["fsync_append_256b_3_concurrent"]["p50_us"] + 2 * f["loopback_rtt_256b"]["p50_us"]
             for f in floors]
    leader = load("leader-t*.json")
    p50 = [x["percentiles_us"]["p50"]["median"] for x in leader]
    p99 = [x["percentiles_us"]["p99"]["median"] for x in leader]
    blast = [x["throughput_msg_s"]["publish"]["median"] for x in leader]
    follower = [x["percentiles_us"]["p50"]["median"] for x in load("follower-t*.json")]
    rate = [r for x in load("rate-clusterleader-quorum-raw.json") for r in x["results"]]
    r50 = [r["latency_us"]["p50"] for r in rate]
    r99 = [r["latency_us"]["p99"] for r in rate]
    rig = [r["publish_msg_s"] for x in load("rig-clusterleader-quorum-raw.json") for r in x["results"]]
    terms = [t.split() for f in files("terms.txt") for t in open(f).read().splitlines() if t]
    changes = sum(1 for t in terms if t[2] != t[3])
    machine = [line for f in files("machine.txt") for line in open(f).read().splitlines()]
    loads = [line.split("load average:")[1].split(",")[0].strip()
             for line in machine if "load average" in line]
    p99s = f" ({st.median(p99):,.0f})" if p99 else ""
    r99s = f" ({st.median(r99):,.0f})" if r99 else ""
    print(f"| {name} | {label} | {'/'.join(loads)} | {med(floor)} | {med(p50)}{p99s} "
          f"| {ratio(p50, floor)} | {med(r50)}{r99s} | {ratio(r50, p50)} | {med(blast)} "
          f"| {med(rig)} | {med(follower)} | {changes} of {len(terms)} |")
