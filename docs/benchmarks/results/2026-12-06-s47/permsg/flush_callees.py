#!/usr/bin/env python3
"""Callees of openraft's RaftCore::flush_metrics in a callgrind profile, summed over the
inlined frames callgrind lists separately (file:function entries), plus the function's
inclusive total. Usage: callgrind_annotate --inclusive=yes --tree=calling --threshold=100 OUT
| flush_callees.py"""
import collections, re, sys

agg = collections.Counter()
cur = False
total = None
for line in sys.stdin:
    m = re.match(r'\s*([\d,]+) \(\s*[\d.]+%\)\s+(\*|>|<)\s+(.*)', line)
    if not m:
        continue
    n = int(m.group(1).replace(',', ''))
    kind, rest = m.group(2), m.group(3)
    name = rest.split(' [')[0]
    if kind == '*':
        cur = name.endswith('RaftCore<C,NF,LS,SM>::flush_metrics')
        if cur and name.startswith('/work/main/vendor/openraft/src/core/raft_core.rs:') and total is None:
            total = n
        continue
    if cur and kind == '>':
        agg[re.sub(r'^/\S*?:', '', rest.split(' (')[0])[:150]] += n
print(f"flush_metrics inclusive: {total:,}")
for k, v in agg.most_common(20):
    print(f"{v:>13,} {k}")
