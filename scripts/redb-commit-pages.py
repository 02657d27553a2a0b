#!/usr/bin/env python3
"""Which pages one redb commit writes, from an strace of commit_cost.

    strace -f -xx -s 4096 -e trace=pwrite64,fdatasync,ftruncate,fallocate -o TRACE \
        commit_cost --appends 500 --committed true --dir DIR
    scripts/redb-commit-pages.py TRACE [LABEL] [SKIP]

Every pwrite64 between two fdatasyncs is one commit's write set. Each
written page is classified by its content (redb's first page byte is 1 for a
B-tree leaf, 2 for a branch):
  header        offset 0 (redb's file header with the two commit slots)
  table_tree    a leaf naming "raft_entries" (the user table tree: each
                table's root page and checksum)
  system_tree   a leaf naming "data_pages_unreachable" (redb's system table
                tree)
  entries_leaf  a leaf holding our payload ("xxxx...")
  branch        a branch page (of the entries tree: the only tree deep
                enough to have one here)
  freed_list    any other leaf (redb's data_pages_unreachable list of the
                pages this commit freed, written into the system tree)
A page is "fresh" when its offset was never written before in the trace
(the file is new, so that block was a hole: the kernel allocates it and
fdatasync must also commit the file system's metadata). Prints one JSON
line of means per commit over the steady part (past the first SKIP
commits, default 20, e.g. more with --preload; before the last 5), the
contiguous runs of bytes per commit (each run is at least one block-layer
request at the fdatasync), and the ftruncate (file growth) count.
"""
import collections
import json
import re
import statistics
import sys

path = sys.argv[1]
label = sys.argv[2] if len(sys.argv) > 2 else ""
skip = int(sys.argv[3]) if len(sys.argv) > 3 else 20
PW = re.compile(r'pwrite64\(\d+, "((?:\\x[0-9a-f]{2})*)"(?:\.\.\.)?, (\d+), (\d+)\) = (\d+)')
X = b"x" * 64


def classify(offset, data):
    if offset == 0:
        return "header"
    if not data:
        return "unknown"
    if data[0] == 2:
        return "branch"
    if data[0] == 1:
        if b"raft_entries" in data:
            return "table_tree"
        if b"data_pages_unreachable" in data:
            return "system_tree"
        if X in data:
            return "entries_leaf"
        return "freed_list"
    return "other"


commits, cur = [], []
seen = set()
truncates = 0
for line in open(path):
    m = PW.search(line)
    if m:
        data = bytes.fromhex(m.group(1).replace("\\x", ""))
        length, offset = int(m.group(2)), int(m.group(3))
        fresh = offset not in seen
        seen.add(offset)
        cur.append((classify(offset, data), length, fresh, offset))
    elif "ftruncate(" in line:
        truncates += 1
    elif "fdatasync(" in line and "= 0" in line:
        if cur:
            commits.append(cur)
        cur = []
body = commits[skip:-5]
kinds = collections.Counter()
bytes_by_kind = collections.Counter()
fresh_pages = 0
commits_with_fresh = 0
for c in body:
    any_fresh = False
    for kind, length, fresh, _ in c:
        kinds[kind] += 1
        bytes_by_kind[kind] += length
        if fresh and kind != "header":
            fresh_pages += 1
            any_fresh = True
    commits_with_fresh += any_fresh
n = len(body)


def runs(c):
    spans = sorted((o, o + length) for _, length, _, o in c)
    count, end = 0, None
    for start, stop in spans:
        if start != end:
            count += 1
        end = stop
    return count


print(json.dumps({
    "label": label,
    "commits": n,
    "pages_per_commit": {k: round(v / n, 3) for k, v in sorted(kinds.items())},
    "bytes_per_commit": {k: round(v / n, 1) for k, v in sorted(bytes_by_kind.items())},
    "bytes_per_commit_total": round(sum(sum(x[1] for x in c) for c in body) / n, 1),
    "contiguous_runs_per_commit": round(statistics.mean(runs(c) for c in body), 2),
    "fresh_pages_per_commit": round(fresh_pages / n, 3),
    "commits_with_a_fresh_page": round(commits_with_fresh / n, 3),
    "ftruncates": truncates,
}))
