//! A local event source mapping: what connects the table's stream to the
//! publisher in AWS, which no local emulator runs.
//!
//! Faithful where outboxes break:
//! - reads every shard from `TRIM_HORIZON`;
//! - applies the mapping's filter patterns from `infra/outbox.yaml` (the same
//!   [`FilterCriteria`] the template test uses); non-matching records are discarded,
//!   never delivered and never retried;
//! - batches up to the mapping's `BatchSize`, per shard, in order;
//! - honours the response like Lambda: checkpoints at the lowest reported
//!   `itemIdentifier` and redelivers from there; an empty, null or unknown
//!   identifier, or a function error, fails the whole batch; bisects a failed
//!   batch when configured (splitting consumes no retry attempt);
//! - after `MaximumRetryAttempts` retries, or once the batch's oldest record
//!   is older than `MaximumRecordAgeInSeconds`, sends the OnFailure message
//!   Lambda sends (metadata only, `DDBStreamBatchInfo`) to the SQS queue and
//!   moves on.
//!
//! - `ParallelizationFactor` N (from the mapping's settings): each shard's
//!   records are split into N lanes by a hash of the item's keys (partition
//!   and sort key), so order holds per item only, as in Lambda; each lane
//!   batches, checkpoints, retries, bisects and gives up on its own, and the
//!   lanes of a shard are invoked at once.
//!
//! Deviations (documented in `docs/local.md`): no wait for the batching
//! window (a pass takes what has arrived); retries are immediate (Lambda
//! retries with backoff); after a bisected half succeeds, the rest of the
//! lane is batched anew rather than as the other half; the lanes of a
//! shard are invoked in rounds (each lane with records gets one batch per
//! round, all at once, and the next round starts when every one of them
//! has answered; Lambda starts a lane's next batch as soon as its last one
//! is done); shards are drained one after another.

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use futures::future::join_all;
use serde_json::json;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::filter::FilterCriteria;
use crate::stream::{StreamCursor, StreamError};
use crate::template::{MappingSettings, MAX_PARALLELIZATION_FACTOR};

/// Invokes the function the mapping feeds. At a `ParallelizationFactor`
/// above 1 the pump calls it for several lanes of a shard at once: an
/// invoker that serves one invocation at a time (one sandbox) runs them one
/// after another; Lambda runs them in separate execution environments.
pub trait Invoker {
    /// `Ok(response)`, or `Err` for a function error (an error returned, a
    /// crash, a timeout).
    fn invoke(
        &self,
        event: Event,
    ) -> impl Future<Output = Result<DynamoDbEventResponse, InvokeError>>;
}

/// An invocation that gave no response.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvokeError {
    /// The Invoke API could not be reached, or did not answer in time.
    #[error("invoke {function}: {reason}")]
    Unreachable {
        /// The function.
        function: String,
        /// Why.
        reason: String,
    },
    /// The function failed: an error payload (`X-Amz-Function-Error`) or
    /// an answer other than 200.
    #[error("function error (HTTP {status}): {body}")]
    Function {
        /// The Invoke API's status.
        status: u16,
        /// The error payload.
        body: String,
    },
    /// The answer is not the response the event source expects.
    #[error("invalid response: {0}")]
    Invalid(String),
    /// Another invoker's failure (a crash, a timeout, an error returned).
    #[error("{0}")]
    Failed(String),
}

/// Where OnFailure messages go.
#[derive(Debug, Clone)]
pub struct OnFailure {
    /// The SQS client.
    pub sqs: aws_sdk_sqs::Client,
    /// The OnFailure queue.
    pub queue_url: String,
}

/// The pump failed (not the function: its failures are handled).
#[derive(Debug, thiserror::Error)]
pub enum PumpError {
    #[error(transparent)]
    /// Reading the stream failed.
    Stream(#[from] StreamError),
    #[error("OnFailure delivery failed: {0}")]
    /// Sending an OnFailure message failed.
    OnFailure(String),
}

/// What the pump did, cumulatively.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PumpStats {
    /// Stream records read.
    pub records_read: usize,
    /// Records the filter discarded.
    pub filtered_out: usize,
    /// Function invocations.
    pub invocations: usize,
    /// Records delivered to the function.
    pub records_delivered: usize,
    /// Invocations that reported a partial batch failure.
    pub partial_failures: usize,
    /// Invocations that failed as a whole.
    pub function_errors: usize,
    /// Batches split in two after a failure.
    pub bisections: usize,
    /// Batches sent to the OnFailure destination.
    pub on_failure_messages: usize,
    /// Records given up past the retry or age bounds.
    pub records_discarded: usize,
    /// Each batch given up (sent to the OnFailure destination, or dropped
    /// without one), in order: when, and its records' sequence numbers.
    pub given_up: Vec<GivenUp>,
}

/// One batch the pump gave up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenUp {
    /// When the pump gave it up.
    pub at: std::time::SystemTime,
    /// Its records' sequence numbers, in stream order.
    pub sequence_numbers: Vec<String>,
    /// Its records' keys, in stream order (what the records were about,
    /// whether or not the function ever got them).
    pub keys: Vec<serde_dynamo::Item>,
}

/// One lane of a shard: the records of the items that hash to it, in
/// stream order.
#[derive(Debug, Default)]
struct Lane {
    pending: VecDeque<EventRecord>,
    /// Retries of the batch at the head (0 on its first delivery).
    retries: i64,
    /// Size limit after bisection.
    limit: Option<usize>,
}

#[derive(Debug, Default)]
struct Shard {
    /// As many as the `ParallelizationFactor` (at least one).
    lanes: Vec<Lane>,
}

/// What an invocation's answer says about its batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Every record handled: checkpoint past the batch.
    Done,
    /// A function error, or a response Lambda cannot use: the whole batch
    /// failed.
    Failed,
    /// Checkpoint before this position (the lowest reported failure) and
    /// retry from it.
    FailedFrom(usize),
}

/// The lane of `record` among `lanes`: a hash of its item's keys
/// (partition and sort key), the same for every record of one item, so
/// that an item's changes keep their order, as in Lambda at a
/// `ParallelizationFactor` above 1. FNV-1a over the key attributes sorted by
/// name (the records' key maps have no order of their own).
fn lane_of(record: &EventRecord, lanes: usize) -> usize {
    if lanes <= 1 {
        return 0;
    }
    let keys = serde_json::to_value(&record.change.keys).unwrap_or_default();
    let mut attributes: Vec<(&String, &serde_json::Value)> = keys
        .as_object()
        .map(|map| map.iter().collect())
        .unwrap_or_default();
    attributes.sort_by(|a, b| a.0.cmp(b.0));
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for (name, value) in attributes {
        for byte in name
            .bytes()
            .chain([0])
            .chain(value.to_string().into_bytes())
            .chain([0])
        {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    (hash % lanes as u64) as usize
}

/// The mapping emulator.
pub struct Pump<I> {
    cursor: StreamCursor,
    mapping: MappingSettings,
    filters: FilterCriteria,
    invoker: I,
    on_failure: Option<OnFailure>,
    function_arn: String,
    shards: BTreeMap<String, Shard>,
    /// What the pump did so far.
    pub stats: PumpStats,
}

impl<I: Invoker> Pump<I> {
    /// A pump reading `cursor` with `mapping`'s settings into `invoker`; OnFailure messages go to `on_failure` when given.
    pub fn new(
        cursor: StreamCursor,
        mapping: MappingSettings,
        invoker: I,
        on_failure: Option<OnFailure>,
    ) -> Result<Self, crate::filter::PatternError> {
        let filters = mapping.filters()?;
        let function_arn = format!(
            "arn:aws:lambda:us-east-1:123456789012:function:{}",
            mapping.function
        );
        Ok(Self {
            cursor,
            mapping,
            filters,
            invoker,
            on_failure,
            function_arn,
            shards: BTreeMap::new(),
            stats: PumpStats::default(),
        })
    }

    /// The stream position (to resume a later run).
    pub fn cursor(&self) -> &StreamCursor {
        &self.cursor
    }

    /// The mapping settings in force.
    pub fn mapping(&self) -> &MappingSettings {
        &self.mapping
    }

    /// Changes the mapping's settings (tests of other configurations).
    pub fn mapping_mut(&mut self) -> &mut MappingSettings {
        &mut self.mapping
    }

    /// The function behind the mapping.
    pub fn invoker(&self) -> &I {
        &self.invoker
    }

    /// Lanes per shard: the `ParallelizationFactor`, within Lambda's bounds.
    fn lanes(&self) -> usize {
        self.mapping
            .parallelization_factor
            .clamp(1, MAX_PARALLELIZATION_FACTOR)
    }

    /// Reads what arrived and delivers until every shard is drained (or its
    /// failing batches were sent to OnFailure). Returns how many records
    /// passed the mapping's filter: records it drops (the stack settings
    /// records each sweep writes, a repair's `MODIFY`) never invoke the
    /// function, so a stream holding only those is idle, as Lambda sees it.
    pub async fn pass(&mut self) -> Result<usize, PumpError> {
        let mut read = 0;
        let mut matched = 0;
        let lanes = self.lanes();
        for (shard_id, records) in self.cursor.read_by_shard().await? {
            let shard = self.shards.entry(shard_id).or_default();
            if shard.lanes.len() < lanes {
                shard.lanes.resize_with(lanes, Lane::default);
            }
            for record in records {
                read += 1;
                let json = serde_json::to_value(&record).unwrap_or_default();
                if self.filters.matches(&json) {
                    matched += 1;
                    let lane = lane_of(&record, lanes);
                    shard.lanes[lane].pending.push_back(record);
                } else {
                    self.stats.filtered_out += 1;
                }
            }
        }
        self.stats.records_read += read;
        let ids: Vec<String> = self.shards.keys().cloned().collect();
        for id in ids {
            self.drain(&id).await?;
        }
        Ok(matched)
    }

    /// Passes until a pass reads nothing new for the function.
    pub async fn run_until_idle(&mut self) -> Result<(), PumpError> {
        while self.pass().await? > 0 {}
        Ok(())
    }

    /// The next batch of a lane, and its retries so far; `None` when the
    /// lane is empty.
    fn next_batch(&self, shard_id: &str, lane: usize) -> Option<(Vec<EventRecord>, i64)> {
        let lane = self.shards.get(shard_id)?.lanes.get(lane)?;
        if lane.pending.is_empty() {
            return None;
        }
        let size = self
            .mapping
            .batch_size
            .max(1)
            .min(lane.limit.unwrap_or(usize::MAX));
        Some((
            lane.pending.iter().take(size).cloned().collect(),
            lane.retries,
        ))
    }

    /// Whether the batch's oldest record is past `MaximumRecordAgeInSeconds`.
    fn too_old(&self, batch: &[EventRecord]) -> bool {
        if self.mapping.maximum_record_age_seconds < 0 {
            return false;
        }
        batch.first().is_some_and(|oldest| {
            OffsetDateTime::now_utc().unix_timestamp()
                - oldest.change.approximate_creation_date_time.timestamp()
                > self.mapping.maximum_record_age_seconds
        })
    }

    /// Delivers a shard in rounds until each of its lanes is drained: each
    /// lane with records gets its next batch, the batches are invoked at
    /// once, and each answer is applied to its own lane.
    async fn drain(&mut self, shard_id: &str) -> Result<(), PumpError> {
        loop {
            let lanes = self.shards.get(shard_id).map_or(0, |s| s.lanes.len());
            let mut round: Vec<(usize, Vec<EventRecord>)> = Vec::new();
            for lane in 0..lanes {
                while let Some((batch, retries)) = self.next_batch(shard_id, lane) {
                    // Too old: discard with an OnFailure message, as Lambda does.
                    if self.too_old(&batch) {
                        self.give_up(shard_id, lane, batch.len(), "RecordAgeExceeded", retries)
                            .await?;
                        continue;
                    }
                    round.push((lane, batch));
                    break;
                }
            }
            if round.is_empty() {
                return Ok(());
            }
            self.stats.invocations += round.len();
            self.stats.records_delivered += round.iter().map(|(_, b)| b.len()).sum::<usize>();
            let invoker = &self.invoker;
            let answers = join_all(round.iter().map(|(_, batch)| {
                let mut event = Event::default();
                event.records = batch.clone();
                invoker.invoke(event)
            }))
            .await;
            for ((lane, batch), answer) in round.iter().zip(answers) {
                let outcome = self.outcome(batch, answer);
                self.settle(shard_id, *lane, batch.len(), outcome).await?;
            }
        }
    }

    /// What the answer to `batch` means, as Lambda reads it.
    fn outcome(
        &mut self,
        batch: &[EventRecord],
        answer: Result<DynamoDbEventResponse, InvokeError>,
    ) -> Outcome {
        match answer {
            Ok(response) if response.batch_item_failures.is_empty() => Outcome::Done,
            Ok(response) if self.mapping.report_batch_item_failures => {
                // The lowest reported sequence number, if every identifier is valid.
                let mut lowest: Option<usize> = None;
                let mut valid = true;
                for failure in &response.batch_item_failures {
                    match failure
                        .item_identifier
                        .as_deref()
                        .filter(|id| !id.is_empty())
                        .and_then(|id| {
                            batch
                                .iter()
                                .position(|r| r.change.sequence_number.as_deref() == Some(id))
                        }) {
                        Some(position) => {
                            lowest = Some(lowest.map_or(position, |l| l.min(position)))
                        }
                        None => valid = false,
                    }
                }
                match lowest {
                    Some(position) if valid => {
                        self.stats.partial_failures += 1;
                        Outcome::FailedFrom(position)
                    }
                    _ => {
                        self.stats.function_errors += 1;
                        Outcome::Failed
                    }
                }
            }
            // Without ReportBatchItemFailures the response is ignored.
            Ok(_) => Outcome::Done,
            Err(_) => {
                self.stats.function_errors += 1;
                Outcome::Failed
            }
        }
    }

    /// Applies the outcome of a batch of `size` records to its lane, and
    /// gives the lane's head up past `MaximumRetryAttempts`.
    async fn settle(
        &mut self,
        shard_id: &str,
        lane: usize,
        size: usize,
        outcome: Outcome,
    ) -> Result<(), PumpError> {
        let Some(state) = lane_mut(&mut self.shards, shard_id, lane) else {
            return Ok(());
        };
        match outcome {
            Outcome::Done => {
                state.pending.drain(..size.min(state.pending.len()));
                state.retries = 0;
                state.limit = None;
            }
            Outcome::Failed => {
                if self.mapping.bisect_on_error && size > 1 {
                    state.limit = Some(size / 2);
                    self.stats.bisections += 1;
                } else {
                    state.retries += 1;
                }
            }
            Outcome::FailedFrom(position) => {
                // Checkpoint before the lowest failure; retry from it.
                state.pending.drain(..position.min(state.pending.len()));
                state.retries += 1;
                state.limit = None;
            }
        }
        let retries = state.retries;
        if self.mapping.maximum_retry_attempts >= 0 && retries > self.mapping.maximum_retry_attempts
        {
            let size = self
                .mapping
                .batch_size
                .max(1)
                .min(state.limit.unwrap_or(usize::MAX))
                .min(state.pending.len());
            self.give_up(shard_id, lane, size, "RetryAttemptsExhausted", retries)
                .await?;
        }
        Ok(())
    }

    /// Discards the first `size` records of the lane, sending the OnFailure
    /// message for them. `invocations`: how often the batch was invoked.
    async fn give_up(
        &mut self,
        shard_id: &str,
        lane: usize,
        size: usize,
        condition: &str,
        invocations: i64,
    ) -> Result<(), PumpError> {
        let Some(state) = lane_mut(&mut self.shards, shard_id, lane) else {
            return Ok(());
        };
        let batch: Vec<EventRecord> = state
            .pending
            .drain(..size.min(state.pending.len()))
            .collect();
        state.retries = 0;
        state.limit = None;
        self.stats.records_discarded += batch.len();
        self.stats.on_failure_messages += 1;
        self.stats.given_up.push(GivenUp {
            at: std::time::SystemTime::now(),
            sequence_numbers: batch
                .iter()
                .filter_map(|r| r.change.sequence_number.clone())
                .collect(),
            keys: batch.iter().map(|r| r.change.keys.clone()).collect(),
        });
        let Some(target) = &self.on_failure else {
            return Ok(());
        };
        let message = on_failure_message(
            &self.function_arn,
            self.cursor.stream_arn(),
            shard_id,
            &batch,
            condition,
            invocations,
        );
        target
            .sqs
            .send_message()
            .queue_url(&target.queue_url)
            .message_body(message.to_string())
            .send()
            .await
            .map_err(|e| PumpError::OnFailure(outbox_runtime::error_line("SendMessage", &e)))?;
        Ok(())
    }
}

/// The message an event source mapping sends to an SQS OnFailure destination
/// for a DynamoDB stream batch: metadata only, not the records.
pub fn on_failure_message(
    function_arn: &str,
    stream_arn: &str,
    shard_id: &str,
    batch: &[EventRecord],
    condition: &str,
    invoke_count: i64,
) -> serde_json::Value {
    let time = |r: Option<&EventRecord>| {
        r.and_then(|r| {
            OffsetDateTime::from_unix_timestamp(r.change.approximate_creation_date_time.timestamp())
                .ok()
        })
        .and_then(|t| t.format(&Rfc3339).ok())
    };
    json!({
        "requestContext": {
            "requestId": ulid::Ulid::new().to_string().to_lowercase(),
            "functionArn": function_arn,
            "condition": condition,
            "approximateInvokeCount": invoke_count,
        },
        "responseContext": {
            "statusCode": 200,
            "executedVersion": "$LATEST",
            "functionError": "Unhandled",
        },
        "version": "1.0",
        "timestamp": OffsetDateTime::now_utc().format(&Rfc3339).unwrap_or_default(),
        "DDBStreamBatchInfo": {
            "shardId": shard_id,
            "startSequenceNumber": batch.first().and_then(|r| r.change.sequence_number.clone()),
            "endSequenceNumber": batch.last().and_then(|r| r.change.sequence_number.clone()),
            "approximateArrivalOfFirstRecord": time(batch.first()),
            "approximateArrivalOfLastRecord": time(batch.last()),
            "batchSize": batch.len(),
            "streamArn": stream_arn,
        }
    })
}

/// Lane `lane` of shard `shard_id`, if there is one.
fn lane_mut<'a>(
    shards: &'a mut BTreeMap<String, Shard>,
    shard_id: &str,
    lane: usize,
) -> Option<&'a mut Lane> {
    shards.get_mut(shard_id).and_then(|s| s.lanes.get_mut(lane))
}

#[cfg(test)]
mod tests;
