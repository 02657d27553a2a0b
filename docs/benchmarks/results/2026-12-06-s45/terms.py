#!/usr/bin/env python3
import sys,glob,re,os,collections
# terms.py SCRAPEDIR KILL_EPOCH_MS DEAD_NODE : term deltas of each group across the kill
d,kill,dead=sys.argv[1],int(sys.argv[2]),int(sys.argv[3])
files=collections.defaultdict(list)
for f in glob.glob(d+'/n*-*.txt'):
    n,ts=re.match(r'.*/n(\d)-(\d+)\.txt',f).groups(); files[int(n)].append((int(ts),f))
def load(f):
    terms={}; lead={}
    for line in open(f):
        m=re.match(r'(ramqp_raft_\w+)\{.*?group="([^"]+)".*\}\s+(\d+)',line)
        if not m: continue
        k,q,v=m.groups()
        (terms if k=='ramqp_raft_term' else lead)[q]=int(v)
    return terms,lead
surv=[n for n in (1,2,3) if n!=dead]
before={};after={};leader_after={}
for n in surv:
    fs=sorted(files[n])
    b=[f for ts,f in fs if ts<kill][-1]
    a=fs[-1][1]
    tb,_=load(b); ta,la=load(a)
    print(n,'before',os.path.basename(b),'after',os.path.basename(a),len(tb),len(ta))
    for q,t in tb.items(): before[q]=max(before.get(q,0),t)
    for q,t in ta.items(): after[q]=max(after.get(q,0),t)
    for q,v in la.items():
        if v: leader_after[q]=n
# only groups the dead node led: those whose term moved
hist=collections.Counter(after[q]-before[q] for q in before if q in after)
print('term delta per group:',sorted(hist.items()))
