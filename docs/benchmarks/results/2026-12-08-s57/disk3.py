import os, threading, time, sys
size=int(sys.argv[1]); dur=float(sys.argv[2]); n=int(sys.argv[3])
res=[0]*n
def w(i):
    fd=os.open(f'/work/disk57/f{i}',os.O_CREAT|os.O_WRONLY|os.O_TRUNC|os.O_APPEND,0o644)
    buf=os.urandom(size); t0=time.time(); c=0
    while time.time()-t0<dur:
        os.write(fd,buf); os.fdatasync(fd); c+=1
    res[i]=c; os.close(fd)
ts=[threading.Thread(target=w,args=(i,)) for i in range(n)]
[t.start() for t in ts]; [t.join() for t in ts]
tot=sum(res)*size
print(f'{n} writers x {size} B appends+fdatasync: {sum(res)/dur:.0f} syncs/s, {tot/dur/1e6:.1f} MB/s, mean {dur*1e3/ (sum(res)/n):.2f} ms per append')
