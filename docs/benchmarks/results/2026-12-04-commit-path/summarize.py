import json,glob,sys,statistics as st
def med(xs): return f"{st.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"
for d in sys.argv[1:]:
    fl=[json.load(open(f)) for f in sorted(glob.glob(d+'/floor-*.json'))]
    f3=[x['fsync_append_256b_3_concurrent']['p50_us'] for x in fl]
    f1=[x['fsync_append_256b']['p50_us'] for x in fl]
    rtt=[x['loopback_rtt_256b']['p50_us'] for x in fl]
    floor=[a+2*b for a,b in zip(f3,rtt)]
    L=[json.load(open(f)) for f in sorted(glob.glob(d+'/leader-t*.json'))]
    p50=[x['percentiles_us']['p50']['median'] for x in L]
    p99=[x['percentiles_us']['p99']['median'] for x in L]
    c50=[x['confirm_percentiles_us']['p50']['median'] for x in L]
    blast=[x['throughput_msg_s']['publish']['median'] for x in L]
    F=[json.load(open(f)) for f in sorted(glob.glob(d+'/follower-t*.json'))]
    fp50=[x['percentiles_us']['p50']['median'] for x in F]
    r=json.load(open(d+'/rate-clusterleader-quorum-raw.json'))['results']
    r50=[x['latency_us']['p50'] for x in r]; r99=[x['latency_us']['p99'] for x in r]
    g=json.load(open(d+'/rig-clusterleader-quorum-raw.json'))['results']
    rig=[x['publish_msg_s'] for x in g]
    terms=open(d+'/terms.txt').read().split('\n')
    ch=sum(1 for t in terms if t and t.split()[2]!=t.split()[3])
    print(d)
    print(f"  floor: 3-conc fsync p50 {f3} (1 alone {f1}), rtt p50 {rtt} -> floor {floor}")
    print(f"  leader closed p50 {med(p50)}  p99 {med(p99)}  pub->accepted p50 {med(c50)}; follower p50 {med(fp50)}")
    print(f"  ratio closed p50 / floor: {st.median(p50)/st.median(floor):.2f}")
    print(f"  fixed 1000/s p50 {med(r50)} p99 {med(r99)}; ratio fixed/closed {st.median(r50)/st.median(p50):.2f}")
    print(f"  blast publish (latency bin, 1000 in flight, no consumer) {med(blast)}; rig 1x1000 with consumer {med(rig)}")
    print(f"  leader changes: {ch} of {len([t for t in terms if t])}")
