# Background writers shaped like the fold and the segments, in the current directory, for SECONDS (python3 bg.py SECONDS):
# buffered 256 KiB writes, an fdatasync every 8 MiB.
import os, sys, threading, time
stop = time.time() + float(sys.argv[1])
def w(i):
    fd = os.open(f"./bg-{i}.bin", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    b = b"y" * 262144; off = 0
    while time.time() < stop:
        os.pwrite(fd, b, off); off += len(b)
        if off % (8 << 20) == 0: os.fdatasync(fd)
        if off >= (256 << 20): off = 0
        time.sleep(0.002)
    os.close(fd); os.unlink(f"./bg-{i}.bin")
ts = [threading.Thread(target=w, args=(i,)) for i in range(3)]
[t.start() for t in ts]; [t.join() for t in ts]
