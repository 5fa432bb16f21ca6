//! The event envelope: what subscribers receive as the EventBridge `Detail`
//! (or the SNS message body).

use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use ulid::{Generator, Ulid};

use crate::error::OutboxError;

/// The published form of an event. Consumers deduplicate on `eventId`, which
/// is the same on every delivery of the same event; EventBridge's own `id`
/// differs between deliveries and must not be used for that.
///
/// Readers ignore fields they do not know: a field may be added within a
/// `schemaVersion` (docs/events.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EventEnvelope {
    /// The event's stable id (a ULID): the same on every delivery.
    /// Consumers deduplicate on it.
    #[cfg_attr(
        feature = "schema",
        schemars(with = "String", regex(pattern = r"^[0-9A-HJKMNP-TV-Z]{26}$"))
    )]
    pub event_id: Ulid,
    /// What happened, e.g. `OrderCreated`.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 128)))]
    pub event_type: String,
    /// The version of `payload`'s shape for this `eventType`.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub schema_version: u32,
    /// The kind of aggregate that changed, e.g. `Order`.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 128)))]
    pub aggregate_type: String,
    /// Which aggregate changed.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 256)))]
    pub aggregate_id: String,
    /// The aggregate's version after the change: 1, 2, … per aggregate.
    /// Consumers apply an event only over an older version.
    #[cfg_attr(
        feature = "schema",
        schemars(range(min = 1, max = 9_007_199_254_740_991u64))
    )]
    pub aggregate_version: u64,
    /// When the change was committed (RFC 3339, UTC, milliseconds).
    #[serde(with = "time::serde::rfc3339")]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "String", extend("format" = "date-time"))
    )]
    pub occurred_at: OffsetDateTime,
    /// The W3C trace context of the request that made the change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "schema",
        schemars(regex(pattern = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"))
    )]
    pub traceparent: Option<String>,
    /// State-carrying: the full aggregate after the change, not only its id.
    /// `null` in a claim check's stub, whose `payloadRef` says where the
    /// whole envelope is.
    pub payload: serde_json::Value,
    /// Only in a claim check's stub (an event too large for the sink): the
    /// S3 object holding the whole envelope, its SHA-256 and size
    /// (docs/events.md, "Large events").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_ref: Option<crate::claim::PayloadRef>,
}

impl EventEnvelope {
    /// A new envelope with a fresh event id and the current time.
    ///
    /// `event_type` and `aggregate_type` are non-empty identifiers of at most
    /// 128 characters (letters, digits, `.`, `_`, `-`); `traceparent`, when
    /// given, must be a W3C `traceparent` header value.
    pub fn new(
        event_type: &str,
        aggregate_type: &str,
        aggregate_id: &str,
        aggregate_version: u64,
        payload: serde_json::Value,
    ) -> Result<Self, OutboxError> {
        check_name("eventType", event_type)?;
        check_name("aggregateType", aggregate_type)?;
        if aggregate_id.is_empty() || aggregate_id.len() > 256 {
            return Err(OutboxError::InvalidEvent(
                "aggregateId must be 1 to 256 bytes".into(),
            ));
        }
        let event_id = next_event_id();
        Ok(Self {
            event_id,
            event_type: event_type.to_owned(),
            schema_version: 1,
            aggregate_type: aggregate_type.to_owned(),
            aggregate_id: aggregate_id.to_owned(),
            aggregate_version,
            occurred_at: ulid_time(event_id),
            traceparent: None,
            payload,
            payload_ref: None,
        })
    }

    /// Sets the schema version of the payload.
    pub fn with_schema_version(mut self, version: u32) -> Self {
        self.schema_version = version;
        self
    }

    /// Attaches a W3C trace context, validated.
    pub fn with_traceparent(mut self, traceparent: &str) -> Result<Self, OutboxError> {
        if !is_valid_traceparent(traceparent) {
            return Err(OutboxError::InvalidEvent(
                "traceparent is not a W3C traceparent value".into(),
            ));
        }
        self.traceparent = Some(traceparent.to_owned());
        Ok(self)
    }

    /// The JSON published as `Detail`.
    pub fn to_json(&self) -> Result<String, OutboxError> {
        serde_json::to_string(self).map_err(|e| OutboxError::Serialize(e.to_string()))
    }

    /// The claim check's stub of this envelope: every field but `payload`,
    /// which is `null`, and `payloadRef`, which names the object holding
    /// the whole envelope.
    pub fn stub(&self, payload_ref: crate::claim::PayloadRef) -> Self {
        Self {
            payload: serde_json::Value::Null,
            payload_ref: Some(payload_ref),
            ..self.clone_without_payload()
        }
    }

    /// Whether this is a claim check's stub, whose whole envelope is the
    /// object its `payloadRef` names.
    pub fn is_stub(&self) -> bool {
        self.payload_ref.is_some()
    }

    fn clone_without_payload(&self) -> Self {
        Self {
            event_id: self.event_id,
            event_type: self.event_type.clone(),
            schema_version: self.schema_version,
            aggregate_type: self.aggregate_type.clone(),
            aggregate_id: self.aggregate_id.clone(),
            aggregate_version: self.aggregate_version,
            occurred_at: self.occurred_at,
            traceparent: self.traceparent.clone(),
            payload: serde_json::Value::Null,
            payload_ref: None,
        }
    }
}

/// The process's event ids: monotonic, so events created in one millisecond
/// (several events of one transaction, a burst of one process) still get
/// strictly increasing ids, and the pending index returns them in creation
/// order.
static EVENT_IDS: Mutex<Generator> = Mutex::new(Generator::new());

/// A new event id, strictly greater than every id this process made before.
pub fn next_event_id() -> Ulid {
    // A poisoned lock only means another thread panicked mid-call; the
    // generator's state (the last id) is still valid.
    let mut ids = EVENT_IDS.lock().unwrap_or_else(|p| p.into_inner());
    match ids.generate() {
        Ok(id) => id,
        // 2^80 ids in one millisecond: move on to the next millisecond.
        Err(_) => ids
            .generate_from_datetime(SystemTime::now() + Duration::from_millis(1))
            .unwrap_or_else(|_| Ulid::new()),
    }
}

/// The creation time an event id carries (millisecond precision).
pub fn ulid_time(id: Ulid) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(id.timestamp_ms()) * 1_000_000)
        .unwrap_or_else(|_| now_utc_millis())
}

/// The current time in UTC truncated to milliseconds (the precision of the
/// ULID), so that `occurredAt` and the event id agree.
pub fn now_utc_millis() -> OffsetDateTime {
    let now = OffsetDateTime::now_utc();
    now.replace_nanosecond(now.nanosecond() / 1_000_000 * 1_000_000)
        .unwrap_or(now)
}

fn check_name(field: &str, value: &str) -> Result<(), OutboxError> {
    let ok = !value.is_empty()
        && value.len() <= 128
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if ok {
        Ok(())
    } else {
        Err(OutboxError::InvalidEvent(format!(
            "{field} must be 1 to 128 characters of letters, digits, '.', '_' or '-'"
        )))
    }
}

/// `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, ids not all zero.
pub fn is_valid_traceparent(value: &str) -> bool {
    let parts: Vec<&str> = value.split('-').collect();
    let hex = |s: &str, n: usize| {
        s.len() == n
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    };
    parts.len() == 4
        && hex(parts[0], 2)
        && parts[0] != "ff"
        && hex(parts[1], 32)
        && parts[1].bytes().any(|b| b != b'0')
        && hex(parts[2], 16)
        && parts[2].bytes().any(|b| b != b'0')
        && hex(parts[3], 2)
}

/// The AWS X-Ray `TraceHeader` for a W3C traceparent: X-Ray trace ids are
/// the W3C trace id split as `1-<8 hex>-<24 hex>`.
pub fn xray_trace_header(traceparent: &str) -> Option<String> {
    if !is_valid_traceparent(traceparent) {
        return None;
    }
    let mut parts = traceparent.split('-');
    let (_, trace, parent, flags) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    let sampled = u8::from_str_radix(flags, 16).ok()? & 1;
    Some(format!(
        "Root=1-{}-{};Parent={};Sampled={}",
        &trace[..8],
        &trace[8..],
        parent,
        sampled
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelope_is_camel_case_json() {
        let env = EventEnvelope::new("OrderCreated", "Order", "o-1", 1, json!({"a": 1})).unwrap();
        let v: serde_json::Value = serde_json::from_str(&env.to_json().unwrap()).unwrap();
        for field in [
            "eventId",
            "eventType",
            "schemaVersion",
            "aggregateType",
            "aggregateId",
            "aggregateVersion",
            "occurredAt",
            "payload",
        ] {
            assert!(v.get(field).is_some(), "missing {field}");
        }
        assert!(v.get("traceparent").is_none());
        assert!(v["occurredAt"].as_str().unwrap().ends_with('Z'));
        let back: EventEnvelope = serde_json::from_value(v).unwrap();
        assert_eq!(back, env);
    }

    #[test]
    fn ids_made_together_strictly_increase_and_carry_the_time() {
        let ids: Vec<Ulid> = (0..10_000).map(|_| next_event_id()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        let env = EventEnvelope::new("OrderCreated", "Order", "1", 1, json!({})).unwrap();
        assert!(env.event_id > ids[ids.len() - 1]);
        assert_eq!(ulid_time(env.event_id), env.occurred_at);
    }

    #[test]
    fn names_are_checked() {
        assert!(EventEnvelope::new("", "Order", "1", 1, json!({})).is_err());
        assert!(EventEnvelope::new("Order Created", "Order", "1", 1, json!({})).is_err());
        assert!(EventEnvelope::new("OrderCreated", "Order", "", 1, json!({})).is_err());
    }

    #[test]
    fn traceparent_is_validated_and_mapped_to_xray() {
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert!(is_valid_traceparent(tp));
        assert!(!is_valid_traceparent(
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01"
        ));
        assert!(!is_valid_traceparent("garbage"));
        assert_eq!(
            xray_trace_header(tp).unwrap(),
            "Root=1-4bf92f35-77b34da6a3ce929d0e0e4736;Parent=00f067aa0ba902b7;Sampled=1"
        );
        let env = EventEnvelope::new("OrderCreated", "Order", "1", 1, json!({})).unwrap();
        assert!(env.clone().with_traceparent("nope").is_err());
        let traced = env.with_traceparent(tp).unwrap();
        assert_eq!(traced.traceparent.as_deref(), Some(tp));
    }
}
