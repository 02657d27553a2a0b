#!/usr/bin/env python3
"""log_counts.py START_ISO NODE...: in the kept data folder of a many_queues run (--keep), per node, the
log lines after START (the first survivor's `peer node lost`), by kind and by half second after it:
openraft heartbeat failures by target and result, `leading`, `stops serving`, `serving again`, and
any other WARN/ERROR. Run in that folder; the brokers logged with RAMQP_LOG_LEVEL as in README.md."""
import re,sys,collections
from datetime import datetime
t0=datetime.fromisoformat(sys.argv[1])
for n in sys.argv[2:]:
    h=collections.defaultdict(collections.Counter)
    for line in open(f"node{n}/log",errors='replace'):
        line=re.sub(r'\x1b\[[0-9;]*m','',line)
        try: t=(datetime.fromisoformat(line[:26])-t0).total_seconds()
        except: continue
        if t<-0.5: continue
        b=int(t*2)/2
        m=re.search(r'HeartbeatWorker\(id=\d+, target=(\d+)\) failed to send a heartbeat: (\w+)',line)
        if m: h['hbfail-to%s-%s'%(m.group(1),m.group(2)[:12])][b]+=1
        elif 'stops serving' in line: h['stop'][b]+=1
        elif 'serving again' in line: h['again'][b]+=1
        elif ': leading' in line: h['lead'][b]+=1
        elif 'no longer leading' in line: h['nolonger'][b]+=1
        elif 'WARN' in line or 'ERROR' in line:
            k=re.sub(r'\d+','N',line[27:140]); h['other:'+k][b]+=1
    print('== node',n)
    for k in sorted(h): print(' ',k, sum(h[k].values()), sorted(h[k].items())[:30])
