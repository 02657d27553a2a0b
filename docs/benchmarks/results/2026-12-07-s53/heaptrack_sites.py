"""Sum what a heaptrack profile still held ("leaked") by the first frame matching a pattern.

usage: python3 heaptrack_sites.py LEAKS.txt 'vendor/openraft/src|broker/src' 45
LEAKS.txt: heaptrack_print -f OUT.zst --print-leaks 1 --print-peaks 0 --print-allocators 0
  --print-temporary 0 -m 0 -n 400 -s 40 (-m 0 keeps the source lines of inlined frames).
Prints bytes per group (leaked bytes / 10,000) and allocation calls per group from each site.
"""
import re,collections,sys
txt=open(sys.argv[1]).read().split('\n')
pat=re.compile(sys.argv[2])
blocks=[];cur=None
for l in txt:
    if re.match(r'^\S.* leaked over \d+ calls from',l):
        cur=[l];blocks.append(cur)
    elif cur is not None and l.strip(): cur.append(l.strip())
def sz(s):
    v=s.split()[0].rstrip('B'); m={'K':1e3,'M':1e6,'G':1e9}
    return float(v[:-1])*m[v[-1]] if v[-1] in m else float(v)
agg=collections.Counter(); cnt=collections.Counter()
for b in blocks:
    ats=[l for l in b[1:] if l.startswith('at ')]
    ks=[a for a in ats if pat.search(a)]
    k=ks[0] if ks else '<none>'
    agg[k]+=sz(b[0]); cnt[k]+=int(re.search(r'over (\d+) calls',b[0]).group(1))
for k,v in agg.most_common(int(sys.argv[3]) if len(sys.argv)>3 else 40): print(f'{v/1e4:8.3f} B/grp {cnt[k]/1e4:7.2f}/grp {k}')
