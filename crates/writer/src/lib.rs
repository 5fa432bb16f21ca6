//! The writer: a business change and its outbox events in one DynamoDB
//! transaction, as a library any service can use and as the orders API
//! behind API Gateway.
//!
//! # Layout
//! - [`transaction`] (from `outbox-core`): [`OutboxTransaction`], the reusable builder: the
//!   caller's puts, updates, condition checks and deletes plus events, one
//!   `TransactWriteItems`, limits checked first, typed cancellation reasons.
//! - [`orders`]: the order domain and request validation.
//! - [`service`]: [`OrderService`]: create, pay and read orders, with
//!   idempotency keys stored in the same transaction.
//! - [`api`]: the HTTP API (API Gateway HTTP API, payload v2): routing,
//!   body checks, one error enum per endpoint mapped to status codes.

pub mod api;
pub mod orders;
pub mod service;
/// The transaction builder lives in `outbox-core` (the inbox library uses it
/// too); it is re-exported here, where users of the writer look for it.
pub use outbox_core::transaction;

pub use service::{IdempotencyKey, OrderService, Outcome};
pub use transaction::{
    Committed, FailedCondition, OutboxSettings, OutboxTransaction, TransactionError,
};
