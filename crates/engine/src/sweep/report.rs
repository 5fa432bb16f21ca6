//! What one sweep or redrive did and saw: [`SweepReport`] (its EMF metrics
//! and log line are the runtime's: `outbox_runtime::SweepMetrics`).

use crate::RelayReport;
use serde::Serialize;

/// What one run did and saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepReport {
    /// Items moved from the keys without a region to this region's (a
    /// scheduled run with a home region: items written before the rule).
    pub adopted: usize,
    /// Pending items found in the swept range (due or not).
    pub stranded: usize,
    /// Events published.
    pub republished: usize,
    /// Failed attempts (recorded with their backoff).
    pub failed: usize,
    /// Items dead-lettered in this run.
    pub dead_lettered: usize,
    /// Items left pending on purpose: not due yet, or behind an earlier
    /// event of their aggregate that failed or is backing off.
    pub deferred: usize,
    /// Shards read (the configured count or the recorded high-water mark).
    pub shards: u16,
    /// Pending items after the run, all shards (a lower bound when
    /// `pendingCapped`).
    pub pending: usize,
    /// Whether `pending` stopped at the count limit.
    pub pending_capped: bool,
    /// Age of the oldest pending item after the run: 0 when none is
    /// pending, `None` when not every shard's statistics were read (an
    /// age from the shards that answered could understate it).
    pub oldest_pending_age_seconds: Option<f64>,
    /// Dead-lettered items in the table (a lower bound when capped).
    pub dead_letter_count: usize,
    /// Whether `dead_letter_count` stopped at the count limit.
    pub dead_letters_capped: bool,
    /// Items the queries read (DynamoDB's ScannedCount), the read cost.
    pub items_read: usize,
    /// Query calls made.
    pub queries: usize,
    /// Shard reads or bookkeeping writes that failed.
    pub shard_errors: usize,
    /// Whether the run stopped early for the deadline.
    pub stopped_early: bool,
    /// Items another run's live claim held: left to that run, which may
    /// have died with the claim (items found no longer pending are not
    /// counted: nothing is left to do for them).
    pub claimed_elsewhere: usize,
    /// Whether every shard's statistics were read: only then are the
    /// statistics emitted (all or nothing).
    pub stats_read: bool,
    /// A scheduled run whose statistics were not all read (a shard's query
    /// failed, or the deadline came first): nothing of them is emitted,
    /// which the oldest-age alarm treats as breaching, and the run is
    /// counted (`StatsIncomplete`).
    pub stats_incomplete: bool,
    /// Strict ordering: events held behind an older event of their
    /// aggregate in this run.
    pub held: usize,
    /// Strict ordering: events published behind one this run published.
    pub released: usize,
    /// Strict ordering: parked aggregates, counted with the statistics
    /// (`None` in relaxed mode): those with a dead letter (their later
    /// events wait for it), and those this run found held for longer than
    /// the sweep period (`long_held`).
    pub parked_aggregates: Option<usize>,
    /// Strict ordering: aggregates whose event this run left held, first
    /// held more than a sweep period ago.
    #[serde(skip)]
    pub long_held: std::collections::BTreeSet<String>,
    /// OnFailure windows fully redriven / left for a retry of the message.
    pub windows_redriven: usize,
    /// OnFailure windows left for a retry of their message.
    pub windows_failed: usize,
    /// Per event published, milliseconds from its commit to the sink's
    /// acknowledgement (`CommitToPublishLatency`).
    #[serde(skip)]
    pub commit_to_publish_ms: Vec<u64>,
}

impl SweepReport {
    /// Adds another run's counts to this one's (the windows of one
    /// OnFailure batch, the shards of one sweep).
    pub fn add(&mut self, other: SweepReport) {
        self.adopted += other.adopted;
        self.stranded += other.stranded;
        self.republished += other.republished;
        self.failed += other.failed;
        self.dead_lettered += other.dead_lettered;
        self.deferred += other.deferred;
        self.items_read += other.items_read;
        self.queries += other.queries;
        self.shard_errors += other.shard_errors;
        self.stopped_early |= other.stopped_early;
        self.claimed_elsewhere += other.claimed_elsewhere;
        self.held += other.held;
        self.released += other.released;
        self.long_held.extend(other.long_held);
        self.commit_to_publish_ms.extend(other.commit_to_publish_ms);
    }

    pub(crate) fn add_relay(&mut self, relayed: &RelayReport) {
        self.republished += relayed.published;
        self.failed += relayed.failed;
        self.dead_lettered += relayed.dead_lettered;
        self.deferred += relayed.deferred;
        self.shard_errors += relayed.store_errors;
        self.stopped_early |= relayed.not_attempted > 0;
        self.claimed_elsewhere += relayed.claimed_elsewhere;
        self.held += relayed.held;
        self.released += relayed.released;
        self.queries += relayed.collection_reads;
        self.commit_to_publish_ms
            .extend_from_slice(&relayed.commit_to_publish_ms);
    }

    /// Whether every item of the swept range was settled: published,
    /// dead-lettered, or deliberately left to the scheduled sweep (a failed
    /// attempt recorded with its backoff, an event behind one that failed,
    /// backs off or is held: each handed over with its `!<ulid>` key). Not
    /// settled: a read or a bookkeeping write failed, the deadline cut the
    /// run, or an item was claimed by another run. A claiming run that dies
    /// leaves its items pending and claimed, and only the 24-hour
    /// threshold's sweep would take them: so an OnFailure message whose
    /// window meets a claim stays in its queue and comes back after the
    /// visibility timeout (six times the sweeper's timeout at least, E9107),
    /// when the claim (the run's deadline plus 12 s at most) has lapsed.
    pub fn settled(&self) -> bool {
        self.shard_errors == 0 && !self.stopped_early && self.claimed_elsewhere == 0
    }
}
