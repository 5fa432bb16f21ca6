//! What Lambda's SQS event source mapping hands a function: a batch of
//! received messages as an `SqsEvent` (used by `outboxctl deliver` and by
//! the tests that drive the sweeper from the OnFailure queue).

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};

/// Most messages in one batch (one `ReceiveMessage`).
pub const MAX_BATCH: i32 = 10;

/// Receives up to [`MAX_BATCH`] messages; they stay in the queue, invisible
/// for its visibility timeout, until deleted.
pub async fn receive(
    sqs: &aws_sdk_sqs::Client,
    queue_url: &str,
) -> Result<Vec<aws_sdk_sqs::types::Message>, String> {
    sqs.receive_message()
        .queue_url(queue_url)
        .max_number_of_messages(MAX_BATCH)
        .send()
        .await
        .map(|out| out.messages.unwrap_or_default())
        .map_err(|e| format!("ReceiveMessage: {e:?}"))
}

/// The event Lambda's SQS mapping would pass for `messages`.
pub fn event(messages: &[aws_sdk_sqs::types::Message]) -> SqsEvent {
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
pub async fn settle(
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
        if let Some(handle) = m.receipt_handle() {
            sqs.delete_message()
                .queue_url(queue_url)
                .receipt_handle(handle)
                .send()
                .await
                .map_err(|e| format!("DeleteMessage: {e:?}"))?;
            deleted += 1;
        }
    }
    Ok((deleted, kept))
}
