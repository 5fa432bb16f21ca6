//! The contract of the outbox: what a service that writes events, or
//! consumes them, depends on.
//!
//! An event is stored as an outbox item in the same DynamoDB transaction as
//! the change it describes, then published from what was committed (by the
//! stack's publisher and sweeper functions, whose runtime is the
//! `outbox-runtime` crate of the repository, not this one). Delivery is at
//! least once; consumers deduplicate on the envelope's `eventId`.
//!
//! # Layout
//! The value types are at the crate's root; the API areas are its public
//! modules.
//!
//! - [`keys`]: the key schema (outbox item, indexes, shard, attribute
//!   names, the settings records); `keys/schema.rs`: [`KeySchema`], the
//!   names in a user's own table, and the home-region rule (`HOME_REGION`,
//!   `HOME_REGION_RULE`: which region publishes an item).
//! - `envelope.rs`: [`EventEnvelope`], what subscribers receive; event ids
//!   and trace context.
//! - `item.rs`: [`OutboxItem`], the stored form, its codec and size checks.
//! - `error.rs`: [`OutboxError`] (an event that cannot be stored) and
//!   [`DecodeError`] (an item that cannot be read).
//! - [`size`]: service limits and size arithmetic.
//! - [`claim`]: the claim check of events too large for an item or the
//!   sink: [`claim::ClaimCheck`] (the writer's setting), [`claim::PayloadRef`]
//!   (where the whole envelope is, its hash), [`claim::PayloadStore`] (the
//!   S3 port; the client its adapter with feature `s3`).
//! - [`codes`]: the one classification of AWS error codes worth retrying
//!   (the SDK's lists plus the per-entry codes it never sees).
//! - [`transaction`]: [`transaction::OutboxTransaction`], one
//!   `TransactWriteItems` of the caller's actions plus outbox events, limits
//!   checked first, typed cancellation reasons (the writer's and the inbox's
//!   builder).
//! - [`table`]: [`table::ItemTable`], the writer's port to DynamoDB (one
//!   consistent `GetItem`, one `TransactWriteItems`), the SDK client as its
//!   adapter, and `MemoryTable` (feature `testing`) for unit tests.

pub mod claim;
pub mod codes;
#[cfg(feature = "schema")]
pub mod contract;
mod envelope;
mod error;
mod item;
pub mod keys;
pub mod size;
pub mod table;
pub mod transaction;

pub use envelope::{
    is_valid_traceparent, next_event_id, now_utc_millis, ulid_time, xray_trace_header,
    EventEnvelope,
};
pub use error::{ConfigError, DecodeError, OutboxError};
pub use item::OutboxItem;
pub use keys::{ItemKey, KeySchema};
