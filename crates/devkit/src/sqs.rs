//! What Lambda's SQS event source mapping hands a function: a batch of
//! received messages as an `SqsEvent` (used by `outboxctl deliver` and by
//! the tests that drive the sweeper from the OnFailure queue).

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};

/// Most messages in one batch (one `ReceiveMessage`).
pub const MAX_BATCH: i32 = 10;

/// Receives up to [`MAX_BATCH`] messages, waiting up to `wait_seconds`
/// (0: a short poll, which may answer empty while messages remain; up to
/// 20: a long poll); they stay in the queue, invisible for its visibility
/// timeout, until deleted.
pub async fn receive_batch(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    wait_seconds: i32,
) -> Result<Vec<aws_sdk_sqs::types::Message>, String> {
    sqs.receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(MAX_BATCH)
        .wait_time_seconds(wait_seconds)
        .send()
        .await
        .map(|out| out.messages.unwrap_or_default())
        .map_err(|e| outbox_runtime::aws::error_line("ReceiveMessage", &e))
}

/// The event Lambda's SQS mapping would pass for `messages`.
pub fn batch_event(messages: &[aws_sdk_sqs::types::Message]) -> SqsEvent {
    let mut event = SqsEvent::default();
    for m in messages {
        let mut message = SqsMessage::default();
        message.message_id = m.message_id.clone();
        message.receipt_handle = m.receipt_handle.clone();
        message.body = m.body.clone();
        message.event_source = Some("aws:sqs".into());
        event.records.push(message);
    }
    event
}

/// What Lambda's SQS mapping does after the function answered: deletes
/// every message not reported in `failed` (those come back after the
/// visibility timeout). Returns (deleted, kept).
pub async fn settle_batch(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    messages: &[aws_sdk_sqs::types::Message],
    failed: &std::collections::HashSet<String>,
) -> Result<(usize, usize), String> {
    let (mut deleted, mut kept) = (0, 0);
    for m in messages {
        if m.message_id.as_ref().is_some_and(|id| failed.contains(id)) {
            kept += 1;
            continue;
        }
        if delete_message(sqs, queue_url, m).await? {
            deleted += 1;
        }
    }
    Ok((deleted, kept))
}

/// Deletes a received message; `false` when it has no receipt handle.
pub async fn delete_message(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    message: &aws_sdk_sqs::types::Message,
) -> Result<bool, String> {
    let Some(handle) = message.receipt_handle() else {
        return Ok(false);
    };
    sqs.delete_message()
        .queue_url(queue_url)
        .receipt_handle(handle)
        .send()
        .await
        .map_err(|e| outbox_runtime::aws::error_line("DeleteMessage", &e))?;
    Ok(true)
}

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

/// The queue's visible and in-flight message counts (approximate, as SQS
/// counts them).
pub async fn queue_depth(sqs: &aws_sdk_sqs::Client, queue_url: &str) -> Result<(u64, u64), String> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(|e| outbox_runtime::aws::error_line("GetQueueAttributes", &e))?;
    let attributes = out.attributes.unwrap_or_default();
    let count = |name: A| {
        attributes
            .get(&name)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    Ok((
        count(A::ApproximateNumberOfMessages),
        count(A::ApproximateNumberOfMessagesNotVisible),
    ))
}

/// Lambda's SQS event source mapping with `ReportBatchItemFailures`, run
/// until the queue is empty: receive a batch, invoke the function with it,
/// delete what it did not report. A reported message (or every message of
/// a failed invocation, `Err`) stays in the queue and comes back after the
/// visibility timeout; the queue's redrive policy moves it to its
/// dead-letter queue after `maxReceiveCount` receives. Stops when nothing
/// is visible or in flight, or after `patience` without a message.
pub async fn drain_queue<F, Fut>(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    patience: std::time::Duration,
    mut invoke: F,
) -> Result<DrainStats, String>
where
    F: FnMut(SqsEvent) -> Fut,
    Fut: std::future::Future<Output = Result<std::collections::HashSet<String>, String>>,
{
    let mut stats = DrainStats::default();
    let mut idle_since = std::time::Instant::now();
    loop {
        let messages = receive_batch(sqs, queue_url, 0).await?;
        if messages.is_empty() {
            let (visible, in_flight) = queue_depth(sqs, queue_url).await?;
            if (visible == 0 && in_flight == 0) || idle_since.elapsed() > patience {
                return Ok(stats);
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            continue;
        }
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
