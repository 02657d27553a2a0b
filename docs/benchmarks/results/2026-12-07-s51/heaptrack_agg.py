"""Sums a heaptrack 'leaked' flame-graph stack file (heaptrack_print --flamegraph-cost-type leaked -F FILE) by the leaf-most frame matching REGEX: agg.py FILE REGEX [TOP]. Bytes are divided by 10,000 (the groups of the run)."""
import sys, re, collections
pat = re.compile(sys.argv[2]) if len(sys.argv) > 2 else None
agg = collections.Counter()
tot = 0
for line in open(sys.argv[1]):
    line = line.rstrip('\n')
    stack, _, n = line.rpartition(' ')
    n = int(n); tot += n
    frames = stack.split(';')
    key = None
    for f in reversed(frames):  # leaf-first
        if pat.search(f):
            key = f; break
    if key is None: key = '<none>'
    key = re.sub(r'::h[0-9a-f]{16}$', '', key)
    agg[key] += n
print('total', tot/1e6, 'MB', tot/10000, 'B/group')
for k, v in agg.most_common(int(sys.argv[3]) if len(sys.argv) > 3 else 50):
    print(f'{v/10000:9.1f} B/group  {k[:200]}')
