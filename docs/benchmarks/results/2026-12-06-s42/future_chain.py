#!/usr/bin/env python3
"""Parse rustc -Zprint-type-sizes output; follow the largest awaitee chain of a future."""
import re, sys
types = {}
def norm(t): return re.sub(r"\b(?:[a-z_][a-z0-9_]*::)+(?=[A-Z])", "", t).strip()
cur = None; var = None
for line in open(sys.argv[1]):
    m = re.match(r"print-type-size type: `(.*)`: (\d+) bytes", line)
    if m:
        cur = {"size": int(m.group(2)), "variants": []}; types.setdefault(norm(m.group(1)), cur); var = None; continue
    m = re.match(r"print-type-size     variant `(.*)`: (\d+) bytes", line)
    if m and cur is not None:
        var = (m.group(1), int(m.group(2)), []); cur["variants"].append(var); continue
    m = re.match(r"print-type-size     +(?:local|upvar|field) `(.*?)`: (\d+) bytes.*?(?:type: (.*))?$", line)
    if m and cur is not None and var is None:
        var = ("struct", cur["size"], []); cur["variants"].append(var)
    if m and var is not None:
        var[2].append((m.group(1), int(m.group(2)), (m.group(3) or "").strip()))
def short(t): return re.sub(r"<[^<>]*(<[^<>]*(<[^<>]*(<[^<>]*>[^<>]*)*>[^<>]*)*>[^<>]*)*>", "<..>", t)[:160]
def find(prefix):
    c = [k for k in types if re.search(prefix, k) and k.startswith("{async")]
    return c
def descend(name, depth=0, maxdepth=12):
    t = types.get(name)
    if not t or depth > maxdepth: return
    vs = sorted(t["variants"], key=lambda v: -v[1])
    print("  "*depth + f"{t['size']:6d} {short(name)}")
    for v in vs[:3]:
        big = sorted(v[2], key=lambda f: -f[1])[:3]
        print("  "*depth + f"   variant {v[0]} {v[1]}: " + "; ".join(f"{f[0]} {f[1]} {short(f[2])[:90]}" for f in big))
    if name.startswith("Instrumented<") and name.endswith(">"):
        inner = name[len("Instrumented<"):-1]
        if inner in types:
            descend(inner, depth+1, maxdepth); return
    if vs:
        big = sorted(vs[0][2], key=lambda f: -f[1])
        if big and big[0][2]:
            tn = big[0][2]
            # resolve abbreviated type names by searching
            tn = norm(tn)
            cands = [tn] if tn in types else []
            if cands:
                descend(min(cands, key=len), depth+1, maxdepth)
if __name__ == "__main__":
    for k in find(sys.argv[2])[:int(sys.argv[3]) if len(sys.argv)>3 else 1]:
        descend(k); print()
