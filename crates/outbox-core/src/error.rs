//! Errors of the outbox core.

use ulid::Ulid;

/// Why an event could not be turned into an outbox item. Callers branch on
/// the kind: every variant is the caller's input, none is retryable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboxError {
    #[error("event is invalid: {0}")]
    InvalidEvent(String),
    #[error(
        "event {event_id} would be a {size}-byte entry for the configured sink; its limit is {limit} bytes"
    )]
    EventTooLarge {
        event_id: Ulid,
        size: usize,
        limit: usize,
    },
    #[error("outbox item for event {event_id} would be {size} bytes; the DynamoDB limit is {limit} bytes")]
    ItemTooLarge {
        event_id: Ulid,
        size: usize,
        limit: usize,
    },
    #[error("event could not be serialized: {0}")]
    Serialize(String),
}

/// Why a stored outbox image could not be decoded. Such an item can never be
/// published as it is: it is dead-lettered, not retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("outbox item does not decode: {0}")]
pub struct DecodeError(pub String);
