//! The functions' runtime: the AWS adapters of the publishing engine
//! (`outbox_engine`, which holds the relay and the ports, with no AWS crate
//! of its own) and the functions' plumbing, for the publisher, the sweeper
//! and `outboxctl`, and what the writer and the projector functions need
//! to start. Published for `outboxctl`, with no stable API: a service
//! depends on `dynamodb-outbox` (the contract, `outbox_core`), never on
//! this.
//!
//! # Layout
//! - `publish/`: the sink adapters (EventBridge and SNS, behind the
//!   features `eventbridge` and `sns`; `SinkAdapter`, both, from the
//!   configuration; `AnySink`, it resolving claim checks through S3) of
//!   the engine's `EventSink`, and the publishing
//!   functions' cold start and one-stack check.
//! - `dynamo/`: [`DynamoStore`], the DynamoDB adapter of the engine's store
//!   port (`PublishStore`, `SweepStore`, `OperatorStore`): `mod.rs` (the
//!   client, calls, conditions, codecs, the item-collection range reads),
//!   one file per role (`publish.rs`, `sweep.rs`, `operator.rs`), and
//!   `adopt.rs` ([`DynamoStore::adopt`], a lost region's items handed
//!   over, for `outboxctl adopt-region`); [`record_shard_count`], the shard
//!   high-water mark.
//! - `config.rs`: [`Config`] from the environment: the sink, the ordering,
//!   the home-region rule (`HOME_REGION`, `HOME_REGION_RULE`), and
//!   [`recorded_variables`], the variables each function records at cold
//!   start (and again, with the one-stack check, the sweeper on every run
//!   and a publisher every five minutes: [`Heartbeat`]) in its
//!   stack settings record (`outbox_core::keys::RecordedSettings`; written
//!   by [`record_settings`], read by the store's
//!   `recorded_settings` and [`refuse_rivals`]).
//! - `queue.rs` (feature `sqs`): SQS batches as Lambda's SQS mapping handles
//!   them (receive, hand over, delete what was not reported), for
//!   `outboxctl redrive-on-failure` and the local kit.
//! - `on_failure.rs` (feature `on-failure`): [`redrive_messages`], an SQS
//!   batch of the OnFailure queue redriven window by window through the
//!   engine's sweep; `sweep_metrics.rs`: a sweep's report as EMF
//!   ([`SweepMetrics`]) and its log line ([`log_sweep`]).
//! - `metrics.rs`: CloudWatch Embedded Metric Format lines ([`emf_line`],
//!   [`emf_lines`]).
//! - `aws.rs`: client construction ([`load_sdk_config`]: explicit retry and
//!   timeout settings, the HTTP client) and the classification of SDK
//!   errors from their metadata ([`error_code`], [`is_retryable`]).
//!
//! Modules are private; the crate's root re-exports what the functions,
//! `outboxctl`, the local kit and the tests call.
//! - `telemetry.rs`: JSON logs for the binaries ([`init_logging`]).

mod aws;
mod config;
mod dynamo;
mod metrics;
#[cfg(feature = "on-failure")]
mod on_failure;
mod publish;
#[cfg(feature = "sqs")]
mod queue;
mod sweep_metrics;
mod telemetry;

pub use aws::{
    error_code, error_line, is_retryable, load as load_sdk_config, loader as sdk_config_loader,
    CallError, CONNECT_TIMEOUT, SDK_MAX_ATTEMPTS,
};
pub use config::{
    recorded_variables, Config, SinkConfig, SinkSettings, DEFAULT_OUTBOX_SHARDS, VARIABLES,
};
pub use dynamo::{record_shard_count, DynamoStore};
pub use metrics::{
    emf_line, emf_lines, stack_name, Distribution, Unit, COMMIT_TO_PUBLISH, CORE_METRICS,
    DETAILED_METRICS_VAR, NAMESPACE,
};
#[cfg(feature = "on-failure")]
pub use on_failure::redrive_messages;
pub use outbox_core::keys::RecordedSettings;
#[cfg(feature = "eventbridge-bus")]
pub use publish::bus::EventBusSink;
#[cfg(feature = "eventbridge")]
pub use publish::eventbridge::EventBridgeSink;
#[cfg(feature = "sns")]
pub use publish::sns::SnsSink;
#[cfg(feature = "sinks")]
pub use publish::{cold_start, connect, sink_from_config, AnySink, ColdStartError, SinkAdapter};
pub use publish::{
    record_settings, refuse_rivals, settings_record, Heartbeat, OtherStack, PUBLISHER_HEARTBEAT,
};
#[cfg(feature = "sqs")]
pub use queue::{
    batch_event, delete_batch, delete_message, queue_depth, receive_batch,
    receive_batch_with_attributes, settle_batch,
};
pub use sweep_metrics::{log_sweep, SweepMetrics};
pub use telemetry::{error_chain, init_logging};
