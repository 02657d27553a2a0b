#!/usr/bin/env python3
"""From a kept many_queues data folder: when nodes 2 and 3 saw node 1 lost,
and how long after that each group got a leader ("leading" lines)."""
import re, sys, datetime, collections
root = sys.argv[1]
ts = re.compile(r'^(\S+Z)\s+(\w+)\s+(\S+): (.*)$')
def parse(t):
    return datetime.datetime.fromisoformat(t.replace('Z', '+00:00')).timestamp()
last1 = None
for line in open(f'{root}/node1/log', errors='replace'):
    m = ts.match(line)
    if m: last1 = parse(m.group(1))
print('node1 last log line at', last1)
for n in (2, 3):
    lost = None; leading = []; nolonger = 0; other = collections.Counter()
    for line in open(f'{root}/node{n}/log', errors='replace'):
        m = ts.match(line)
        if not m: continue
        t = parse(m.group(1)); msg = m.group(4)
        if lost is None:
            if 'peer node lost' in msg and 'peer=1' in msg: lost = t
            continue
        if msg.startswith('leading'): leading.append(t - lost)
        elif msg.startswith('no longer leading'): nolonger += 1
        else: other[msg.split(' ')[0] + ' ' + m.group(2)] += 1
    leading.sort()
    q = lambda p: leading[min(len(leading)-1, int(p*len(leading)))] if leading else None
    print(f'node{n}: lost seen at {lost} ({(lost - last1) if lost and last1 else None:.2f} s after node1 last line)'
          f' leading after loss: {len(leading)}; p10 {q(.1):.2f} p50 {q(.5):.2f} p90 {q(.9):.2f} max {leading[-1] if leading else None:.2f} s;'
          f' no longer leading: {nolonger}')
    print('   other lines after loss:', other.most_common(8))

# histogram of "leading" after the loss, per 250 ms, both nodes
import math
for n in (2, 3):
    lost=None; hist=collections.Counter()
    for line in open(f'{root}/node{n}/log', errors='replace'):
        m = ts.match(line)
        if not m: continue
        t = parse(m.group(1)); msg=m.group(4)
        if lost is None:
            if 'peer node lost' in msg and 'peer=1' in msg: lost=t
            continue
        if msg.startswith('leading'): hist[math.floor((t-lost)*4)/4]+=1
    print(f'node{n}', ' '.join(f'{k:.2f}:{v}' for k,v in sorted(hist.items())))
