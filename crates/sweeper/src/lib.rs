//! The sweeper: finds outbox items the stream left behind (older than the
//! stream's 24-hour retention, or abandoned by the mapping after its retry
//! bounds) through the sparse, sharded pending index, and republishes them
//! through the same publishing module as the publisher.
//!
//! # Layout
//! - [`Sweeper`]: dependencies and [`Sweeper::sweep`], one run.
//! - [`pending`]: the index queries (stranded page, shard statistics, dead
//!   letter count): reads that touch outbox items and nothing else.
//! - [`backoff`]: the persisted retry schedule.
//! - [`SweepReport`]: what one run did and saw, emitted as EMF metrics.
//! - [`handler`]: the Lambda handler for the scheduled event.
//!
//! # Safety with a concurrent publisher
//! The publisher may publish and delete an item between our query and our
//! write. Every write here is a delete or an update conditioned on the item
//! still existing, so nothing deleted is ever resurrected; the event may be
//! published twice in that window (same event id), which consumers absorb.

pub mod backoff;
pub mod pending;

use std::time::Duration;

use aws_lambda_events::event::eventbridge::EventBridgeEvent;
use futures::future::join_all;
use lambda_runtime::{Error, LambdaEvent};
use outbox_core::keys::ItemKey;
use outbox_core::metrics::{self, Unit};
use outbox_core::publish::{publish_in_order, EventSink, ItemOutcome, Ordering};
use outbox_core::retry::{Deadline, RetryPolicy};
use outbox_core::store::{DynamoStore, OutboxStore};
use outbox_core::Config;
use serde::Serialize;
use time::OffsetDateTime;

/// Time kept back from the Lambda deadline: no new page or call starts
/// within it.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(5);

/// The sweeper's settings, from [`Config`].
#[derive(Debug, Clone)]
pub struct SweepSettings {
    pub stranded_after: Duration,
    pub max_attempts: u32,
    pub page_size: i32,
    pub backoff: backoff::Backoff,
}

impl From<&Config> for SweepSettings {
    fn from(config: &Config) -> Self {
        Self {
            stranded_after: config.stranded_after,
            max_attempts: config.max_attempts,
            page_size: config.sweep_page_size,
            backoff: backoff::Backoff::default(),
        }
    }
}

/// The sweeper's dependencies, built once per cold start.
#[derive(Debug, Clone)]
pub struct Sweeper<S> {
    pub sink: S,
    pub store: DynamoStore,
    pub settings: SweepSettings,
    pub retry: RetryPolicy,
}

/// What one run did and saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepReport {
    /// Stranded items found (due, older than the threshold).
    pub stranded: usize,
    pub republished: usize,
    /// Failed attempts recorded (the item stays, with its next attempt time).
    pub failed: usize,
    /// Items dead-lettered in this run.
    pub dead_lettered: usize,
    /// Items still pending after the run, all shards.
    pub pending: usize,
    /// Age of the oldest pending item after the run (0 when none).
    pub oldest_pending_age_seconds: f64,
    /// Dead-lettered items in the table.
    pub dead_letter_count: usize,
    /// Items the queries read (DynamoDB's ScannedCount), the read cost.
    pub items_read: usize,
    /// Query calls made.
    pub queries: usize,
    /// Shards whose queries failed.
    pub shard_errors: usize,
    /// Whether the run stopped early for the deadline.
    pub stopped_early: bool,
}

impl SweepReport {
    fn add(&mut self, other: SweepReport) {
        self.stranded += other.stranded;
        self.republished += other.republished;
        self.failed += other.failed;
        self.dead_lettered += other.dead_lettered;
        self.pending += other.pending;
        self.oldest_pending_age_seconds = self
            .oldest_pending_age_seconds
            .max(other.oldest_pending_age_seconds);
        self.dead_letter_count += other.dead_letter_count;
        self.items_read += other.items_read;
        self.queries += other.queries;
        self.shard_errors += other.shard_errors;
        self.stopped_early |= other.stopped_early;
    }

    /// The EMF document of this run.
    pub fn emf(&self) -> String {
        metrics::emf_line("sweeper", &self.metrics())
    }

    fn metrics(&self) -> Vec<(&'static str, f64, Unit)> {
        vec![
            ("PendingCount", self.pending as f64, Unit::Count),
            (
                "OldestPendingAgeSeconds",
                self.oldest_pending_age_seconds,
                Unit::Seconds,
            ),
            ("Stranded", self.stranded as f64, Unit::Count),
            ("Republished", self.republished as f64, Unit::Count),
            ("Failed", self.failed as f64, Unit::Count),
            ("DeadLettered", self.dead_lettered as f64, Unit::Count),
            (
                "DeadLetterCount",
                self.dead_letter_count as f64,
                Unit::Count,
            ),
            ("SweepErrors", self.shard_errors as f64, Unit::Count),
        ]
    }
}

impl<S: EventSink> Sweeper<S> {
    pub fn new(sink: S, store: DynamoStore, settings: SweepSettings) -> Self {
        Self {
            sink,
            store,
            settings,
            retry: RetryPolicy::default(),
        }
    }

    /// One run at time `now`: every shard concurrently.
    pub async fn sweep(&self, now: OffsetDateTime, deadline: &Deadline) -> SweepReport {
        let shards = 0..self.store.shards();
        let reports = join_all(shards.map(|shard| self.sweep_shard(shard, now, deadline))).await;
        let mut total = SweepReport::default();
        for report in reports {
            total.add(report);
        }
        total
    }

    async fn sweep_shard(
        &self,
        shard: u16,
        now: OffsetDateTime,
        deadline: &Deadline,
    ) -> SweepReport {
        let mut report = SweepReport::default();
        let query = pending::Query::new(&self.store, shard);
        let cutoff = now - self.settings.stranded_after;
        let mut start: Option<pending::Cursor> = None;
        loop {
            if !deadline.allows(Duration::ZERO) {
                report.stopped_early = true;
                break;
            }
            let page = match query
                .stranded_page(cutoff, now, self.settings.page_size, start.take())
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    tracing::error!(shard, error = %e, "stranded query failed");
                    report.shard_errors += 1;
                    break;
                }
            };
            report.queries += 1;
            report.items_read += page.scanned;
            self.republish(&page, now, deadline, &mut report).await;
            match page.next {
                Some(next) => start = Some(next),
                None => break,
            }
        }
        match query.stats(now).await {
            Ok(stats) => {
                report.pending = stats.pending;
                report.oldest_pending_age_seconds = stats.oldest_age_seconds;
                report.dead_letter_count = stats.dead_letters;
                report.items_read += stats.scanned;
                report.queries += stats.queries;
            }
            Err(e) => {
                tracing::error!(shard, error = %e, "pending statistics query failed");
                report.shard_errors += 1;
            }
        }
        report
    }

    async fn republish(
        &self,
        page: &pending::Page,
        now: OffsetDateTime,
        deadline: &Deadline,
        report: &mut SweepReport,
    ) {
        report.stranded += page.items.len() + page.undecodable.len();
        for (key, reason) in &page.undecodable {
            self.dead_letter(key, reason, None, report).await;
        }
        let outcomes = publish_in_order(
            &self.sink,
            &page.items,
            Ordering::Independent,
            &self.retry,
            deadline,
        )
        .await;
        let mut published = Vec::new();
        for (item, outcome) in page.items.iter().zip(outcomes) {
            let attempts = item.attempts.saturating_add(1);
            match outcome {
                ItemOutcome::Published => published.push(item.key()),
                ItemOutcome::Poison(failure) => {
                    self.dead_letter(&item.key(), &failure.to_string(), Some(attempts), report)
                        .await
                }
                ItemOutcome::Failed(failure) if attempts >= self.settings.max_attempts => {
                    let reason = format!("gave up after {attempts} attempts; last error {failure}");
                    self.dead_letter(&item.key(), &reason, Some(attempts), report)
                        .await
                }
                ItemOutcome::Failed(failure) => {
                    let next = now + self.settings.backoff.delay(attempts);
                    match self
                        .store
                        .record_failure(
                            &item.key(),
                            attempts,
                            next.unix_timestamp(),
                            &failure.to_string(),
                        )
                        .await
                    {
                        Ok(marked) => {
                            tracing::warn!(event_id = %item.event_id, attempts, code = %failure.code, outcome = ?marked, "republish failed; next attempt scheduled");
                            report.failed += 1;
                        }
                        Err(e) => {
                            tracing::error!(event_id = %item.event_id, error = %e, "could not record a failed attempt")
                        }
                    }
                }
                ItemOutcome::NotAttempted => report.stopped_early = true,
            }
        }
        let undeleted = self.store.delete_published(&published, deadline).await;
        for key in &undeleted {
            tracing::error!(key = %key, "republished event's outbox item not deleted; the next sweep republishes it");
        }
        report.republished += published.len();
    }

    async fn dead_letter(
        &self,
        key: &ItemKey,
        reason: &str,
        attempts: Option<u32>,
        report: &mut SweepReport,
    ) {
        match self.store.dead_letter(key, reason, attempts).await {
            Ok(marked) => {
                tracing::error!(key = %key, reason, outcome = ?marked, "outbox item dead-lettered");
                report.dead_lettered += 1;
            }
            Err(e) => {
                tracing::error!(key = %key, error = %e, "could not dead-letter; the next sweep tries again")
            }
        }
    }
}

/// The Lambda handler for the scheduled event. Emits the run's EMF line and
/// returns the report; fails (so the Errors alarm sees it) when a shard
/// could not be read.
pub async fn handler<S: EventSink>(
    sweeper: &Sweeper<S>,
    event: LambdaEvent<EventBridgeEvent<serde_json::Value>>,
) -> Result<SweepReport, Error> {
    let deadline = Deadline::from_epoch_millis(event.context.deadline, DEADLINE_MARGIN);
    tracing::info!(
        deadline_ms = event.context.deadline,
        remaining_ms = deadline.remaining().as_millis() as u64,
        "sweep starting"
    );
    let report = sweeper.sweep(OffsetDateTime::now_utc(), &deadline).await;
    println!("{}", report.emf());
    tracing::info!(
        stranded = report.stranded,
        republished = report.republished,
        failed = report.failed,
        dead_lettered = report.dead_lettered,
        pending = report.pending,
        oldest_pending_age_seconds = report.oldest_pending_age_seconds,
        dead_letter_count = report.dead_letter_count,
        items_read = report.items_read,
        stopped_early = report.stopped_early,
        "sweep finished"
    );
    if report.shard_errors > 0 {
        return Err(Error::from(format!(
            "{} shard queries failed",
            report.shard_errors
        )));
    }
    Ok(report)
}
