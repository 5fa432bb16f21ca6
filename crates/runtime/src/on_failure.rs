//! The OnFailure queue's SQS batches, redriven: each message's window
//! (`outbox_engine::Window`) through the engine's sweep, for the sweeper
//! function and `outboxctl redrive-on-failure` alike.

use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use outbox_engine::{
    Deadline, EventSink, OnFailureMessage, PublishStore, SweepReport, SweepStore, Sweeper, Window,
};
use time::OffsetDateTime;

/// Redrives each OnFailure message's window, in order.
pub async fn redrive_messages<S: EventSink, T: PublishStore + SweepStore>(
    sweeper: &Sweeper<S, T>,
    event: &SqsEvent,
    deadline: &Deadline,
) -> (SqsBatchResponse, SweepReport) {
    let mut response = SqsBatchResponse::default();
    let mut total = SweepReport::default();
    for message in &event.records {
        let id = message.message_id.clone().unwrap_or_default();
        let parsed = message
            .body
            .as_deref()
            .ok_or_else(|| "message has no body".to_owned())
            .and_then(|b| serde_json::from_str::<OnFailureMessage>(b).map_err(|e| e.to_string()));
        let settled = match parsed {
            Err(e) => {
                tracing::error!(message_id = %id, error = %e, "not an OnFailure message of a DynamoDB stream mapping");
                false
            }
            Ok(_) if !deadline.allows(Duration::ZERO) => false,
            Ok(message) => {
                let window = Window::of(&message, &sweeper.settings);
                let report = sweeper
                    .redrive(window, OffsetDateTime::now_utc(), deadline)
                    .await;
                tracing::info!(
                    message_id = %id,
                    condition = message.request_context.condition.as_deref().unwrap_or(""),
                    shard_id = message.batch.shard_id.as_deref().unwrap_or(""),
                    batch_size = message.batch.batch_size.unwrap_or(0),
                    found = report.stranded,
                    republished = report.republished,
                    settled = report.settled(),
                    "OnFailure window redriven"
                );
                let settled = report.settled()
                    && (report.stranded > 0 || sweeper.settings.settle_empty_windows);
                total.add(report);
                settled
            }
        };
        if settled {
            total.windows_redriven += 1;
        } else {
            total.windows_failed += 1;
            let mut failure = aws_lambda_events::event::sqs::BatchItemFailure::default();
            failure.item_identifier = id;
            response.batch_item_failures.push(failure);
        }
    }
    (response, total)
}
