# Session 34: the follower path of each set (session 30's table.py shows
# the leader's). usage: python3 table_follower.py a1:before:a1-before ...
import json, glob, sys, statistics as st
def med(xs): return f"{st.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"
print("| set | build | closed-loop p50 (p99) µs, via follower | blast publish msg/s via follower, 1,000 in flight | fixed 1,000 msg/s p50 µs via follower | rig via follower, with consumer |")
print("|---|---|---|---|---|---|")
for arg in sys.argv[1:]:
    name, build, d = arg.split(':')
    F = [json.load(open(f)) for f in sorted(glob.glob(d + '/follower-t*.json'))]
    p50 = [x['percentiles_us']['p50']['median'] for x in F]
    p99 = [x['percentiles_us']['p99']['median'] for x in F]
    blast = [x['throughput_msg_s']['publish']['median'] for x in F]
    r = [x for f in glob.glob(d + '/rate-clusterfollower-quorum-raw.json') for x in json.load(open(f))['results']]
    g = [x for f in glob.glob(d + '/rig-clusterfollower-quorum-raw.json') for x in json.load(open(f))['results']]
    r50 = med([x['latency_us']['p50'] for x in r]) if r else "-"
    rig = med([x['publish_msg_s'] for x in g]) if g else "-"
    print(f"| {name} | {build} | {med(p50)} ({st.median(p99):,.0f}) | {med(blast)} | {r50} | {rig} |")
