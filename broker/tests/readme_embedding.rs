//! The README's "Embed it in a Rust test" example, as a test, so that it
//! cannot rot: the code between the two `README` marker lines below is
//! what the README shows, and `the_readme_shows_this_file` fails when the
//! two differ. It uses only the public API and fe2o3-amqp, as a user's
//! crate would, with `ramqpd-broker` (feature `test-cluster`) and
//! `fe2o3-amqp` as dev-dependencies.

// README: begin
use fe2o3_amqp::{Connection, Receiver, Sender, Session};
use ramqpd_broker::{Broker, BrokerConfig, Cluster};

#[tokio::test]
async fn one_node() -> Result<(), Box<dyn std::error::Error>> {
    // An ephemeral port and a temporary data directory.
    let broker = Broker::start(BrokerConfig::default()).await?;
    let mut connection = Connection::open("readme", broker.url().as_str()).await?;
    let mut session = Session::begin(&mut connection).await?;
    let mut sender = Sender::attach(&mut session, "tx", "/quorum/orders").await?;
    sender.send("hello").await?.accepted_or("not accepted")?;
    let mut receiver = Receiver::attach(&mut session, "rx", "/quorum/orders").await?;
    let delivery = receiver.recv::<String>().await?;
    assert_eq!(delivery.body(), "hello");
    receiver.accept(&delivery).await?;
    sender.close().await?;
    receiver.close().await?;
    session.end().await?;
    connection.close().await?;
    broker.shutdown().await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes() -> Result<(), Box<dyn std::error::Error>> {
    // Three nodes in this process: a quorum queue replicated on all three.
    let cluster = Cluster::start(3, BrokerConfig::default()).await?;
    let url = |id| format!("amqp://{}", cluster.addr(id).expect("node runs"));
    // Publish through node 1, consume through node 3: any node serves any
    // queue (a follower forwards to the queue's leader).
    let mut publisher = Connection::open("pub", url(1).as_str()).await?;
    let mut session = Session::begin(&mut publisher).await?;
    let mut sender = Sender::attach(&mut session, "tx", "/quorum/replicated").await?;
    sender
        .send("kept by a majority")
        .await?
        .accepted_or("not accepted")?;
    let mut consumer = Connection::open("sub", url(3).as_str()).await?;
    let mut session3 = Session::begin(&mut consumer).await?;
    let mut receiver = Receiver::attach(&mut session3, "rx", "/quorum/replicated").await?;
    let delivery = receiver.recv::<String>().await?;
    assert_eq!(delivery.body(), "kept by a majority");
    receiver.accept(&delivery).await?;
    assert!(cluster.leader_of("replicated").is_some());
    sender.close().await?;
    receiver.close().await?;
    session.end().await?;
    session3.end().await?;
    publisher.close().await?;
    consumer.close().await?;
    cluster.shutdown().await;
    Ok(())
}
// README: end

#[test]
fn the_readme_shows_this_file() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let this =
        std::fs::read_to_string(root.join("broker/tests/readme_embedding.rs")).expect("this file");
    let begin = "// README: begin\n";
    let end = "// README: end\n";
    let start = this.find(begin).expect("begin marker") + begin.len();
    let stop = this.find(end).expect("end marker");
    let example = &this[start..stop];
    assert!(
        readme.contains(example),
        "README.md's embedding example differs from broker/tests/readme_embedding.rs; \
         copy the code between the markers into the README"
    );
}
