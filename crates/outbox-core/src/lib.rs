//! The outbox core shared by the writer, the publisher and the sweeper.
//!
//! An event is stored as an outbox item in the same DynamoDB transaction as
//! the change it describes, then published from what was committed. Delivery
//! is at least once; consumers deduplicate on the envelope's `eventId`.
//!
//! # Layout
//! The value types are at the crate's root; the API areas are its public
//! modules.
//!
//! - [`keys`]: the key schema (business item, outbox item, indexes, shard,
//!   attribute names) and [`KeySchema`], the names in a user's own table.
//! - `envelope.rs`: [`EventEnvelope`], what subscribers receive; event ids
//!   and trace context.
//! - `item.rs`: [`OutboxItem`], the stored form, its codec and size checks.
//! - `config.rs`: [`Config`] from the environment.
//! - `error.rs`: [`OutboxError`] (an event that cannot be stored) and
//!   [`DecodeError`] (an item that cannot be read).
//! - [`size`]: service limits and size arithmetic.
//! - [`publish`]: the one publishing module (sink port, EventBridge and SNS
//!   adapters, and [`publish::relay`]: publishing and the handling of every
//!   outcome, for the publisher and the sweeper alike).
//! - [`store`]: the store port ([`store::OutboxStore`]) and its adapters:
//!   DynamoDB, and in memory for tests (feature `testing`). Deletes, dead
//!   letters, failure records, the pending and dead-letter indexes, the
//!   shard high-water mark, the operator's redrives and discards.
//! - [`retry`]: the one backoff type, the deadline that bounds every call,
//!   the retry policy for what the SDK cannot see (unprocessed items, failed
//!   entries), and the classification of retryable error codes.
//! - [`metrics`]: CloudWatch Embedded Metric Format lines.
//! - [`transaction`]: [`transaction::OutboxTransaction`], one
//!   `TransactWriteItems` of the caller's actions plus outbox events, limits
//!   checked first, typed cancellation reasons (the writer's and the inbox's
//!   builder).
//! - [`aws`]: client construction (explicit retry and timeout settings, the
//!   HTTP client) and the classification of SDK errors from their metadata.
//! - [`telemetry`]: JSON logs for the binaries.

pub mod aws;
mod config;
mod envelope;
mod error;
mod item;
pub mod keys;
pub mod metrics;
pub mod publish;
pub mod retry;
pub mod size;
pub mod store;
pub mod telemetry;
pub mod transaction;

pub use config::{
    Config, ConfigError, Ordering, RecordedSettings, SinkConfig, SinkSettings,
    DEFAULT_OUTBOX_SHARDS, DEFAULT_SEND_CONCURRENCY, VARIABLES,
};
pub use envelope::{
    is_valid_traceparent, next_event_id, now_utc_millis, ulid_time, xray_trace_header,
    EventEnvelope,
};
pub use error::{DecodeError, OutboxError};
pub use item::OutboxItem;
pub use keys::{ItemKey, KeySchema};
