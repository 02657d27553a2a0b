import json,glob,sys,statistics as st
def med(xs): return f"{st.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"
print("| set | build | load (start/end) | floor: 3 fsyncs at once p50 + 2 RTT p50 | closed-loop p50 (p99) µs, leader | / floor | fixed 1,000 msg/s p50 (p99) µs | / closed | blast publish msg/s, 1,000 in flight | rig 1 x 1,000 in flight, with consumer | leader changes |")
print("|---|---|---|---|---|---:|---|---:|---|---|---|")
for arg in sys.argv[1:]:
    name,build,ds=arg.split(':')
    ds=ds.split(',')
    G=lambda pat: [f for d in ds for f in sorted(glob.glob(d+'/'+pat))]
    fl=[json.load(open(f)) for f in G('floor-*.json')]
    f3=[x['fsync_append_256b_3_concurrent']['p50_us'] for x in fl]
    rtt=[x['loopback_rtt_256b']['p50_us'] for x in fl]
    floor=[a+2*b for a,b in zip(f3,rtt)]
    L=[json.load(open(f)) for f in G('leader-t*.json')]
    p50=[x['percentiles_us']['p50']['median'] for x in L]
    p99=[x['percentiles_us']['p99']['median'] for x in L]
    blast=[x['throughput_msg_s']['publish']['median'] for x in L]
    r=[x for f in G('rate-clusterleader-quorum-raw.json') for x in json.load(open(f))['results']]
    r50=[x['latency_us']['p50'] for x in r]; r99=[x['latency_us']['p99'] for x in r]
    g=[x for f in G('rig-clusterleader-quorum-raw.json') for x in json.load(open(f))['results']]
    rig=[x['publish_msg_s'] for x in g]
    terms=[t.split() for f in G('terms.txt') for t in open(f).read().split('\n') if t]
    ch=sum(1 for t in terms if t[2]!=t[3])
    m=[l for f in G('machine.txt') for l in open(f).read().split('\n')]
    loads=[l.split('load average:')[1].split(',')[0].strip() for l in m if 'load average' in l]
    fs=(f"{med(floor)} ({st.median(f3):,.0f} + 2 x {st.median(rtt):,.0f})")
    print(f"| {name} | {build} | {'/'.join(loads)} | {fs} | {med(p50)} ({st.median(p99):,.0f}) | {st.median(p50)/st.median(floor):.2f} | {med(r50)} ({st.median(r99):,.0f}) | {st.median(r50)/st.median(p50):.2f} | {med(blast)} | {med(rig)} | {ch} of {len(terms)} |")
