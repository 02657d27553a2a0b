import subprocess,sys,re,glob
def load(f):
    out=subprocess.run(["callgrind_annotate","--inclusive=yes","--threshold=100",f],capture_output=True,text=True).stdout
    d={}
    for line in out.splitlines():
        m=re.match(r"\s*([\d,]+)\s+\([^)]*\)\s+(.*)",line) or re.match(r"\s*([\d,]+)\s+(.*)",line)
        if m:
            v=int(m.group(1).replace(",",""))
            d[m.group(2).strip()]=max(v,d.get(m.group(2).strip(),0))
    return d
w=sys.argv[1]
a=load(glob.glob(w+"/quorum-callgrind-2000.callgrind.out")[0] if glob.glob(w+"/quorum-callgrind-2000.callgrind.out") else sys.exit("no"))
b=load(glob.glob(w+"/quorum-callgrind-12000.callgrind.out")[0])
r=sorted(((b.get(k,0)-a.get(k,0))/10000,k) for k in b)
r.reverse()
for v,k in r[:int(sys.argv[2])]: print(f"{v:9.0f}  {k}")
