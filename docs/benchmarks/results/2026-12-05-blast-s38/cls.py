import sys,re,pickle,collections
stacks=pickle.load(open(sys.argv[1],'rb'))
cls=[('connection','Connection::run::'),('h2 client','H2ClientFuture|h2::client'),('h2 server','h2::server|hyper::proto::h2::server|hyper::server'),
('fabric peer','ramqpd_fabric::peer'),('fabric server','ramqpd_fabric::server'),('replication','ReplicationCore'),('raft core','RaftCore<'),('sm worker','sm::worker::Worker'),
('proposer','propose_in_order'),('append feed','append_feed|append_stream'),('rpc','quorum::rpc|serve_rpc'),('writer','store_redb::writer'),('fold','store_redb::fold'),('settle batcher','settle_batcher'),('io fwd','io_completion_forwarder'),('mio poll','mio::poll'),('park','park|Parker')]
c=collections.Counter()
for comm,st in stacks:
    j=' | '.join(st)
    for name,rx in cls:
        if re.search(rx,j): c[name]+=1;break
    else: c['other:'+comm]+=1
tot=len(stacks)
for k,v in c.most_common(): print('%5.1f%% %4d %s'%(100*v/tot,v,k))
