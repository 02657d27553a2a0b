import sys, collections, subprocess
data = sys.argv[1]
out = subprocess.run(["perf", "script", "-i", data, "-F", "pid,time"], capture_output=True, text=True).stdout
c = collections.defaultdict(collections.Counter); start = None
for line in out.splitlines():
    parts = line.split()
    if len(parts) < 2: continue
    pid, t = parts[0], float(parts[1].rstrip(":"))
    start = t if start is None else start
    c[int((t - start) * 2)][pid] += 1
for b in sorted(c):
    print(f"{b/2:5.1f} s: " + " ".join(f"{p}={n}" for p, n in c[b].most_common() if n >= 20))
