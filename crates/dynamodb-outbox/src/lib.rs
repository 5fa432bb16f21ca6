//! A transactional outbox for Amazon DynamoDB.
//!
//! Saving a change and then publishing its event is a dual write: a crash
//! between the two loses the event, the reverse order announces one that
//! never happened. With an outbox the event is stored **in the same
//! `TransactWriteItems`** as the change, as an item of the aggregate's own
//! item collection; the stack's publisher (a Lambda function on the
//! table's stream) and sweeper publish it afterwards to EventBridge or SNS,
//! at least once, with a stable `eventId` that consumers deduplicate on.
//!
//! This crate is the library surface a service depends on: the key schema,
//! the envelope, the transaction builder, and the consumer's inbox. The
//! functions and the SAM stack are in the project's repository
//! (`docs/adopt.md` takes a team from an existing table to events flowing).
//!
//! # Layout
//! - [`KeySchema`] and [`keys`]: the names of the outbox in *your* table
//!   (partition and sort key, the outbox prefix, the pending and dead-letter
//!   indexes, the TTL attribute), from the environment or set in code.
//! - [`EventEnvelope`]: what subscribers receive.
//! - [`transaction`]: [`transaction::OutboxTransaction`], your puts,
//!   updates, condition checks and deletes plus events in one
//!   `TransactWriteItems`, every limit checked before the call;
//!   [`transaction::OutboxSettings::from_stack`], the stack's settings read
//!   from the table, so the writer never restates them.
//! - [`OutboxItem`] and [`size`]: the stored form and the service limits.
//! - [`claim`]: the claim check of events too large for an item or the sink
//!   (the stack's `PayloadBucket`): [`claim::ClaimCheck`], [`claim::PayloadRef`],
//!   and the S3 client as [`claim::PayloadStore`] with feature `s3`, for
//!   [`transaction::OutboxTransaction::send_with_payloads`].
//! - [`inbox`] (feature `inbox`, on by default): an inbox record in the
//!   consumer's own transaction, and version guards.
//! - `doctests.rs` (only under `cfg(doctest)`): the Rust examples of the
//!   repository's `README.md` and `docs/`, compiled against this crate.
//!
//! Nothing here publishes: the relay, the sinks and the store adapter are the
//! stack's functions' own runtime, so a service that writes or consumes
//! events compiles none of them.
//!
//! # Example
//!
//! An order and its `OrderCreated`, in one transaction, on a table keyed
//! `pk`/`sk`:
//!
//! ```no_run
//! use aws_sdk_dynamodb::types::{AttributeValue, Put};
//! use dynamodb_outbox::transaction::{OutboxSettings, OutboxTransaction};
//! use dynamodb_outbox::EventEnvelope;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let client = aws_sdk_dynamodb::Client::new(&aws_config::load_from_env().await);
//! // The stack's key schema, shards, home region and size limit, as its
//! // publisher and sweeper recorded them in the table: one read, held for
//! // the life of the process.
//! let settings = OutboxSettings::from_stack(&client, "orders")
//!     .key_names("pk", "sk")
//!     .load()
//!     .await?;
//!
//! let order = Put::builder()
//!     .table_name("orders")
//!     .item("pk", AttributeValue::S("ORDER#42".into()))
//!     .item("sk", AttributeValue::S("META".into()))
//!     .condition_expression("attribute_not_exists(pk)")
//!     .build()?;
//! let created = EventEnvelope::new(
//!     "OrderCreated", "Order", "42", 1,
//!     serde_json::json!({"orderId": "42", "totalCents": 1250}),
//! )?;
//!
//! OutboxTransaction::new(&settings)
//!     .put("order", order)
//!     .event("ORDER#42", &created)
//!     .send(&client)
//!     .await?;
//! # Ok(())
//! # }
//! ```

// The examples of this crate and of the docs pages (`doctests.rs`) fail on
// a warning, an unused import among them.
#![doc(test(attr(deny(warnings), allow(dead_code))))]

#[cfg(doctest)]
mod doctests;

pub use outbox_core::{
    claim, codes, keys, size, transaction, DecodeError, EventEnvelope, ItemKey, KeySchema,
    OutboxError, OutboxItem,
};

#[cfg(feature = "inbox")]
pub use inbox;
