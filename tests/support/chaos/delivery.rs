//! What the subscriber received: its queue, read all along a run; the
//! messages in the order the sink delivered them; the per-aggregate
//! inversions among them; and the event each message carries.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::SinkKind;
use crate::proxy::SinkGate;

/// Most messages one `ReceiveMessage` returns: a receive that returns
/// this many may have left more in the queue.
const FULL_RECEIVE: usize = 10;

/// Receives and deletes the subscriber's messages until `reading` turns
/// false and the queue answers empty twice ([`devkit::receive_until_empty`]);
/// every message, in arrival order, each SQS message once. A failed call
/// is retried (up to 20 in a run): one timeout no longer ends the reading.
/// Before each receive it tells `gate` whether the last one came back full
/// (the proxies then hold the sink calls until the queue is short again).
pub(super) async fn read_subscriber(
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    reading: Arc<AtomicBool>,
    gate: Arc<SinkGate>,
) -> Result<Vec<Value>, String> {
    // The backlog is cleared when the reader stops, a panic included, so
    // the gate never holds the sink calls after it.
    struct Stopped<'a>(&'a SinkGate);
    impl Drop for Stopped<'_> {
        fn drop(&mut self) {
            self.0.set_backlogged(false);
        }
    }
    let _stopped = Stopped(&gate);
    // A patient client: on a loaded machine a receive can take longer than
    // the functions' 12 s operation timeout (two 20,000-order chaos runs
    // lost their whole reading to one such timeout, seen only at the end).
    let sqs = aws_sdk_sqs::Client::from_conf(
        sqs.config()
            .to_builder()
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(Duration::from_secs(60))
                    .operation_timeout(Duration::from_secs(300))
                    .build(),
            )
            .build(),
    );
    let mut messages = Vec::new();
    // A message received again because its delete failed is the queue's
    // own redelivery, not the sink's: kept once (by its SQS message id).
    let mut seen: HashSet<String> = HashSet::new();
    let mut failures = 0;
    // Messages the last receive returned.
    let last = AtomicUsize::new(0);
    loop {
        let read = devkit::receive_until_empty(
            &sqs,
            &queue_url,
            || {
                gate.set_backlogged(last.swap(0, Ordering::SeqCst) >= FULL_RECEIVE);
                reading.load(Ordering::SeqCst)
            },
            |m| {
                last.fetch_add(1, Ordering::SeqCst);
                if m.message_id().is_none_or(|id| seen.insert(id.to_owned())) {
                    messages.push(crate::message_value(m));
                }
            },
        )
        .await;
        match read {
            Ok(_) => return Ok(messages),
            // A failed call loses nothing (what it received is kept, what
            // it did not delete comes back): read on, unless the server is
            // gone.
            Err(e) if failures < 20 => {
                failures += 1;
                eprintln!("subscriber reader: {e}; reading on ({failures} of 20 failures)");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// An event as the subscriber received it.
pub(super) struct Received {
    pub(super) event_id: String,
    pub(super) aggregate: String,
    pub(super) version: u64,
}

/// When the queue accepted `message` (its `SentTimestamp`, ms).
fn sent_at(message: &Value) -> Option<u64> {
    message["__sqs"]["SentTimestamp"].as_str()?.parse().ok()
}

/// The subscriber's messages (as received) in the order the sink delivered
/// them: the FIFO queue's own (it keeps each group's order; the SNS FIFO
/// topic's and the Custom Event Bus's FIFO subscriber's). EventBridge's
/// is a standard queue, which promises none, so its messages are put in
/// the order the bus's rule sent them to it (`SentTimestamp`, in ms, set as
/// moto's rule delivers within `PutEvents`; equal times keep the order
/// received, which for moto's queue is the order sent). Strict ordering
/// sends an aggregate's next event only after the call that carried the one
/// before it has returned. `Err` for a message without its time.
pub fn in_delivery_order(sink: SinkKind, mut messages: Vec<Value>) -> Result<Vec<Value>, String> {
    if sink == SinkKind::EventBridge {
        if let Some(m) = messages.iter().find(|m| sent_at(m).is_none()) {
            return Err(format!("a message without its SentTimestamp: {m}"));
        }
        messages.sort_by_key(sent_at);
    }
    Ok(messages)
}

/// Per aggregate, each first delivery of a version below one already
/// delivered, in the order of `messages` (duplicates are not judged: a
/// duplicate comes after the event it repeats); one line each.
pub fn inversions(sink: SinkKind, messages: &[Value]) -> Vec<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut highest: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    for r in messages.iter().filter_map(|m| received(sink, m)) {
        if !seen.insert(r.event_id.clone()) {
            continue;
        }
        let top = highest.entry(r.aggregate.clone()).or_default();
        if r.version < *top {
            out.push(format!(
                "inversion: {} v{} first delivered after v{} ({})",
                r.aggregate, r.version, *top, r.event_id
            ));
        }
        *top = (*top).max(r.version);
    }
    out
}

/// The event `message` carries; `None` when it carries none.
pub(super) fn received(sink: SinkKind, message: &Value) -> Option<Received> {
    let envelope = match sink {
        SinkKind::EventBridge | SinkKind::CustomBus => message.get("detail")?.clone(),
        SinkKind::SnsFifo => {
            let mut body = message.clone();
            body.as_object_mut()?.remove("__sqs");
            body
        }
    };
    Some(Received {
        event_id: envelope["eventId"].as_str()?.to_owned(),
        aggregate: envelope["aggregateId"].as_str()?.to_owned(),
        version: envelope["aggregateVersion"].as_u64()?,
    })
}
