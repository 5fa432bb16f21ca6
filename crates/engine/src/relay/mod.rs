//! The relay: publishes outbox entries through an [`EventSink`] and handles
//! every outcome through a [`PublishStore`], in one place for the publisher,
//! the sweeper and the operator's `redrive --now`. They differ only in the
//! [`Mode`]: how far to go after a failure and what to do with it.
//!
//! # Layout
//! - this file: the modes, the entries, the outcomes and the report, and
//!   [`Relay::run`] / [`Relay::run_claimed`], the run itself: its turns,
//!   each a step of the files below.
//! - `run.rs`: `Run`, the state of one run (outcomes, what was published
//!   and deleted, the guard's reads and holds, the claim); the steps change
//!   it only through its methods (its fields are private to that file).
//! - `waves.rs`: which entries are settled alone, how waves and batches are
//!   cut, the sweep's claims, the sends.
//! - `guard.rs`: strict order: the guard reads, holds, and the events behind
//!   what a sweep published.
//! - `outcomes.rs`: deletes, dead letters, failed attempts and their
//!   backoff, the operator's kept dead letters, the hand-over to the
//!   scheduled sweep, the report.
//!
//! # Rules, for every mode
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

mod guard;
mod outcomes;
mod run;
#[cfg(test)]
mod tests;
mod waves;

use run::Run;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use time::OffsetDateTime;

use crate::Ordering;
use crate::{Backoff, Deadline, RetryPolicy};
use crate::{
    Claim, ClaimOutcome, DeadLetter, Guarded, Marked, PendingItem, PublishStore, StoreError,
    MAX_BATCH_WRITE,
};
use crate::{EntryOutcome, EventSink, FailureKind, PublishFailure, NOT_DELETED};
use outbox_core::keys::{self, ItemKey};
use outbox_core::OutboxItem;

/// Extra time, past the work deadline, for the deletes and bookkeeping
/// writes that must follow work already done.
pub const FINISH_GRACE: Duration = Duration::from_secs(2);

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
    /// a possibly redelivered stream batch found ([`PublishStore::publishable`]).
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
    /// Not tried: after the first failure (stream) or for the deadline;
    /// or (sweep mode) its sink call was cut by the run's own deadline,
    /// which is not an attempt: its claim released, it stays due.
    NotAttempted,
    /// Its item was no longer pending when this run came to it: gone from
    /// the table when strict ordering's guard read it (published by
    /// another run), or (sweep mode) its claim found it published,
    /// dead-lettered or another region's. Not sent again.
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
    /// Sweep mode: entries another run's live claim held: left to that
    /// run (the ones found no longer pending are [`RelayOutcome::Gone`]).
    pub claimed_elsewhere: usize,
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
    /// Events whose item was no longer pending ([`RelayOutcome::Gone`]),
    /// not sent again.
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
        // A later round the deadline cut stops the run early too.
        self.not_attempted += round.not_attempted;
        self.claimed_elsewhere += round.claimed_elsewhere;
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

impl<S: EventSink, T: PublishStore> Relay<'_, S, T> {
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
        // The operator checks the older events itself (a dead letter is
        // held by no guard).
        let strict = self.ordering == Ordering::Strict && !matches!(mode, Mode::Operator);
        let mut run = Run::new(
            mode,
            deadline.finishing(FINISH_GRACE),
            entries.len(),
            strict,
            claim,
        );
        if run.strict() {
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
            i = run.batch_end();
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
        Mode::Sweep { now, .. } => item.is_due(now),
    }
}

/// The most times one entry is sent in one invocation, over the SDK's
/// attempts and the relay's retries together. Without it, a sink that
/// accepts but answers after the attempt timeout could receive an entry 12
/// times (3 SDK attempts × 4 relay attempts); `PutEvents` and
/// `PublishBatch` are not idempotent.
pub const MAX_SENDS_PER_ENTRY: u32 = 4;
