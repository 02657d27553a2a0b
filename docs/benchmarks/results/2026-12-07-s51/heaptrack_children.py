"""Under the last frame matching ANCHOR, sums leaked bytes by the next DEPTH frames: children.py FILE ANCHOR [DEPTH]. Bytes divided by 10,000 groups."""
import sys, re, collections
anchor = re.compile(sys.argv[2]); depth = int(sys.argv[3]) if len(sys.argv) > 3 else 1
agg = collections.Counter(); tot=0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip('\n').rpartition(' '); n=int(n)
    fr = stack.split(';')
    idx = [i for i,f in enumerate(fr) if anchor.search(f)]
    if not idx: continue
    i = idx[-1]
    tot += n
    child = ' > '.join(re.sub(r'::h[0-9a-f]{16}','',f)[:110] for f in fr[i+1:i+1+depth]) or '<self>'
    agg[child] += n
print('total', tot/10000, 'B/group')
for k,v in agg.most_common(30): print(f'{v/10000:8.1f}  {k}')
