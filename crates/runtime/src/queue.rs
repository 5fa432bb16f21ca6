//! SQS batches as Lambda's SQS event source mapping handles them: receive
//! a batch, hand it over as an `SqsEvent`, delete what was not reported
//! (`outboxctl redrive-on-failure` against a real queue, and `devkit`'s
//! local mapping emulator, whose receive loop is `devkit::drain_queue`);
//! and the batches of `devkit::receive_until_empty`, which takes every
//! message off a queue.

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};

use crate::aws::CallError;

/// Most messages in one batch (one `ReceiveMessage`).
pub(crate) const MAX_BATCH: i32 = 10;

/// Receives up to 10 (`MAX_BATCH`) messages, waiting up to `wait_seconds`
/// (0: a short poll, which may answer empty while messages remain; up to
/// 20: a long poll); they stay in the queue, invisible for its visibility
/// timeout, until deleted.
pub async fn receive_batch(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    wait_seconds: i32,
) -> Result<Vec<aws_sdk_sqs::types::Message>, CallError> {
    receive(sqs, queue_url, wait_seconds, false).await
}

/// [`receive_batch`], each message with every system attribute
/// (`SentTimestamp`, `ApproximateReceiveCount`, …).
pub async fn receive_batch_with_attributes(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    wait_seconds: i32,
) -> Result<Vec<aws_sdk_sqs::types::Message>, CallError> {
    receive(sqs, queue_url, wait_seconds, true).await
}

async fn receive(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    wait_seconds: i32,
    attributes: bool,
) -> Result<Vec<aws_sdk_sqs::types::Message>, CallError> {
    let mut request = sqs
        .receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(MAX_BATCH)
        .wait_time_seconds(wait_seconds);
    if attributes {
        request = request
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All);
    }
    request
        .send()
        .await
        .map(|out| out.messages.unwrap_or_default())
        .map_err(|e| CallError::of("ReceiveMessage", &e))
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
) -> Result<(usize, usize), CallError> {
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
) -> Result<bool, CallError> {
    let Some(handle) = message.receipt_handle() else {
        return Ok(false);
    };
    sqs.delete_message()
        .queue_url(queue_url)
        .receipt_handle(handle)
        .send()
        .await
        .map_err(|e| CallError::of("DeleteMessage", &e))?;
    Ok(true)
}

/// Deletes received messages (one batch, at most 10 (`MAX_BATCH`)) with one
/// `DeleteMessageBatch`; returns how many it deleted (a message without a
/// receipt handle is skipped). An entry the queue refuses fails the call,
/// as a failed `DeleteMessage` does.
pub async fn delete_batch(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
    messages: &[aws_sdk_sqs::types::Message],
) -> Result<usize, CallError> {
    use aws_sdk_sqs::types::DeleteMessageBatchRequestEntry;
    const OPERATION: &str = "DeleteMessageBatch";
    let mut entries = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let Some(handle) = m.receipt_handle() else {
            continue;
        };
        let entry = DeleteMessageBatchRequestEntry::builder()
            .id(i.to_string())
            .receipt_handle(handle)
            .build()
            .map_err(|e| CallError {
                operation: OPERATION.to_owned(),
                code: "ConstructionFailure".to_owned(),
                message: Some(e.to_string()),
            })?;
        entries.push(entry);
    }
    if entries.is_empty() {
        return Ok(0);
    }
    let count = entries.len();
    let out = sqs
        .delete_message_batch()
        .queue_url(queue_url)
        .set_entries(Some(entries))
        .send()
        .await
        .map_err(|e| CallError::of(OPERATION, &e))?;
    if let Some(failed) = out.failed.first() {
        return Err(CallError {
            operation: OPERATION.to_owned(),
            code: failed.code.clone(),
            message: failed.message.clone(),
        });
    }
    Ok(count)
}

/// The queue's visible and in-flight message counts (approximate, as SQS
/// counts them).
pub async fn queue_depth(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
) -> Result<(u64, u64), CallError> {
    use aws_sdk_sqs::types::QueueAttributeName as A;
    let out = sqs
        .get_queue_attributes()
        .queue_url(queue_url)
        .attribute_names(A::ApproximateNumberOfMessages)
        .attribute_names(A::ApproximateNumberOfMessagesNotVisible)
        .send()
        .await
        .map_err(|e| CallError::of("GetQueueAttributes", &e))?;
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
