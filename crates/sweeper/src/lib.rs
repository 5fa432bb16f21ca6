//! The sweeper function: the engine's sweep (`outbox_engine::Sweeper`)
//! behind one Lambda handler with two triggers, told apart by the event's
//! shape:
//!
//! - **the schedule** (an EventBridge scheduled event): `Sweeper::sweep`,
//!   every shard of the pending index, items created more than
//!   `STRANDED_AFTER_SECONDS` ago;
//! - **the publisher mapping's OnFailure queue** (an SQS event of
//!   `DDBStreamBatchInfo` messages): `outbox_runtime::redrive_messages`,
//!   each abandoned batch's window at once.
//!
//! # Layout
//! - `lib.rs`: the Lambda [`handler`], its `Trigger` and [`Response`].
//! - `main.rs`: the cold start (configuration, sink, store, heartbeat),
//!   wired to the handler.

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use lambda_runtime::{Error, LambdaEvent};
use outbox_engine::{Deadline, EventSink, PublishStore, SweepReport, SweepStore, Sweeper};
use outbox_runtime::{log_sweep, redrive_messages, Heartbeat};
use serde::Serialize;
use std::time::Duration;
use time::OffsetDateTime;

/// Time kept back from the Lambda deadline: no new page or call starts
/// within it.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(5);

/// What invoked the sweeper, told apart by the event's shape: an SQS event
/// has `Records` of `aws:sqs`; anything else is the schedule.
#[derive(Debug, Clone)]
pub(crate) enum Trigger {
    /// The schedule (any event that is not an SQS batch).
    Schedule,
    /// A batch of the OnFailure queue.
    OnFailure(SqsEvent),
}

impl Trigger {
    /// Tells the trigger from the event's shape.
    pub(crate) fn from_value(event: serde_json::Value) -> Result<Self, Error> {
        let is_sqs = event
            .get("Records")
            .and_then(|r| r.as_array())
            .is_some_and(|records| {
                records
                    .iter()
                    .all(|r| r.get("eventSource").and_then(|s| s.as_str()) == Some("aws:sqs"))
            });
        if is_sqs {
            Ok(Self::OnFailure(serde_json::from_value(event)?))
        } else {
            Ok(Self::Schedule)
        }
    }
}

/// What the handler answers: the run's report (schedule), or the messages
/// to retry (OnFailure queue, `ReportBatchItemFailures`).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Response {
    /// A scheduled run's report.
    Sweep(SweepReport),
    /// The OnFailure messages to retry.
    Batch(SqsBatchResponse),
}

/// The Lambda handler. A scheduled run emits its EMF line and fails (so the
/// Errors alarm sees it) when a shard could not be read; an OnFailure batch
/// reports each message whose window is not settled, so SQS redelivers it
/// and, after `maxReceiveCount`, moves it to the dead-letter queue.
///
/// `heartbeat`: this function's stack settings record, written again on
/// every run (the stack's heartbeat: a second stack on the table yields to
/// a live one, `adopt-region` refuses a live region) before the run checks
/// that no other stack publishes from the table; `None`: neither (tests of
/// the sweep alone).
pub async fn handler<S: EventSink, T: PublishStore + SweepStore>(
    sweeper: &Sweeper<S, T>,
    heartbeat: Option<&Heartbeat>,
    event: LambdaEvent<serde_json::Value>,
) -> Result<Response, Error> {
    let deadline = Deadline::from_epoch_millis(event.context.deadline, DEADLINE_MARGIN);
    let trigger = Trigger::from_value(event.payload)?;
    if let Some(heartbeat) = heartbeat {
        heartbeat.beat(&sweeper.store, &deadline).await?;
    }
    match trigger {
        Trigger::Schedule => {
            let report = sweeper.sweep(OffsetDateTime::now_utc(), &deadline).await;
            log_sweep(&report, "sweep finished");
            if report.shard_errors > 0 {
                return Err(Error::from(format!(
                    "{} shard reads or writes failed",
                    report.shard_errors
                )));
            }
            Ok(Response::Sweep(report))
        }
        Trigger::OnFailure(event) => {
            let (response, report) = redrive_messages(sweeper, &event, &deadline).await;
            log_sweep(&report, "OnFailure windows redriven");
            Ok(Response::Batch(response))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trigger_is_told_by_the_shape() {
        let trigger = |v| Trigger::from_value(v).unwrap();
        let scheduled = serde_json::json!({"version": "0", "id": "x", "detail-type": "Scheduled Event", "source": "aws.events", "detail": {}});
        assert!(matches!(trigger(scheduled), Trigger::Schedule));
        let sqs = serde_json::json!({"Records": [{"messageId": "m", "body": "{}", "eventSource": "aws:sqs", "attributes": {}, "messageAttributes": {}}]});
        assert!(matches!(trigger(sqs), Trigger::OnFailure(_)));
    }
}
