//! The outbox core shared by the writer, the publisher and the sweeper.
//!
//! An event is stored as an outbox item in the same DynamoDB transaction as
//! the change it describes, then published from what was committed. Delivery
//! is at least once; consumers deduplicate on the envelope's `eventId`.
//!
//! # Layout
//! - [`keys`]: the key schema (business item, outbox item, indexes, shard).
//! - [`envelope`]: [`EventEnvelope`], what subscribers receive.
//! - [`item`]: [`OutboxItem`], the stored form, its codec and size checks.
//! - [`size`]: service limits and size arithmetic.
//! - [`config`]: [`Config`] from the environment.
//! - [`publish`]: the one publishing module (sink port, EventBridge and SNS
//!   adapters, and [`publish::relay`]: publishing and the handling of every
//!   outcome, for the publisher and the sweeper alike).
//! - [`store`]: the store port and its DynamoDB adapter: deletes, dead
//!   letters, failure records, the pending and dead-letter indexes, the
//!   shard high-water mark.
//! - [`retry`]: the one backoff type, the deadline that bounds every call,
//!   and the classification of retryable error codes.
//! - [`metrics`]: CloudWatch Embedded Metric Format lines.
//! - [`transaction`]: [`transaction::OutboxTransaction`], one
//!   `TransactWriteItems` of the caller's actions plus outbox events, limits
//!   checked first, typed cancellation reasons (the writer's and the inbox's
//!   builder).
//! - [`aws`]: client construction (explicit retry and timeout settings, the
//!   HTTP client) and the classification of SDK errors from their metadata.
//! - [`telemetry`]: JSON logs for the binaries.

pub mod aws;
pub mod config;
pub mod envelope;
pub mod error;
pub mod item;
pub mod keys;
pub mod metrics;
pub mod publish;
pub mod retry;
pub mod size;
pub mod store;
pub mod telemetry;
pub mod transaction;

pub use config::{Config, ConfigError, SinkConfig};
pub use envelope::EventEnvelope;
pub use error::{DecodeError, OutboxError};
pub use item::OutboxItem;
pub use keys::ItemKey;
