//! Performatives and message bodies for the raw client: `open`, `begin`,
//! `attach`, flows and transfers with permissive defaults, and encoded
//! message sections.

use bytes::{Bytes, BytesMut};
use ramqpd_broker::codec::{
    Attach, Begin, Descriptor, Flow, Open, ReceiverSettleMode, Role, SenderSettleMode, Source,
    Target, Transfer, Value,
};

/// An `open` with the given container-id and permissive limits.
pub fn open(container_id: &str) -> Open {
    Open {
        container_id: container_id.to_string(),
        hostname: None,
        max_frame_size: 1024 * 1024,
        channel_max: 255,
        idle_time_out: None,
        outgoing_locales: Vec::new(),
        incoming_locales: Vec::new(),
        offered_capabilities: Vec::new(),
        desired_capabilities: Vec::new(),
        properties: None,
    }
}

/// A `begin` with large windows.
pub fn begin() -> Begin {
    Begin {
        remote_channel: None,
        next_outgoing_id: 0,
        incoming_window: 1_000_000,
        outgoing_window: 1_000_000,
        handle_max: 1023,
        offered_capabilities: Vec::new(),
        desired_capabilities: Vec::new(),
        properties: None,
    }
}

/// An `attach` for `/queues/<queue>`; `role` is ours.
pub fn attach(handle: u32, role: Role, queue: &str) -> Attach {
    let address = Some(format!("/queues/{queue}"));
    let (source, target) = match role {
        Role::Sender => (
            Some(Source::default()),
            Some(Target {
                address,
                ..Target::default()
            }),
        ),
        Role::Receiver => (
            Some(Source {
                address,
                ..Source::default()
            }),
            Some(Target::default()),
        ),
    };
    Attach {
        name: format!("raw-link-{handle}"),
        handle,
        role,
        snd_settle_mode: SenderSettleMode::Mixed,
        rcv_settle_mode: ReceiverSettleMode::First,
        source,
        target,
        unsettled: None,
        incomplete_unsettled: false,
        initial_delivery_count: (role == Role::Sender).then_some(0),
        max_message_size: None,
        offered_capabilities: Vec::new(),
        desired_capabilities: Vec::new(),
        properties: None,
    }
}

/// A link flow granting `credit` on `handle` (session fields permissive).
pub fn credit_flow(handle: u32, delivery_count: u32, credit: u32, drain: bool) -> Flow {
    Flow {
        next_incoming_id: Some(0),
        incoming_window: 1_000_000,
        next_outgoing_id: 0,
        outgoing_window: 1_000_000,
        handle: Some(handle),
        delivery_count: Some(delivery_count),
        link_credit: Some(credit),
        drain,
        ..Flow::default()
    }
}

/// The first transfer of a one-frame delivery.
pub fn transfer(handle: u32, delivery_id: u32, settled: bool) -> Transfer {
    Transfer {
        handle,
        delivery_id: Some(delivery_id),
        delivery_tag: Some(Bytes::from(delivery_id.to_be_bytes().to_vec())),
        message_format: Some(0),
        settled: Some(settled),
        ..Transfer::default()
    }
}

/// A described section value (0x70 header ... 0x78 footer).
pub fn section(code: u64, value: Value) -> Value {
    Value::Described(Box::new((Descriptor::Code(code), value)))
}

/// Encode values back to back.
pub fn encode(values: &[Value]) -> Vec<u8> {
    let mut out = BytesMut::new();
    for value in values {
        value.encode(&mut out);
    }
    out.to_vec()
}

/// A minimal message: one amqp-value section holding `text`.
pub fn text_message(text: &str) -> Vec<u8> {
    encode(&[section(0x77, Value::String(text.to_string()))])
}
