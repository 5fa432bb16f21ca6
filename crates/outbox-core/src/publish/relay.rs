//! The relay: publishes outbox entries through an [`EventSink`] and handles
//! every outcome through an [`OutboxStore`], in one place for the publisher
//! and the sweeper. They differ only in the [`Mode`]: how far to go after a
//! failure and what to do with it.
//!
//! # Rules, for both modes
//! - Entries are taken in order. A sink call carries at most
//!   `max_entries` entries and `max_bytes` bytes, and **never two events of
//!   one aggregate**: a later event of an aggregate goes out only after the
//!   call that carried the earlier one succeeded for it. With an SNS FIFO
//!   topic (group = aggregate) a partial `PublishBatch` failure therefore
//!   never lets a later message of a group overtake an earlier one, and with
//!   EventBridge no aggregate's events are inverted by our retries.
//! - Poison (an entry that does not decode or that the sink refuses as
//!   malformed or too large) is dead-lettered **before** anything after it
//!   is sent, when it is known before the call.
//! - Every call is bounded by the deadline; deletes and bookkeeping writes
//!   may use [`FINISH_GRACE`] more (inside the margin the handlers keep).
//! - Published items are deleted at the end, 25 per `BatchWriteItem`.
//!
//! # [`Mode::Stream`] (the publisher)
//! Lambda redelivers every record from the first reported one, so nothing
//! after the first unhandled entry is sent: on a failure after retries, a
//! dead-letter write that fails for a poison entry known before its call, a
//! record without an image, or the deadline, the relay stops; that entry and
//! all after it are [`RelayOutcome::Failed`] or [`RelayOutcome::NotAttempted`].
//! A poison entry discovered *by* the sink, whose dead-letter write then
//! fails, is [`RelayOutcome::Deferred`]: its call-mates after it were already
//! accepted, so reporting it would only republish them on every retry;
//! its item stays pending (counted by the oldest-age metric) and the sweeper
//! dead-letters it.
//!
//! # [`Mode::Sweep`] (the sweeper)
//! Aggregates are independent: a failure holds its aggregate (the later
//! events of that aggregate are [`RelayOutcome::Deferred`] for the rest of the
//! run, across pages, through the caller's `held` set) and the others go on.
//! An item not yet due (`nextAttemptAt` in the future) holds its aggregate
//! too, so a later event never overtakes an earlier one that is backing off.
//! A failed entry gets its attempt recorded with the persisted backoff, or
//! is dead-lettered after `max_attempts`.

use std::collections::HashSet;
use std::time::Duration;

use time::OffsetDateTime;

use super::{EntryOutcome, EventSink, FailureKind, PublishFailure};
use crate::item::OutboxItem;
use crate::keys::ItemKey;
use crate::retry::{Backoff, Deadline, RetryPolicy};
use crate::store::{DeadLetter, Marked, OutboxStore, PendingItem};

/// Extra time, past the work deadline, for the deletes and bookkeeping
/// writes that must follow work already done.
pub const FINISH_GRACE: Duration = Duration::from_secs(2);

/// One entry to relay, in order.
// Nearly every value is an item: boxing it would cost an allocation per
// event to shrink the rare other variant.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Entry {
    /// A decoded outbox item.
    Item(OutboxItem),
    /// It can never be published: dead-letter it.
    Poison {
        /// Its primary key.
        key: ItemKey,
        /// Its aggregate, when known (it picks the dead-letter shard).
        aggregate_id: Option<String>,
        /// Why it can never be published.
        reason: String,
    },
    /// It cannot be handled here, through nobody's fault in the data (a
    /// stream record without its new image: a configuration error). Never
    /// dead-lettered; reported.
    Unusable {
        /// Its primary key.
        key: ItemKey,
        /// What is missing.
        reason: String,
    },
}

impl From<PendingItem> for Entry {
    fn from(stored: PendingItem) -> Self {
        match stored {
            PendingItem::Item(item) => Self::Item(item),
            PendingItem::Undecodable { key, reason } => Self::Poison {
                key,
                aggregate_id: None,
                reason,
            },
        }
    }
}

impl Entry {
    fn aggregate(&self) -> Option<&str> {
        match self {
            Self::Item(item) => Some(&item.aggregate_id),
            Self::Poison { aggregate_id, .. } => aggregate_id.as_deref(),
            Self::Unusable { .. } => None,
        }
    }
}

/// How far to go after a failure, and what to do with it.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// The stream mapping: stop at the first entry not handled.
    Stream,
    /// A sweep at `now`: hold failed aggregates, persist the backoff,
    /// dead-letter after `max_attempts`.
    Sweep {
        /// The time of the sweep.
        now: OffsetDateTime,
        /// Attempts before an item is dead-lettered.
        max_attempts: u32,
        /// The persisted backoff between attempts.
        backoff: Backoff,
    },
}

/// What became of one entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayOutcome {
    /// Accepted by the sink (its item deleted, unless the delete failed:
    /// see [`RelayReport::delete_failed`]).
    Published,
    /// Kept in the table, out of the pending index, for an operator.
    DeadLettered,
    /// Not published. Stream: to report. Sweep: the attempt is recorded and
    /// the item backs off (unless even that write failed: it stays due).
    Failed(PublishFailure),
    /// Left pending on purpose: held behind an earlier event of its
    /// aggregate, not yet due, or (stream) poison whose dead-letter write
    /// failed after its call-mates were sent.
    Deferred,
    /// Not tried: after the first failure (stream) or for the deadline.
    NotAttempted,
}

impl RelayOutcome {
    /// Whether the entry needs no retry of the stream record.
    pub fn is_handled(&self) -> bool {
        matches!(self, Self::Published | Self::DeadLettered | Self::Deferred)
    }
}

/// What one relay run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RelayReport {
    /// One per entry, in order.
    pub outcomes: Vec<RelayOutcome>,
    /// Entries the sink accepted.
    pub published: usize,
    /// Entries dead-lettered.
    pub dead_lettered: usize,
    /// Entries that failed.
    pub failed: usize,
    /// Entries left pending on purpose.
    pub deferred: usize,
    /// Entries not tried.
    pub not_attempted: usize,
    /// Published events whose item could not be deleted: published again
    /// later by the sweeper (same event id).
    pub delete_failed: usize,
    /// Dead-letter or failure-record writes that failed.
    pub store_errors: usize,
}

impl RelayReport {
    /// The first entry that was not handled (stream mode: the record to
    /// report).
    pub fn first_unhandled(&self) -> Option<usize> {
        self.outcomes.iter().position(|o| !o.is_handled())
    }
}

/// The state of one [`Relay::run`].
struct Run {
    mode: Mode,
    /// The deadline of deletes and bookkeeping writes.
    finish: Deadline,
    outcomes: Vec<RelayOutcome>,
    published: Vec<ItemKey>,
    store_errors: usize,
    /// Where the last batch's scan stopped.
    batch_end: usize,
}

impl Run {
    fn sweep(&self) -> bool {
        matches!(self.mode, Mode::Sweep { .. })
    }

    /// Records the outcome of entry `i`, settled alone. A failure holds its
    /// aggregate; in stream mode it ends the run (returns `false`), in sweep
    /// mode the entry stays pending (its write failed) and the run goes on.
    fn record_alone(
        &mut self,
        i: usize,
        entry: &Entry,
        outcome: RelayOutcome,
        held: &mut HashSet<String>,
    ) -> bool {
        if !matches!(outcome, RelayOutcome::Failed(_)) {
            self.outcomes[i] = outcome;
            return true;
        }
        if let Some(aggregate) = entry.aggregate() {
            held.insert(aggregate.to_owned());
        }
        if !self.sweep() {
            self.outcomes[i] = outcome;
            return false;
        }
        self.store_errors += 1;
        self.outcomes[i] = RelayOutcome::Deferred;
        true
    }
}

/// The sink, the store and the in-call retry policy.
pub struct Relay<'a, S, T> {
    /// Where events go.
    pub sink: &'a S,
    /// Where outbox items are.
    pub store: &'a T,
    /// Retries of failed entries within the call.
    pub retry: &'a RetryPolicy,
}

impl<S: EventSink, T: OutboxStore> Relay<'_, S, T> {
    /// Relays `entries` in order. `held`: aggregates held back (sweep mode;
    /// read and extended, so a caller paging through a shard passes the
    /// same set to every page).
    pub async fn run(
        &self,
        entries: &[Entry],
        mode: Mode,
        held: &mut HashSet<String>,
        deadline: &Deadline,
    ) -> RelayReport {
        let mut run = Run {
            mode,
            finish: deadline.finishing(FINISH_GRACE),
            outcomes: vec![RelayOutcome::NotAttempted; entries.len()],
            published: Vec::new(),
            store_errors: 0,
            batch_end: 0,
        };
        let mut i = 0;
        while i < entries.len() && deadline.allows(self.retry.backoff.base) {
            if let Some(outcome) = self.settle_alone(&entries[i], &mut run, held).await {
                if !run.record_alone(i, &entries[i], outcome, held) {
                    break;
                }
                i += 1;
                continue;
            }
            let batch = self.next_batch(entries, i, &mut run, held);
            if batch.is_empty() {
                // The entry at `i` is settled alone on the next turn.
                continue;
            }
            let stop = self
                .publish_batch(entries, &batch, &mut run, held, deadline)
                .await;
            i = run.batch_end;
            if stop {
                break;
            }
        }
        self.finish(run).await
    }

    /// Settles what cannot be batched (before anything after it is sent):
    /// an unusable record, a poison entry, an item its aggregate holds back
    /// (sweep) or one too large for the sink. `None`: it goes in a batch.
    async fn settle_alone(
        &self,
        entry: &Entry,
        run: &mut Run,
        held: &mut HashSet<String>,
    ) -> Option<RelayOutcome> {
        let sweep = run.sweep();
        match entry {
            Entry::Unusable { key, reason } => {
                tracing::error!(key = %key, reason = %reason, "outbox record cannot be handled; reporting it");
                Some(RelayOutcome::Failed(PublishFailure::new(
                    FailureKind::Rejected,
                    "Unusable",
                    reason.clone(),
                )))
            }
            Entry::Poison {
                key,
                aggregate_id,
                reason,
            } => Some(
                self.dead_letter(key, aggregate_id.as_deref(), reason, None, &run.finish)
                    .await,
            ),
            Entry::Item(item) if sweep && !self.sendable(item, run.mode, held) => {
                Some(RelayOutcome::Deferred)
            }
            Entry::Item(item) if self.sink.entry_size(item) > self.sink.max_bytes() => {
                let reason = format!(
                    "EntryTooLarge: entry is {} bytes; the sink accepts {}",
                    self.sink.entry_size(item),
                    self.sink.max_bytes()
                );
                let attempts = sweep.then(|| item.attempts.saturating_add(1));
                Some(
                    self.dead_letter(
                        &item.key(),
                        Some(&item.aggregate_id),
                        &reason,
                        attempts,
                        &run.finish,
                    )
                    .await,
                )
            }
            Entry::Item(_) => None,
        }
    }

    /// The next batch from `start`: contiguous items, one per aggregate,
    /// within the sink's limits (sweep: items held back are deferred and
    /// skipped once the batch has begun).
    fn next_batch(
        &self,
        entries: &[Entry],
        start: usize,
        run: &mut Run,
        held: &mut HashSet<String>,
    ) -> Vec<usize> {
        let mut batch: Vec<usize> = Vec::new();
        let mut aggregates: HashSet<&str> = HashSet::new();
        let mut bytes = 0;
        let mut j = start;
        while j < entries.len() && batch.len() < self.sink.max_entries() {
            let Entry::Item(item) = &entries[j] else {
                break;
            };
            if run.sweep() && !self.sendable(item, run.mode, held) {
                if batch.is_empty() {
                    break;
                }
                run.outcomes[j] = RelayOutcome::Deferred;
                j += 1;
                continue;
            }
            let size = self.sink.entry_size(item);
            if aggregates.contains(item.aggregate_id.as_str())
                || size > self.sink.max_bytes()
                || bytes + size > self.sink.max_bytes()
            {
                break;
            }
            aggregates.insert(&item.aggregate_id);
            bytes += size;
            batch.push(j);
            j += 1;
        }
        run.batch_end = j;
        batch
    }

    /// Publishes one batch and settles each of its entries. Returns whether
    /// the run stops (stream mode, after a failure).
    async fn publish_batch(
        &self,
        entries: &[Entry],
        batch: &[usize],
        run: &mut Run,
        held: &mut HashSet<String>,
        deadline: &Deadline,
    ) -> bool {
        let items: Vec<&OutboxItem> = batch
            .iter()
            .filter_map(|k| match &entries[*k] {
                Entry::Item(item) => Some(item),
                _ => None,
            })
            .collect();
        let results = publish_with_retries(self.sink, &items, self.retry, deadline).await;
        let mut stop = false;
        for ((index, item), result) in batch.iter().zip(&items).zip(results) {
            run.outcomes[*index] = match result {
                Ok(()) => {
                    run.published.push(item.key());
                    RelayOutcome::Published
                }
                Err(failure) if failure.kind == FailureKind::Poison => {
                    self.sink_poison(item, &failure, run, held).await
                }
                Err(failure) => {
                    tracing::warn!(event_id = %item.event_id, code = %failure.code, kind = ?failure.kind, "event not published");
                    held.insert(item.aggregate_id.clone());
                    match run.mode {
                        Mode::Stream => {
                            stop = true;
                            RelayOutcome::Failed(failure)
                        }
                        Mode::Sweep {
                            now,
                            max_attempts,
                            backoff,
                        } => {
                            let (outcome, ok) = self
                                .record_failure(
                                    item,
                                    failure,
                                    now,
                                    max_attempts,
                                    backoff,
                                    &run.finish,
                                )
                                .await;
                            if !ok {
                                run.store_errors += 1;
                            }
                            outcome
                        }
                    }
                }
            };
        }
        stop
    }

    /// An entry the sink refused as poison: dead-lettered; if even that
    /// fails, left pending for the sweeper (its call-mates went out already:
    /// reporting it would send them again on every retry).
    async fn sink_poison(
        &self,
        item: &OutboxItem,
        failure: &PublishFailure,
        run: &mut Run,
        held: &mut HashSet<String>,
    ) -> RelayOutcome {
        let attempts = run.sweep().then(|| item.attempts.saturating_add(1));
        match self
            .dead_letter(
                &item.key(),
                Some(&item.aggregate_id),
                &failure.to_string(),
                attempts,
                &run.finish,
            )
            .await
        {
            RelayOutcome::Failed(_) => {
                tracing::error!(event_id = %item.event_id, "poison event left pending for the sweeper (dead-letter write failed)");
                run.store_errors += 1;
                held.insert(item.aggregate_id.clone());
                RelayOutcome::Deferred
            }
            other => other,
        }
    }

    /// Deletes what was published and counts the outcomes.
    async fn finish(&self, run: Run) -> RelayReport {
        let undeleted = self
            .store
            .delete_published(&run.published, &run.finish)
            .await;
        for key in &undeleted {
            tracing::error!(key = %key, "published event's outbox item not deleted; the sweeper will republish it");
        }
        let outcomes = run.outcomes;
        let count = |f: fn(&RelayOutcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
        RelayReport {
            published: run.published.len(),
            dead_lettered: count(|o| *o == RelayOutcome::DeadLettered),
            failed: count(|o| matches!(o, RelayOutcome::Failed(_))),
            deferred: count(|o| *o == RelayOutcome::Deferred),
            not_attempted: count(|o| *o == RelayOutcome::NotAttempted),
            delete_failed: undeleted.len(),
            store_errors: run.store_errors,
            outcomes,
        }
    }

    /// Sweep mode: whether `item` may be sent now (its aggregate is not
    /// held and it is due). An item not due holds its aggregate.
    fn sendable(&self, item: &OutboxItem, mode: Mode, held: &mut HashSet<String>) -> bool {
        let Mode::Sweep { now, .. } = mode else {
            return true;
        };
        if held.contains(&item.aggregate_id) {
            return false;
        }
        if item
            .next_attempt_at
            .is_some_and(|at| at > now.unix_timestamp())
        {
            held.insert(item.aggregate_id.clone());
            return false;
        }
        true
    }

    async fn dead_letter(
        &self,
        key: &ItemKey,
        aggregate_id: Option<&str>,
        reason: &str,
        attempts: Option<u32>,
        finish: &Deadline,
    ) -> RelayOutcome {
        let letter = DeadLetter {
            key,
            aggregate_id,
            reason,
            attempts,
        };
        match self.store.dead_letter(letter, finish).await {
            Ok(marked) => {
                tracing::error!(key = %key, reason, outcome = ?marked, "outbox item dead-lettered");
                RelayOutcome::DeadLettered
            }
            Err(e) => {
                tracing::error!(key = %key, error = %e, "could not dead-letter an outbox item");
                RelayOutcome::Failed(PublishFailure::new(
                    FailureKind::Transient,
                    "DeadLetterFailed",
                    e.to_string(),
                ))
            }
        }
    }

    /// Sweep mode: records a failed attempt (or dead-letters after the last
    /// one). Returns the outcome and whether the write succeeded.
    async fn record_failure(
        &self,
        item: &OutboxItem,
        failure: PublishFailure,
        now: OffsetDateTime,
        max_attempts: u32,
        backoff: Backoff,
        finish: &Deadline,
    ) -> (RelayOutcome, bool) {
        let attempts = item.attempts.saturating_add(1);
        if attempts >= max_attempts {
            let reason = format!("gave up after {attempts} attempts; last error {failure}");
            let outcome = self
                .dead_letter(
                    &item.key(),
                    Some(&item.aggregate_id),
                    &reason,
                    Some(attempts),
                    finish,
                )
                .await;
            let ok = outcome == RelayOutcome::DeadLettered;
            return (
                if ok {
                    outcome
                } else {
                    RelayOutcome::Failed(failure)
                },
                ok,
            );
        }
        let next = now + backoff.delay(attempts);
        match self
            .store
            .record_failure(
                &item.key(),
                attempts,
                next.unix_timestamp(),
                &failure.to_string(),
                finish,
            )
            .await
        {
            Ok(marked) => {
                if marked == Marked::Gone {
                    tracing::info!(event_id = %item.event_id, "item gone meanwhile (published by someone else)");
                }
                (RelayOutcome::Failed(failure), true)
            }
            Err(e) => {
                tracing::error!(event_id = %item.event_id, error = %e, "could not record a failed attempt; the item stays due");
                (RelayOutcome::Failed(failure), false)
            }
        }
    }
}

/// Publishes one batch, retrying only the entries that failed transiently
/// in a call that succeeded (the SDK already retried a call that failed as
/// a whole: [`crate::aws`]), while the policy and the deadline allow. Each
/// sink call is cut at the deadline (its entries then fail as transient:
/// not known to be sent).
async fn publish_with_retries<S: EventSink>(
    sink: &S,
    items: &[&OutboxItem],
    policy: &RetryPolicy,
    deadline: &Deadline,
) -> Vec<EntryOutcome> {
    let mut results: Vec<EntryOutcome> = vec![Ok(()); items.len()];
    let mut pending: Vec<usize> = (0..items.len()).collect();
    let mut attempt = 1;
    loop {
        let refs: Vec<&OutboxItem> = pending.iter().map(|i| items[*i]).collect();
        let answer = match deadline.bound(sink.publish_batch(&refs)).await {
            Some(answer) => answer,
            None => {
                tracing::warn!(
                    entries = refs.len(),
                    "sink call cut at the deadline; its entries count as not published"
                );
                vec![
                    Err(PublishFailure::new(
                        FailureKind::Transient,
                        "DeadlineReached",
                        "the sink did not answer before the deadline",
                    )
                    .of_whole_call());
                    refs.len()
                ]
            }
        };
        let mut answer = answer.into_iter();
        let mut retry = Vec::new();
        for index in pending {
            // A sink that answers for fewer entries than it was given leaves
            // the rest unknown: treat them as transient failures.
            let result = answer.next().unwrap_or_else(|| {
                Err(PublishFailure::new(
                    FailureKind::Transient,
                    "MissingResult",
                    "the sink returned no result for this entry",
                ))
            });
            if matches!(&result, Err(f) if f.kind == FailureKind::Transient && !f.whole_call) {
                retry.push(index);
            }
            results[index] = result;
        }
        if retry.is_empty() || !policy.wait(attempt, deadline).await {
            return results;
        }
        attempt += 1;
        pending = retry;
    }
}
