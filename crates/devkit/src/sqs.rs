//! The local kit's two receive loops, on the runtime's SQS batch
//! primitives (`crates/runtime/src/queue.rs`): Lambda's SQS event source
//! mapping, emulated
//! ([`drain_queue`]: the projector's queue, the OnFailure queue), and a
//! reader that takes every message off a queue ([`receive_until_empty`]:
//! a subscriber's queue, read by the tests, the chaos run and `devkit
//! receive`).

use aws_lambda_events::event::sqs::SqsEvent;
use outbox_runtime::CallError;
use outbox_runtime::{
    batch_event, delete_batch, queue_depth, receive_batch, receive_batch_with_attributes,
    settle_batch,
};

/// What [`drain_queue`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DrainStats {
    /// Invocations (batches).
    pub batches: usize,
    /// Messages handed to the function, redeliveries included.
    pub messages: usize,
    /// Messages deleted after the function handled them.
    pub deleted: usize,
    /// Messages reported (or in a failed invocation), left to come back.
    pub reported: usize,
}

/// Lambda's SQS event source mapping with `ReportBatchItemFailures`, run
/// until the queue is empty: receive a batch, invoke the function with it,
/// delete what it did not report. A reported message (or every message of
/// a failed invocation, `Err`) stays in the queue and comes back after the
/// visibility timeout; the queue's redrive policy moves it to its
/// dead-letter queue after `maxReceiveCount` receives. Stops when nothing
/// is visible or in flight twice in a row, with an empty receive between,
/// or after `patience` without a message. Once is not enough: a message
/// whose visibility timeout ends while the queue counts it can be counted
/// neither visible nor in flight (moto reads the two counts a moment
/// apart), and it moves to the dead-letter queue only on a receive.
pub async fn drain_queue<F, Fut, E>(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    patience: std::time::Duration,
    mut invoke: F,
) -> Result<DrainStats, CallError>
where
    F: FnMut(SqsEvent) -> Fut,
    Fut: std::future::Future<Output = Result<std::collections::HashSet<String>, E>>,
{
    let mut stats = DrainStats::default();
    let mut idle_since = std::time::Instant::now();
    let mut seen_empty = false;
    loop {
        let messages = receive_batch(sqs, queue_url, 0).await?;
        if messages.is_empty() {
            let (visible, in_flight) = queue_depth(sqs, queue_url).await?;
            let empty = visible == 0 && in_flight == 0;
            if (empty && seen_empty) || idle_since.elapsed() > patience {
                return Ok(stats);
            }
            seen_empty = empty;
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            continue;
        }
        seen_empty = false;
        stats.batches += 1;
        stats.messages += messages.len();
        let failed = match invoke(batch_event(&messages)).await {
            Ok(failed) => failed,
            Err(_) => messages
                .iter()
                .filter_map(|m| m.message_id.clone())
                .collect(),
        };
        let (deleted, kept) = settle_batch(sqs, queue_url, &messages, &failed).await?;
        stats.deleted += deleted;
        stats.reported += kept;
        idle_since = std::time::Instant::now();
    }
}

/// Receives every message of a queue and deletes it, until the queue is
/// empty: `each` sees each message (every system attribute included,
/// `SentTimestamp` say) in the order received, then its batch is deleted
/// with one `DeleteMessageBatch`. While `keep_reading()` is true, the
/// receives long-poll 1 s and an empty answer counts for nothing (the
/// producers are still at work); after, they short-poll, and two empty
/// answers in a row end the loop (a short poll may answer empty while
/// messages remain). Returns how many messages it received.
pub async fn receive_until_empty(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    keep_reading: impl Fn() -> bool,
    mut each: impl FnMut(&aws_sdk_sqs::types::Message),
) -> Result<usize, CallError> {
    let mut received = 0;
    let mut empty = 0;
    loop {
        let reading = keep_reading();
        let messages =
            receive_batch_with_attributes(sqs, queue_url, if reading { 1 } else { 0 }).await?;
        if messages.is_empty() {
            if reading {
                empty = 0;
                continue;
            }
            empty += 1;
            if empty >= 2 {
                return Ok(received);
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            continue;
        }
        empty = 0;
        received += messages.len();
        for m in &messages {
            each(m);
        }
        delete_batch(sqs, queue_url, &messages).await?;
    }
}
