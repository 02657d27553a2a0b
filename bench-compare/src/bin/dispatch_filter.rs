//! `dispatch_filter`: what a consumer's filter costs the dispatcher, in
//! process, without sockets: a transient queue holds `--n` messages (an
//! application-properties section `colour = 'red'` and a 256-byte data
//! body, as a client sends them); one consumer subscribes, without a
//! filter or with `--selector` (or the equivalent
//! `amqp:application-properties-filter`), and one `flow` granting credit
//! for all of them pushes every message to its sink. The time of that call
//! divided by `--n` is the dispatch cost per message. Modes alternate
//! within each trial; prints one JSON object per trial and the medians.

#![forbid(unsafe_code)]

use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use broker::codec::{Descriptor, MessageView, Symbol, Value};
use broker::queue::filter::{selector_entry, MessageFilter};
use broker::queue::{
    ConsumerOptions, Message, Queue, QueueAddress, QueueEventKind, Sink, TransientQueue,
};
use bytes::BytesMut;
use clap::Parser;
use serde_json::json;

/// Dispatch cost per message with and without a consumer filter.
#[derive(Debug, Parser)]
#[command(name = "dispatch_filter", version)]
struct Args {
    /// Messages per measurement.
    #[arg(long, default_value_t = 100_000)]
    n: usize,
    /// Trials (each runs every mode once, in turn).
    #[arg(long, default_value_t = 5)]
    trials: usize,
    /// The selector of the `selector` mode.
    #[arg(long, default_value = "colour = 'red'")]
    selector: String,
}

fn message() -> Result<Message> {
    let mut out = BytesMut::new();
    Value::Described(Box::new((
        Descriptor::Code(0x74),
        Value::Map(vec![(
            Value::String("colour".into()),
            Value::String("red".into()),
        )]),
    )))
    .encode(&mut out);
    Value::Described(Box::new((
        Descriptor::Code(0x75),
        Value::Binary(bytes::Bytes::from(vec![7u8; 256])),
    )))
    .encode(&mut out);
    let bytes = out.freeze();
    let view = MessageView::scan(&bytes).context("the message scans")?;
    Ok(Message {
        header: view.header,
        header_len: view.header_len as u32,
        bytes,
    })
}

/// Nanoseconds per message to dispatch `n` messages to one consumer.
fn measure(n: usize, filter: Option<Arc<MessageFilter>>, message: &Message) -> Result<f64> {
    let address = QueueAddress::parse("/queues/dispatch").context("address")?;
    let queue = TransientQueue::new(address, n + 1, u64::MAX);
    for _ in 0..n {
        queue.publish(message.clone(), None).context("publish")?;
    }
    let (sink, mut rx) = Sink::channel();
    let options = ConsumerOptions {
        filter,
        ..ConsumerOptions::default()
    };
    let consumer = queue.subscribe(sink, 1, options).context("subscribe")?;
    let start = Instant::now();
    queue.flow(consumer, n as u32, false);
    let elapsed = start.elapsed();
    let mut delivered = 0usize;
    while let Ok(event) = rx.try_recv() {
        if matches!(event.kind, QueueEventKind::Deliver(_)) {
            delivered += 1;
        }
    }
    if delivered != n {
        bail!("{delivered} of {n} messages delivered");
    }
    Ok(elapsed.as_nanos() as f64 / n as f64)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let args = Args::parse();
    let message = message()?;
    let selector = MessageFilter::from_filter_set(&vec![selector_entry("s", &args.selector)])
        .context("selector")?
        .map(Arc::new);
    let equality = MessageFilter::from_filter_set(&vec![(
        Symbol::from("f"),
        Value::Described(Box::new((
            Descriptor::Symbol(Symbol::from("amqp:application-properties-filter")),
            Value::Map(vec![(
                Value::String("colour".into()),
                Value::String("red".into()),
            )]),
        ))),
    )])
    .context("equality filter")?
    .map(Arc::new);
    let modes = [
        ("none", None),
        ("selector", selector),
        ("equality", equality),
    ];
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); modes.len()];
    for trial in 1..=args.trials {
        let mut line = serde_json::Map::new();
        line.insert("trial".into(), json!(trial));
        for (i, (name, filter)) in modes.iter().enumerate() {
            let ns = measure(args.n, filter.clone(), &message)?;
            results[i].push(ns);
            line.insert(
                format!("{name}_ns_per_msg"),
                json!((ns * 10.0).round() / 10.0),
            );
        }
        println!("{}", serde_json::Value::Object(line));
    }
    let base = median(results[0].clone());
    let summary: Vec<_> = modes
        .iter()
        .zip(&results)
        .map(|((name, _), r)| {
            let m = median(r.clone());
            json!({"mode": name, "median_ns_per_msg": (m * 10.0).round() / 10.0, "ratio": (m / base * 100.0).round() / 100.0})
        })
        .collect();
    println!(
        "{}",
        json!({"n": args.n, "trials": args.trials, "selector": args.selector, "medians": summary})
    );
    Ok(())
}
