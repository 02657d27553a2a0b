import sys,re,pickle,collections
stacks=pickle.load(open(sys.argv[1],'rb'));root=sys.argv[2];depth=int(sys.argv[3]) if len(sys.argv)>3 else 1
tot=len(stacks);n=0;child=collections.Counter();leaf=collections.Counter()
skip=re.compile(r'\(inlined\)|^core::|^std::|^tokio::runtime|^<core::|AssertUnwindSafe|catch_unwind')
for comm,st in stacks:
    idx=[i for i,s in enumerate(st) if re.search(root,s)]
    if not idx: continue
    n+=1;i=max(idx)  # outermost occurrence (stack leaf-first)
    below=[s for s in st[:i] if not re.search(r'\{\{closure\}\} \(inlined\)$',s)]
    # walk down from root: pick first 'depth' meaningful frames
    path=[]
    for s in reversed(below):
        if re.search(root,s): continue
        if skip.search(s): continue
        path.append(s[:110])
        if len(path)>=depth: break
    child[' > '.join(path) if path else '(self)']+=1
    leaf[st[0][:110]]+=1
print('root %s: %d of %d samples (%.1f%%)'%(root,n,tot,100*n/tot))
for k,v in child.most_common(25): print('%5.1f%% %s'%(100*v/tot,k))
print('-- leaves')
for k,v in leaf.most_common(15): print('%5.1f%% %s'%(100*v/tot,k))
