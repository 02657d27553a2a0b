import re,sys
ev=[]
for l in open('trace.txt'):
    m=re.match(r'\s*([\d.]+) \(\s*([\d.]+) ms\): (\S+)/(\d+) (?:\.\.\. \[continued\]: )?(\w+)\((.*?)\)\)?\s+= (-?\d+)',l)
    if m: ev.append((float(m.group(1)),float(m.group(2)),m.group(3),int(m.group(4)),m.group(5),m.group(6),int(m.group(7))))
ev.sort()
tids=set(int(x) for x in sys.argv[1].split(','))
t0=ev[len(ev)//2][0]+float(sys.argv[2]); dur=float(sys.argv[3])
fds={}
for e in ev:
    if t0<=e[0]<t0+dur and e[3] in tids:
        fd=re.search(r'fd: (\d+)',e[5]); fd=fd.group(1) if fd else '?'
        print('%9.3f-%8.3f %-15s %6d %-9s fd%-3s = %d'%(e[0]-t0,e[0]-t0+e[1],e[2],e[3],e[4],fd,e[6]))
