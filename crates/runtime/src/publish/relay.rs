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
//!   may use `FINISH_GRACE` more (inside the margin the handlers keep).
//! - Sink calls go out in waves of up to [`Relay::concurrency`] calls in
//!   flight together, no aggregate in two calls of a wave; an entry that
//!   must be settled alone or guarded first, or a second event of an
//!   aggregate of the wave, starts the next wave.
//! - Published items are deleted 25 per `BatchWriteItem` (a lone key with
//!   a `DeleteItem`), every full batch of 25 beside the next wave's sends,
//!   the rest at the end: a kill repeats at most the events of the wave it
//!   struck, those of the delete
//!   batches in flight beside it, and fewer than 25 waiting to fill a
//!   batch (with a concurrency of 1: one call's events, the delete batch
//!   beside it and fewer than 25 more). One whose delete fails is handed to the scheduled sweep at once
//!   (`!<ulid>` pending key, due now), which publishes it again and deletes
//!   it.
//! - One entry is sent at most [`MAX_SENDS_PER_ENTRY`] times per run, the
//!   SDK's attempts included.
//! - With `ORDERING=strict`, no event goes out while an older event of its
//!   aggregate is in the table, and none is sent again once its item is
//!   gone: every event is guarded by a consistent read of its aggregate's
//!   item collection, descending from its own key with a small limit. The
//!   reads are made ahead, all at once, one per aggregate of the run: from
//!   its newest event down, so that it covers the run's older events of
//!   that aggregate too; an event it does not cover gets its own read. An
//!   event may also go out when the only older item the read shows is an
//!   event published earlier in this run (nothing sits between them). A
//!   held event is marked and handed to the scheduled sweep; a stream run
//!   never waits for it (the sweeper releases it: in the same run when it
//!   published the older event, else at the next scheduled sweep;
//!   docs/ordering.md).
//!
//! # [`Mode::Stream`] (the publisher)
//! Lambda redelivers every record from the first reported one, so nothing
//! after the wave of the first unhandled entry is sent (the wave's later
//! calls were in flight beside it: their events are published and deleted,
//! and the redelivered batch's check finds them gone): on a failure after
//! retries, a
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
//! is dead-lettered after `max_attempts`; either way, and for every entry
//! left pending behind one, the event is handed to the scheduled sweep
//! (`!<ulid>` pending key). Each event is claimed before it is sent, so no
//! two sweeper runs publish one event.
//!
//! # [`Mode::Operator`] (`outboxctl dead-letters redrive --now`)
//! The entries are dead letters the operator has claimed
//! ([`Relay::run_claimed`]): nothing else claims them, and the operator has
//! checked that no older event of their aggregate is in the table (strict
//! order whatever `ORDERING` says; the relay's own guard does not run). A
//! published one is deleted as in the other modes; one not published (a
//! failure after retries, a refusal, an entry too large) **stays a dead
//! letter**: its claim is released with the failure as its reason, and it is
//! [`RelayOutcome::Failed`]. A published one whose delete fails also stays a
//! dead letter (a later redrive sends it again).

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use time::OffsetDateTime;

use super::{EntryOutcome, EventSink, FailureKind, PublishFailure};
use crate::config::Ordering;
use crate::retry::{Backoff, Deadline, RetryPolicy};
use crate::store::{
    Claim, CollectionRead, DeadLetter, Guarded, Marked, OutboxStore, PendingItem, MAX_BATCH_WRITE,
};
use outbox_core::keys::{self, ItemKey};
use outbox_core::OutboxItem;

/// Extra time, past the work deadline, for the deletes and bookkeeping
/// writes that must follow work already done.
pub(crate) const FINISH_GRACE: Duration = Duration::from_secs(2);

/// How long a sweeper's claim on an event outlives the run's deadline (its
/// deletes included): a claim whose run died lapses soon after.
const CLAIM_MARGIN: Duration = Duration::from_secs(10);

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
    /// Its item is no longer this region's to publish: deleted (published
    /// already), adopted by another region, or dead-lettered, as a check of
    /// a possibly redelivered stream batch found ([`OutboxStore::publishable`]).
    /// Not sent, not reported.
    Settled {
        /// Its primary key.
        key: ItemKey,
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
            PendingItem::Undecodable { key, reason, .. } => Self::Poison {
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
            Self::Unusable { .. } | Self::Settled { .. } => None,
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
    /// The operator's republishing of claimed dead letters
    /// ([`Relay::run_claimed`]): a failure keeps the dead letter.
    Operator,
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
    /// Strict ordering: its item was already gone from the table when its
    /// guard read it (published by another run): not sent again.
    Gone,
}

impl RelayOutcome {
    /// Whether the entry needs no retry of the stream record.
    pub(crate) fn is_handled(&self) -> bool {
        matches!(
            self,
            Self::Published | Self::DeadLettered | Self::Deferred | Self::Gone
        )
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
    /// Strict ordering: events held behind an older event of their
    /// aggregate still in the table (left pending, handed to the sweeper).
    pub held: usize,
    /// Strict ordering: held events published later in the same run, once
    /// the event ahead of them was (counted in `published` too).
    pub released: usize,
    /// Strict ordering: consistent reads of an item collection (the guard
    /// before an event, the release after one).
    pub collection_reads: usize,
    /// Strict ordering: events whose item was already gone (published by
    /// another run), not sent again.
    pub gone: usize,
    /// Per event published, the milliseconds from its commit (the time of
    /// its event id, a ULID the writer makes as it builds the transaction)
    /// to the sink's acknowledgement.
    pub commit_to_publish_ms: Vec<u64>,
}

impl RelayReport {
    /// Adds a later round's counts (sweep mode: the events found behind
    /// the ones published).
    fn add_round(&mut self, round: RelayReport) {
        self.published += round.published;
        self.released += round.published;
        self.dead_lettered += round.dead_lettered;
        self.failed += round.failed;
        self.delete_failed += round.delete_failed;
        self.store_errors += round.store_errors;
        self.gone += round.gone;
        self.held += round.held;
        self.collection_reads += round.collection_reads;
        self.commit_to_publish_ms.extend(round.commit_to_publish_ms);
    }
}

impl RelayReport {
    /// The first entry that was not handled (stream mode: the record to
    /// report).
    pub fn first_unhandled(&self) -> Option<usize> {
        self.outcomes.iter().position(|o| !o.is_handled())
    }
}

/// A bookkeeping write's claim token (sweep mode) and deadline.
#[derive(Clone, Copy)]
struct Writes<'a> {
    claim: Option<&'a str>,
    finish: &'a Deadline,
}

/// The state of one [`Relay::run`].
struct Run {
    mode: Mode,
    /// The deadline of deletes and bookkeeping writes.
    finish: Deadline,
    outcomes: Vec<RelayOutcome>,
    published: Vec<ItemKey>,
    /// How many of `published` (from the start) a delete was asked for.
    deleted_upto: usize,
    /// Published events whose delete failed.
    undeleted: Vec<ItemKey>,
    store_errors: usize,
    /// Where the last batch's scan stopped.
    batch_end: usize,
    /// Strict ordering.
    strict: bool,
    /// Entries whose guard passed.
    cleared: HashSet<usize>,
    /// Aggregates held in this run, with the sort key of the event they
    /// are held at (a later event of theirs is held behind it).
    held_at: HashMap<String, String>,
    /// Strict ordering: the guard reads made ahead, one per item collection
    /// (partition key) of the run, from its newest event down.
    reads: HashMap<String, CollectionRead>,
    /// Sweep mode: the claim this run publishes under.
    claim: Option<Claim>,
    /// Entries another sweeper run had claimed (left to it).
    claimed_elsewhere: HashSet<usize>,
    /// Entries held by the guard in this run, with the sort key each is
    /// held behind.
    held_entries: Vec<(usize, String)>,
    collection_reads: usize,
    /// Per event published, commit to acknowledgement (ms).
    latencies: Vec<u64>,
}

impl Run {
    fn sweep(&self) -> bool {
        matches!(self.mode, Mode::Sweep { .. })
    }

    /// The token of the claim this run publishes under (sweep mode): its
    /// bookkeeping writes may clear that claim, and no other live one.
    fn claim_token(&self) -> Option<&str> {
        self.claim.as_ref().map(|c| c.token.as_str())
    }

    /// What a bookkeeping write of this run needs.
    fn writes(&self) -> Writes<'_> {
        Writes {
            claim: self.claim_token(),
            finish: &self.finish,
        }
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
    /// Order per aggregate (`ORDERING`).
    pub ordering: Ordering,
    /// Sink calls in flight at once (`SEND_CONCURRENCY`, at least 1): each
    /// carries other aggregates than the others.
    pub concurrency: usize,
}

impl<S: EventSink, T: OutboxStore> Relay<'_, S, T> {
    /// Relays `entries` in order. `held`: aggregates held back (sweep mode;
    /// read and extended, so a caller paging through a shard passes the
    /// same set to every page).
    ///
    /// With [`Ordering::Strict`], a sweep goes on after its entries while
    /// time allows: it reads the item collection of each event it
    /// published and relays the pending events behind it (held, or of
    /// another shard), so that they go out in seconds rather than at the
    /// next scheduled sweep. A stream run never waits for a release: what
    /// it held is handed to the scheduled sweep, and it answers at once.
    pub async fn run(
        &self,
        entries: &[Entry],
        mode: Mode,
        held: &mut HashSet<String>,
        deadline: &Deadline,
    ) -> RelayReport {
        let (mut report, mut run) = self
            .run_once(entries, mode, sweep_claim(mode, deadline), held, deadline)
            .await;
        if self.ordering != Ordering::Strict || !matches!(mode, Mode::Sweep { .. }) {
            return report;
        }
        let mut seen: HashSet<ItemKey> = entries
            .iter()
            .filter_map(|e| match e {
                Entry::Item(item) => Some(item.key()),
                _ => None,
            })
            .collect();
        loop {
            let (found, reads, errors) = self.behind_published(&run, &mut seen, deadline).await;
            report.collection_reads += reads;
            report.store_errors += errors;
            if found.is_empty() || !deadline.allows(self.retry.backoff.base) {
                break;
            }
            let (round, next) = self
                .run_once(&found, mode, sweep_claim(mode, deadline), held, deadline)
                .await;
            report.add_round(round);
            run = next;
        }
        report
    }

    /// Relays dead letters the operator has claimed under `claim`
    /// ([`Mode::Operator`]): each published one is deleted, each other one
    /// stays a dead letter with the failure as its reason, its claim
    /// released.
    pub async fn run_claimed(
        &self,
        entries: &[Entry],
        claim: &Claim,
        deadline: &Deadline,
    ) -> RelayReport {
        let mut held = HashSet::new();
        let (report, _) = self
            .run_once(
                entries,
                Mode::Operator,
                Some(claim.clone()),
                &mut held,
                deadline,
            )
            .await;
        report
    }

    async fn run_once(
        &self,
        entries: &[Entry],
        mode: Mode,
        claim: Option<Claim>,
        held: &mut HashSet<String>,
        deadline: &Deadline,
    ) -> (RelayReport, Run) {
        let mut run = Run {
            mode,
            finish: deadline.finishing(FINISH_GRACE),
            outcomes: vec![RelayOutcome::NotAttempted; entries.len()],
            published: Vec::new(),
            deleted_upto: 0,
            undeleted: Vec::new(),
            store_errors: 0,
            batch_end: 0,
            // The operator checks the older events itself (a dead letter
            // is held by no guard).
            strict: self.ordering == Ordering::Strict && !matches!(mode, Mode::Operator),
            cleared: HashSet::new(),
            held_at: HashMap::new(),
            held_entries: Vec::new(),
            collection_reads: 0,
            claim,
            claimed_elsewhere: HashSet::new(),
            reads: HashMap::new(),
            latencies: Vec::new(),
        };
        if run.strict {
            self.read_ahead(entries, &mut run, held, deadline).await;
        }
        let mut i = 0;
        while i < entries.len() && deadline.allows(self.retry.backoff.base) {
            if !self.starts_wave(entries, i, &run, held) {
                // A store call comes (a guard read or hold, a dead letter),
                // not a send: the full delete batches of what was published go first.
                self.delete_full_batches(&mut run).await;
            }
            if let Some(outcome) = self.guard(i, entries, &mut run, held, deadline).await {
                if !run.record_alone(i, &entries[i], outcome, held) {
                    break;
                }
                i += 1;
                continue;
            }
            if let Some(outcome) = self.settle_alone(&entries[i], &mut run, held).await {
                if !run.record_alone(i, &entries[i], outcome, held) {
                    break;
                }
                i += 1;
                continue;
            }
            let wave = self.next_wave(entries, i, &mut run, held);
            if wave.is_empty() {
                // The entry at `i` is settled alone on the next turn.
                continue;
            }
            let stop = self
                .publish_wave(entries, &wave, &mut run, held, deadline)
                .await;
            i = run.batch_end;
            if stop {
                break;
            }
        }
        // What was published is deleted before the bookkeeping writes.
        self.delete_rest(&mut run).await;
        if run.sweep() {
            self.hand_over(entries, &mut run).await;
        }
        let report = self.finish(entries, &mut run).await;
        (report, run)
    }

    /// Sweep mode: hands every event this run left pending on purpose
    /// (behind an earlier event of its aggregate that failed, is backing
    /// off or is held) to the scheduled sweep, unless it is already
    /// (`!<ulid>`): marked held behind the nearest earlier event of its
    /// aggregate in the run. So an OnFailure window is settled once each of
    /// its events is published, dead-lettered or in the schedule's hands,
    /// and none waits for the 24-hour threshold. A write that fails is a
    /// store error (the window is then not settled).
    async fn hand_over(&self, entries: &[Entry], run: &mut Run) {
        let held_by_guard: HashSet<usize> = run.held_entries.iter().map(|(i, _)| *i).collect();
        for (i, entry) in entries.iter().enumerate() {
            let Entry::Item(item) = entry else { continue };
            if run.outcomes[i] != RelayOutcome::Deferred
                || held_by_guard.contains(&i)
                || run.claimed_elsewhere.contains(&i)
                || item.pending_sk.as_deref().is_some_and(keys::is_redriven_sk)
            {
                continue;
            }
            let behind = entries[..i]
                .iter()
                .rev()
                .find_map(|e| match e {
                    Entry::Item(earlier) if earlier.aggregate_id == item.aggregate_id => {
                        Some(earlier.sk.clone())
                    }
                    _ => None,
                })
                .unwrap_or_else(|| keys::OUTBOX_PREFIX.to_owned());
            if let Err(e) = self
                .store
                .hold(&item.key(), &behind, run.claim_token(), &run.finish)
                .await
            {
                tracing::error!(event_id = %item.event_id, error = %e, "could not hand a deferred event to the scheduled sweep");
                run.store_errors += 1;
            }
        }
    }

    /// Strict ordering's guard for entry `i`: `None` when it may go out (no
    /// older event of its aggregate is in the table, or the nearest older
    /// one was published in this run, which passed its own guard: nothing
    /// sits between them); otherwise the entry is held (recorded on the
    /// item, handed to the sweeper), or found gone, and its outcome
    /// returned.
    ///
    /// Every event is read: by the read made ahead for its aggregate when
    /// that read covers it, or by its own. No read (sweep) for an event its
    /// aggregate already holds back, nor (stream) for one behind an event of
    /// its aggregate held in this run: it is held behind that one.
    async fn guard(
        &self,
        i: usize,
        entries: &[Entry],
        run: &mut Run,
        held: &mut HashSet<String>,
        deadline: &Deadline,
    ) -> Option<RelayOutcome> {
        let Entry::Item(item) = &entries[i] else {
            return None;
        };
        if !run.strict || run.cleared.contains(&i) {
            return None;
        }
        if held.contains(&item.aggregate_id) {
            // Stream: an earlier event of its aggregate was held in this
            // invocation, or left pending (poison whose dead-letter write
            // failed); hold this one behind it. Sweep: the same, or
            // deferred by the usual rule (settle_alone).
            let behind = match run.held_at.get(&item.aggregate_id) {
                Some(behind) => behind.clone(),
                None if run.sweep() => return None,
                None => keys::OUTBOX_PREFIX.to_owned(),
            };
            return Some(self.hold(i, item, &behind, run, held).await);
        }
        if let Mode::Sweep { now, .. } = run.mode {
            if item
                .next_attempt_at
                .is_some_and(|at| at > now.unix_timestamp())
            {
                // Not due: settle_alone defers it and holds its aggregate.
                return None;
            }
        }
        let ahead = run.reads.get(&item.pk).and_then(|r| r.about(&item.sk));
        let read = match ahead {
            Some(guarded) => Ok(guarded),
            None => {
                run.collection_reads += 1;
                self.store
                    .collection_below(&item.key(), OWN_READ_LIMIT, deadline)
                    .await
                    .map(|read| {
                        // Two keys from its own: itself and the nearest
                        // older one, or all there is. A read that says less
                        // holds it.
                        read.about(&item.sk).unwrap_or_else(|| Guarded {
                            present: true,
                            older: Some(
                                read.keys
                                    .last()
                                    .cloned()
                                    .unwrap_or_else(|| keys::OUTBOX_PREFIX.to_owned()),
                            ),
                        })
                    })
            }
        };
        let guarded = match read {
            Ok(guarded) => guarded,
            Err(e) => {
                tracing::error!(event_id = %item.event_id, error = %e, "could not read the aggregate's older events");
                return Some(RelayOutcome::Failed(PublishFailure::new(
                    FailureKind::Transient,
                    "OrderCheckFailed",
                    e.to_string(),
                )));
            }
        };
        if !guarded.present {
            tracing::info!(event_id = %item.event_id, "event already gone from the table (published by another run); not sent again");
            return Some(RelayOutcome::Gone);
        }
        match guarded.older {
            Some(behind) if !published_in(run, &item.pk, &behind) => {
                Some(self.hold(i, item, &behind, run, held).await)
            }
            _ => {
                run.cleared.insert(i);
                None
            }
        }
    }

    /// Strict ordering: the guard reads, made all at once before anything
    /// is sent, so that the guard does not cut a batch at every event: one
    /// per item collection of `entries` (aggregate not held), from its
    /// newest event down, its limit one more than the run's events of it
    /// (due ones, in sweep mode), so that it covers them all when nothing
    /// else of theirs is in the table. A read that fails is made again at
    /// the event's turn.
    async fn read_ahead(
        &self,
        entries: &[Entry],
        run: &mut Run,
        held: &HashSet<String>,
        deadline: &Deadline,
    ) {
        // Per collection, in order of first appearance: its newest event
        // and how many of its events the run has.
        let mut order: Vec<&str> = Vec::new();
        let mut newest: HashMap<&str, (ItemKey, i32)> = HashMap::new();
        for entry in entries {
            let Entry::Item(item) = entry else { continue };
            if held.contains(&item.aggregate_id) {
                continue;
            }
            if let Mode::Sweep { now, .. } = run.mode {
                if item
                    .next_attempt_at
                    .is_some_and(|at| at > now.unix_timestamp())
                {
                    continue;
                }
            }
            let slot = newest.entry(&item.pk).or_insert_with(|| {
                order.push(&item.pk);
                (item.key(), 0)
            });
            if item.sk > slot.0.sk {
                slot.0 = item.key();
            }
            slot.1 += 1;
        }
        let wanted: Vec<(ItemKey, i32)> = order
            .iter()
            .filter_map(|pk| newest.get(pk).cloned())
            .collect();
        for chunk in wanted.chunks(READ_AHEAD_AT_ONCE) {
            if !deadline.allows(self.retry.backoff.base) {
                return;
            }
            let reads = futures::future::join_all(chunk.iter().map(|(key, count)| {
                self.store
                    .collection_below(key, count.saturating_add(1), deadline)
            }))
            .await;
            run.collection_reads += chunk.len();
            for ((key, _), read) in chunk.iter().zip(reads) {
                if let Ok(read) = read {
                    run.reads.insert(key.pk.clone(), read);
                }
            }
        }
    }

    /// Holds entry `i` behind `behind`: recorded on the item (unless it is
    /// already), its aggregate held for the rest of the run.
    async fn hold(
        &self,
        i: usize,
        item: &OutboxItem,
        behind: &str,
        run: &mut Run,
        held: &mut HashSet<String>,
    ) -> RelayOutcome {
        // Already recorded: held behind the same event, with its time (an
        // item held before `heldSince` existed gets it now; one whose
        // blocker changed names the new one), in the scheduled sweep's hands.
        let recorded = item.held_behind.as_deref() == Some(behind)
            && item.held_since.is_some()
            && item.pending_sk.as_deref().is_some_and(keys::is_redriven_sk);
        if !recorded {
            if let Err(e) = self
                .store
                .hold(&item.key(), behind, run.claim_token(), &run.finish)
                .await
            {
                tracing::error!(event_id = %item.event_id, error = %e, "could not hold an event behind an older one");
                return RelayOutcome::Failed(PublishFailure::new(
                    FailureKind::Transient,
                    "HoldFailed",
                    e.to_string(),
                ));
            }
        }
        tracing::info!(event_id = %item.event_id, behind, "event held behind an older event of its aggregate");
        held.insert(item.aggregate_id.clone());
        run.held_at
            .insert(item.aggregate_id.clone(), item.sk.clone());
        run.held_entries.push((i, behind.to_owned()));
        RelayOutcome::Deferred
    }

    /// Sweep mode, strict: the pending events behind each event published
    /// in the last round (one read per aggregate), not seen before in this
    /// run. Returns them, the reads made and the reads that failed.
    async fn behind_published(
        &self,
        run: &Run,
        seen: &mut HashSet<ItemKey>,
        deadline: &Deadline,
    ) -> (Vec<Entry>, usize, usize) {
        // The newest published event of each item collection.
        let mut newest: HashMap<&str, &ItemKey> = HashMap::new();
        for key in &run.published {
            let slot = newest.entry(key.pk.as_str()).or_insert(key);
            if key.sk > slot.sk {
                *slot = key;
            }
        }
        let mut found = Vec::new();
        let (mut reads, mut errors) = (0, 0);
        for key in newest.into_values() {
            if !deadline.allows(self.retry.backoff.base) {
                break;
            }
            reads += 1;
            match self.store.newer_pending(key, deadline).await {
                Ok(items) => {
                    for stored in items {
                        let entry = Entry::from(stored);
                        let key = match &entry {
                            Entry::Item(item) => item.key(),
                            Entry::Poison { key, .. }
                            | Entry::Unusable { key, .. }
                            | Entry::Settled { key } => key.clone(),
                        };
                        if seen.insert(key) {
                            found.push(entry);
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "could not read the events behind a published one; the sweeper releases them");
                    errors += 1;
                }
            }
        }
        (found, reads, errors)
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
            Entry::Settled { key } => {
                tracing::info!(key = %key, "redelivered record of an event no longer this region's to publish (published, adopted or dead-lettered); not sent again");
                Some(RelayOutcome::Gone)
            }
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
                self.dead_letter(key, aggregate_id.as_deref(), reason, None, run.writes())
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
                if matches!(run.mode, Mode::Operator) {
                    let failure = PublishFailure::new(FailureKind::Poison, "EntryTooLarge", reason);
                    return Some(self.keep_dead_letter(&item.key(), failure, run).await);
                }
                let attempts = sweep.then(|| item.attempts.saturating_add(1));
                Some(
                    self.dead_letter(
                        &item.key(),
                        Some(&item.aggregate_id),
                        &reason,
                        attempts,
                        run.writes(),
                    )
                    .await,
                )
            }
            Entry::Item(_) => None,
        }
    }

    /// The next wave from `start`: up to [`Relay::concurrency`] batches
    /// sent at once, no aggregate in two of them. It ends before an entry
    /// that must be settled alone or checked by its own guard first (a
    /// poison or unusable record, an item held back, not yet cleared by the
    /// strict guard's read ahead), and at an aggregate already in the wave:
    /// its later event goes out only after the call that carries the
    /// earlier one succeeded.
    fn next_wave(
        &self,
        entries: &[Entry],
        start: usize,
        run: &mut Run,
        held: &mut HashSet<String>,
    ) -> Vec<Vec<usize>> {
        let mut in_wave: HashSet<String> = HashSet::new();
        let mut wave = Vec::new();
        let mut j = start;
        loop {
            let batch = self.next_batch(entries, j, run, held, &mut in_wave);
            if batch.is_empty() {
                break;
            }
            wave.push(batch);
            j = run.batch_end;
            if wave.len() >= self.concurrency.max(1)
                || j >= entries.len()
                || !self.batchable(entries, j, run, held)
            {
                break;
            }
        }
        wave
    }

    /// Whether entry `j` may start a batch of a wave without being settled
    /// alone or guarded first (see [`Relay::next_wave`]); in strict mode it
    /// is then marked cleared. Safe before `next_batch` checks the wave's
    /// aggregates: an older event of its aggregate in the wave is still in
    /// the table and not yet published, so the read ahead does not clear it.
    fn batchable(
        &self,
        entries: &[Entry],
        j: usize,
        run: &mut Run,
        held: &HashSet<String>,
    ) -> bool {
        if !self.starts_wave(entries, j, run, held) {
            return false;
        }
        if run.strict {
            run.cleared.insert(j);
        }
        true
    }

    /// Whether entry `j` can go straight into a wave: an item, its
    /// aggregate not held, not too large, due, and (strict) cleared by the
    /// read ahead. Otherwise its turn begins with a store call (a guard
    /// read, a hold, a dead letter) or with nothing sent.
    fn starts_wave(&self, entries: &[Entry], j: usize, run: &Run, held: &HashSet<String>) -> bool {
        let Entry::Item(item) = &entries[j] else {
            return false;
        };
        !held.contains(&item.aggregate_id)
            && self.sink.entry_size(item) <= self.sink.max_bytes()
            && due(item, run.mode)
            && (!run.strict || run.cleared.contains(&j) || cleared_ahead(item, run, held))
    }

    /// The next batch from `start`: contiguous items, one per aggregate and
    /// none of an aggregate in `in_wave` (the other batches of its wave),
    /// within the sink's limits (sweep: items held back are deferred and
    /// skipped once the batch has begun).
    fn next_batch(
        &self,
        entries: &[Entry],
        start: usize,
        run: &mut Run,
        held: &mut HashSet<String>,
        in_wave: &mut HashSet<String>,
    ) -> Vec<usize> {
        let mut batch: Vec<usize> = Vec::new();
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
            if run.strict && !batch.is_empty() && !run.cleared.contains(&j) {
                if !cleared_ahead(item, run, held) {
                    // Its guard runs first, as the start of the next batch.
                    break;
                }
                run.cleared.insert(j);
            }
            let size = self.sink.entry_size(item);
            if in_wave.contains(item.aggregate_id.as_str())
                || size > self.sink.max_bytes()
                || bytes + size > self.sink.max_bytes()
            {
                break;
            }
            in_wave.insert(item.aggregate_id.clone());
            bytes += size;
            batch.push(j);
            j += 1;
        }
        run.batch_end = j;
        batch
    }

    /// Publishes one wave, its batches in flight together and the full
    /// delete batches of earlier waves beside them, then settles each entry
    /// in order. Returns whether the run stops (stream mode, after a
    /// failure: the wave's later batches went out already, so their events
    /// are published; the first failed entry is still the first in order
    /// not published).
    async fn publish_wave(
        &self,
        entries: &[Entry],
        wave: &[Vec<usize>],
        run: &mut Run,
        held: &mut HashSet<String>,
        deadline: &Deadline,
    ) -> bool {
        // The full delete batches of what earlier waves published go out
        // beside this wave's claims and sends (issued first).
        let full = (run.published.len() - run.deleted_upto) / MAX_BATCH_WRITE * MAX_BATCH_WRITE;
        let to_delete: Vec<ItemKey> =
            run.published[run.deleted_upto..run.deleted_upto + full].to_vec();
        run.deleted_upto += full;
        let finish = run.finish;
        let (undeleted, (batches, results)) = futures::future::join(
            self.delete_at_once(&to_delete, &finish),
            self.claim_and_send(entries, wave, run, held, deadline),
        )
        .await;
        run.undeleted.extend(undeleted);
        if batches.is_empty() {
            return false;
        }
        // The acknowledged entries first (no store call), then, with what
        // they completed deleted, the failures' bookkeeping writes.
        let mut failures = Vec::new();
        for ((batch, items), (results, acknowledged)) in batches.iter().zip(results) {
            for ((index, item), result) in batch.iter().zip(items).zip(results) {
                match result {
                    Ok(()) => {
                        run.published.push(item.key());
                        run.latencies
                            .push(acknowledged.saturating_sub(item.event_id.timestamp_ms()));
                        run.outcomes[*index] = RelayOutcome::Published;
                    }
                    Err(failure) => failures.push((*index, *item, failure)),
                }
            }
        }
        if !failures.is_empty() {
            self.delete_full_batches(run).await;
        }
        let mut stop = false;
        for (index, item, failure) in failures {
            run.outcomes[index] = if matches!(run.mode, Mode::Operator) {
                self.keep_dead_letter(&item.key(), failure, run).await
            } else if failure.kind == FailureKind::Poison {
                self.sink_poison(item, &failure, run, held).await
            } else {
                tracing::warn!(event_id = %item.event_id, code = %failure.code, kind = ?failure.kind, "event not published");
                held.insert(item.aggregate_id.clone());
                match run.mode {
                    Mode::Stream | Mode::Operator => {
                        stop = true;
                        RelayOutcome::Failed(failure)
                    }
                    Mode::Sweep {
                        now,
                        max_attempts,
                        backoff,
                    } => {
                        let (outcome, ok) = self
                            .record_failure(item, failure, now, max_attempts, backoff, run.writes())
                            .await;
                        if !ok {
                            run.store_errors += 1;
                        }
                        outcome
                    }
                }
            };
        }
        stop
    }

    /// Claims the wave's events (sweep mode) and sends its batches, all in
    /// flight together. Returns the batches sent, with their entries, and
    /// each call's results and the time it was acknowledged.
    #[allow(clippy::type_complexity)]
    async fn claim_and_send<'e>(
        &self,
        entries: &'e [Entry],
        wave: &[Vec<usize>],
        run: &mut Run,
        held: &mut HashSet<String>,
        deadline: &Deadline,
    ) -> (
        Vec<(Vec<usize>, Vec<&'e OutboxItem>)>,
        Vec<(Vec<EntryOutcome>, u64)>,
    ) {
        let wave = match &run.claim {
            Some(claim) if run.sweep() => {
                let claim = claim.clone();
                self.claim_wave(entries, wave, &claim, run, held).await
            }
            _ => wave.to_vec(),
        };
        let batches: Vec<(Vec<usize>, Vec<&OutboxItem>)> = wave
            .into_iter()
            .filter(|batch| !batch.is_empty())
            .map(|batch| {
                let items = batch
                    .iter()
                    .filter_map(|k| match &entries[*k] {
                        Entry::Item(item) => Some(item),
                        _ => None,
                    })
                    .collect();
                (batch, items)
            })
            .collect();
        let results = futures::future::join_all(batches.iter().map(|(_, items)| async {
            let results = publish_with_retries(self.sink, items, self.retry, deadline).await;
            (results, epoch_millis())
        }))
        .await;
        (batches, results)
    }

    /// Sweep mode: claims the wave's events (no two sweeper runs publish
    /// one event) and returns the batches without those it could not claim
    /// (left to the run that holds them, or due again).
    async fn claim_wave(
        &self,
        entries: &[Entry],
        wave: &[Vec<usize>],
        claim: &Claim,
        run: &mut Run,
        held: &mut HashSet<String>,
    ) -> Vec<Vec<usize>> {
        let keyed: Vec<(usize, ItemKey)> = wave
            .iter()
            .flatten()
            .filter_map(|k| match &entries[*k] {
                Entry::Item(item) => Some((*k, item.key())),
                _ => None,
            })
            .collect();
        let finish = run.finish;
        let claims = futures::future::join_all(
            keyed
                .iter()
                .map(|(_, key)| self.store.claim_pending(key, claim, &finish)),
        )
        .await;
        let mut lost: HashSet<usize> = HashSet::new();
        for ((index, _), claimed) in keyed.iter().zip(claims) {
            let Entry::Item(item) = &entries[*index] else {
                continue;
            };
            match claimed {
                Ok(Marked::Updated) => continue,
                Ok(Marked::Gone) => {
                    tracing::info!(event_id = %item.event_id, "event claimed by another sweeper run, or gone; left to it");
                    run.claimed_elsewhere.insert(*index);
                }
                Err(e) => {
                    tracing::error!(event_id = %item.event_id, error = %e, "could not claim an event; it stays due");
                    run.store_errors += 1;
                }
            }
            run.outcomes[*index] = RelayOutcome::Deferred;
            held.insert(item.aggregate_id.clone());
            lost.insert(*index);
        }
        wave.iter()
            .map(|batch| {
                batch
                    .iter()
                    .copied()
                    .filter(|k| !lost.contains(k))
                    .collect()
            })
            .collect()
    }

    /// Deletes the full batches of [`MAX_BATCH_WRITE`] of what was published
    /// and not yet deleted, before a store call that is not a send (a guard
    /// read, a dead-letter or failure write): what is published is not left
    /// waiting behind it.
    async fn delete_full_batches(&self, run: &mut Run) {
        let full = (run.published.len() - run.deleted_upto) / MAX_BATCH_WRITE * MAX_BATCH_WRITE;
        if full == 0 {
            return;
        }
        let finish = run.finish;
        let undeleted = self
            .delete_at_once(
                &run.published[run.deleted_upto..run.deleted_upto + full],
                &finish,
            )
            .await;
        run.deleted_upto += full;
        run.undeleted.extend(undeleted);
    }

    /// Deletes everything published and not yet deleted.
    async fn delete_rest(&self, run: &mut Run) {
        let finish = run.finish;
        let undeleted = self
            .delete_at_once(&run.published[run.deleted_upto..], &finish)
            .await;
        run.deleted_upto = run.published.len();
        run.undeleted.extend(undeleted);
    }

    /// Deletes `keys`, its batches of [`MAX_BATCH_WRITE`] at once; returns
    /// those not deleted.
    async fn delete_at_once(&self, keys: &[ItemKey], finish: &Deadline) -> Vec<ItemKey> {
        futures::future::join_all(
            keys.chunks(MAX_BATCH_WRITE)
                .map(|chunk| self.store.delete_published(chunk, finish)),
        )
        .await
        .into_iter()
        .flatten()
        .collect()
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
                run.writes(),
            )
            .await
        {
            RelayOutcome::Failed(_) => {
                tracing::error!(event_id = %item.event_id, "poison event left pending for the sweeper (dead-letter write failed)");
                run.store_errors += 1;
                // Its aggregate's later events in the run are held behind
                // it, as behind a dead letter.
                held.insert(item.aggregate_id.clone());
                run.held_at
                    .entry(item.aggregate_id.clone())
                    .or_insert_with(|| item.sk.clone());
                RelayOutcome::Deferred
            }
            other => other,
        }
    }

    /// Deletes what was published and counts the outcomes.
    /// A published event whose item could not be deleted is handed to the
    /// scheduled sweep at once (`!<ulid>` pending key, due now, its
    /// attempts unchanged): the next sweep publishes it again (same event
    /// id) and deletes it, so that, in strict mode, its aggregate's later
    /// events are not held behind it until it is stranded.
    async fn finish(&self, entries: &[Entry], run: &mut Run) -> RelayReport {
        self.delete_rest(run).await;
        let undeleted = std::mem::take(&mut run.undeleted);
        let now = outbox_core::now_utc_millis().unix_timestamp();
        for key in &undeleted {
            if let (Mode::Operator, Some(claim)) = (run.mode, &run.claim) {
                tracing::error!(key = %key, "republished dead letter not deleted; it stays a dead letter");
                let reason = "published by redrive --now, but its item was not deleted: a later redrive sends it again";
                if let Err(e) = self
                    .store
                    .release_claim(key, claim, Some(reason), &run.finish)
                    .await
                {
                    tracing::error!(key = %key, error = %e, "could not release the claim (it lapses)");
                    run.store_errors += 1;
                }
                continue;
            }
            tracing::error!(key = %key, "published event's outbox item not deleted; the next scheduled sweep republishes it");
            let attempts = entries
                .iter()
                .find_map(|e| match e {
                    Entry::Item(item) if item.key() == *key => Some(item.attempts),
                    _ => None,
                })
                .unwrap_or(0);
            let handed = self
                .store
                .record_failure(
                    key,
                    attempts,
                    now,
                    "published, but its item was not deleted",
                    run.claim_token(),
                    &run.finish,
                )
                .await;
            if let Err(e) = handed {
                tracing::error!(key = %key, error = %e, "could not hand an undeleted event to the scheduled sweep");
                run.store_errors += 1;
            }
        }
        let outcomes = run.outcomes.clone();
        let count = |f: fn(&RelayOutcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
        RelayReport {
            published: run.published.len(),
            dead_lettered: count(|o| *o == RelayOutcome::DeadLettered),
            failed: count(|o| matches!(o, RelayOutcome::Failed(_))),
            deferred: count(|o| *o == RelayOutcome::Deferred),
            gone: count(|o| *o == RelayOutcome::Gone),
            not_attempted: count(|o| *o == RelayOutcome::NotAttempted),
            delete_failed: undeleted.len(),
            store_errors: run.store_errors,
            held: run.held_entries.len(),
            released: 0,
            collection_reads: run.collection_reads,
            commit_to_publish_ms: std::mem::take(&mut run.latencies),
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

    /// Operator mode: an event not published stays a dead letter: its claim
    /// is released with the failure as its reason. A release that fails is a
    /// store error (the claim lapses).
    async fn keep_dead_letter(
        &self,
        key: &ItemKey,
        failure: PublishFailure,
        run: &mut Run,
    ) -> RelayOutcome {
        tracing::warn!(key = %key, code = %failure.code, kind = ?failure.kind, "dead letter not republished; it stays a dead letter");
        if let Some(claim) = &run.claim {
            let reason = format!("redrive --now: {failure}");
            if let Err(e) = self
                .store
                .release_claim(key, claim, Some(&reason), &run.finish)
                .await
            {
                tracing::error!(key = %key, error = %e, "could not release the claim (it lapses)");
                run.store_errors += 1;
            }
        }
        RelayOutcome::Failed(failure)
    }

    async fn dead_letter(
        &self,
        key: &ItemKey,
        aggregate_id: Option<&str>,
        reason: &str,
        attempts: Option<u32>,
        writes: Writes<'_>,
    ) -> RelayOutcome {
        let letter = DeadLetter {
            key,
            aggregate_id,
            reason,
            attempts,
            claim: writes.claim,
        };
        match self.store.dead_letter(letter, writes.finish).await {
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
        writes: Writes<'_>,
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
                    writes,
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
                writes.claim,
                writes.finish,
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

/// Strict ordering: collection reads made at once when reading ahead.
const READ_AHEAD_AT_ONCE: usize = 25;

/// Strict ordering: the limit of an event's own guard read: itself and the
/// nearest older outbox item of its aggregate.
const OWN_READ_LIMIT: i32 = 2;

/// The claim a sweep run publishes under (none in the other modes): it
/// outlives the run's deadline, its deletes included, by [`CLAIM_MARGIN`].
fn sweep_claim(mode: Mode, deadline: &Deadline) -> Option<Claim> {
    matches!(mode, Mode::Sweep { .. })
        .then(|| Claim::new(deadline.remaining() + FINISH_GRACE + CLAIM_MARGIN))
}

/// Now, in milliseconds since the epoch.
fn epoch_millis() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Whether `item` is due (sweep mode: its `nextAttemptAt` has passed).
fn due(item: &OutboxItem, mode: Mode) -> bool {
    match mode {
        Mode::Stream | Mode::Operator => true,
        Mode::Sweep { now, .. } => item
            .next_attempt_at
            .is_none_or(|at| at <= now.unix_timestamp()),
    }
}

/// Strict ordering: whether the read made ahead for `item`'s collection
/// clears it (its aggregate not held, its item present, and no older event
/// of its aggregate in the table but one published in this run).
fn cleared_ahead(item: &OutboxItem, run: &Run, held: &HashSet<String>) -> bool {
    !held.contains(&item.aggregate_id)
        && run
            .reads
            .get(&item.pk)
            .and_then(|r| r.about(&item.sk))
            .is_some_and(|g| {
                g.present
                    && g.older
                        .as_ref()
                        .is_none_or(|o| published_in(run, &item.pk, o))
            })
}

/// Whether the event of sort key `sk` in collection `pk` was published in
/// this run (after its own guard passed).
fn published_in(run: &Run, pk: &str, sk: &str) -> bool {
    run.published.iter().any(|k| k.pk == pk && k.sk == sk)
}

/// The most times one entry is sent in one invocation, over the SDK's
/// attempts and the relay's retries together. Without it, a sink that
/// accepts but answers after the attempt timeout could receive an entry 12
/// times (3 SDK attempts × 4 relay attempts); `PutEvents` and
/// `PublishBatch` are not idempotent.
pub const MAX_SENDS_PER_ENTRY: u32 = 4;

/// Publishes one batch, retrying only the entries that failed transiently
/// in a call that succeeded (the SDK already retried a call that failed as
/// a whole: [`crate::aws`]), while the policy, the deadline and the send
/// budget allow: every entry of the batch is sent at most
/// [`MAX_SENDS_PER_ENTRY`] times, each SDK attempt counted (a retried
/// entry was in every call before). Each sink call is cut at the deadline
/// (its entries then fail as transient: not known to be sent).
async fn publish_with_retries<S: EventSink>(
    sink: &S,
    items: &[&OutboxItem],
    policy: &RetryPolicy,
    deadline: &Deadline,
) -> Vec<EntryOutcome> {
    let mut results: Vec<EntryOutcome> = vec![Ok(()); items.len()];
    let mut pending: Vec<usize> = (0..items.len()).collect();
    let mut attempt = 1;
    let mut sends_left = MAX_SENDS_PER_ENTRY;
    loop {
        let refs: Vec<&OutboxItem> = pending.iter().map(|i| items[*i]).collect();
        let counter = crate::aws::SendCounter::default();
        let answer = match deadline
            .bound(sink.publish_batch(&refs, sends_left, &counter))
            .await
        {
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
        sends_left = sends_left.saturating_sub(counter.sends().max(1));
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
        if retry.is_empty() || sends_left == 0 || !policy.wait(attempt, deadline).await {
            return results;
        }
        attempt += 1;
        pending = retry;
    }
}
