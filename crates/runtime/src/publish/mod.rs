//! The sink adapters of the engine's port (`outbox_engine::EventSink`) and
//! the publishing functions' cold start: `cold_start` (the configuration,
//! the verified sink, the store, and [`record_settings`], the settings a
//! function records for `outboxctl`), the one-stack check
//! ([`refuse_rivals`], [`Heartbeat`]).
//!
//! # Layout
//! - `eventbridge::EventBridgeSink` and `sns::SnsSink`: the adapters, behind
//!   the crate's `eventbridge` and `sns` features (the writer and the
//!   projector link neither client); `SinkAdapter` (both features, `sinks`)
//!   picks one from the configuration, and `AnySink` is it resolving claim
//!   checks (`outbox_engine::ClaimChecked` over the S3 client); `classify`, which of a service's
//!   error codes are transient, poison or neither; `sdk_failure`, a whole
//!   call's SDK error as every entry's failure.
//! - `heartbeat_tests.rs`: the heartbeat against the engine's memory store.

#[cfg(feature = "eventbridge-bus")]
pub(crate) mod bus;
#[cfg(feature = "eventbridge")]
pub(crate) mod eventbridge;
#[cfg(test)]
mod heartbeat_tests;
#[cfg(feature = "sns")]
pub(crate) mod sns;

#[cfg(any(feature = "eventbridge", feature = "eventbridge-bus", feature = "sns"))]
use aws_smithy_runtime_api::{client::result::SdkError, http::Response};
#[cfg(any(feature = "eventbridge", feature = "eventbridge-bus", feature = "sns"))]
use aws_smithy_types::{error::metadata::ProvideErrorMetadata, retry::ProvideErrorKind};

#[cfg(feature = "sinks")]
use crate::config::{Config, SinkConfig};
#[cfg(feature = "sinks")]
use outbox_core::OutboxItem;
#[cfg(any(feature = "eventbridge", feature = "eventbridge-bus", feature = "sns"))]
use outbox_engine::EntryOutcome;
#[cfg(feature = "sinks")]
use outbox_engine::{EventSink, SinkError};
#[cfg(any(feature = "eventbridge", feature = "eventbridge-bus", feature = "sns"))]
use outbox_engine::{FailureKind, PublishFailure};

/// The configured sink as the functions publish to it: the adapter
/// `SINK` names, resolving claim-checked events (`payloadRef`) through S3
/// ([`outbox_engine::ClaimChecked`]; built by [`sink_from_config`]).
#[cfg(feature = "sinks")]
pub type AnySink = outbox_engine::ClaimChecked<SinkAdapter, aws_sdk_s3::Client>;

/// The configured sink and an S3 client for its claim checks (the bucket
/// is the one each event's `payloadRef` names).
#[cfg(feature = "sinks")]
pub fn sink_from_config(config: &Config, sdk: &aws_config::SdkConfig) -> AnySink {
    outbox_engine::ClaimChecked::new(
        SinkAdapter::from_config(config, sdk),
        aws_sdk_s3::Client::new(sdk),
    )
}

/// The adapter of the configured sink.
#[cfg(feature = "sinks")]
#[derive(Debug, Clone)]
pub enum SinkAdapter {
    /// `SINK=eventbridge`.
    EventBridge(eventbridge::EventBridgeSink),
    /// `SINK=sns`.
    Sns(sns::SnsSink),
    /// `SINK=eventbridge-bus`.
    EventBridgeBus(bus::EventBusSink),
}

#[cfg(feature = "sinks")]
impl SinkAdapter {
    /// Builds the sink named by `SINK` with clients from `sdk`.
    pub fn from_config(config: &Config, sdk: &aws_config::SdkConfig) -> Self {
        match &config.sink {
            SinkConfig::EventBridge { bus_name } => Self::EventBridge(
                eventbridge::EventBridgeSink::new(
                    aws_sdk_eventbridge::Client::new(sdk),
                    bus_name.clone(),
                    config.event_source.clone(),
                )
                .with_max_bytes(config.max_event_bytes),
            ),
            SinkConfig::Sns { topic_arn } => Self::Sns(
                sns::SnsSink::new(aws_sdk_sns::Client::new(sdk), topic_arn.clone())
                    .with_max_bytes(config.max_event_bytes),
            ),
            SinkConfig::EventBridgeBus { bus_arn } => Self::EventBridgeBus(
                bus::EventBusSink::new(
                    aws_sdk_eventbridgev2::Client::new(sdk),
                    bus_arn.clone(),
                    config.event_source.clone(),
                )
                .with_max_bytes(config.max_event_bytes),
            ),
        }
    }
}

/// What the publisher and the sweeper build once per cold start: the
/// configured sink, its target verified, and the DynamoDB store.
#[cfg(feature = "sinks")]
pub async fn connect(
    config: &Config,
    sdk: &aws_config::SdkConfig,
) -> Result<(AnySink, crate::DynamoStore), SinkError> {
    let sink = sink_from_config(config, sdk);
    sink.verify().await?;
    let store = crate::DynamoStore::new(
        aws_sdk_dynamodb::Client::new(sdk),
        &config.table_name,
        config.outbox_shards,
    )
    .with_keys(config.keys.clone());
    Ok((sink, store))
}

/// Why a publishing function could not start.
#[cfg(feature = "sinks")]
#[derive(thiserror::Error)]
pub enum ColdStartError {
    /// A setting is missing or invalid.
    #[error(transparent)]
    Config(#[from] outbox_core::ConfigError),
    /// The sink's target does not answer as configured.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// Another outbox stack publishes from the table in this region, and
    /// was there first ([`refuse_rivals`]).
    #[error(transparent)]
    OtherStack(#[from] OtherStack),
}

/// Another outbox stack of this region publishes from the table, and was
/// there first ([`refuse_rivals`]): the message names it and what to do.
#[derive(thiserror::Error)]
#[error("{0}")]
pub struct OtherStack(pub String);

/// The message alone, as the function's init log prints it.
impl std::fmt::Debug for OtherStack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// As the inner error: `main` returning it prints `Error: {:?}`, and the
/// function's init log reads as before the wrapper.
#[cfg(feature = "sinks")]
impl std::fmt::Debug for ColdStartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Config(e) => std::fmt::Debug::fmt(e, f),
            Self::Sink(e) => std::fmt::Debug::fmt(e, f),
            Self::OtherStack(e) => std::fmt::Debug::fmt(e, f),
        }
    }
}

/// A publishing function's cold start, for the publisher's and the
/// sweeper's `main`: JSON logs, [`Config`] from the environment, the SDK
/// configuration, [`connect`] (the sink verified), the settings recorded in
/// the table as `function` ([`record_settings`]), and no other stack
/// publishing from the table ([`refuse_rivals`]). Also returns the record,
/// which the sweeper writes again on every run (its heartbeat).
#[cfg(feature = "sinks")]
pub async fn cold_start(
    function: &str,
) -> Result<
    (
        Config,
        AnySink,
        crate::DynamoStore,
        Option<crate::RecordedSettings>,
    ),
    ColdStartError,
> {
    crate::telemetry::init_logging();
    let config = Config::from_env()?;
    let sdk = crate::aws::load().await;
    let (sink, store) = connect(&config, &sdk).await?;
    let record = settings_record(&sdk, function);
    if let Some(record) = &record {
        // Each call its own deadline: a slow write leaves the read its time.
        let deadline = outbox_engine::Deadline::after(SETTINGS_CALL_DEADLINE);
        record_settings(&store, record, &deadline).await;
        let deadline = outbox_engine::Deadline::after(SETTINGS_CALL_DEADLINE);
        refuse_rivals(&store, record, &deadline).await?;
    } else {
        tracing::warn!("no region: the settings were not recorded in the table");
    }
    Ok((config, sink, store, record))
}

/// How long the settings record's write, and the read of the table's
/// records, may take at cold start (the sweeper's runs give them less).
pub(crate) const SETTINGS_CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(3);

/// A function's settings record written again, and the one-stack check
/// made again, at most every `every` (the sweeper: every run; the
/// publisher: every five minutes while it is invoked), so that a stack
/// stays live while it runs and a warm function of a stack that must yield
/// stops within that time ([`refuse_rivals`]).
/// Clones share one clock.
#[derive(Debug, Clone)]
pub struct Heartbeat {
    record: crate::RecordedSettings,
    every: std::time::Duration,
    last: std::sync::Arc<std::sync::Mutex<Option<std::time::Instant>>>,
}

/// How often a warm publisher records its settings and checks for another
/// stack (at most; only while it is invoked).
pub const PUBLISHER_HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(300);

impl Heartbeat {
    /// A heartbeat of `record` every `every`, the first one due `every`
    /// after now (the cold start has just recorded and checked).
    pub fn new(record: crate::RecordedSettings, every: std::time::Duration) -> Self {
        Self {
            record,
            every,
            last: std::sync::Arc::new(std::sync::Mutex::new(Some(std::time::Instant::now()))),
        }
    }

    /// When one is due: the record written at `now` and the check, at
    /// once, each in a tenth of what `run` has left (at most
    /// `SETTINGS_CALL_DEADLINE`, 3 s), so a slow settings call never costs the
    /// run its time. `Err` when another stack was there first.
    pub async fn beat<T: outbox_engine::PublishStore>(
        &self,
        store: &T,
        run: &outbox_engine::Deadline,
    ) -> Result<(), OtherStack> {
        {
            let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
            if last.is_some_and(|at| at.elapsed() < self.every) {
                return Ok(());
            }
            *last = Some(std::time::Instant::now());
        }
        let record = self.record.renewed(outbox_core::now_utc_millis());
        let budget =
            outbox_engine::Deadline::after(SETTINGS_CALL_DEADLINE.min(run.remaining() / 10));
        let ((), checked) = futures::join!(
            record_settings(store, &record, &budget),
            refuse_rivals(store, &record, &budget),
        );
        checked
    }
}

/// The settings record `function` writes now: its region, `STACK_NAME`,
/// every variable of [`crate::VARIABLES`] in its environment, its name
/// (`AWS_LAMBDA_FUNCTION_NAME`) and the time. `None` without a region.
pub fn settings_record(
    sdk: &aws_config::SdkConfig,
    function: &str,
) -> Option<crate::RecordedSettings> {
    let region = sdk.region()?.to_string();
    let name = std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| function.into());
    let now = outbox_core::now_utc_millis();
    Some(crate::RecordedSettings {
        region,
        stack: std::env::var(crate::metrics::STACK_NAME_VAR).unwrap_or_default(),
        function: function.to_owned(),
        by: crate::RecordedSettings::by_now(&name, now),
        since: now
            .format(&time::format_description::well_known::Rfc3339)
            .ok(),
        variables: crate::recorded_variables(|k| std::env::var(k).ok()),
    })
}

/// Records `settings` in the table (at cold start, and the sweeper on every
/// run), so that writers and the operator's tool find the stack's key
/// schema, home region, sink and ordering there, and a second stack on the
/// table is seen. A failure is logged and does not stop the function:
/// publishing matters more, and the readers say when nothing is recorded.
pub async fn record_settings<T: outbox_engine::PublishStore>(
    store: &T,
    settings: &crate::RecordedSettings,
    deadline: &outbox_engine::Deadline,
) {
    if let Err(e) = store.record_settings(settings, deadline).await {
        tracing::warn!(error = %e, "the settings were not recorded in the table");
    }
}

/// Fails when another outbox stack of this region published from `table`
/// within the last hour and was there first
/// ([`outbox_core::keys::rivals`]): two stacks on one table would each
/// publish a share of the events and delete them, so each sink would miss
/// the other's share. The function then fails (its cold start, or the
/// sweep), which the `Errors` alarms report, and the events stay in the
/// table for the stack that publishes them. One consistent `Query` of the
/// settings records; when it fails, logged, and the function goes on (the
/// check guards against a misconfiguration, it is not a lock).
pub async fn refuse_rivals<T: outbox_engine::PublishStore>(
    store: &T,
    mine: &crate::RecordedSettings,
    deadline: &outbox_engine::Deadline,
) -> Result<(), OtherStack> {
    let table = mine.variable("TABLE_NAME").unwrap_or("the table");
    let records = match store.recorded_settings(deadline).await {
        Ok(records) => records,
        Err(e) => {
            tracing::warn!(error = %e, "the stack settings were not read: another stack on the table would not be seen");
            return Ok(());
        }
    };
    let rivals = outbox_core::keys::rivals(&records, mine, outbox_core::now_utc_millis());
    if rivals.is_empty() {
        return Ok(());
    }
    let named: Vec<String> = rivals
        .iter()
        .map(|r| format!("{} ({}, {})", r.stack, r.function, r.by))
        .collect();
    let message = format!(
        "another outbox stack publishes from {table} in {}: {}. Two stacks on one table would each publish and delete a share of the events, so this stack ({}) does not publish; its events stay in the table. Delete one of the stacks (this one starts once the other has not recorded for three of its sweep periods, an hour at least), or give each its own table (docs/adopt.md, \"One table, one stack\")",
        mine.region,
        named.join("; "),
        if mine.stack.is_empty() { "unnamed" } else { mine.stack.as_str() },
    );
    tracing::error!(rivals = %named.join("; "), "another outbox stack publishes from the table");
    Err(OtherStack(message))
}

#[cfg(feature = "sinks")]
impl EventSink for SinkAdapter {
    fn max_entries(&self) -> usize {
        match self {
            Self::EventBridge(s) => s.max_entries(),
            Self::Sns(s) => s.max_entries(),
            Self::EventBridgeBus(s) => s.max_entries(),
        }
    }
    fn max_bytes(&self) -> usize {
        match self {
            Self::EventBridge(s) => s.max_bytes(),
            Self::Sns(s) => s.max_bytes(),
            Self::EventBridgeBus(s) => s.max_bytes(),
        }
    }
    fn entry_size(&self, item: &OutboxItem) -> usize {
        match self {
            Self::EventBridge(s) => s.entry_size(item),
            Self::Sns(s) => s.entry_size(item),
            Self::EventBridgeBus(s) => s.entry_size(item),
        }
    }
    async fn publish_batch(
        &self,
        items: &[&OutboxItem],
        max_sends: u32,
        sends: &outbox_engine::SendCounter,
    ) -> Vec<EntryOutcome> {
        match self {
            Self::EventBridge(s) => s.publish_batch(items, max_sends, sends).await,
            Self::Sns(s) => s.publish_batch(items, max_sends, sends).await,
            Self::EventBridgeBus(s) => s.publish_batch(items, max_sends, sends).await,
        }
    }
    async fn verify(&self) -> Result<(), SinkError> {
        match self {
            Self::EventBridge(s) => s.verify().await,
            Self::Sns(s) => s.verify().await,
            Self::EventBridgeBus(s) => s.verify().await,
        }
    }
}

/// The outcomes of a call whose answer lists one result per entry in
/// request order (`PutEvents` of both buses): `(entries, returned)` are the
/// entries sent and the results returned; `result(i)` is the `i`th
/// result's error code, message and whether it names an event. A 200 with
/// `FailedEntryCount` > 0 is a partial failure, so each result is read; a
/// result with neither an event nor an error is not a success, nor is a
/// missing one. An answer with more or fewer results than entries cannot
/// be matched to them by position: every entry is then failed, transient
/// (sent again, a duplicate at worst).
#[cfg(any(feature = "eventbridge", feature = "eventbridge-bus"))]
pub(crate) fn in_request_order<'a>(
    (entries, returned): (usize, usize),
    result: impl Fn(usize) -> Option<(Option<&'a str>, Option<&'a str>, bool)>,
    poison: &[&str],
) -> Vec<EntryOutcome> {
    if returned != entries {
        let failure = PublishFailure::new(
            FailureKind::Transient,
            "ResultCountMismatch",
            format!("PutEvents returned {returned} results for {entries} entries"),
        );
        return vec![Err(failure); entries];
    }
    (0..entries)
        .map(|i| match result(i) {
            Some((Some(code), message, _)) => Err(PublishFailure::new(
                classify(code, poison),
                code,
                message.unwrap_or(""),
            )),
            Some((None, _, true)) => Ok(()),
            Some((None, _, false)) => Err(PublishFailure::new(
                FailureKind::Transient,
                "NoEventId",
                "entry has neither an event id nor an error",
            )),
            None => Err(PublishFailure::new(
                FailureKind::Transient,
                "MissingResult",
                "PutEvents returned fewer entries than it was sent",
            )),
        })
        .collect()
}

#[cfg(any(feature = "eventbridge", feature = "eventbridge-bus", feature = "sns"))]
/// Classifies an error code. `poison` lists the codes that mean "this entry
/// can never be accepted" for the sink at hand; anything unknown is
/// [`FailureKind::Rejected`]: kept and reported, never silently dropped.
pub(crate) fn classify(code: &str, poison: &[&str]) -> FailureKind {
    if outbox_core::codes::is_transient(code) {
        FailureKind::Transient
    } else if poison.contains(&code) {
        FailureKind::Poison
    } else {
        FailureKind::Rejected
    }
}

/// Turns a whole-call SDK error (after the SDK's own retries) into the
/// failure of each entry of the call. The code comes from the SDK's error
/// metadata ([`crate::aws::error_code`]), the kind from the SDK's retry
/// classification ([`crate::aws::is_retryable`]): a whole call is never
/// the fault of one entry, so it is transient or rejected, never poison.
#[cfg(any(feature = "eventbridge", feature = "eventbridge-bus", feature = "sns"))]
pub(crate) fn sdk_failure<E>(err: &SdkError<E, Response>) -> PublishFailure
where
    E: ProvideErrorMetadata + ProvideErrorKind + std::error::Error,
{
    let code = crate::aws::error_code(err);
    let kind = if crate::aws::is_retryable(err) {
        FailureKind::Transient
    } else {
        FailureKind::Rejected
    };
    let message = match err {
        SdkError::TimeoutError(_) => "request timed out".to_owned(),
        SdkError::DispatchFailure(_) => "request could not be sent".to_owned(),
        SdkError::ResponseError(_) => "response could not be read".to_owned(),
        SdkError::ServiceError(service) => service.err().message().unwrap_or("").to_owned(),
        _ => "request could not be built".to_owned(),
    };
    PublishFailure::new(kind, code, message).of_whole_call()
}

#[cfg(all(test, any(feature = "eventbridge", feature = "sns")))]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert_eq!(classify("ThrottlingException", &[]), FailureKind::Transient);
        assert_eq!(classify("InternalFailure", &[]), FailureKind::Transient);
        assert_eq!(
            classify("MalformedDetail", &["MalformedDetail"]),
            FailureKind::Poison
        );
        assert_eq!(
            classify("AccessDeniedException", &["MalformedDetail"]),
            FailureKind::Rejected
        );
        assert_eq!(classify("SomethingNew", &[]), FailureKind::Rejected);
    }

    /// Results are matched to entries by position only when there is one
    /// per entry: with one missing (anywhere) or one too many, no entry
    /// is taken as published.
    #[cfg(feature = "eventbridge")]
    #[test]
    fn results_that_do_not_match_the_entries_publish_nothing() {
        let ok = |_: usize| Some((None, None, true));
        let kinds = |outcomes: Vec<EntryOutcome>| -> Vec<Option<(FailureKind, String)>> {
            outcomes
                .into_iter()
                .map(|o| o.err().map(|f| (f.kind, f.code)))
                .collect()
        };
        assert_eq!(kinds(in_request_order((3, 3), ok, &[])), vec![None; 3]);
        let mismatch = Some((FailureKind::Transient, "ResultCountMismatch".to_owned()));
        for returned in [2, 4, 0] {
            assert_eq!(
                kinds(in_request_order((3, returned), ok, &[])),
                vec![mismatch.clone(); 3],
                "{returned} results"
            );
        }
    }
}
