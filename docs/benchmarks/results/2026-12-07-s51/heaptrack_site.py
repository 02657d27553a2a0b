"""One call site of a heaptrack 'leaked' stack file (heaptrack_print
--flamegraph-cost-type leaked -F FILE), in bytes per group (divided by
10,000, the groups of the run). For the stacks through the last frame
matching ANCHOR, sums the leaked bytes by
  children: the next DEPTH frames (what the site calls), or
  parents:  the two nearest callers matching REGEX (who calls it).
Usage: heaptrack_site.py FILE ANCHOR children [DEPTH]
       heaptrack_site.py FILE ANCHOR parents REGEX"""
import collections
import re
import sys

path, anchor, mode = sys.argv[1], re.compile(sys.argv[2]), sys.argv[3]
arg = sys.argv[4] if len(sys.argv) > 4 else None


def name(frame, width):
    return re.sub(r'::h[0-9a-f]{16}', '', frame)[:width]


sums = collections.Counter()
total = 0
for line in open(path):
    stack, _, n = line.rstrip('\n').rpartition(' ')
    frames = stack.split(';')
    hits = [i for i, f in enumerate(frames) if anchor.search(f)]
    if not hits:
        continue
    i = hits[-1]
    total += int(n)
    if mode == 'children':
        depth = int(arg) if arg else 1
        key = ' > '.join(name(f, 110) for f in frames[i + 1:i + 1 + depth]) or '<self>'
    else:
        callers = [name(f, 120) for f in frames[:i] if re.search(arg, f)]
        key = ' < '.join(reversed(callers[-2:]))
    sums[key] += int(n)
print('total', total / 10000, 'B/group')
for key, n in sums.most_common(30):
    print(f'{n / 10000:8.1f}  {key}')
