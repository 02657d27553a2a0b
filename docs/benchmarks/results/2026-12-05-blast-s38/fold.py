import sys,re,collections
# parse perf script output into stacks (leaf first)
stacks=[];cur=None;comm=None
for line in open(sys.argv[1],errors='replace'):
    if not line.strip():
        if cur is not None: stacks.append((comm,cur))
        cur=None;continue
    if not line.startswith((' ','\t')):
        comm=line.split()[0];cur=[];continue
    parts=line.strip().split(None,1)
    sym=parts[1] if len(parts)>1 else '?'
    sym=re.sub(r'\+0x[0-9a-f]+$','',sym)
    cur.append(sym)
if cur is not None: stacks.append((comm,cur))
import pickle;pickle.dump(stacks,open(sys.argv[2],'wb'))
print(len(stacks))
