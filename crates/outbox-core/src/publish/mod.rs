//! Publishing: the one module that turns outbox items into published events,
//! used by both the publisher and the sweeper.
//!
//! # Layout
//! - [`EventSink`]: the port. One call publishes one batch already within
//!   the sink's limits and says, per entry and in order, what happened.
//! - [`eventbridge::EventBridgeSink`] and [`sns::SnsSink`]: the adapters;
//!   [`AnySink`] picks one from the configuration.
//! - [`publish_in_order`]: batching, in-invocation retries of transient
//!   failures, and the stop-at-first-failure rule the stream mapping needs.
//! - [`classify`]: which failures are transient, which are the event's own
//!   fault (poison) and which are neither.

pub mod eventbridge;
pub mod sns;

use std::future::Future;

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::http::Response;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::config::{Config, SinkConfig};
use crate::item::OutboxItem;
use crate::retry::{Deadline, RetryPolicy};

/// What kind of failure an entry met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Throttling, 5xx, timeouts, dropped connections: worth retrying soon.
    Transient,
    /// The event itself can never be accepted (malformed, too large): retrying
    /// cannot help, so it is dead-lettered instead of blocking its shard.
    Poison,
    /// Neither (a missing bus, a denied permission, an unknown code): the
    /// event is kept and the failure reported; an operator must act.
    Rejected,
}

/// Why one entry was not published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishFailure {
    pub kind: FailureKind,
    /// The service's error code, or a code of ours.
    pub code: String,
    /// A short, sanitized message (no payload).
    pub message: String,
}

impl PublishFailure {
    pub fn new(kind: FailureKind, code: impl Into<String>, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        if message.len() > 256 {
            let mut cut = 256;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        Self {
            kind,
            code: code.into(),
            message,
        }
    }
}

impl std::fmt::Display for PublishFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// What a sink says about one entry of a batch.
pub type EntryOutcome = Result<(), PublishFailure>;

/// The sink could not be verified at start-up.
#[derive(Debug, thiserror::Error)]
#[error("event sink {target} is not usable: {reason}")]
pub struct SinkError {
    pub target: String,
    pub reason: String,
}

/// The port through which events leave the outbox.
pub trait EventSink: Send + Sync {
    /// Most entries in one call.
    fn max_entries(&self) -> usize;
    /// Most bytes in one call (and in one entry).
    fn max_bytes(&self) -> usize;
    /// The size of `item`'s entry as the service counts it.
    fn entry_size(&self, item: &OutboxItem) -> usize;
    /// Publishes one batch (within the limits above). Returns exactly one
    /// outcome per item, in order; a whole-call error fails every entry.
    fn publish_batch(
        &self,
        items: &[&OutboxItem],
    ) -> impl Future<Output = Vec<EntryOutcome>> + Send;
    /// Checks once, at cold start, that the target exists: some services
    /// report success for a target that does not exist.
    fn verify(&self) -> impl Future<Output = Result<(), SinkError>> + Send;
}

/// The configured sink.
#[derive(Debug, Clone)]
pub enum AnySink {
    EventBridge(eventbridge::EventBridgeSink),
    Sns(sns::SnsSink),
}

impl AnySink {
    /// Builds the sink named by `SINK` with clients from `sdk`.
    pub fn from_config(config: &Config, sdk: &aws_config::SdkConfig) -> Self {
        match &config.sink {
            SinkConfig::EventBridge { bus_name } => {
                Self::EventBridge(eventbridge::EventBridgeSink::new(
                    aws_sdk_eventbridge::Client::new(sdk),
                    bus_name.clone(),
                    config.event_source.clone(),
                ))
            }
            SinkConfig::Sns { topic_arn } => Self::Sns(sns::SnsSink::new(
                aws_sdk_sns::Client::new(sdk),
                topic_arn.clone(),
            )),
        }
    }
}

/// What the publisher and the sweeper build once per cold start: the
/// configured sink, its target verified, and the DynamoDB store.
pub async fn connect(
    config: &Config,
    sdk: &aws_config::SdkConfig,
) -> Result<(AnySink, crate::store::DynamoStore), SinkError> {
    let sink = AnySink::from_config(config, sdk);
    sink.verify().await?;
    let store = crate::store::DynamoStore::new(
        aws_sdk_dynamodb::Client::new(sdk),
        &config.table_name,
        config.outbox_shards,
    );
    Ok((sink, store))
}

impl EventSink for AnySink {
    fn max_entries(&self) -> usize {
        match self {
            Self::EventBridge(s) => s.max_entries(),
            Self::Sns(s) => s.max_entries(),
        }
    }
    fn max_bytes(&self) -> usize {
        match self {
            Self::EventBridge(s) => s.max_bytes(),
            Self::Sns(s) => s.max_bytes(),
        }
    }
    fn entry_size(&self, item: &OutboxItem) -> usize {
        match self {
            Self::EventBridge(s) => s.entry_size(item),
            Self::Sns(s) => s.entry_size(item),
        }
    }
    async fn publish_batch(&self, items: &[&OutboxItem]) -> Vec<EntryOutcome> {
        match self {
            Self::EventBridge(s) => s.publish_batch(items).await,
            Self::Sns(s) => s.publish_batch(items).await,
        }
    }
    async fn verify(&self) -> Result<(), SinkError> {
        match self {
            Self::EventBridge(s) => s.verify().await,
            Self::Sns(s) => s.verify().await,
        }
    }
}

/// Whether to go on after an item could not be published.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ordering {
    /// Stream mapping: Lambda redelivers every record from the first reported
    /// failure, so publishing anything after it would only make duplicates.
    StopAtFirstFailure,
    /// Sweeper: items are independent; record each failure and go on.
    Independent,
}

/// What became of one item.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemOutcome {
    /// Accepted by the sink: delete the outbox item.
    Published,
    /// Can never be published: dead-letter it.
    Poison(PublishFailure),
    /// Not published (retries exhausted, or rejected): keep the item.
    Failed(PublishFailure),
    /// Not tried: after the first failure, or too close to the deadline.
    NotAttempted,
}

/// Publishes `items` in order: batches of at most `sink.max_entries()`
/// entries and `sink.max_bytes()` bytes, transient entry failures retried
/// (only the failed entries) with backoff while `deadline` allows. Returns
/// one outcome per item, in order.
pub async fn publish_in_order<S: EventSink>(
    sink: &S,
    items: &[OutboxItem],
    ordering: Ordering,
    policy: &RetryPolicy,
    deadline: &Deadline,
) -> Vec<ItemOutcome> {
    let mut outcomes = vec![ItemOutcome::NotAttempted; items.len()];
    let mut start = 0;
    while start < items.len() {
        // Too close to the deadline to start a call: leave the rest.
        if !deadline.allows(policy.base) {
            break;
        }
        let mut end = start;
        let mut bytes = 0;
        while end < items.len() && end - start < sink.max_entries() {
            let size = sink.entry_size(&items[end]);
            if size > sink.max_bytes() {
                if end == start {
                    outcomes[end] = ItemOutcome::Poison(PublishFailure::new(
                        FailureKind::Poison,
                        "EntryTooLarge",
                        format!(
                            "entry is {size} bytes; the sink accepts {}",
                            sink.max_bytes()
                        ),
                    ));
                    end += 1;
                }
                break;
            }
            if bytes + size > sink.max_bytes() {
                break;
            }
            bytes += size;
            end += 1;
        }
        let batch: Vec<usize> = (start..end)
            .filter(|i| outcomes[*i] == ItemOutcome::NotAttempted)
            .collect();
        start = end;
        if batch.is_empty() {
            continue;
        }
        publish_batch_with_retries(sink, items, &batch, policy, deadline, &mut outcomes).await;
        let failed = batch
            .iter()
            .any(|i| matches!(outcomes[*i], ItemOutcome::Failed(_)));
        if failed && ordering == Ordering::StopAtFirstFailure {
            break;
        }
    }
    outcomes
}

async fn publish_batch_with_retries<S: EventSink>(
    sink: &S,
    items: &[OutboxItem],
    batch: &[usize],
    policy: &RetryPolicy,
    deadline: &Deadline,
    outcomes: &mut [ItemOutcome],
) {
    let mut pending: Vec<usize> = batch.to_vec();
    let mut attempt = 1;
    loop {
        let refs: Vec<&OutboxItem> = pending.iter().map(|i| &items[*i]).collect();
        let mut results = sink.publish_batch(&refs).await.into_iter();
        let mut retry = Vec::new();
        for index in pending {
            // A sink that answers for fewer entries than it was given leaves
            // the rest unknown: treat them as transient failures.
            let result = results.next().unwrap_or_else(|| {
                Err(PublishFailure::new(
                    FailureKind::Transient,
                    "MissingResult",
                    "the sink returned no result for this entry",
                ))
            });
            outcomes[index] = match result {
                Ok(()) => ItemOutcome::Published,
                Err(f) if f.kind == FailureKind::Poison => ItemOutcome::Poison(f),
                Err(f) => {
                    if f.kind == FailureKind::Transient {
                        retry.push(index);
                    }
                    ItemOutcome::Failed(f)
                }
            };
        }
        if retry.is_empty() || !policy.wait(attempt, deadline).await {
            return;
        }
        attempt += 1;
        pending = retry;
    }
}

/// Error codes (whole-call or per-entry) that are worth retrying.
const TRANSIENT_CODES: &[&str] = &[
    "ThrottlingException",
    "Throttling",
    "Throttled",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "ProvisionedThroughputExceededException",
    "InternalFailure",
    "InternalException",
    "InternalError",
    "InternalServerError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "KMSThrottlingException",
    "RequestTimeout",
    "RequestTimeoutException",
];

/// Classifies an error code. `poison` lists the codes that mean "this entry
/// can never be accepted" for the sink at hand; anything unknown is
/// [`FailureKind::Rejected`]: kept and reported, never silently dropped.
pub fn classify(code: &str, poison: &[&str]) -> FailureKind {
    if TRANSIENT_CODES.contains(&code) {
        FailureKind::Transient
    } else if poison.contains(&code) {
        FailureKind::Poison
    } else {
        FailureKind::Rejected
    }
}

/// Turns a whole-call SDK error into the failure of each entry of the call.
pub(crate) fn sdk_failure<E>(err: &SdkError<E, Response>) -> PublishFailure
where
    E: ProvideErrorMetadata + std::error::Error,
{
    match err {
        SdkError::TimeoutError(_) => {
            PublishFailure::new(FailureKind::Transient, "Timeout", "request timed out")
        }
        SdkError::DispatchFailure(_) => PublishFailure::new(
            FailureKind::Transient,
            "DispatchFailure",
            "request could not be sent",
        ),
        SdkError::ResponseError(_) => PublishFailure::new(
            FailureKind::Transient,
            "ResponseError",
            "response could not be read",
        ),
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or("Unknown").to_owned();
            let message = service.err().message().unwrap_or("").to_owned();
            let kind = if service.raw().status().as_u16() >= 500 {
                FailureKind::Transient
            } else {
                // A whole call is never the fault of one entry: no poison here.
                match classify(&code, &[]) {
                    FailureKind::Poison => FailureKind::Rejected,
                    other => other,
                }
            };
            PublishFailure::new(kind, code, message)
        }
        _ => PublishFailure::new(
            FailureKind::Rejected,
            "SdkError",
            "request could not be built",
        ),
    }
}

#[cfg(test)]
mod tests;
