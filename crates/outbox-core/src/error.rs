//! Errors of the outbox core.

use ulid::Ulid;

/// Why an event could not be turned into an outbox item. Callers branch on
/// the kind: every variant is the caller's input, none is retryable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutboxError {
    /// The event breaks a rule (an aggregate id a FIFO group cannot carry).
    #[error("event is invalid: {0}")]
    InvalidEvent(String),
    /// The sink would refuse the entry for its size.
    #[error(
        "event {event_id} would be a {size}-byte entry for the configured sink; its limit is {limit} bytes"
    )]
    EventTooLarge {
        /// The event.
        event_id: Ulid,
        /// Its entry's size as the sink counts it.
        size: usize,
        /// The sink's limit (`MAX_EVENT_BYTES`).
        limit: usize,
    },
    /// The item would exceed DynamoDB's item limit.
    #[error("outbox item for event {event_id} would be {size} bytes; the DynamoDB limit is {limit} bytes")]
    ItemTooLarge {
        /// The event.
        event_id: Ulid,
        /// The item's size.
        size: usize,
        /// DynamoDB's limit.
        limit: usize,
    },
    /// The event does not serialize.
    #[error("event could not be serialized: {0}")]
    Serialize(String),
    /// Larger than a claim check takes (`claim::MAX_PAYLOAD_BYTES`).
    #[error("event {event_id} is {size} bytes; a claim check takes at most {limit}")]
    PayloadTooLarge {
        /// The event.
        event_id: Ulid,
        /// Its envelope's size.
        size: usize,
        /// The limit.
        limit: usize,
    },
}

impl OutboxError {
    /// The refusal's code, the same in every writer package.
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidEvent(_) => "InvalidEvent",
            Self::EventTooLarge { .. } => "EventTooLarge",
            Self::ItemTooLarge { .. } => "ItemTooLarge",
            Self::Serialize(_) => "Serialize",
            Self::PayloadTooLarge { .. } => "PayloadTooLarge",
        }
    }
}

/// Why a stored outbox image could not be decoded. Such an item can never be
/// published as it is: it is dead-lettered, not retried.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("outbox item does not decode: {0}")]
pub struct DecodeError(pub String);

/// A configuration variable is missing or cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A required variable is not set.
    #[error("environment variable {0} is required but not set")]
    Missing(&'static str),
    /// A variable is set to something unusable.
    #[error("environment variable {name}={value:?} is invalid: {reason}")]
    Invalid {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl ConfigError {
    /// `raw`, the value of the variable `name`, as a whole number from
    /// `min` to `max`: the one parse of every numeric setting.
    pub fn bounded<T>(name: &'static str, raw: &str, min: T, max: T) -> Result<T, Self>
    where
        T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
    {
        let invalid = |reason: String| Self::Invalid {
            name,
            value: raw.to_owned(),
            reason,
        };
        let value: T = raw
            .trim()
            .parse()
            .map_err(|_| invalid("not a whole number".to_owned()))?;
        if value < min || value > max {
            return Err(invalid(format!("must be between {min} and {max}")));
        }
        Ok(value)
    }
}
