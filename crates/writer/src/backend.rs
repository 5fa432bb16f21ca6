//! [`BackendError`]: a failure below the domain, shared by the service and
//! its idempotency records (its own module, so neither imports the other
//! for it).

use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use outbox_core::transaction::TransactionError;
use outbox_core::OutboxError;

/// A failure below the domain (DynamoDB, encoding), kept with its cause
/// for the log; the API answers 500 without it.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The transaction failed for a reason no condition explains.
    #[error("the transaction failed")]
    Transaction(#[source] TransactionError),
    /// A read failed.
    #[error("reading an item failed")]
    Read(#[source] Box<SdkError<GetItemError, HttpResponse>>),
    /// A stored order does not decode.
    #[error("a stored order does not decode")]
    Decode(#[source] serde_dynamo::Error),
    /// An item does not encode.
    #[error("an item does not encode")]
    Encode(#[source] serde_dynamo::Error),
    /// A response does not encode.
    #[error("a response does not encode")]
    Json(#[source] serde_json::Error),
    /// The event could not be built.
    #[error("the event could not be built")]
    Event(#[source] OutboxError),
    /// A request could not be built.
    #[error("a DynamoDB request could not be built")]
    Request(#[source] aws_sdk_dynamodb::error::BuildError),
}
