//! The `projector` Lambda: a consumer of our events that keeps a customer
//! read model exactly once in effect, from at-least-once, any-order
//! delivery.
//!
//! EventBridge rule (`source` = `EVENT_SOURCE`) → SQS queue → this function
//! (Lambda's SQS mapping with `ReportBatchItemFailures`). For each message,
//! in order:
//! - the body must be an EventBridge event whose `detail` is our envelope;
//!   otherwise the message is logged (ids and the error's position only,
//!   never the body) and reported, so it is retried and, after the queue's
//!   `maxReceiveCount`, lands in the queue's dead-letter queue (alarmed);
//! - a large event's claim check (its stub) is resolved from S3, size and
//!   SHA-256 checked (`inbox::resolve`); a missing or altered object is
//!   reported like a malformed message, an S3 failure for retry;
//! - `OrderCreated` and `OrderPaid` are applied with the inbox library: the
//!   inbox record, the order row and the customer summary in one
//!   transaction, without reads (`model.rs`);
//! - other event types, and other `schemaVersion`s than 1, are acknowledged
//!   and counted `Ignored`;
//! - an error is reported for retry; whether a retry can help is logged.
//!
//! One EMF line per invocation: `Applied`, `Duplicate`, `Stale`, `Ignored`,
//! `Failed`, `Unstarted` and `ProjectionLagSeconds` (now − `occurredAt` of the newest
//! event in the batch). The envelope's `traceparent` trace id is in every
//! log line about the event.
//!
//! Messages of one batch are applied one after the other: one batch never
//! conflicts with itself, and the SQS mapping scales out by invocations.
//!
//! The batch keeps to the invocation's deadline (less [`DEADLINE_MARGIN`]
//! for the answer): each message's DynamoDB work is bounded by the time
//! left, a message cut by the deadline is reported, and messages never
//! started are reported without a call (`Unstarted`). So a slow or hung
//! table never times the invocation out, which would count a receive
//! towards the dead-letter queue for every message of the batch, the
//! valid ones included. A cut transaction may have committed; its
//! redelivery is then a `Duplicate`.
//!
//! # Layout
//! - `model.rs`: the read model's keys, the payload it reads, the row and
//!   summary actions.
//! - [`Projector`], [`handler`]: applying one message, and a batch.

mod model;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use aws_lambda_events::event::sqs::{BatchItemFailure, SqsBatchResponse, SqsEvent};
use inbox::{EventOutcome, Inbox, InboxError};
use lambda_runtime::{Error, LambdaEvent};
use model::{OrderState, Stored};
use outbox_core::claim::PayloadStore;
use outbox_core::table::ItemTable;
use outbox_core::EventEnvelope;
use outbox_engine::Deadline;
use outbox_runtime::Unit;
use std::time::Duration;
use time::OffsetDateTime;

/// Time kept back from the Lambda deadline for the batch's answer.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(2);

/// Least time a message is started with: one DynamoDB round trip.
const MESSAGE_MINIMUM: Duration = Duration::from_millis(250);

/// How many times one event's transaction is rebuilt from what a failed
/// condition returned before the message is reported for retry.
const MAX_ATTEMPTS: usize = 4;

/// The row's label in the transaction.
const ROW: &str = "row";

/// Why a message was not applied. It is reported for retry either way.
#[derive(Debug, thiserror::Error)]
pub enum ProjectError {
    /// Not an EventBridge event with our envelope, or an order event whose
    /// payload is not an order. Retrying will not help; after the queue's
    /// `maxReceiveCount` it moves to the dead-letter queue.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The inbox transaction failed.
    #[error(transparent)]
    Inbox(#[from] InboxError),
    /// The row changed between every attempt (concurrent deliveries of
    /// this order's events).
    #[error("the order row changed under each of {0} attempts")]
    Contended(usize),
    /// The invocation's deadline came first: not started, or cut while its
    /// transaction was in flight (it may have committed; a redelivery is
    /// then a duplicate).
    #[error("the invocation's deadline came first ({0})")]
    Deadline(&'static str),
}

impl ProjectError {
    /// Whether a redelivery may succeed (the message is reported, not dropped).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Malformed(_) => false,
            Self::Inbox(e) => e.is_retryable(),
            Self::Contended(_) | Self::Deadline(_) => true,
        }
    }
}

/// What became of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Projected {
    /// What became of the event.
    pub outcome: EventOutcome,
    /// When the event happened (for the lag metric).
    pub occurred_at: OffsetDateTime,
}

/// The projector's dependencies: the table it writes through (the SDK
/// client, or `MemoryTable` in unit tests) and the inbox settings (whose
/// table is the read model's).
#[derive(Debug, Clone)]
pub struct Projector<T = aws_sdk_dynamodb::Client, P = aws_sdk_s3::Client> {
    table: T,
    inbox: Inbox,
    payloads: P,
}

impl<T: ItemTable, P: PayloadStore> Projector<T, P> {
    /// A projector writing through `table` with `inbox`, reading large
    /// events' claim checks through `payloads` (the S3 client).
    pub fn new(table: T, inbox: Inbox, payloads: P) -> Self {
        Self {
            table,
            inbox,
            payloads,
        }
    }

    /// Applies one SQS message body (a claim check's stub resolved first:
    /// `inbox::resolve`).
    pub async fn project(&self, body: &str) -> Result<Projected, ProjectError> {
        let envelope = inbox::resolve(parse(body)?, &self.payloads)
            .await
            .map_err(InboxError::from)?;
        let trace_id = envelope
            .traceparent
            .as_deref()
            .and_then(|t| t.split('-').nth(1))
            .unwrap_or("");
        // The shapes this projector reads: version 1 of the order events.
        // Another version (docs/events.md) is a new shape: ignored, not misread.
        let outcome = match (envelope.event_type.as_str(), envelope.schema_version) {
            (model::ORDER_CREATED | model::ORDER_PAID, 1) => self.apply_order(&envelope).await?,
            _ => EventOutcome::Ignored,
        };
        tracing::info!(
            event_id = %envelope.event_id,
            event_type = %envelope.event_type,
            aggregate_version = envelope.aggregate_version,
            outcome = outcome.as_str(),
            trace_id,
            "projected"
        );
        Ok(Projected {
            outcome,
            occurred_at: envelope.occurred_at,
        })
    }

    async fn apply_order(&self, envelope: &EventEnvelope) -> Result<EventOutcome, ProjectError> {
        let order: OrderState = serde_json::from_value(envelope.payload.clone()).map_err(|e| {
            ProjectError::Malformed(format!(
                "{} payload is not an order ({:?} error)",
                envelope.event_type,
                e.classify()
            ))
        })?;
        if envelope.aggregate_id != order.order_id {
            return Err(ProjectError::Malformed(
                "the payload's orderId is not the event's aggregateId".into(),
            ));
        }
        let version = envelope.aggregate_version;
        let updated_at = envelope
            .occurred_at
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(|_| ProjectError::Malformed("occurredAt cannot be formatted".into()))?;
        let table = self.inbox.table();
        let build = |e: aws_sdk_dynamodb::error::BuildError| {
            ProjectError::Malformed(format!("cannot build the transaction: {e}"))
        };
        let mut stored = Stored::guess(&order, version);
        for _ in 0..MAX_ATTEMPTS {
            let mut tx = self.inbox.begin(envelope)?.put(
                ROW,
                model::row_put(table, &order, version, &updated_at, stored).map_err(build)?,
            );
            if let Some(update) = model::summary_update(table, &order, stored).map_err(build)? {
                tx = tx.update("summary", update);
            }
            match tx.commit(&self.table).await {
                Ok(outcome) => return Ok(outcome),
                Err(e) => {
                    // Only the row's condition failed: its old item (ALL_OLD)
                    // says what is stored, without a read.
                    let Some(failed) = e.failed_condition(ROW) else {
                        return Err(e.into());
                    };
                    match Stored::from_item(failed.item.as_ref()) {
                        Stored::Present { version: old, .. } if old >= version => {
                            return Ok(EventOutcome::Stale)
                        }
                        now => stored = now,
                    }
                }
            }
        }
        Err(ProjectError::Contended(MAX_ATTEMPTS))
    }
}

/// The envelope of an EventBridge event delivered to SQS.
fn parse(body: &str) -> Result<EventEnvelope, ProjectError> {
    serde_json::from_str::<EventBridgeEvent<EventEnvelope>>(body)
        .map(|event| event.detail)
        .map_err(|e| {
            // The error's category and position only: its text may quote
            // the body.
            ProjectError::Malformed(format!(
                "not an EventBridge event with the outbox envelope ({:?} error at line {} column {})",
                e.classify(),
                e.line(),
                e.column()
            ))
        })
}

/// Events of one batch, by outcome (the EMF metrics).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    /// Applied.
    pub applied: u32,
    /// Seen before.
    pub duplicate: u32,
    /// Older than the row.
    pub stale: u32,
    /// Not handled by the projector.
    pub ignored: u32,
    /// Failed (reported for redelivery), the unstarted included.
    pub failed: u32,
    /// Not started before the deadline (reported without a call).
    pub unstarted: u32,
}

impl Counts {
    fn add(&mut self, outcome: EventOutcome) {
        match outcome {
            EventOutcome::Applied => self.applied += 1,
            EventOutcome::Duplicate => self.duplicate += 1,
            EventOutcome::Stale => self.stale += 1,
            EventOutcome::Ignored => self.ignored += 1,
        }
    }
}

/// The EMF document of a batch: its `counts`, and `ProjectionLagSeconds`
/// (how long ago the newest applied event occurred) when one was applied.
pub fn emf(counts: &Counts, lag: Option<time::Duration>) -> String {
    let mut line = vec![
        ("Applied", f64::from(counts.applied), Unit::Count),
        ("Duplicate", f64::from(counts.duplicate), Unit::Count),
        ("Stale", f64::from(counts.stale), Unit::Count),
        ("Ignored", f64::from(counts.ignored), Unit::Count),
        ("Failed", f64::from(counts.failed), Unit::Count),
        ("Unstarted", f64::from(counts.unstarted), Unit::Count),
    ];
    if let Some(lag) = lag {
        line.push((
            "ProjectionLagSeconds",
            lag.as_seconds_f64().max(0.0),
            Unit::Seconds,
        ));
    }
    outbox_runtime::emf_line("projector", &line)
}

/// Applies a batch before `deadline` and names the messages to retry. The
/// EMF line is printed; the counts are returned for tests.
pub async fn project_batch(
    projector: &Projector<impl ItemTable, impl PayloadStore>,
    event: &SqsEvent,
    deadline: &Deadline,
) -> (SqsBatchResponse, Counts) {
    let mut response = SqsBatchResponse::default();
    let mut counts = Counts::default();
    let mut newest: Option<OffsetDateTime> = None;
    for message in &event.records {
        let id = message.message_id.clone().unwrap_or_default();
        let body = message.body.as_deref().unwrap_or("");
        let outcome = if !deadline.allows(MESSAGE_MINIMUM) {
            counts.unstarted += 1;
            Err(ProjectError::Deadline("not started"))
        } else {
            deadline
                .bound(Box::pin(projector.project(body)))
                .await
                .unwrap_or(Err(ProjectError::Deadline("cut in flight")))
        };
        match outcome {
            Ok(projected) => {
                counts.add(projected.outcome);
                newest = newest.max(Some(projected.occurred_at));
            }
            Err(e) => {
                counts.failed += 1;
                tracing::warn!(
                    message_id = %id,
                    retryable = e.is_retryable(),
                    error = %outbox_runtime::error_chain(&e),
                    "message not applied; reported for retry"
                );
                let mut failure = BatchItemFailure::default();
                failure.item_identifier = id;
                response.batch_item_failures.push(failure);
            }
        }
    }
    println!(
        "{}",
        emf(&counts, newest.map(|n| OffsetDateTime::now_utc() - n))
    );
    (response, counts)
}

/// The Lambda handler: a batch in, the messages to retry out. A message
/// without an id cannot be reported alone, so the whole batch fails then.
pub async fn handler(
    projector: &Projector<impl ItemTable, impl PayloadStore>,
    event: LambdaEvent<SqsEvent>,
) -> Result<SqsBatchResponse, Error> {
    let deadline = Deadline::from_epoch_millis(event.context.deadline, DEADLINE_MARGIN);
    let (response, _) = project_batch(projector, &event.payload, &deadline).await;
    if response
        .batch_item_failures
        .iter()
        .any(|f| f.item_identifier.is_empty())
    {
        return Err("a failed message has no messageId; the whole batch is retried".into());
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_dynamodb::types::AttributeValue;
    use outbox_core::claim::MemoryPayloads;
    use outbox_core::keys::{ItemKey, KeySchema};
    use outbox_core::table::MemoryTable;
    use EventOutcome::{Applied, Duplicate, Ignored, Stale};

    #[test]
    fn bodies_that_are_not_our_events_are_malformed_without_quoting_them() {
        for body in [
            "",
            "not json",
            r#"{"secret":"4111-1111"}"#,
            r#"{"version":"0","id":"x","detail-type":"OrderCreated","source":"s","detail":{"secret":"4111"}}"#,
        ] {
            match parse(body) {
                Err(ProjectError::Malformed(message)) => assert!(!message.contains("4111")),
                other => panic!("{other:?}"),
            }
        }
    }

    // The projector's logic on the in-memory table: in order, out of order
    // and redelivered events give one row and one summary.
    // (`tests/projector.rs` runs it on DynamoDB Local and SQS.)

    const TABLE: &str = "read-model";

    fn projector() -> Projector<MemoryTable, MemoryPayloads> {
        let inbox = Inbox::new(TABLE, 7 * 86_400).expect("inbox settings");
        Projector::new(
            MemoryTable::new(KeySchema::default()),
            inbox,
            MemoryPayloads::new(),
        )
    }

    fn body(envelope: &EventEnvelope) -> String {
        serde_json::json!({
            "version": "0", "id": "00000000-0000-0000-0000-000000000000",
            "detail-type": envelope.event_type, "source": "orders.service",
            "account": "123456789012", "time": "2026-12-07T12:00:00Z",
            "region": "us-east-1", "resources": [], "detail": envelope,
        })
        .to_string()
    }

    fn event(event_type: &str, version: u64, status: &str) -> EventEnvelope {
        let payload = serde_json::json!({
            "orderId": "o-1", "customerId": "c-1", "status": status,
            "currency": "EUR", "totalCents": 300,
        });
        EventEnvelope::new(event_type, "Order", "o-1", version, payload).expect("an envelope")
    }

    /// `sk`'s `attributes` as stored, numbers and strings alike.
    fn stored(
        projector: &Projector<MemoryTable, MemoryPayloads>,
        sk: &str,
        attributes: &[&str],
    ) -> Vec<String> {
        let key = ItemKey::new("CUSTOMER#c-1", sk);
        let item = projector.table.item(TABLE, &key).unwrap_or_default();
        let text = |v: &AttributeValue| v.as_n().or_else(|_| v.as_s()).ok().cloned();
        let value = |a: &&str| item.get(*a).and_then(text).unwrap_or_default();
        attributes.iter().map(value).collect()
    }

    async fn outcome(
        projector: &Projector<MemoryTable, MemoryPayloads>,
        envelope: &EventEnvelope,
    ) -> EventOutcome {
        projector
            .project(&body(envelope))
            .await
            .expect("projected")
            .outcome
    }

    #[tokio::test]
    async fn redelivered_and_out_of_order_events_leave_one_row_and_one_summary() {
        let created = event(model::ORDER_CREATED, 1, "PENDING");
        let paid = event(model::ORDER_PAID, 2, "PAID");
        for order in [[&created, &paid], [&paid, &created]] {
            let projector = projector();
            let first = outcome(&projector, order[0]).await;
            let second = outcome(&projector, order[1]).await;
            let expected = if order[0].event_type == model::ORDER_CREATED {
                [Applied, Applied]
            } else {
                [Applied, Stale]
            };
            assert_eq!([first, second], expected);
            // A redelivery of an applied event is a duplicate; a stale one
            // wrote nothing, so it is stale again.
            for (envelope, was) in order.iter().zip(expected) {
                let again = if was == Applied { Duplicate } else { was };
                assert_eq!(outcome(&projector, envelope).await, again);
            }
            let row = stored(&projector, "ORDER#o-1", &["status", "version"]);
            assert_eq!(row, ["PAID", "2"]);
            let summary = stored(
                &projector,
                "SUMMARY",
                &["orders", "paidOrders", "paidCents"],
            );
            assert_eq!(
                summary,
                ["1", "1", "300"],
                "each event counted once, whatever the order"
            );
        }
    }

    #[tokio::test]
    async fn a_conflict_is_reported_for_retry_and_other_versions_are_ignored() {
        let projector = projector();
        projector.table.cancel_next("TransactionConflict");
        let error = projector
            .project(&body(&event(model::ORDER_CREATED, 1, "PENDING")))
            .await
            .expect_err("cancelled");
        assert!(error.is_retryable(), "{error:?}");
        let mut v2 = event(model::ORDER_CREATED, 1, "PENDING");
        v2.schema_version = 2;
        assert_eq!(outcome(&projector, &v2).await, Ignored);
        assert!(projector.table.items(TABLE).is_empty());
    }
}
