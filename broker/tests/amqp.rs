//! The AMQP 1.0 surface of one embedded broker, driven by fe2o3-amqp and
//! raw frames: handshake, SASL, TLS, WebSocket, links, flow, outcomes,
//! filters, transactions, users and permissions.
//!
//! One test binary for these files (each a module, `cargo test -p
//! ramqpd-broker --test amqp <module>::` runs one): a binary per file
//! linked the whole broker 60 times over, 6 GB of a CI disk.

mod common;

mod amqp_addresses;
mod amqp_anonymous_relay;
mod amqp_bad_input;
mod amqp_consumer_order;
mod amqp_dynamic_nodes;
mod amqp_filters;
mod amqp_flow_control;
mod amqp_handshake;
mod amqp_idle_timeout;
mod amqp_large_messages;
mod amqp_outcomes;
mod amqp_permissions;
mod amqp_preauth_limits;
mod amqp_sasl;
mod amqp_send_receive;
mod amqp_tls;
mod amqp_transactions;
mod amqp_users;
mod amqp_websocket;
