//! Dynamic nodes with the third-party client (fe2o3-amqp): a receiver
//! attached with a dynamic source gets a temporary queue whose generated
//! address comes back in the attach reply; the queue is deleted when that
//! link closes or its connection goes; request/reply through `reply-to`
//! works end to end, the responder answering through anonymous relay or
//! through a sender attached to the reply address, with the requests on a
//! transient or a quorum queue and, on a cluster, from another node.

use crate::common;

use std::time::Duration;

use common::*;
use fe2o3_amqp::types::definitions::{AmqpError, ErrorCondition};
use fe2o3_amqp::types::messaging::{AmqpValue, Message, Outcome, Properties, Source, Target};
use fe2o3_amqp::{Receiver, Sender};
use ramqpd_broker::{Broker, BrokerConfig, Cluster};

/// Attach a receiver with a dynamic source; returns it and its address.
async fn dynamic_receiver(session: &mut Sess, name: &str) -> (Receiver, String) {
    let receiver = step(
        "dynamic receiver attach",
        Receiver::builder()
            .name(name)
            .source(Source::builder().dynamic(true).build())
            .attach(session),
    )
    .await
    .expect("a dynamic receiver attaches");
    let source = receiver.source().clone().expect("a source in the reply");
    assert!(source.dynamic, "the reply keeps dynamic=true: {source:?}");
    let address = source.address.expect("the generated address");
    (receiver, address)
}

fn message(to: Option<&str>, reply_to: Option<&str>, text: &str) -> Message<AmqpValue<String>> {
    let mut properties = Properties::builder();
    if let Some(to) = to {
        properties = properties.to(to);
    }
    if let Some(reply_to) = reply_to {
        properties = properties.reply_to(reply_to);
    }
    Message::builder()
        .properties(properties.build())
        .value(text.to_string())
        .build()
}

async fn send(sender: &mut Sender, message: Message<AmqpValue<String>>) -> Outcome {
    step("send", sender.send(message))
        .await
        .expect("send completes")
}

fn queue_exists(broker: &Broker, address: &str) -> bool {
    broker.queues().iter().any(|q| q.address == address)
}

/// How the responder sends its answer.
#[derive(Clone, Copy)]
enum Answer {
    Relay,
    AttachedSender,
}

/// One request/reply round trip: the requester (a dynamic receiver, on
/// `requester_at`) asks through `requests`, the responder (on
/// `responder_at`) answers to the request's reply-to. Returns the reply
/// address, after the requester closed its receiver.
async fn request_reply(
    requester_at: std::net::SocketAddr,
    responder_at: std::net::SocketAddr,
    requests: &str,
    answer: Answer,
) -> String {
    let mut req_conn = open_at(requester_at, "requester").await;
    let mut req_session = begin_session(&mut req_conn).await;
    let (mut replies, reply_to) = dynamic_receiver(&mut req_session, "replies").await;
    assert!(reply_to.starts_with("/queues/"), "{reply_to}");
    let mut ask = step(
        "request sender",
        Sender::attach(&mut req_session, "ask", requests.to_string()),
    )
    .await
    .expect("request sender attaches");
    let outcome = send(&mut ask, message(None, Some(&reply_to), "what time is it")).await;
    assert!(outcome.is_accepted(), "{outcome:?}");

    let mut resp_conn = open_at(responder_at, "responder").await;
    let mut resp_session = begin_session(&mut resp_conn).await;
    let mut incoming = step(
        "responder receiver",
        Receiver::attach(&mut resp_session, "incoming", requests.to_string()),
    )
    .await
    .expect("responder attaches");
    let request = step("request", incoming.recv::<String>())
        .await
        .expect("a request");
    assert_eq!(request.body(), "what time is it");
    let reply_address = request
        .message()
        .properties
        .as_ref()
        .and_then(|p| p.reply_to.clone())
        .expect("the request's reply-to");
    assert_eq!(reply_address, reply_to);
    step("accept request", incoming.accept(&request))
        .await
        .unwrap();
    let outcome = match answer {
        Answer::Relay => {
            let mut anon = step(
                "anonymous sender",
                Sender::builder()
                    .name("anon")
                    .target(Target::builder().build())
                    .attach(&mut resp_session),
            )
            .await
            .expect("anonymous sender attaches");
            send(&mut anon, message(Some(&reply_address), None, "noon")).await
        }
        Answer::AttachedSender => {
            let mut reply = step(
                "reply sender",
                Sender::attach(&mut resp_session, "reply", reply_address.clone()),
            )
            .await
            .expect("a sender attaches to the reply address");
            send(&mut reply, message(None, None, "noon")).await
        }
    };
    assert!(outcome.is_accepted(), "{outcome:?}");

    step("set credit", replies.set_credit(1)).await.unwrap();
    let reply = step("reply", replies.recv::<String>())
        .await
        .expect("the reply");
    assert_eq!(reply.body(), "noon");
    step("accept reply", replies.accept(&reply)).await.unwrap();
    step("close replies", replies.close()).await.unwrap();
    let _ = req_conn.close().await;
    let _ = resp_conn.close().await;
    reply_to
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_reply_through_relay_and_through_an_attached_sender() {
    let broker = start().await;
    let addr = broker.local_addr();
    for (requests, answer) in [
        ("/queues/requests", Answer::Relay),
        ("/queues/requests", Answer::AttachedSender),
        ("/quorum/requests", Answer::Relay),
        ("/quorum/requests", Answer::AttachedSender),
    ] {
        let reply_to = request_reply(addr, addr, requests, answer).await;
        eventually(Duration::from_secs(5), "the reply queue is deleted", || {
            !queue_exists(&broker, &reply_to)
        })
        .await;
    }
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_goes_with_its_link_and_its_connection() {
    let broker = start().await;
    let mut connection = connect(&broker, "dyn").await;
    let mut session = begin_session(&mut connection).await;
    let (first, a) = dynamic_receiver(&mut session, "a").await;
    let (_second, b) = dynamic_receiver(&mut session, "b").await;
    assert_ne!(a, b, "each dynamic node has its own address");
    assert!(queue_exists(&broker, &a) && queue_exists(&broker, &b));

    // A responder attached to the reply address, and one relaying to it.
    let mut other = connect(&broker, "other").await;
    let mut other_session = begin_session(&mut other).await;
    let mut attached = step(
        "sender to a",
        Sender::attach(&mut other_session, "to-a", a.clone()),
    )
    .await
    .expect("attaches");
    let mut anon = step(
        "anonymous sender",
        Sender::builder()
            .name("anon")
            .target(Target::builder().build())
            .attach(&mut other_session),
    )
    .await
    .expect("attaches");

    step("close a", first.close()).await.unwrap();
    assert!(
        !queue_exists(&broker, &a),
        "closing the link deletes its node"
    );
    assert!(queue_exists(&broker, &b));
    // The sender attached to it is detached with resource-deleted: its
    // next message is released (not lost in a deleted queue) and the link
    // closed with that condition.
    let first_try = step(
        "send to a deleted node",
        attached.send(message(None, None, "late")),
    )
    .await;
    let error = match first_try {
        Ok(Outcome::Released(_)) => format!("{:?}", step("detach", attached.on_detach()).await),
        Err(error) => format!("{error:?}"),
        Ok(other) => panic!("a publish to a deleted node was answered {other:?}"),
    };
    assert!(error.contains("ResourceDeleted"), "{error}");
    // A relayed reply to it is not-found, and never re-creates it.
    let outcome = send(&mut anon, message(Some(&a), None, "late")).await;
    assert!(
        matches!(&outcome, Outcome::Rejected(r) if matches!(
            r.error.as_ref().map(|e| &e.condition),
            Some(ErrorCondition::AmqpError(AmqpError::NotFound)))),
        "{outcome:?}"
    );
    assert!(!queue_exists(&broker, &a));

    // The connection goes without closing its link: the node goes too.
    drop(session);
    drop(connection);
    eventually(
        Duration::from_secs(5),
        "b deleted with its connection",
        || !queue_exists(&broker, &b),
    )
    .await;
    let _ = other.close().await;
    stop(broker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_reply_across_nodes() {
    let mut config = BrokerConfig::default();
    fast_raft(&mut config);
    config.quorum.leader_wait_ms = 5000;
    let cluster = Cluster::start(3, config).await.unwrap();
    let (a, b) = (cluster.addr(1).unwrap(), cluster.addr(2).unwrap());
    for answer in [Answer::Relay, Answer::AttachedSender] {
        request_reply(a, b, "/quorum/cross-requests", answer).await;
        request_reply(a, b, "/queues/cross-requests", answer).await;
    }
    cluster.shutdown().await;
}
