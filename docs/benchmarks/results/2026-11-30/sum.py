import json,glob,os
os.chdir('/tmp/rawres')
def f(v,d=1):
    if not v: return 'n/a'
    return f"{v['median']:.{d}f} ({v['min']:.{d}f}-{v['max']:.{d}f})"
for name in ['pre','conf','quorum','rmq-pre','rmq-conf']:
    for c in ['raw','fe2o3']:
        p=f'{name}-{c}.json'
        if not os.path.exists(p) or os.path.getsize(p)==0: print(name,c,'missing'); continue
        r=json.load(open(p)); pc=r['percentiles_us']; t=r['throughput_msg_s']
        errs=[e for tr in r['trials'] for e in tr.get('close_errors',[])]
        print(f"{name:9} {c:6} p50 {f(pc['p50'])} p99 {f(pc['p99'])} p99.9 {f(pc['p99_9'])} | publish {f(t['publish'],0)} drain {f(t['drain'],0)} total {f(t['total'],0)} | closeerr {len(errs)} {errs[:1]}")
