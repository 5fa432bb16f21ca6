//! The sweeper: republishes the outbox items the stream left behind, through
//! the same relay as the publisher. Two triggers, one binary, told apart by
//! the event's shape:
//!
//! - **the schedule** (an EventBridge scheduled event): every shard of the
//!   pending index, items created more than `STRANDED_AFTER_SECONDS` ago
//!   (past the stream's retention, or abandoned by the mapping);
//! - **the publisher mapping's OnFailure queue** (an SQS event of
//!   `DDBStreamBatchInfo` messages): the pending items of each abandoned
//!   batch's time window, right away, so a short sink outage that used up
//!   the mapping's retries is recovered in minutes, not a day.
//!
//! # Layout
//! - [`Sweeper`]: the dependencies (a sink and a store, both ports of
//!   `outbox_core`), [`Sweeper::sweep`] and [`Sweeper::redrive`].
//! - [`OnFailureMessage`] and [`Window`]: what an OnFailure message says and
//!   which items it points at.
//! - [`SweepReport`]: what one run did and saw, emitted as EMF metrics.
//! - [`handler`], [`Trigger`], [`Response`]: the Lambda handler.
//!
//! # Order and safety
//! Items are read shard by shard in ULID order; the shard is a hash of the
//! aggregate id, so each aggregate's events come in creation order, and the
//! relay ([`Mode::Sweep`]) holds an aggregate after a failure (or behind an
//! event still backing off) so that its later events never overtake it.
//! Every write is a delete or an update conditioned on the item still
//! existing, so nothing deleted is ever resurrected; an event the publisher
//! sends at the same moment may go out twice (same event id).

use std::collections::HashSet;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent};
use futures::future::join_all;
use lambda_runtime::{Error, LambdaEvent};
use outbox_core::metrics::{self, Unit};
use outbox_core::publish::relay::{Entry, Mode, Relay, RelayReport};
use outbox_core::publish::EventSink;
use outbox_core::retry::{Backoff, Deadline, RetryPolicy};
use outbox_core::store::{Created, OutboxStore, PendingQuery};
use outbox_core::Config;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use ulid::Ulid;

/// Time kept back from the Lambda deadline: no new page or call starts
/// within it.
pub const DEADLINE_MARGIN: Duration = Duration::from_secs(5);

/// Time kept, within the run, for the statistics after the work.
pub const STATS_RESERVE: Duration = Duration::from_secs(3);

/// The sweeper's settings, from [`Config`].
#[derive(Debug, Clone)]
pub struct SweepSettings {
    pub stranded_after: Duration,
    pub max_attempts: u32,
    pub page_size: i32,
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
}

impl From<&Config> for SweepSettings {
    fn from(config: &Config) -> Self {
        Self {
            stranded_after: config.stranded_after,
            max_attempts: config.max_attempts,
            page_size: config.sweep_page_size,
            backoff: Backoff {
                base: config.retry_base,
                ..Backoff::PERSISTED
            },
            count_limit: 1_000,
            window_lead: Duration::from_secs(300),
            window_lag: Duration::from_secs(2),
        }
    }
}

/// The sweeper's dependencies, built once per cold start.
#[derive(Debug, Clone)]
pub struct Sweeper<S, T> {
    pub sink: S,
    pub store: T,
    pub settings: SweepSettings,
    pub retry: RetryPolicy,
}

/// What one run did and saw.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SweepReport {
    /// Pending items found in the swept range (due or not).
    pub stranded: usize,
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
    pub pending_capped: bool,
    /// Age of the oldest pending item after the run (0 when none).
    pub oldest_pending_age_seconds: f64,
    /// Dead-lettered items in the table (a lower bound when capped).
    pub dead_letter_count: usize,
    pub dead_letters_capped: bool,
    /// Items the queries read (DynamoDB's ScannedCount), the read cost.
    pub items_read: usize,
    /// Query calls made.
    pub queries: usize,
    /// Shard reads or bookkeeping writes that failed.
    pub shard_errors: usize,
    /// Whether the run stopped early for the deadline.
    pub stopped_early: bool,
    /// Whether the statistics were read (not when the deadline came first).
    pub stats_read: bool,
    /// OnFailure windows fully redriven / left for a retry of the message.
    pub windows_redriven: usize,
    pub windows_failed: usize,
}

impl SweepReport {
    fn add(&mut self, other: SweepReport) {
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

    fn add_relay(&mut self, relayed: &RelayReport) {
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
        ];
        if self.stats_read {
            metrics.extend([
                ("PendingCount", self.pending as f64, Unit::Count),
                ("PendingCountCapped", flag(self.pending_capped), Unit::Count),
                (
                    "OldestPendingAgeSeconds",
                    self.oldest_pending_age_seconds,
                    Unit::Seconds,
                ),
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

/// The smallest ULID of a millisecond: every id created before `at` sorts
/// below it.
pub fn ulid_floor(at: OffsetDateTime) -> Ulid {
    Ulid::from_parts(millis(at), 0)
}

/// The largest ULID of a millisecond.
pub fn ulid_ceiling(at: OffsetDateTime) -> Ulid {
    Ulid::from_parts(millis(at), u128::MAX)
}

fn millis(at: OffsetDateTime) -> u64 {
    (at.unix_timestamp_nanos() / 1_000_000).max(0) as u64
}

/// The message a DynamoDB stream mapping sends to its OnFailure destination
/// (metadata only). Unknown fields and `condition` values are accepted.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct OnFailureMessage {
    #[serde(rename = "requestContext", default)]
    pub request_context: RequestContext,
    #[serde(rename = "DDBStreamBatchInfo")]
    pub batch: StreamBatchInfo,
}

#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestContext {
    /// `RetryAttemptsExhausted`, `RecordAgeExceeded`, or any other value.
    #[serde(default)]
    pub condition: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamBatchInfo {
    #[serde(default)]
    pub shard_id: Option<String>,
    #[serde(default)]
    pub start_sequence_number: Option<String>,
    #[serde(default)]
    pub end_sequence_number: Option<String>,
    #[serde(with = "time::serde::rfc3339")]
    pub approximate_arrival_of_first_record: OffsetDateTime,
    #[serde(with = "time::serde::rfc3339")]
    pub approximate_arrival_of_last_record: OffsetDateTime,
    #[serde(default)]
    pub batch_size: Option<u64>,
    #[serde(default)]
    pub stream_arn: Option<String>,
}

/// The creation-time range of an abandoned batch's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub from: OffsetDateTime,
    pub to: OffsetDateTime,
}

impl Window {
    /// The window of `message`, widened by the settings' lead and lag.
    pub fn of(message: &OnFailureMessage, settings: &SweepSettings) -> Self {
        let first = message.batch.approximate_arrival_of_first_record;
        let last = message.batch.approximate_arrival_of_last_record.max(first);
        Self {
            from: first - settings.window_lead,
            to: last + settings.window_lag,
        }
    }
}

impl<S: EventSink, T: OutboxStore> Sweeper<S, T> {
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
            let entries: Vec<Entry> = page.items.into_iter().map(Entry::from).collect();
            report.stranded += entries.len();
            let relayed = relay.run(&entries, mode, &mut held, deadline).await;
            report.add_relay(&relayed);
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

    /// The statistics, at a bounded cost: per shard, the oldest pending id
    /// (one item) and two counts that stop at `count_limit` items.
    async fn stats(
        &self,
        shards: u16,
        now: OffsetDateTime,
        deadline: &Deadline,
        report: &mut SweepReport,
    ) {
        if !deadline.allows(Duration::ZERO) {
            tracing::warn!("no time left for the statistics");
            return;
        }
        let limit = self.settings.count_limit;
        let results =
            join_all((0..shards).map(|s| self.store.shard_stats(s, limit, deadline))).await;
        let mut oldest: Option<Ulid> = None;
        report.stats_read = true;
        for (shard, result) in results.into_iter().enumerate() {
            match result {
                Ok(stats) => {
                    report.pending += stats.pending;
                    report.pending_capped |= stats.pending_capped;
                    report.dead_letter_count += stats.dead_letters;
                    report.dead_letters_capped |= stats.dead_letters_capped;
                    report.items_read += stats.scanned;
                    report.queries += stats.queries;
                    oldest = match (oldest, stats.oldest) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                Err(e) => {
                    tracing::error!(shard, error = %e, "shard statistics not read");
                    report.shard_errors += 1;
                }
            }
        }
        report.oldest_pending_age_seconds = oldest
            .map(|id| millis(now).saturating_sub(id.timestamp_ms()) as f64 / 1000.0)
            .unwrap_or(0.0);
    }
}

/// What invoked the sweeper, told apart by the event's shape: an SQS event
/// has `Records` of `aws:sqs`; anything else is the schedule.
#[derive(Debug, Clone)]
pub enum Trigger {
    Schedule,
    OnFailure(SqsEvent),
}

impl Trigger {
    pub fn from_value(event: serde_json::Value) -> Result<Self, Error> {
        let is_sqs = event
            .get("Records")
            .and_then(|r| r.as_array())
            .is_some_and(|records| {
                records
                    .iter()
                    .all(|r| r.get("eventSource").and_then(|s| s.as_str()) == Some("aws:sqs"))
            });
        if is_sqs {
            Ok(Self::OnFailure(serde_json::from_value(event)?))
        } else {
            Ok(Self::Schedule)
        }
    }
}

/// What the handler answers: the run's report (schedule), or the messages
/// to retry (OnFailure queue, `ReportBatchItemFailures`).
#[derive(Debug, Clone, Serialize)]
#[serde(untagged)]
pub enum Response {
    Sweep(SweepReport),
    Batch(SqsBatchResponse),
}

/// The Lambda handler. A scheduled run emits its EMF line and fails (so the
/// Errors alarm sees it) when a shard could not be read; an OnFailure batch
/// reports each message whose window is not settled, so SQS redelivers it
/// and, after `maxReceiveCount`, moves it to the dead-letter queue.
pub async fn handler<S: EventSink, T: OutboxStore>(
    sweeper: &Sweeper<S, T>,
    event: LambdaEvent<serde_json::Value>,
) -> Result<Response, Error> {
    let deadline = Deadline::from_epoch_millis(event.context.deadline, DEADLINE_MARGIN);
    match Trigger::from_value(event.payload)? {
        Trigger::Schedule => {
            let report = sweeper.sweep(OffsetDateTime::now_utc(), &deadline).await;
            log(&report, "sweep finished");
            if report.shard_errors > 0 {
                return Err(Error::from(format!(
                    "{} shard reads or writes failed",
                    report.shard_errors
                )));
            }
            Ok(Response::Sweep(report))
        }
        Trigger::OnFailure(event) => {
            let (response, report) = redrive_messages(sweeper, &event, &deadline).await;
            log(&report, "OnFailure windows redriven");
            Ok(Response::Batch(response))
        }
    }
}

/// Redrives each OnFailure message's window, in order.
pub async fn redrive_messages<S: EventSink, T: OutboxStore>(
    sweeper: &Sweeper<S, T>,
    event: &SqsEvent,
    deadline: &Deadline,
) -> (SqsBatchResponse, SweepReport) {
    let mut response = SqsBatchResponse::default();
    let mut total = SweepReport::default();
    for message in &event.records {
        let id = message.message_id.clone().unwrap_or_default();
        let parsed = message
            .body
            .as_deref()
            .ok_or_else(|| "message has no body".to_owned())
            .and_then(|b| serde_json::from_str::<OnFailureMessage>(b).map_err(|e| e.to_string()));
        let settled = match parsed {
            Err(e) => {
                tracing::error!(message_id = %id, error = %e, "not an OnFailure message of a DynamoDB stream mapping");
                false
            }
            Ok(_) if !deadline.allows(Duration::ZERO) => false,
            Ok(message) => {
                let window = Window::of(&message, &sweeper.settings);
                let report = sweeper
                    .redrive(window, OffsetDateTime::now_utc(), deadline)
                    .await;
                tracing::info!(
                    message_id = %id,
                    condition = message.request_context.condition.as_deref().unwrap_or(""),
                    shard_id = message.batch.shard_id.as_deref().unwrap_or(""),
                    batch_size = message.batch.batch_size.unwrap_or(0),
                    found = report.stranded,
                    republished = report.republished,
                    settled = report.settled(),
                    "OnFailure window redriven"
                );
                let settled = report.settled();
                total.add(report);
                settled
            }
        };
        if settled {
            total.windows_redriven += 1;
        } else {
            total.windows_failed += 1;
            let mut failure = aws_lambda_events::event::sqs::BatchItemFailure::default();
            failure.item_identifier = id;
            response.batch_item_failures.push(failure);
        }
    }
    (response, total)
}

fn log(report: &SweepReport, message: &'static str) {
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
        dead_letter_count = report.dead_letter_count,
        items_read = report.items_read,
        stopped_early = report.stopped_early,
        windows_redriven = report.windows_redriven,
        windows_failed = report.windows_failed,
        "{message}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_and_ceiling_bracket_a_millisecond() {
        let at = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let older = Ulid::from_parts(1_800_000_000_000 - 1, u128::MAX);
        let same_ms = Ulid::from_parts(1_800_000_000_000, 1);
        let newer = Ulid::from_parts(1_800_000_000_001, 0);
        assert!(older < ulid_floor(at) && ulid_floor(at) < same_ms);
        assert!(same_ms < ulid_ceiling(at) && ulid_ceiling(at) < newer);
        assert_eq!(
            ulid_floor(OffsetDateTime::UNIX_EPOCH - time::Duration::days(1)),
            Ulid::from_parts(0, 0)
        );
    }

    #[test]
    fn on_failure_messages_parse_whatever_their_condition() {
        for condition in [
            "RetryAttemptsExhausted",
            "RecordAgeExceeded",
            "SomethingNew",
        ] {
            let body = serde_json::json!({
                "requestContext": {"requestId": "r", "functionArn": "arn", "condition": condition, "approximateInvokeCount": 3},
                "responseContext": {"statusCode": 200},
                "version": "1.0",
                "timestamp": "2026-11-30T10:00:10.000Z",
                "DDBStreamBatchInfo": {
                    "shardId": "shardId-1", "startSequenceNumber": "100", "endSequenceNumber": "200",
                    "approximateArrivalOfFirstRecord": "2026-11-30T10:00:00.123Z",
                    "approximateArrivalOfLastRecord": "2026-11-30T10:00:05Z",
                    "batchSize": 3, "streamArn": "arn:stream", "somethingNew": true
                }
            });
            let message: OnFailureMessage = serde_json::from_value(body).unwrap();
            assert_eq!(
                message.request_context.condition.as_deref(),
                Some(condition)
            );
            let settings = SweepSettings::from(
                &Config::from_lookup(|k| (k == "TABLE_NAME").then(|| "t".to_owned())).unwrap(),
            );
            let window = Window::of(&message, &settings);
            assert_eq!(
                window.from,
                message.batch.approximate_arrival_of_first_record - Duration::from_secs(300)
            );
            assert_eq!(
                window.to,
                message.batch.approximate_arrival_of_last_record + Duration::from_secs(2)
            );
        }
    }

    #[test]
    fn the_trigger_is_told_by_the_shape() {
        let scheduled = serde_json::json!({"version": "0", "id": "x", "detail-type": "Scheduled Event", "source": "aws.events", "detail": {}});
        assert!(matches!(
            Trigger::from_value(scheduled).unwrap(),
            Trigger::Schedule
        ));
        let sqs = serde_json::json!({"Records": [{"messageId": "m", "body": "{}", "eventSource": "aws:sqs", "attributes": {}, "messageAttributes": {}}]});
        assert!(matches!(
            Trigger::from_value(sqs).unwrap(),
            Trigger::OnFailure(_)
        ));
    }
}
