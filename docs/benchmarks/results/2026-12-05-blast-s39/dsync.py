# Latency of making 200 KB durable, three writers at once (like three nodes' journals), in the current directory
# (run it on the disk under test; usage: python3 dsync.py MODES [N], e.g. abcabc 300):
# mode a: pwrite + fdatasync (the journal with log_journal_direct = false); b: O_DSYNC pwrite; c: O_DIRECT|O_DSYNC pwrite (the default).
import mmap, os, sys, threading, time, statistics as st
N = int(sys.argv[2]) if len(sys.argv) > 2 else 400
SIZE = 200 * 1024 // 4096 * 4096
REGION = 4 * 1024 * 1024
def worker(i, mode, out):
    path = f"./dsync-{i}.bin"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, b"\0" * REGION); os.fsync(fd); os.close(fd)  # written extents, as a ring reused
    flags = os.O_RDWR
    if mode in "bc": flags |= os.O_DSYNC
    if mode == "c": flags |= os.O_DIRECT
    fd = os.open(path, flags)
    buf = mmap.mmap(-1, SIZE); buf.write(b"x" * SIZE)
    lat = []
    off = 0
    for _ in range(N):
        t = time.perf_counter()
        os.pwritev(fd, [buf], off)
        if mode == "a": os.fdatasync(fd)
        lat.append((time.perf_counter() - t) * 1e3)
        off = (off + SIZE) % (REGION - SIZE) // 4096 * 4096
    os.close(fd); os.unlink(path)
    out.extend(lat)
for mode in sys.argv[1]:
    out = []
    ts = [threading.Thread(target=worker, args=(i, mode, out)) for i in range(3)]
    [t.start() for t in ts]; [t.join() for t in ts]
    q = st.quantiles(out, n=100)
    print(mode, "p50 %.3f p90 %.3f p99 %.3f ms" % (q[49], q[89], q[98]))
