//! A sweep's [`SweepReport`] (the engine's) as CloudWatch EMF documents
//! and one log line: what the sweeper function and `outboxctl` emit.

use outbox_engine::SweepReport;

use crate::metrics::{Distribution, Unit, COMMIT_TO_PUBLISH};

/// A sweep report's metric documents.
pub trait SweepMetrics {
    /// The EMF document of this run (with the first 100 latencies).
    fn emf(&self) -> String;
    /// The EMF documents of this run: the counts and statistics, and
    /// `CommitToPublishLatency`, one value per event published, 100 to a
    /// document.
    fn emf_lines(&self) -> Vec<String>;
}

impl SweepMetrics for SweepReport {
    fn emf(&self) -> String {
        self.emf_lines().swap_remove(0)
    }

    fn emf_lines(&self) -> Vec<String> {
        crate::metrics::emf_lines(
            "sweeper",
            &metrics(self),
            Distribution {
                name: COMMIT_TO_PUBLISH,
                values: &self.commit_to_publish_ms,
                unit: Unit::Milliseconds,
            },
        )
    }
}

fn metrics(report: &SweepReport) -> Vec<(&'static str, f64, Unit)> {
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    let mut metrics = vec![
        ("Stranded", report.stranded as f64, Unit::Count),
        ("Republished", report.republished as f64, Unit::Count),
        ("Failed", report.failed as f64, Unit::Count),
        ("DeadLettered", report.dead_lettered as f64, Unit::Count),
        ("Deferred", report.deferred as f64, Unit::Count),
        ("SweepErrors", report.shard_errors as f64, Unit::Count),
        (
            "WindowsRedriven",
            report.windows_redriven as f64,
            Unit::Count,
        ),
        ("WindowsFailed", report.windows_failed as f64, Unit::Count),
        (
            "ClaimedElsewhere",
            report.claimed_elsewhere as f64,
            Unit::Count,
        ),
        (
            "StatsIncomplete",
            flag(report.stats_incomplete),
            Unit::Count,
        ),
        ("Held", report.held as f64, Unit::Count),
        ("Released", report.released as f64, Unit::Count),
    ];
    if let (true, Some(age)) = (report.stats_read, report.oldest_pending_age_seconds) {
        metrics.extend([
            ("PendingCount", report.pending as f64, Unit::Count),
            (
                "PendingCountCapped",
                flag(report.pending_capped),
                Unit::Count,
            ),
            ("OldestPendingAgeSeconds", age, Unit::Seconds),
            (
                "DeadLetterCount",
                report.dead_letter_count as f64,
                Unit::Count,
            ),
        ]);
    }
    if let (true, Some(parked)) = (report.stats_read, report.parked_aggregates) {
        metrics.push(("ParkedAggregates", parked as f64, Unit::Count));
    }
    metrics
}

/// The run's EMF line on stdout and its summary in the log.
pub fn log_sweep(report: &SweepReport, message: &'static str) {
    for line in report.emf_lines() {
        println!("{line}");
    }
    tracing::info!(
        adopted = report.adopted,
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
        claimed_elsewhere = report.claimed_elsewhere,
        held = report.held,
        released = report.released,
        parked_aggregates = report.parked_aggregates,
        "{message}"
    );
}
