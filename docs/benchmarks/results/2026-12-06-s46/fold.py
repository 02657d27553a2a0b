import re,sys,collections
# group each sample by the task it ran in: the innermost frame below tokio's run_task/poll
# that names an openraft or ramqpd function (outermost-first search from the root).
samples=[]; cur=[]
for line in open('stacks.txt'):
    if line.startswith('ramqp-worker'):
        if cur: samples.append(cur)
        cur=[]
    elif line.strip():
        parts=line.strip().split(' ',1)
        cur.append(parts[1] if len(parts)>1 else '?')
if cur: samples.append(cur)
def clean(s):
    s=re.sub(r'<[^<>]*>','',s); s=re.sub(r'<[^<>]*>','',s); s=re.sub(r'<[^<>]*>','',s)
    s=s.replace('::{{closure}}','')
    return s[:90]
top=collections.Counter(); second=collections.Counter()
for st in samples:
    root=list(reversed(st))  # root first
    label='other'
    for f in root:
        if ('openraft' in f or 'ramqpd' in f or 'hyper' in f) and 'Instrumented' not in f and 'raw::poll' not in f:
            label=clean(f); break
    else:
        if any('park' in f for f in root): label='tokio park'
        elif any('getdents' in f for f in root): label='getdents (/proc fd count)'
        elif any('blocking' in f for f in root): label='blocking pool'
    top[label]+=1
n=len(samples)
print(n,'samples')
for k,v in top.most_common(40): print(f'{100*v/n:5.1f}% {v:5} {k}')
