"""For allocations under the last frame matching ANCHOR, sums leaked bytes by the two nearest callers matching PARENT: parents.py FILE ANCHOR PARENT. Bytes divided by 10,000 groups."""
import sys, re, collections
anchor = re.compile(sys.argv[2]); pp = re.compile(sys.argv[3])
agg = collections.Counter(); tot=0
for line in open(sys.argv[1]):
    stack, _, n = line.rstrip('\n').rpartition(' '); n=int(n)
    fr = stack.split(';')
    idx = [i for i,f in enumerate(fr) if anchor.search(f)]
    if not idx: continue
    i = idx[-1]; tot += n
    par = [re.sub(r'::h[0-9a-f]{16}','',f)[:120] for f in fr[:i] if pp.search(f)]
    agg[' < '.join(reversed(par[-2:]))] += n
print('total', tot/10000, 'B/group')
for k,v in agg.most_common(12): print(f'{v/10000:8.1f}  {k}')
