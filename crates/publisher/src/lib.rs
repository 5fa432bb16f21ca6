//! The publisher: DynamoDB stream records of outbox inserts in, events out
//! (EventBridge, or SNS), outbox items deleted only after their event was
//! accepted, and a partial-batch response that never skips a record.
//!
//! # Layout
//! - [`Publisher`]: the dependencies (a sink and a store, both ports of
//!   `outbox_core`) and [`Publisher::process`], the whole logic.
//! - [`handler`]: the Lambda handler: a plain function of the dependencies
//!   and the event, used by the binary and by tests.
//! - [`Report`]: what one invocation did, logged and emitted as metrics.
//!
//! # Rules
//! - Only `INSERT` records whose `SK` starts with `OUTBOX#` are published
//!   (the mapping filters too; this is the defensive second check).
//! - Records are handled in order. The first record that cannot be published
//!   is reported by its `dynamodb.SequenceNumber`, and nothing after it is
//!   published in this invocation: Lambda retries from that record anyway.
//! - A record that can never be published (an image that does not decode, an
//!   entry the sink rejects as malformed or too large) is dead-lettered in
//!   the table and counts as handled, so it does not block its shard.

use std::time::Duration;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use lambda_runtime::{Error, LambdaEvent};
use outbox_core::keys::{self, ItemKey};
use outbox_core::metrics::{self, Unit};
use outbox_core::publish::{publish_in_order, EventSink, ItemOutcome, Ordering};
use outbox_core::retry::{Deadline, RetryPolicy};
use outbox_core::store::OutboxStore;
use outbox_core::OutboxItem;

/// Time kept back from the Lambda deadline for deletes and the response.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(3);

/// The publisher's dependencies, built once per cold start.
#[derive(Debug, Clone)]
pub struct Publisher<S, T> {
    pub sink: S,
    pub store: T,
    pub retry: RetryPolicy,
}

/// What one invocation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Records that were not outbox inserts.
    pub skipped: usize,
    /// Events accepted by the sink.
    pub published: usize,
    /// Records dead-lettered (poison).
    pub dead_lettered: usize,
    /// Published events whose outbox item could not be deleted (the sweeper
    /// will republish them later: a duplicate with the same event id).
    pub delete_failed: usize,
    /// Sequence number of the first record not handled, if any.
    pub first_failure: Option<String>,
    /// Records not handled in this invocation (the first failure and all
    /// records after it).
    pub unhandled: usize,
}

impl Report {
    /// The partial-batch response: the first failure's sequence number, or
    /// nothing.
    pub fn response(&self) -> DynamoDbEventResponse {
        let mut response = DynamoDbEventResponse::default();
        if let Some(sequence) = &self.first_failure {
            let mut failure = DynamoDbBatchItemFailure::default();
            failure.item_identifier = Some(sequence.clone());
            response.batch_item_failures.push(failure);
        }
        response
    }

    fn emit(&self) {
        metrics::emit(
            "publisher",
            &[
                ("Published", self.published as f64, Unit::Count),
                ("Skipped", self.skipped as f64, Unit::Count),
                ("DeadLettered", self.dead_lettered as f64, Unit::Count),
                ("DeleteFailed", self.delete_failed as f64, Unit::Count),
                ("Unhandled", self.unhandled as f64, Unit::Count),
            ],
        );
    }
}

/// A record's part in this invocation.
enum Work {
    Publish(usize),
    Poison(ItemKey, String),
}

/// An outbox insert to handle, in stream order.
struct Pending {
    sequence: Option<String>,
    work: Work,
}

impl<S: EventSink, T: OutboxStore> Publisher<S, T> {
    pub fn new(sink: S, store: T) -> Self {
        Self {
            sink,
            store,
            retry: RetryPolicy::default(),
        }
    }

    /// Handles one batch of stream records.
    ///
    /// Returns an error (failing the whole batch, which Lambda retries) only
    /// when a record that must be reported has no sequence number, which a
    /// real stream never sends.
    pub async fn process(
        &self,
        records: &[EventRecord],
        deadline: &Deadline,
    ) -> Result<Report, Error> {
        let mut report = Report::default();
        let mut pending = Vec::new();
        let mut items = Vec::new();
        for record in records {
            let Some(key) = outbox_insert(record) else {
                report.skipped += 1;
                continue;
            };
            let sequence = record.change.sequence_number.clone();
            let work = match OutboxItem::from_item(record.change.new_image.clone()) {
                Ok(item) => {
                    items.push(item);
                    Work::Publish(items.len() - 1)
                }
                Err(e) => Work::Poison(key, e.to_string()),
            };
            pending.push(Pending { sequence, work });
        }

        let outcomes = publish_in_order(
            &self.sink,
            &items,
            Ordering::StopAtFirstFailure,
            &self.retry,
            deadline,
        )
        .await;

        for (position, record) in pending.iter().enumerate() {
            let handled = match &record.work {
                Work::Publish(i) => match &outcomes[*i] {
                    ItemOutcome::Published => true,
                    ItemOutcome::Poison(failure) => {
                        self.dead_letter(&items[*i].key(), &failure.to_string(), &mut report)
                            .await
                    }
                    ItemOutcome::Failed(failure) => {
                        tracing::error!(
                            event_id = %items[*i].event_id,
                            code = %failure.code,
                            kind = ?failure.kind,
                            "event not published; reporting the record for retry"
                        );
                        false
                    }
                    ItemOutcome::NotAttempted => false,
                },
                Work::Poison(key, reason) => self.dead_letter(key, reason, &mut report).await,
            };
            if !handled {
                report.unhandled = pending.len() - position;
                report.first_failure = Some(record.sequence.clone().ok_or_else(|| {
                    Error::from("a stream record to retry has no dynamodb.SequenceNumber; failing the whole batch")
                })?);
                break;
            }
        }
        // Every accepted event's item is deleted, including those after the
        // first failure that went out in the same sink call: the retry from
        // the reported record will publish them again (a duplicate with the
        // same event id), but they must not linger for the sweeper too.
        let published: Vec<ItemKey> = items
            .iter()
            .zip(&outcomes)
            .filter(|(_, outcome)| **outcome == ItemOutcome::Published)
            .map(|(item, _)| item.key())
            .collect();
        report.published = published.len();
        let undeleted = self.store.delete_published(&published, deadline).await;
        for key in &undeleted {
            tracing::error!(key = %key, "published event's outbox item not deleted; the sweeper will republish it");
        }
        report.delete_failed = undeleted.len();
        Ok(report)
    }

    async fn dead_letter(&self, key: &ItemKey, reason: &str, report: &mut Report) -> bool {
        match self.store.dead_letter(key, reason, None).await {
            Ok(marked) => {
                tracing::error!(key = %key, reason, outcome = ?marked, "poison outbox record dead-lettered");
                report.dead_lettered += 1;
                true
            }
            Err(e) => {
                tracing::error!(key = %key, error = %e, "could not dead-letter a poison record; reporting it for retry");
                false
            }
        }
    }
}

/// The key of the record if it is the insert of an outbox item.
fn outbox_insert(record: &EventRecord) -> Option<ItemKey> {
    if record.event_name != "INSERT" {
        return None;
    }
    #[derive(serde::Deserialize)]
    struct Keys {
        #[serde(rename = "PK")]
        pk: String,
        #[serde(rename = "SK")]
        sk: String,
    }
    let keys: Keys = serde_dynamo::from_item(record.change.keys.clone()).ok()?;
    keys::is_outbox_sk(&keys.sk).then(|| ItemKey::new(keys.pk, keys.sk))
}

/// The Lambda handler.
pub async fn handler<S: EventSink, T: OutboxStore>(
    publisher: &Publisher<S, T>,
    event: LambdaEvent<Event>,
) -> Result<DynamoDbEventResponse, Error> {
    let deadline = Deadline::from_epoch_millis(event.context.deadline, DEADLINE_MARGIN);
    let records = event.payload.records;
    let report = publisher.process(&records, &deadline).await?;
    tracing::info!(
        records = records.len(),
        published = report.published,
        skipped = report.skipped,
        dead_lettered = report.dead_lettered,
        delete_failed = report.delete_failed,
        unhandled = report.unhandled,
        first_failure = report.first_failure.as_deref().unwrap_or(""),
        "batch handled"
    );
    report.emit();
    Ok(report.response())
}
