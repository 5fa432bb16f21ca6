//! A claim check resolved on the consumer's side: [`resolve`] turns a
//! stub envelope (`payloadRef`, `payload: null`: an event too large for
//! the sink, docs/events.md "Large events") into the whole envelope from
//! its S3 object, checked against the recorded size and SHA-256 and
//! against the stub's own event; any other envelope is returned as it is.

use outbox_core::claim::{PayloadError, PayloadStore};
use outbox_core::EventEnvelope;
use ulid::Ulid;

/// Why a claim check could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClaimError {
    /// The object does not exist (expired, deleted): the event cannot be
    /// read. Not retryable.
    #[error("the payload of event {event_id} is missing ({key})")]
    Missing {
        /// The event.
        event_id: Ulid,
        /// The object's key.
        key: String,
    },
    /// The object is not the one the claim check records, or not the
    /// stub's event. Not retryable.
    #[error("the payload of event {event_id} is not the one its claim check records: {reason}")]
    Mismatch {
        /// The event.
        event_id: Ulid,
        /// What differs.
        reason: String,
    },
    /// S3 failed: throttling, a 5xx or the connection (`transient`), or a
    /// refusal such as `AccessDenied`.
    #[error("the payload of event {event_id} was not read: {code}")]
    Failed {
        /// The event.
        event_id: Ulid,
        /// S3's error code.
        code: String,
        /// Whether a retry soon may help.
        transient: bool,
    },
}

impl ClaimError {
    /// Whether reading the object again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Failed {
                transient: true,
                ..
            }
        )
    }
}

/// The whole envelope of `envelope`: itself, or, for a claim check's stub,
/// the envelope its S3 object holds (its size and SHA-256 checked, and its
/// event id, type, aggregate and version the stub's).
pub async fn resolve(
    envelope: EventEnvelope,
    payloads: &impl PayloadStore,
) -> Result<EventEnvelope, ClaimError> {
    let Some(payload_ref) = &envelope.payload_ref else {
        return Ok(envelope);
    };
    let event_id = envelope.event_id;
    let body = payloads
        .get_payload(payload_ref)
        .await
        .map_err(|e| match e {
            PayloadError::Missing { key } => ClaimError::Missing { event_id, key },
            PayloadError::Failed {
                code, transient, ..
            } => ClaimError::Failed {
                event_id,
                code,
                transient,
            },
        })?;
    let mismatch = |reason: String| ClaimError::Mismatch { event_id, reason };
    payload_ref
        .check(&body)
        .map_err(|e| mismatch(e.to_string()))?;
    let whole: EventEnvelope = serde_json::from_slice(&body)
        .map_err(|e| mismatch(format!("not an envelope ({:?} error)", e.classify())))?;
    let same = whole.event_id == envelope.event_id
        && whole.event_type == envelope.event_type
        && whole.aggregate_id == envelope.aggregate_id
        && whole.aggregate_version == envelope.aggregate_version
        && whole.payload_ref.is_none();
    if !same {
        return Err(mismatch("the object holds another event".into()));
    }
    Ok(whole)
}

#[cfg(test)]
mod tests {
    use super::*;
    use outbox_core::claim::{MemoryPayloads, PayloadRef};

    fn whole() -> EventEnvelope {
        EventEnvelope::new(
            "OrderCreated",
            "Order",
            "o-1",
            1,
            serde_json::json!({"orderId": "o-1", "note": "x".repeat(100)}),
        )
        .unwrap()
    }

    fn stored(payloads: &MemoryPayloads, envelope: &EventEnvelope) -> EventEnvelope {
        let body = envelope.to_json().unwrap().into_bytes();
        let key = format!("outbox/{}", envelope.event_id);
        payloads.set("b", &key, Some(body.clone()));
        envelope.stub(PayloadRef::of("b", key, &body))
    }

    #[tokio::test]
    async fn a_stub_resolves_to_its_checked_envelope_and_others_pass_through() {
        let payloads = MemoryPayloads::new();
        let event = whole();
        let stub = stored(&payloads, &event);
        assert_eq!(resolve(stub, &payloads).await, Ok(event.clone()));
        assert_eq!(resolve(event.clone(), &payloads).await, Ok(event));
    }

    #[tokio::test]
    async fn a_missing_altered_or_foreign_object_is_refused_for_good() {
        let payloads = MemoryPayloads::new();
        let event = whole();
        let stub = stored(&payloads, &event);
        let key = stub.payload_ref.clone().unwrap().key;
        // Another event's envelope under this event's reference.
        let other = whole();
        let foreign = other.to_json().unwrap().into_bytes();
        payloads.set("b", &key, Some(foreign.clone()));
        let mut relabelled = stub.clone();
        relabelled.payload_ref = Some(PayloadRef::of("b", key.clone(), &foreign));
        let refused = resolve(relabelled, &payloads).await.unwrap_err();
        assert!(matches!(refused, ClaimError::Mismatch { .. }), "{refused}");
        let refused = resolve(stub.clone(), &payloads).await.unwrap_err();
        assert!(matches!(refused, ClaimError::Mismatch { .. }), "{refused}");
        payloads.set("b", &key, None);
        let refused = resolve(stub, &payloads).await.unwrap_err();
        assert!(matches!(refused, ClaimError::Missing { .. }));
        assert!(!refused.is_retryable());
    }
}
