import collections, re, sys
path, groups, pat = sys.argv[1], int(sys.argv[2]), sys.argv[3]
depth = int(sys.argv[4]) if len(sys.argv) > 4 else 1
c = collections.Counter()
def clean(f): return re.sub(r"::h[0-9a-f]{16}", "", f).split(" (")[0]
for line in open(path):
    stack, _, n = line.rstrip().rpartition(" ")
    frames = stack.split(";")
    s = ";".join(frames)
    if not re.search(pat, s): continue
    own = [clean(f) for f in frames if re.search(r"openraft|ramqpd", f) and "tokio" not in f]
    key = " <- ".join(reversed(own[-depth:])) if own else "?"
    c[key[:230]] += int(n)
tot = sum(c.values())
print(f"total {tot/groups/1024:.2f} KiB per replica")
for k, v in c.most_common(25):
    print(f"{v/groups/1024:7.2f}  {k}")
