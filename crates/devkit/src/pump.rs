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
//! Deviations (documented in `docs/local.md`): no wait for the batching
//! window (a pass takes what has arrived); retries are immediate (Lambda
//! retries with backoff); after a bisected half succeeds, the rest of the
//! shard is batched anew rather than as the other half; one invocation per
//! shard at a time (`ParallelizationFactor` 1, as in the template).

use std::collections::{BTreeMap, VecDeque};
use std::future::Future;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use serde_json::json;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::filter::FilterCriteria;
use crate::stream::{StreamCursor, StreamError};
use crate::template::MappingSettings;

/// Invokes the function the mapping feeds.
pub trait Invoker {
    /// `Ok(response)`, or `Err(message)` for a function error (an error
    /// returned, a crash, a timeout).
    fn invoke(&self, event: Event) -> impl Future<Output = Result<DynamoDbEventResponse, String>>;
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
}

#[derive(Debug, Default)]
struct Shard {
    pending: VecDeque<EventRecord>,
    /// Retries of the batch at the head (0 on its first delivery).
    retries: i64,
    /// Size limit after bisection.
    limit: Option<usize>,
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

    /// Reads what arrived and delivers until every shard is drained (or its
    /// failing batches were sent to OnFailure). Returns how many records were
    /// read.
    pub async fn pass(&mut self) -> Result<usize, PumpError> {
        let mut read = 0;
        for (shard_id, records) in self.cursor.read_by_shard().await? {
            let shard = self.shards.entry(shard_id).or_default();
            for record in records {
                read += 1;
                let json = serde_json::to_value(&record).unwrap_or_default();
                if self.filters.matches(&json) {
                    shard.pending.push_back(record);
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
        Ok(read)
    }

    /// Passes until a pass reads nothing new.
    pub async fn run_until_idle(&mut self) -> Result<(), PumpError> {
        while self.pass().await? > 0 {}
        Ok(())
    }

    async fn drain(&mut self, shard_id: &str) -> Result<(), PumpError> {
        loop {
            let (batch, retries) = {
                let Some(shard) = self.shards.get(shard_id) else {
                    return Ok(());
                };
                if shard.pending.is_empty() {
                    return Ok(());
                }
                let size = self
                    .mapping
                    .batch_size
                    .max(1)
                    .min(shard.limit.unwrap_or(usize::MAX));
                let batch: Vec<EventRecord> = shard.pending.iter().take(size).cloned().collect();
                (batch, shard.retries)
            };
            // Too old: discard with an OnFailure message, as Lambda does.
            if self.mapping.maximum_record_age_seconds >= 0 {
                let oldest = batch[0].change.approximate_creation_date_time.timestamp();
                if OffsetDateTime::now_utc().unix_timestamp() - oldest
                    > self.mapping.maximum_record_age_seconds
                {
                    self.give_up(shard_id, batch.len(), "RecordAgeExceeded", retries)
                        .await?;
                    continue;
                }
            }
            self.stats.invocations += 1;
            self.stats.records_delivered += batch.len();
            let mut event = Event::default();
            event.records = batch.clone();
            let outcome = self.invoker.invoke(event).await;
            let first_failed = match outcome {
                Ok(response) if response.batch_item_failures.is_empty() => None,
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
                    if valid {
                        self.stats.partial_failures += 1;
                        lowest
                    } else {
                        self.stats.function_errors += 1;
                        Some(usize::MAX)
                    }
                }
                // Without ReportBatchItemFailures the response is ignored.
                Ok(_) => None,
                Err(_) => {
                    self.stats.function_errors += 1;
                    Some(usize::MAX)
                }
            };
            let Some(shard) = self.shards.get_mut(shard_id) else {
                return Ok(());
            };
            match first_failed {
                None => {
                    shard.pending.drain(..batch.len());
                    shard.retries = 0;
                    shard.limit = None;
                }
                Some(usize::MAX) => {
                    // The whole batch failed.
                    if self.mapping.bisect_on_error && batch.len() > 1 {
                        shard.limit = Some(batch.len() / 2);
                        self.stats.bisections += 1;
                    } else {
                        shard.retries += 1;
                    }
                }
                Some(position) => {
                    // Checkpoint before the lowest failure; retry from it.
                    shard.pending.drain(..position);
                    shard.retries += 1;
                    shard.limit = None;
                }
            }
            let retries = shard.retries;
            if self.mapping.maximum_retry_attempts >= 0
                && retries > self.mapping.maximum_retry_attempts
            {
                let size = self
                    .mapping
                    .batch_size
                    .max(1)
                    .min(shard.limit.unwrap_or(usize::MAX))
                    .min(shard.pending.len());
                self.give_up(shard_id, size, "RetryAttemptsExhausted", retries)
                    .await?;
            }
        }
    }

    /// Discards the first `size` records of the shard, sending the OnFailure
    /// message for them. `invocations`: how often the batch was invoked.
    async fn give_up(
        &mut self,
        shard_id: &str,
        size: usize,
        condition: &str,
        invocations: i64,
    ) -> Result<(), PumpError> {
        let Some(shard) = self.shards.get_mut(shard_id) else {
            return Ok(());
        };
        let batch: Vec<EventRecord> = shard
            .pending
            .drain(..size.min(shard.pending.len()))
            .collect();
        shard.retries = 0;
        shard.limit = None;
        self.stats.records_discarded += batch.len();
        self.stats.on_failure_messages += 1;
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
            .map_err(|e| PumpError::OnFailure(outbox_core::aws::error_line("SendMessage", &e)))?;
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
