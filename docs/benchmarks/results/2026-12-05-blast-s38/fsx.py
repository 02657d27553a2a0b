import os,threading,time,sys,statistics
bg=int(sys.argv[1]); dur=3.0
lat=[[] for _ in range(3)]
stop=time.time()+dur
def journal(i):
    fd=os.open(f'/work/fsx/j{i}',os.O_RDWR|os.O_CREAT); os.ftruncate(fd,64<<20)
    buf=b'x'*200000; off=0
    os.pwrite(fd,b'\0'*(64<<20),0); os.fsync(fd)
    while time.time()<stop:
        t=time.perf_counter(); os.pwrite(fd,buf,off); os.fdatasync(fd); lat[i].append(time.perf_counter()-t)
        off=(off+200000)%(60<<20); time.sleep(0.0005)
def fold(i):
    fd=os.open(f'/work/fsx/f{i}',os.O_RDWR|os.O_CREAT); buf=b'y'*(3400000); off=0
    while time.time()<stop:
        os.pwrite(fd,buf,off); os.fdatasync(fd); off+=len(buf); time.sleep(0.022)
def seg(i):
    fd=os.open(f'/work/fsx/s{i}',os.O_RDWR|os.O_CREAT); buf=b'z'*262144; off=0
    while time.time()<stop:
        os.pwrite(fd,buf,off); off+=len(buf)
        if off%(4<<20)==0: os.posix_fadvise(fd,off-(4<<20),4<<20,os.POSIX_FADV_DONTNEED)
        time.sleep(0.003)
ts=[threading.Thread(target=journal,args=(i,)) for i in range(3)]
if bg: ts+=[threading.Thread(target=fold,args=(i,)) for i in range(3)]+[threading.Thread(target=seg,args=(i,)) for i in range(3)]
[t.start() for t in ts]; [t.join() for t in ts]
a=sorted(sum(lat,[]))
print('bg',bg,'n',len(a),'p50 %.3f p90 %.3f p99 %.3f ms'%(a[len(a)//2]*1e3,a[int(len(a)*.9)]*1e3,a[int(len(a)*.99)]*1e3))
