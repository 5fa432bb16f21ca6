//! The sweep: republishes the outbox items the stream left behind, through
//! the same relay as the publisher. Two kinds of run, one [`Sweeper`]:
//!
//! - **the schedule** ([`Sweeper::sweep`]): every shard of the pending
//!   index, items created more than `stranded_after` ago (past the
//!   stream's retention, or abandoned by the mapping);
//! - **an OnFailure window** ([`Sweeper::redrive`]): the pending items of
//!   an abandoned batch's time window ([`Window`], from an
//!   [`OnFailureMessage`]), right away, so a short sink outage that used
//!   up the mapping's retries is recovered in minutes, not a day.
//!
//! The sweeper function (`crates/sweeper`) and `outboxctl
//! redrive-on-failure` run it; the runtime turns its [`SweepReport`] into
//! metrics and takes OnFailure messages from SQS.
//!
//! # Layout
//! - `mod.rs`: [`SweepSettings`], [`Sweeper`] (a sink and a store, the
//!   engine's ports) with [`Sweeper::sweep`] and [`Sweeper::redrive`].
//! - `window.rs`: what an OnFailure message says ([`OnFailureMessage`]),
//!   which items it points at ([`Window`]).
//! - `report.rs`: [`SweepReport`], what one run did and saw.
//! - `stats.rs`: the run's statistics at a bounded cost (per shard the
//!   oldest pending event and capped counts; with strict ordering the
//!   parked aggregates).
//!
//! # Order and safety
//! Items are read shard by shard in ULID order; the shard is a hash of the
//! aggregate id, so each aggregate's events come in creation order, and the
//! relay ([`Mode::Sweep`]) holds an aggregate after a failure (or behind an
//! event still backing off) so that its later events never overtake it.
//! A redriven dead letter (pending sort key `!<ulid>`) sorts first in its
//! shard whatever its age, so it is due at once (with `ORDERING=strict`
//! each page is relayed in creation order again, so that it does not
//! overtake an older event of its aggregate in the page); it still waits while an
//! older event of its aggregate is pending (one consistent read of the
//! aggregate's item collection per redriven event).
//! Every write is a delete or an update conditioned on the item still
//! existing, so nothing deleted is ever resurrected; an event the publisher
//! sends at the same moment may go out twice (same event id).

mod report;
mod stats;
#[cfg(test)]
mod tests;
mod window;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::EventSink;
use crate::Ordering;
use crate::{Backoff, Deadline, RetryPolicy};
use crate::{Created, PendingItem, PendingQuery, PublishStore, StoreError, SweepStore};
use crate::{Entry, Mode, Relay, RelayOutcome};
use futures::future::join_all;
use outbox_core::keys;
use outbox_core::{ItemKey, OutboxItem};
pub use report::SweepReport;
use time::OffsetDateTime;
use ulid::Ulid;
pub use window::{OnFailureMessage, RequestContext, StreamBatchInfo, Window};

/// Order checks (relaxed ordering: is an older event of the aggregate
/// pending?) made at once, and the time one round needs at least.
const ORDER_CHECKS_AT_ONCE: usize = 25;
const ORDER_CHECK_TIME: Duration = Duration::from_millis(500);

/// Time kept, within the run, for the statistics after the work.
pub(crate) const STATS_RESERVE: Duration = Duration::from_secs(3);

/// The sweep's settings (the runtime makes them from the function's
/// configuration).
#[derive(Debug, Clone)]
pub struct SweepSettings {
    /// Items older than this are swept.
    pub stranded_after: Duration,
    /// Attempts before an item is dead-lettered.
    pub max_attempts: u32,
    /// Items per page of the pending index.
    pub page_size: i32,
    /// The persisted backoff between attempts.
    pub backoff: Backoff,
    /// Items each statistics count reads at most, per shard and index.
    pub count_limit: i32,
    /// How far before an OnFailure batch's first arrival to look: an event
    /// id is made before its transaction commits (and its stream record
    /// arrives), by up to the writer's retries.
    pub window_lead: Duration,
    /// How far after its last arrival: arrival times are rounded to the
    /// second, and clocks differ a little.
    pub window_lag: Duration,
    /// Order per aggregate (`ORDERING`).
    pub ordering: Ordering,
    /// The schedule's period (`SWEEP_SCHEDULE`): an aggregate held for
    /// longer is parked.
    pub sweep_period: Duration,
    /// Whether an OnFailure window in which no outbox item is found counts
    /// as settled (its events were published meanwhile). The function's
    /// own keys are the stack's, so it does; `outboxctl redrive-on-failure`
    /// keeps such a message when its keys may not be the stack's.
    pub settle_empty_windows: bool,
    /// Sink calls in flight at once in one shard (`SEND_CONCURRENCY`).
    pub send_concurrency: usize,
}

/// The sweeper's dependencies, built once per cold start.
#[derive(Debug, Clone)]
pub struct Sweeper<S, T> {
    /// Where events go.
    pub sink: S,
    /// Where outbox items are.
    pub store: T,
    /// The sweep's settings.
    pub settings: SweepSettings,
    /// Retries of failed entries within the call.
    pub retry: RetryPolicy,
}

/// The smallest ULID of a millisecond: every id created before `at` sorts
/// below it.
pub(crate) fn ulid_floor(at: OffsetDateTime) -> Ulid {
    Ulid::from_parts(millis(at), 0)
}

/// The largest ULID of a millisecond.
pub(crate) fn ulid_ceiling(at: OffsetDateTime) -> Ulid {
    Ulid::from_parts(millis(at), u128::MAX)
}

pub(crate) fn millis(at: OffsetDateTime) -> u64 {
    (at.unix_timestamp_nanos() / 1_000_000).max(0) as u64
}

impl<S: EventSink, T: PublishStore + SweepStore> Sweeper<S, T> {
    /// A sweeper with the default retry policy.
    pub fn new(sink: S, store: T, settings: SweepSettings) -> Self {
        Self {
            sink,
            store,
            settings,
            retry: RetryPolicy::default(),
        }
    }

    /// A scheduled run at time `now`: every shard, items created before
    /// `now - stranded_after`, then the statistics.
    pub async fn sweep(&self, now: OffsetDateTime, deadline: &Deadline) -> SweepReport {
        let cutoff = ulid_floor(now - self.settings.stranded_after);
        self.run(Created::Before(cutoff), now, deadline, true).await
    }

    /// Redrives one OnFailure window at time `now`: every shard, items
    /// created inside the window, whatever their age. No statistics (the
    /// schedule emits them).
    pub async fn redrive(
        &self,
        window: Window,
        now: OffsetDateTime,
        deadline: &Deadline,
    ) -> SweepReport {
        let created = Created::Between(ulid_floor(window.from), ulid_ceiling(window.to));
        self.run(created, now, deadline, false).await
    }

    /// Relaxed ordering: the entries of a page, less the `!<ulid>` events
    /// (redriven, backing off or held: they sort first in the index,
    /// whatever their age) that an older pending event of their aggregate
    /// is still ahead of: they stay pending and go out once the older one
    /// is published. No read for one that is not due (the relay defers it)
    /// or whose aggregate has an earlier event in this page (the relay keeps
    /// their order); later events of an aggregate found waiting wait too.
    /// Their aggregate is not held, so the older event is published in this
    /// very run when due. One consistent read of the item collection per
    /// event read.
    async fn behind_older_events(
        &self,
        items: Vec<PendingItem>,
        now: OffsetDateTime,
        report: &mut SweepReport,
        deadline: &Deadline,
    ) -> Vec<Entry> {
        let marked =
            |item: &OutboxItem| item.pending_sk.as_deref().is_some_and(keys::is_redriven_sk);
        // The reads needed: the first event of each aggregate in the page,
        // when it is marked and due (its aggregate's later events in the
        // page follow its fate). Made together, ORDER_CHECKS_AT_ONCE at a
        // time, none begun once the deadline is near: a page of events
        // handed to the schedule costs a few round trips, not one each.
        let mut first: HashSet<&str> = HashSet::new();
        let mut checks: Vec<(usize, ItemKey)> = Vec::new();
        for (i, stored) in items.iter().enumerate() {
            if let PendingItem::Item(item) = stored {
                if first.insert(&item.aggregate_id) && item.is_due(now) && marked(item) {
                    checks.push((i, item.key()));
                }
            }
        }
        let mut checked: HashMap<usize, Option<Result<bool, StoreError>>> =
            checks.iter().map(|(i, _)| (*i, None)).collect();
        for chunk in checks.chunks(ORDER_CHECKS_AT_ONCE) {
            if !deadline.allows(ORDER_CHECK_TIME) {
                tracing::warn!(
                    unchecked = checked.values().filter(|c| c.is_none()).count(),
                    "deadline near: events not checked against their aggregate stay due"
                );
                break;
            }
            let results = futures::future::join_all(
                chunk
                    .iter()
                    .map(|(_, key)| self.store.older_pending(key, deadline)),
            )
            .await;
            report.queries += chunk.len();
            for ((i, _), result) in chunk.iter().zip(results) {
                checked.insert(*i, Some(result));
            }
        }
        let mut entries = Vec::with_capacity(items.len());
        let mut waiting: HashSet<String> = HashSet::new();
        for (i, stored) in items.into_iter().enumerate() {
            if let PendingItem::Item(item) = &stored {
                if marked(item) && waiting.contains(&item.aggregate_id) {
                    report.deferred += 1;
                    continue;
                }
                match checked.remove(&i) {
                    None | Some(Some(Ok(false))) => {}
                    Some(Some(Ok(true))) => {
                        tracing::info!(event_id = %item.event_id, "event waits behind an older pending event of its aggregate");
                        report.deferred += 1;
                        waiting.insert(item.aggregate_id.clone());
                        continue;
                    }
                    Some(Some(Err(e))) => {
                        tracing::error!(event_id = %item.event_id, error = %e, "could not check an event's aggregate; it stays due");
                        report.shard_errors += 1;
                        waiting.insert(item.aggregate_id.clone());
                        continue;
                    }
                    Some(None) => {
                        // Not checked before the deadline: it stays due.
                        report.deferred += 1;
                        waiting.insert(item.aggregate_id.clone());
                        continue;
                    }
                }
            }
            entries.push(Entry::from(stored));
        }
        entries
    }

    async fn run(
        &self,
        created: Created,
        now: OffsetDateTime,
        deadline: &Deadline,
        with_stats: bool,
    ) -> SweepReport {
        let mut total = SweepReport::default();
        let shards = match self.store.shard_count(deadline).await {
            Ok(shards) => shards,
            Err(e) => {
                tracing::error!(error = %e, "shard high-water mark not read; sweeping the configured shards");
                total.shard_errors += 1;
                0
            }
        };
        let shards = shards.max(self.store.configured_shards());
        total.shards = shards;
        let work = if with_stats {
            deadline.shortened(STATS_RESERVE)
        } else {
            *deadline
        };
        if with_stats {
            // Items written before the home-region rule, under the keys
            // without a region: moved to this region's first, so that this
            // very sweep sees them (their sort keys, hence their due times,
            // stay). Nothing to do without a home region.
            let adopted =
                join_all((0..shards).map(|shard| self.store.adopt_unregioned(shard, &work))).await;
            for (shard, result) in adopted.into_iter().enumerate() {
                match result {
                    Ok(moved) => total.adopted += moved,
                    Err(e) => {
                        tracing::error!(shard, error = %e, "items without a region not adopted");
                        total.shard_errors += 1;
                    }
                }
            }
        }
        let reports =
            join_all((0..shards).map(|shard| self.sweep_shard(shard, created.clone(), now, &work)))
                .await;
        for report in reports {
            total.add(report);
        }
        if with_stats {
            self.stats(shards, now, deadline, &mut total).await;
        }
        total
    }

    async fn sweep_shard(
        &self,
        shard: u16,
        created: Created,
        now: OffsetDateTime,
        deadline: &Deadline,
    ) -> SweepReport {
        let mut report = SweepReport::default();
        let relay = Relay {
            sink: &self.sink,
            store: &self.store,
            retry: &self.retry,
            ordering: self.settings.ordering,
            concurrency: self.settings.send_concurrency,
        };
        let mode = Mode::Sweep {
            now,
            max_attempts: self.settings.max_attempts,
            backoff: self.settings.backoff,
        };
        let query = PendingQuery {
            shard,
            created,
            limit: self.settings.page_size,
        };
        // Aggregates held back for the rest of this run (all their events
        // are in this shard).
        let mut held = HashSet::new();
        let mut cursor = None;
        loop {
            if !deadline.allows(Duration::ZERO) {
                report.stopped_early = true;
                break;
            }
            let page = match self
                .store
                .pending_page(&query, cursor.take(), deadline)
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    tracing::error!(shard, error = %e, "pending index query failed");
                    report.shard_errors += 1;
                    break;
                }
            };
            report.queries += 1;
            report.items_read += page.scanned;
            report.stranded += page.items.len();
            // Strict ordering guards every event in the relay; relaxed
            // ordering only keeps a redriven event behind older pending ones.
            let entries = match self.settings.ordering {
                Ordering::Strict => {
                    // Creation order within the page: a `!<ulid>` event
                    // (held, backing off, redriven) sorts first in the
                    // index, ahead of the older events of its aggregate
                    // that keep their normal keys; relayed first, it would
                    // hold them behind it.
                    let mut items = page.items;
                    items.sort_by(|a, b| item_sk(a).cmp(item_sk(b)));
                    items.into_iter().map(Entry::from).collect()
                }
                Ordering::Relaxed => {
                    self.behind_older_events(page.items, now, &mut report, deadline)
                        .await
                }
            };
            let relayed = relay.run(&entries, mode, &mut held, deadline).await;
            report.add_relay(&relayed);
            // Held since before the last sweep period, and still held:
            // its aggregate is parked.
            let parked_since = now.unix_timestamp()
                - i64::try_from(self.settings.sweep_period.as_secs()).unwrap_or(i64::MAX);
            for (entry, outcome) in entries.iter().zip(&relayed.outcomes) {
                if let (Entry::Item(item), RelayOutcome::Deferred) = (entry, outcome) {
                    if item.held_behind.is_some()
                        && item.held_since.is_some_and(|since| since < parked_since)
                    {
                        report.long_held.insert(item.aggregate_id.clone());
                    }
                }
            }
            if relayed.not_attempted > 0 {
                break;
            }
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        report
    }
}

/// The sort key of a pending item (its creation order within an
/// aggregate).
fn item_sk(item: &PendingItem) -> &str {
    match item {
        PendingItem::Item(item) => &item.sk,
        PendingItem::Undecodable { key, .. } => &key.sk,
    }
}
