//! The writer: a business change and its outbox events in one DynamoDB
//! transaction, as a library any service can use and as the orders API
//! behind API Gateway.
//!
//! # Layout
//! - [`transaction`] (from `outbox-core`): [`OutboxTransaction`], the reusable builder: the
//!   caller's puts, updates, condition checks and deletes plus events, one
//!   `TransactWriteItems`, limits checked first, typed cancellation reasons.
//! - `orders.rs`: the order domain ([`Order`], [`OrderStatus`]) and request
//!   validation ([`CreateOrderRequest`] into [`NewOrder`]).
//! - `caller.rs`: [`Caller`], the authenticated principal that owns orders.
//! - `idempotency.rs`: [`IdempotencyKey`]s scoped to their caller and the
//!   records that replay a command's response.
//! - `backend.rs`: [`BackendError`], a failure below the domain (DynamoDB,
//!   encoding), for the service and the idempotency records alike.
//! - `service.rs`: [`OrderService`]: create, pay and read a caller's orders,
//!   with idempotency records stored in the same transaction, through the
//!   port [`ItemTable`](outbox_core::table::ItemTable) (the SDK client;
//!   `MemoryTable` in its unit tests).
//! - `api.rs`: [`Api`], the HTTP API (API Gateway HTTP API, payload v2): the caller
//!   from the authorizer, routing, body checks, one error enum ([`OrderError`])
//!   mapped to status codes.
//! - `schemas` (feature `schema`): the events' JSON Schemas, from these
//!   types, as checked in under `schemas/`.

mod api;
mod backend;
mod caller;
mod idempotency;
mod orders;
#[cfg(feature = "schema")]
pub mod schemas;
mod service;
/// The transaction builder lives in `outbox-core` (the inbox library uses it
/// too); it is re-exported here, where users of the writer look for it.
pub use outbox_core::transaction;

pub use api::{Api, ApiError, ErrorCode, LOCAL_CALLER_ENV, MAX_BODY_BYTES};
pub use backend::BackendError;
pub use caller::Caller;
pub use idempotency::{IdempotencyKey, StoredResponse};
pub use orders::{
    CreateOrderRequest, FieldError, NewOrder, Order, OrderLine, OrderLineRequest, OrderStatus,
    PaymentRequest, MAX_LINES, MAX_SAFE_CENTS,
};
pub use service::{OrderError, OrderService, Reply};
pub use transaction::{
    Committed, FailedCondition, OutboxSettings, OutboxTransaction, TransactionError,
};
