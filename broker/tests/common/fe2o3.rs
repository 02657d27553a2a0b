//! fe2o3-amqp, the third-party client: connect, attach, send and receive
//! bounded, plus `assert_serves` and the `Bystander` that checks a broker
//! still serves clients after something bad happened.

use std::time::Duration;

use fe2o3_amqp::connection::ConnectionHandle;
use fe2o3_amqp::link::receiver::CreditMode;
use fe2o3_amqp::session::SessionHandle;
use fe2o3_amqp::types::messaging::{Body, Message};
use fe2o3_amqp::types::primitives::Value as FeValue;
use fe2o3_amqp::{Connection, Receiver, Sender, Session};
use ramqpd_broker::Broker;

use super::wait::{step, within};

/// A connection of the third-party client.
pub type Conn = ConnectionHandle<()>;
/// A session of the third-party client.
pub type Sess = SessionHandle<()>;
/// The body type every test receives into.
pub type AnyBody = Body<FeValue>;

/// Open an anonymous (no SASL) connection.
pub async fn connect(broker: &Broker, id: &str) -> Conn {
    within(
        Duration::from_secs(5),
        "fe2o3 connection open",
        Connection::open(id.to_string(), broker.url().as_str()),
    )
    .await
    .expect("connection opens")
}

/// Begin a session.
pub async fn begin_session(connection: &mut Conn) -> Sess {
    step("fe2o3 session begin", Session::begin(connection))
        .await
        .expect("session begins")
}

/// Attach a sender to `/queues/<queue>`.
pub async fn attach_sender(session: &mut Sess, name: &str, queue: &str) -> Sender {
    step(
        "fe2o3 sender attach",
        Sender::attach(session, name.to_string(), format!("/queues/{queue}")),
    )
    .await
    .expect("sender attaches")
}

/// Attach a receiver to `/queues/<queue>` with manual credit `credit`
/// (granted right away when non-zero).
pub async fn attach_receiver(session: &mut Sess, name: &str, queue: &str, credit: u32) -> Receiver {
    attach_receiver_at(session, name, &format!("/queues/{queue}"), credit).await
}

/// The same for any `address` (e.g. `/quorum/<name>`).
pub async fn attach_receiver_at(
    session: &mut Sess,
    name: &str,
    address: &str,
    credit: u32,
) -> Receiver {
    let mut receiver = step(
        "fe2o3 receiver attach",
        Receiver::builder()
            .name(name.to_string())
            .source(address.to_string())
            .credit_mode(CreditMode::Manual)
            .attach(session),
    )
    .await
    .expect("receiver attaches");
    if credit > 0 {
        step("set credit", receiver.set_credit(credit))
            .await
            .expect("credit granted");
    }
    receiver
}

/// Send a string body and expect `accepted`.
pub async fn send_text(sender: &mut Sender, text: &str) {
    let outcome = step(
        "send (waits for the outcome)",
        sender.send(text.to_string()),
    )
    .await
    .expect("send succeeds");
    assert!(
        outcome.is_accepted(),
        "expected accepted for {text:?}, got {outcome:?}"
    );
}

/// Receive one delivery (any body), bounded.
pub async fn recv(receiver: &mut Receiver) -> fe2o3_amqp::link::delivery::Delivery<AnyBody> {
    step("receive a delivery", receiver.recv::<AnyBody>())
        .await
        .expect("receive succeeds")
}

/// Receive one delivery whose body is a string.
pub async fn recv_text(
    receiver: &mut Receiver,
) -> (fe2o3_amqp::link::delivery::Delivery<String>, String) {
    let delivery = step("receive a text delivery", receiver.recv::<String>())
        .await
        .expect("receive succeeds");
    let text = delivery.body().clone();
    (delivery, text)
}

/// Assert that nothing arrives on `receiver` for `quiet`.
pub async fn expect_nothing(receiver: &mut Receiver, quiet: Duration, why: &str) {
    if let Ok(result) = tokio::time::timeout(quiet, receiver.recv::<AnyBody>()).await {
        panic!("expected no delivery ({why}), got {result:?}");
    }
}

/// The string inside an amqp-value body, if that is what the body is.
pub fn body_text(message: &Message<AnyBody>) -> Option<String> {
    match &message.body {
        Body::Value(v) => match &v.0 {
            FeValue::String(s) => Some(s.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// delivery-count of the header (0 when there is no header).
pub fn header_delivery_count<T>(message: &Message<T>) -> u32 {
    message.header.as_ref().map_or(0, |h| h.delivery_count)
}

/// A full round trip on a fresh connection: the broker still serves
/// clients.
pub async fn assert_serves(broker: &Broker, queue: &str) {
    let mut connection = connect(broker, &format!("health-{queue}")).await;
    let mut session = begin_session(&mut connection).await;
    let mut tx = attach_sender(&mut session, "health-tx", queue).await;
    let mut rx = attach_receiver(&mut session, "health-rx", queue, 1).await;
    send_text(&mut tx, "still alive").await;
    let (delivery, text) = recv_text(&mut rx).await;
    assert_eq!(text, "still alive");
    step("accept", rx.accept(&delivery)).await.unwrap();
    step("close sender", tx.close()).await.unwrap();
    step("close receiver", rx.close()).await.unwrap();
    step("end session", session.end()).await.unwrap();
    step("close connection", connection.close()).await.unwrap();
}

/// A client connected before something bad happens, checked afterwards.
pub struct Bystander {
    connection: Conn,
    session: Sess,
    sender: Sender,
    receiver: Receiver,
    sent: usize,
}

impl Bystander {
    /// Connect and attach a sender and receiver on `queue`.
    pub async fn connect(broker: &Broker, queue: &str) -> Bystander {
        let mut connection = connect(broker, &format!("bystander-{queue}")).await;
        let mut session = begin_session(&mut connection).await;
        let sender = attach_sender(&mut session, "bystander-tx", queue).await;
        let receiver = attach_receiver(&mut session, "bystander-rx", queue, 100).await;
        let mut bystander = Bystander {
            connection,
            session,
            sender,
            receiver,
            sent: 0,
        };
        bystander.check().await;
        bystander
    }

    /// One more round trip on the existing connection.
    pub async fn check(&mut self) {
        self.sent += 1;
        let text = format!("bystander {}", self.sent);
        send_text(&mut self.sender, &text).await;
        let (delivery, got) = recv_text(&mut self.receiver).await;
        assert_eq!(got, text, "the bystander's connection still works");
        step("accept", self.receiver.accept(&delivery))
            .await
            .unwrap();
    }

    /// Close everything cleanly.
    pub async fn close(mut self) {
        step("close sender", self.sender.close()).await.unwrap();
        step("close receiver", self.receiver.close()).await.unwrap();
        step("end session", self.session.end()).await.unwrap();
        step("close connection", self.connection.close())
            .await
            .unwrap();
    }
}
