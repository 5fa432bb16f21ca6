//! The publisher: DynamoDB stream records of outbox inserts in, events out
//! (EventBridge, or SNS), outbox items deleted only after their event was
//! accepted, and a partial-batch response that never skips a record.
//!
//! # Layout
//! - [`Publisher`]: the dependencies (a sink and a store, both ports of
//!   `outbox_runtime`: `publish::EventSink`, `store::PublishStore`) and [`Publisher::process`], the whole logic.
//! - [`handler`]: the Lambda handler: a plain function of the dependencies
//!   and the event, used by the binary and by tests.
//! - [`Report`]: what one invocation did, logged and emitted as metrics.
//! - [`StreamEvent`] (`stream.rs`): the lean decode of the stream event:
//!   only the fields the publisher uses, borrowed from the event's text,
//!   images decoded only for outbox inserts (docs/performance.md §2).
//!
//! # Rules
//! - Only `INSERT` records whose `SK` starts with `OUTBOX#` are published
//!   (the mapping filters too; this is the defensive second check).
//! - Records are relayed in order through [`outbox_engine::Relay`] in
//!   [`Mode::Stream`]: the first record that is not handled is reported by
//!   its `dynamodb.SequenceNumber`, and **nothing after its wave is sent**
//!   in this invocation, whatever made it unhandled (a failure after
//!   retries, a poison record whose dead-letter write failed, the
//!   deadline); the wave's other calls went out beside it, and their events
//!   are deleted, so the redelivered batch's check does not send them again.
//! - An item whose pending-index keys are not ones this stack's sweeper
//!   reads ([`KeySchema::sweepable`]: a writer on other names, another
//!   region's keys, another shard count, none) is given the stack's keys
//!   before anything is sent (`KeysRepaired`); if that write fails, its
//!   record is reported. So no failure after it can leave an event where
//!   no sweep looks.
//! - A record whose image does not decode is poison: dead-lettered before
//!   anything after it is sent, so it does not block its shard.
//! - An `INSERT` without a `NewImage` is a configuration error (the stream
//!   is not `NEW_IMAGE`), never poison: it is reported, with an error that
//!   names the stream view type, and never dead-lettered.
//! - A batch that may be a redelivery is checked against the table before
//!   anything is sent ([`Redelivery`]): an event whose item is gone
//!   (published), another region's (adopted) or dead-lettered is not sent
//!   again and not reported. Strict ordering's guard read answers the same
//!   question, so it makes no second read. Fresh records on a warm process
//!   pay nothing.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_lambda_events::event::dynamodb::StreamViewType;
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use futures::StreamExt;
use lambda_runtime::{Error, LambdaEvent};
use outbox_core::keys::{self, ItemKey, KeySchema};
use outbox_core::OutboxItem;
use outbox_engine::EventSink;
use outbox_engine::Ordering;
use outbox_engine::{Deadline, RetryPolicy};
use outbox_engine::{Entry, Mode, Relay, RelayReport};
use outbox_engine::{Marked, PublishStore};
use outbox_runtime::Unit;

mod stream;

pub use stream::{Change, Record, StreamDecodeError, StreamEvent};

/// Repair writes in flight at once ([`Publisher::process`]'s key check).
const REPAIRS_AT_ONCE: usize = 25;

/// Time kept back from the Lambda deadline for deletes and the response.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(3);

/// The publisher's dependencies, built once per cold start.
#[derive(Debug, Clone)]
pub struct Publisher<S, T> {
    /// Where events go.
    pub sink: S,
    /// Where outbox items are.
    pub store: T,
    /// Retries of failed entries within the call.
    pub retry: RetryPolicy,
    /// Order per aggregate (`ORDERING`; relaxed unless set).
    pub ordering: Ordering,
    /// Sink calls in flight at once (`SEND_CONCURRENCY`).
    pub send_concurrency: usize,
    /// The table's key schema (the defaults unless set).
    pub keys: KeySchema,
    /// Which batches are checked against the table first.
    pub redelivery: Redelivery,
    /// The shards the stack's sweeper reads (`OUTBOX_SHARDS`, or the
    /// highest count recorded in the table, whichever is larger): an item
    /// whose pending-index keys name another shard, another region, other
    /// names or none is made sweepable before it is sent.
    pub shards: u16,
    /// This function's stack settings record, written again and the
    /// one-stack check made again at most every five minutes while it is
    /// invoked (`publish::Heartbeat`); a batch that finds another stack
    /// was there first fails whole, nothing sent (its records come back).
    /// `None`: neither (tests of the relay alone).
    pub heartbeat: Option<outbox_runtime::Heartbeat>,
}

/// How many sequence numbers a process remembers (a few batches' worth:
/// Lambda redelivers a batch right after the invocation that failed it).
const REMEMBERED: usize = 10_000;

/// Which batches may be redeliveries, so are checked against the table
/// before anything is sent: the first batch a process handles (the
/// process before it may have been killed after its deletes), the batch
/// after one whose check found a stale record (Lambda bisects a batch that
/// failed as a whole: its halves come one after the other), a batch with a
/// record this process has seen (a retry after a partial failure or a
/// timeout), and a batch with a record older than `check_after` (a
/// backlog: a shard catching up, a region coming back).
#[derive(Debug, Clone)]
pub struct Redelivery {
    /// Records older than this are checked (`RECHECK_AFTER_SECONDS`).
    pub check_after: Duration,
    seen: Arc<Mutex<Seen>>,
}

#[derive(Debug, Default)]
struct Seen {
    handled_one: bool,
    /// The last check found a stale record: the next batch is checked too.
    stale_found: bool,
    order: VecDeque<String>,
    set: HashSet<String>,
}

impl Redelivery {
    /// Records older than `check_after` are checked.
    pub fn new(check_after: Duration) -> Self {
        Self {
            check_after,
            seen: Arc::default(),
        }
    }

    /// Whether `records` may be a redelivery.
    fn suspect(&self, records: &[Record<'_>], now_ms: i64) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let limit = i64::try_from(self.check_after.as_millis()).unwrap_or(i64::MAX);
        self.check_after.is_zero()
            || !seen.handled_one
            || seen.stale_found
            || records.iter().any(|r| {
                now_ms.saturating_sub(r.created_ms) > limit
                    || r.sequence.as_deref().is_some_and(|s| seen.set.contains(s))
            })
    }

    /// Remembers the batch's sequence numbers, and whether its check (if
    /// it was checked) found a stale record.
    fn remember<'a>(&self, sequences: impl Iterator<Item = &'a str>, checked: Option<bool>) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.handled_one = true;
        if let Some(stale) = checked {
            seen.stale_found = stale;
        }
        for sequence in sequences {
            if !seen.set.contains(sequence) {
                seen.set.insert(sequence.to_owned());
                seen.order.push_back(sequence.to_owned());
            }
        }
        while seen.order.len() > REMEMBERED {
            if let Some(old) = seen.order.pop_front() {
                seen.set.remove(&old);
            }
        }
    }
}

impl Default for Redelivery {
    /// Records older than a minute are checked (the template's default).
    fn default() -> Self {
        Self::new(Duration::from_secs(60))
    }
}

/// What one invocation did: the batch's records before the relay, and the
/// relay's own report of the entries it was given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Records in the batch.
    pub records: usize,
    /// Records that were not outbox inserts, or another region's.
    pub skipped: usize,
    /// Of those, outbox inserts of another home region (global tables),
    /// ignored: that region publishes them.
    pub foreign: usize,
    /// Outbox items written without the pending-index keys this stack's
    /// sweeper reads (a writer on other key names, another region's keys,
    /// another shard count, none), given them before their event was sent,
    /// or, when the item cannot take them (`ValidationException`),
    /// published as it is (`KeysRepaired`: a writer and the stack disagree).
    pub repaired: usize,
    /// Sequence number of the first record not handled, if any.
    pub first_failure: Option<String>,
    /// Records the mapping delivers again: the first failure and all
    /// records after it (`Unhandled`). Some of them may have been published
    /// beside the failure, in its wave; their items are deleted, so the
    /// redelivered batch's check does not send them again.
    pub unhandled: usize,
    /// The batch may be a redelivery and was checked against the table.
    pub rechecked: bool,
    /// What the relay did with the outbox inserts (stream mode): events
    /// published, dead-lettered, not deleted, held and released (strict
    /// ordering), not sent again (`gone`: their item was gone, another
    /// region's or dead-lettered), the collection reads, and each
    /// published event's `CommitToPublishLatency`.
    pub relayed: RelayReport,
}

impl Report {
    /// Poison found by the sink whose dead-letter write failed: left
    /// pending for the sweeper (not reported, see the relay's rules). Held
    /// events are deferred on purpose and not counted here.
    pub fn dead_letter_deferred(&self) -> usize {
        self.relayed.deferred.saturating_sub(self.relayed.held)
    }

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
        for line in self.emf_lines() {
            println!("{line}");
        }
    }

    /// The EMF document of this invocation (with the first 100 latencies).
    pub fn emf(&self) -> String {
        self.emf_lines().swap_remove(0)
    }

    /// The EMF documents of this invocation: `Published`, the other counts
    /// that are not zero, and `CommitToPublishLatency`, one value per event
    /// published, 100 to a document. A zero count is left out: every alarm
    /// on these treats missing data as not breaching, and at one record an
    /// invocation the zeros were half the bytes CloudWatch Logs ingests
    /// from the publisher (docs/performance.md §7).
    pub fn emf_lines(&self) -> Vec<String> {
        let counts: Vec<_> = [
            ("Published", self.relayed.published, Unit::Count),
            ("Skipped", self.skipped, Unit::Count),
            ("DeadLettered", self.relayed.dead_lettered, Unit::Count),
            ("KeysRepaired", self.repaired, Unit::Count),
            ("DeleteFailed", self.relayed.delete_failed, Unit::Count),
            (
                "DeadLetterDeferred",
                self.dead_letter_deferred(),
                Unit::Count,
            ),
            ("Unhandled", self.unhandled, Unit::Count),
            ("Held", self.relayed.held, Unit::Count),
            ("Released", self.relayed.released, Unit::Count),
        ]
        .into_iter()
        .filter(|(name, count, _)| *name == "Published" || *count > 0)
        .map(|(name, count, unit)| (name, count as f64, unit))
        .collect();
        outbox_runtime::emf_lines(
            "publisher",
            &counts,
            outbox_runtime::Distribution {
                name: outbox_runtime::COMMIT_TO_PUBLISH,
                values: &self.relayed.commit_to_publish_ms,
                unit: Unit::Milliseconds,
            },
        )
    }
}

impl<S: EventSink, T: PublishStore> Publisher<S, T> {
    /// A publisher with the default retry policy.
    pub fn new(sink: S, store: T) -> Self {
        Self {
            sink,
            store,
            retry: RetryPolicy::default(),
            ordering: Ordering::default(),
            send_concurrency: outbox_engine::DEFAULT_SEND_CONCURRENCY,
            keys: KeySchema::default(),
            redelivery: Redelivery::default(),
            shards: outbox_runtime::DEFAULT_OUTBOX_SHARDS,
            heartbeat: None,
        }
    }

    /// The same publisher on a table with the key schema `keys` (names and
    /// home region: the stack's, as the binary reads them).
    pub fn with_keys(mut self, keys: KeySchema) -> Self {
        self.keys = keys;
        self
    }

    /// Handles one batch of stream records: a [`StreamEvent`], or
    /// `aws_lambda_events` records (which become one).
    ///
    /// Returns an error (failing the whole batch, which Lambda retries, then
    /// gives to the mapping's OnFailure destination) when the event does not
    /// decode, or when a record that must be reported has no sequence
    /// number, which a real stream never sends.
    pub async fn process(
        &self,
        event: impl Into<StreamEvent>,
        deadline: &Deadline,
    ) -> Result<Report, Error> {
        let event = event.into();
        let records = event.records(&self.keys)?;
        let mut report = Report {
            records: records.len(),
            ..Report::default()
        };
        let now_ms =
            i64::try_from(outbox_core::now_utc_millis().unix_timestamp_nanos() / 1_000_000)
                .unwrap_or(i64::MAX);
        report.rechecked = self.redelivery.suspect(&records, now_ms);
        let default_schema = self.keys.is_default();
        // Borrowed from the event's text: no copies.
        let all_sequences: Vec<_> = records.iter().filter_map(|r| r.sequence.clone()).collect();
        let mut sequences = Vec::with_capacity(records.len());
        let mut entries = Vec::with_capacity(records.len());
        // By value: each image is decoded in place, never copied
        // (docs/performance.md §2).
        for record in records {
            let Change::OutboxInsert { key, image, view } = record.change else {
                report.skipped += 1;
                continue;
            };
            // Another region's item (global tables: a replicated write):
            // its home region publishes it. Ignored, never dead-lettered;
            // the mapping's filter drops these before they get here.
            let region = string_attribute(&image, keys::attr::HOME_REGION);
            if !self.keys.publishes_region(region) {
                report.skipped += 1;
                report.foreign += 1;
                continue;
            }
            sequences.push(record.sequence);
            entries.push(entry(&self.keys, default_schema, key, image, view));
        }

        // Before anything is sent: an item the sweeper could not find would
        // be lost to the first failure after this point.
        report.repaired = self.make_sweepable(&mut entries, deadline).await;
        // Strict ordering's guard reads answer the check for every event.
        if report.rechecked && self.ordering == Ordering::Relaxed {
            self.settle_republished(&mut entries, deadline).await;
        }
        let relay = Relay {
            sink: &self.sink,
            store: &self.store,
            retry: &self.retry,
            ordering: self.ordering,
            concurrency: self.send_concurrency,
        };
        report.relayed = relay
            .run(&entries, Mode::Stream, &mut Default::default(), deadline)
            .await;
        self.redelivery.remember(
            all_sequences.iter().map(|s| s.as_ref()),
            report.rechecked.then_some(report.relayed.gone > 0),
        );
        if let Some(first) = report.relayed.first_unhandled() {
            report.unhandled = entries.len() - first;
            report.first_failure = Some(
                sequences[first]
                    .as_deref()
                    .ok_or_else(|| {
                        Error::from("a stream record to retry has no dynamodb.SequenceNumber; failing the whole batch")
                    })?
                    .to_owned(),
            );
        }
        Ok(report)
    }
}

impl<S: EventSink, T: PublishStore> Publisher<S, T> {
    /// Gives every item that lacks the pending-index keys this stack's
    /// sweeper reads ([`KeySchema::sweepable`]) those keys, in one
    /// conditional write each, all at once: the shard of its aggregate
    /// under this stack's names and home region, its event id as the sort
    /// key. An item gone or dead-lettered meanwhile becomes
    /// [`Entry::Settled`]; one whose write failed becomes
    /// [`Entry::Unusable`], reported, so that nothing after it is sent and
    /// the stream delivers it again. Returns how many were repaired.
    async fn make_sweepable(&self, entries: &mut [Entry], deadline: &Deadline) -> usize {
        type Repair = (usize, ItemKey, Option<String>, String, String);
        let repairs: Vec<Repair> = entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| match e {
                Entry::Item(item) if !self.keys.sweepable(item, self.shards) => Some((
                    i,
                    item.key(),
                    item.pending_pk.clone(),
                    self.keys
                        .pending_pk(keys::shard_of(&item.aggregate_id, self.shards)),
                    item.event_id.to_string(),
                )),
                _ => None,
            })
            .collect();
        if repairs.is_empty() {
            return 0;
        }
        // A few at once, in order (a batch may hold thousands).
        let results: Vec<_> =
            futures::stream::iter(repairs.iter().map(|(_, key, seen, pk, sk)| {
                self.store
                    .make_sweepable(key, seen.as_deref(), pk, sk, deadline)
            }))
            .buffered(REPAIRS_AT_ONCE)
            .collect()
            .await;
        let mut repaired = 0;
        for ((i, key, _, pk, sk), result) in repairs.into_iter().zip(results) {
            let Entry::Item(item) = &mut entries[i] else {
                continue;
            };
            let found = item.pending_pk.as_deref().unwrap_or("none").to_owned();
            match result {
                Ok(Marked::Updated) => {
                    tracing::warn!(
                        event_id = %item.event_id,
                        found_pending_key = %found,
                        pending_key = %pk,
                        "outbox item written without the pending-index keys this stack reads (a writer's key names, home region or shard count differ from the stack's); keys written before publishing"
                    );
                    item.pending_pk = Some(pk);
                    item.pending_sk = Some(sk);
                    repaired += 1;
                }
                // Already under keys this stack reads (written since the
                // record): sent as it is.
                Ok(Marked::Claimed) => {}
                // Gone, dead-lettered or another region's now.
                Ok(Marked::Gone) => entries[i] = Entry::Settled { key },
                Ok(Marked::Refused) => {
                    tracing::error!(event_id = %item.event_id, "outbox item under other pending-index keys again; its record is reported");
                    entries[i] = Entry::Unusable {
                        key,
                        reason: format!(
                            "the item's pending-index keys changed since its stream record, and are still not ones this stack reads (found {found})"
                        ),
                    };
                }
                // A write that can never succeed (an item too large to take
                // two more attributes): reporting it would block its shard
                // until the stream drops it. Sent as before, from the
                // stream, with the mismatch logged and counted.
                Err(e) if e.code == "ValidationException" => {
                    tracing::error!(event_id = %item.event_id, error = %e, "an outbox item cannot take the pending-index keys this stack reads; publishing it from the stream as it is (a failure after this point leaves it where no sweep looks)");
                    repaired += 1;
                }
                Err(e) => {
                    tracing::error!(event_id = %item.event_id, error = %e, "could not give an outbox item the pending-index keys this stack reads; its record is reported");
                    entries[i] = Entry::Unusable {
                        key,
                        reason: format!(
                            "the item has no pending-index keys this stack reads (found {found}) and writing them failed: {e}"
                        ),
                    };
                }
            }
        }
        repaired
    }

    /// The check of a batch that may be a redelivery: one consistent
    /// batched read of its events' items; an event whose item this region
    /// may no longer publish becomes [`Entry::Settled`]. A read that fails
    /// checks nothing (a duplicate rather than a loss).
    async fn settle_republished(&self, entries: &mut [Entry], deadline: &Deadline) {
        let keys: Vec<ItemKey> = entries
            .iter()
            .filter_map(|e| match e {
                Entry::Item(item) => Some(item.key()),
                _ => None,
            })
            .collect();
        if keys.is_empty() {
            return;
        }
        match self.store.publishable(&keys, deadline).await {
            Ok(publishable) => {
                for entry in entries.iter_mut() {
                    if let Entry::Item(item) = entry {
                        let key = item.key();
                        if !publishable.contains(&key) {
                            *entry = Entry::Settled { key };
                        }
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "a possibly redelivered batch was not checked against the table; publishing it (consumers deduplicate by eventId)");
            }
        }
    }
}

/// What the relay makes of an outbox insert.
fn entry(
    schema: &KeySchema,
    default_schema: bool,
    key: ItemKey,
    image: serde_dynamo::Item,
    view: Option<StreamViewType>,
) -> Entry {
    if image.is_empty() {
        let view = serde_json::to_value(view)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_else(|| "unknown".to_owned());
        return Entry::Unusable {
            key,
            reason: format!(
                "the stream record has no NewImage (stream view type {view}); the table's stream must be NEW_IMAGE or NEW_AND_OLD_IMAGES"
            ),
        };
    }
    // Kept for a dead letter.
    let aggregate_id = string_attribute(&image, keys::attr::AGGREGATE_ID).map(str::to_owned);
    let image = if default_schema {
        image
    } else {
        let mut image = image.into_inner();
        schema.rename_from_table(&mut image);
        serde_dynamo::Item::from(image)
    };
    match OutboxItem::from_item(image) {
        Ok(item) => Entry::Item(item),
        Err(e) => Entry::Poison {
            key,
            aggregate_id,
            reason: e.to_string(),
        },
    }
}

/// A string attribute of an image, if present.
fn string_attribute<'i>(image: &'i serde_dynamo::Item, name: &str) -> Option<&'i str> {
    match image.get(name) {
        Some(serde_dynamo::AttributeValue::S(s)) => Some(s),
        _ => None,
    }
}

/// The Lambda handler.
pub async fn handler<S: EventSink, T: PublishStore>(
    publisher: &Publisher<S, T>,
    event: LambdaEvent<StreamEvent>,
) -> Result<DynamoDbEventResponse, Error> {
    let deadline = Deadline::from_epoch_millis(event.context.deadline, DEADLINE_MARGIN);
    if let Some(heartbeat) = &publisher.heartbeat {
        heartbeat.beat(&publisher.store, &deadline).await?;
    }
    let report = publisher.process(event.payload, &deadline).await?;
    let count = report.records;
    tracing::info!(
        records = count,
        published = report.relayed.published,
        skipped = report.skipped,
        foreign = report.foreign,
        dead_lettered = report.relayed.dead_lettered,
        keys_repaired = report.repaired,
        delete_failed = report.relayed.delete_failed,
        dead_letter_deferred = report.dead_letter_deferred(),
        unhandled = report.unhandled,
        held = report.relayed.held,
        released = report.relayed.released,
        rechecked = report.rechecked,
        not_republished = report.relayed.gone,
        first_failure = report.first_failure.as_deref().unwrap_or(""),
        "batch handled"
    );
    report.emit();
    Ok(report.response())
}
