//! The functions' runtime: what the publisher, the sweeper and `outboxctl`
//! share, and what the writer and the projector functions need to start.
//! Not published: a service depends on `dynamodb-outbox` (the contract,
//! `outbox_core`), never on this.
//!
//! # Layout
//! - [`publish`]: the one publishing module (sink port, EventBridge and SNS
//!   adapters behind the features `eventbridge` and `sns`, and
//!   [`publish::relay`]: publishing and the handling of every outcome, for
//!   the publisher, the sweeper and the operator's redrive alike), and
//!   `publish/fake.rs`: [`publish::FakeSink`], the one configurable sink of
//!   tests and benches (feature `testing`).
//! - [`store`]: the store port, by role ([`store::PublishStore`],
//!   [`store::SweepStore`], [`store::OperatorStore`]), and its adapters:
//!   DynamoDB, and in memory for tests (feature `testing`). Deletes, dead
//!   letters, failure records, the pending and dead-letter indexes, the
//!   shard high-water mark, the operator's redrives and discards, and a
//!   lost region's adoption (`store::DynamoStore::adopt`, for
//!   `outboxctl adopt-region`).
//! - `config.rs`: [`Config`] from the environment: the sink, the ordering,
//!   the home-region rule (`HOME_REGION`, `HOME_REGION_RULE`), and
//!   [`recorded_variables`], the variables each function records at cold
//!   start (and again, with the one-stack check, the sweeper on every run
//!   and a publisher every five minutes: [`publish::Heartbeat`]) in its
//!   stack settings record (`outbox_core::keys::RecordedSettings`; written
//!   by [`publish::record_settings`], read by the store's
//!   `recorded_settings` and [`publish::refuse_rivals`]).
//! - [`retry`]: the one backoff type, the deadline that bounds every call,
//!   the retry policy for what the SDK cannot see (unprocessed items, failed
//!   entries); the codes worth retrying are `outbox_core::codes`.
//! - `queue` (feature `sqs`): SQS batches as Lambda's SQS mapping handles
//!   them (receive, hand over, delete what was not reported), for
//!   `outboxctl redrive-on-failure` and the local kit.
//! - [`metrics`]: CloudWatch Embedded Metric Format lines.
//! - [`aws`]: client construction (explicit retry and timeout settings, the
//!   HTTP client) and the classification of SDK errors from their metadata.
//! - [`telemetry`]: JSON logs for the binaries.

pub mod aws;
mod config;
pub mod metrics;
pub mod publish;
#[cfg(feature = "sqs")]
pub mod queue;
pub mod retry;
pub mod store;
pub mod telemetry;

pub use config::{
    recorded_variables, Config, Ordering, SinkConfig, SinkSettings, DEFAULT_OUTBOX_SHARDS,
    DEFAULT_SEND_CONCURRENCY, VARIABLES,
};
pub use outbox_core::keys::RecordedSettings;
