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
//!   adapters, ordered relay with retries).
//! - [`store`]: deletes, dead letters and failure records (port + DynamoDB).
//! - [`retry`]: backoff with jitter, bounded by the Lambda deadline.
//! - [`metrics`]: CloudWatch Embedded Metric Format lines.
//! - [`telemetry`]: JSON logs and AWS configuration for the binaries.

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

pub use config::{Config, ConfigError, SinkConfig};
pub use envelope::EventEnvelope;
pub use error::{DecodeError, OutboxError};
pub use item::OutboxItem;
pub use keys::ItemKey;
