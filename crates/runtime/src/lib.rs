//! The functions' runtime: the AWS adapters of the publishing engine
//! (`outbox_engine`, which holds the relay and the ports, with no AWS crate
//! of its own) and the functions' plumbing, for the publisher, the sweeper
//! and `outboxctl`, and what the writer and the projector functions need
//! to start. Published for `outboxctl`, with no stable API: a service
//! depends on `dynamodb-outbox` (the contract, `outbox_core`), never on
//! this.
//!
//! # Layout
//! - [`publish`]: the sink adapters (EventBridge and SNS, behind the
//!   features `eventbridge` and `sns`; `AnySink`, both, from the
//!   configuration) of the engine's `EventSink`, and the publishing
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
//!   and a publisher every five minutes: [`publish::Heartbeat`]) in its
//!   stack settings record (`outbox_core::keys::RecordedSettings`; written
//!   by [`publish::record_settings`], read by the store's
//!   `recorded_settings` and [`publish::refuse_rivals`]).
//! - `queue` (feature `sqs`): SQS batches as Lambda's SQS mapping handles
//!   them (receive, hand over, delete what was not reported), for
//!   `outboxctl redrive-on-failure` and the local kit.
//! - [`metrics`]: CloudWatch Embedded Metric Format lines.
//! - [`aws`]: client construction (explicit retry and timeout settings, the
//!   HTTP client) and the classification of SDK errors from their metadata.
//! - [`telemetry`]: JSON logs for the binaries.

pub mod aws;
mod config;
mod dynamo;
pub mod metrics;
pub mod publish;
#[cfg(feature = "sqs")]
pub mod queue;
pub mod telemetry;

pub use config::{
    recorded_variables, Config, SinkConfig, SinkSettings, DEFAULT_OUTBOX_SHARDS, VARIABLES,
};
pub use dynamo::{record_shard_count, DynamoStore};
pub use outbox_core::keys::RecordedSettings;
