//! What one sweeper run did and saw: [`SweepReport`], its EMF metrics and
//! its log line.

use outbox_core::metrics::{self, Unit};
use outbox_core::publish::relay::RelayReport;
use serde::Serialize;

/// What one run did and saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepReport {
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
    /// Whether every shard's statistics were read: only then are the
    /// statistics emitted (all or nothing).
    pub stats_read: bool,
    /// A scheduled run whose statistics were not all read (a shard's query
    /// failed, or the deadline came first): nothing of them is emitted,
    /// which the oldest-age alarm treats as breaching, and the run is
    /// counted (`StatsIncomplete`).
    pub stats_incomplete: bool,
    /// OnFailure windows fully redriven / left for a retry of the message.
    pub windows_redriven: usize,
    /// OnFailure windows left for a retry of their message.
    pub windows_failed: usize,
}

impl SweepReport {
    pub(crate) fn add(&mut self, other: SweepReport) {
        self.stranded += other.stranded;
        self.republished += other.republished;
        self.failed += other.failed;
        self.dead_lettered += other.dead_lettered;
        self.deferred += other.deferred;
        self.items_read += other.items_read;
        self.queries += other.queries;
        self.shard_errors += other.shard_errors;
        self.stopped_early |= other.stopped_early;
    }

    pub(crate) fn add_relay(&mut self, relayed: &RelayReport) {
        self.republished += relayed.published;
        self.failed += relayed.failed;
        self.dead_lettered += relayed.dead_lettered;
        self.deferred += relayed.deferred;
        self.shard_errors += relayed.store_errors;
        self.stopped_early |= relayed.not_attempted > 0;
    }

    /// Whether every item of the swept range was settled: published,
    /// dead-lettered, and nothing left pending, failed or unread.
    pub fn settled(&self) -> bool {
        self.failed == 0 && self.deferred == 0 && self.shard_errors == 0 && !self.stopped_early
    }

    /// The EMF document of this run.
    pub fn emf(&self) -> String {
        metrics::emf_line("sweeper", &self.metrics())
    }

    fn metrics(&self) -> Vec<(&'static str, f64, Unit)> {
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        let mut metrics = vec![
            ("Stranded", self.stranded as f64, Unit::Count),
            ("Republished", self.republished as f64, Unit::Count),
            ("Failed", self.failed as f64, Unit::Count),
            ("DeadLettered", self.dead_lettered as f64, Unit::Count),
            ("Deferred", self.deferred as f64, Unit::Count),
            ("SweepErrors", self.shard_errors as f64, Unit::Count),
            ("WindowsRedriven", self.windows_redriven as f64, Unit::Count),
            ("WindowsFailed", self.windows_failed as f64, Unit::Count),
            ("StatsIncomplete", flag(self.stats_incomplete), Unit::Count),
        ];
        if let (true, Some(age)) = (self.stats_read, self.oldest_pending_age_seconds) {
            metrics.extend([
                ("PendingCount", self.pending as f64, Unit::Count),
                ("PendingCountCapped", flag(self.pending_capped), Unit::Count),
                ("OldestPendingAgeSeconds", age, Unit::Seconds),
                (
                    "DeadLetterCount",
                    self.dead_letter_count as f64,
                    Unit::Count,
                ),
            ]);
        }
        metrics
    }
}

/// The run's EMF line on stdout and its summary in the log.
pub(crate) fn log(report: &SweepReport, message: &'static str) {
    println!("{}", report.emf());
    tracing::info!(
        stranded = report.stranded,
        republished = report.republished,
        failed = report.failed,
        dead_lettered = report.dead_lettered,
        deferred = report.deferred,
        shards = report.shards,
        pending = report.pending,
        oldest_pending_age_seconds = report.oldest_pending_age_seconds,
        stats_incomplete = report.stats_incomplete,
        dead_letter_count = report.dead_letter_count,
        items_read = report.items_read,
        stopped_early = report.stopped_early,
        windows_redriven = report.windows_redriven,
        windows_failed = report.windows_failed,
        "{message}"
    );
}
