//! The outbox item: an event stored as data next to the change it describes.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::{Deserialize, Serialize};
use ulid::Ulid;

use crate::envelope::EventEnvelope;
use crate::error::{DecodeError, OutboxError};
use crate::keys::{self, ItemKey};
use crate::size;

/// An outbox item as stored in the table and as seen in a stream image.
///
/// `envelope` holds the exact JSON that is published, written once by the
/// writer; the publisher and the sweeper never re-encode it, so what was
/// committed is byte for byte what subscribers receive. The other attributes
/// are what routing, retries and the indexes need without parsing it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OutboxItem {
    /// The item collection: the aggregate's partition key.
    #[serde(rename = "PK")]
    pub pk: String,
    /// `OUTBOX#<eventId>`.
    #[serde(rename = "SK")]
    pub sk: String,
    /// The event id (stable across republishing).
    #[cfg_attr(feature = "schema", schemars(with = "String"))]
    pub event_id: Ulid,
    /// The event type (`OrderCreated`).
    pub event_type: String,
    /// The aggregate the event is about.
    pub aggregate_id: String,
    /// The aggregate's version after the event (1: its first event); absent
    /// on items written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggregate_version: Option<u64>,
    /// The W3C trace context of the write, passed on to the sink.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// The [`EventEnvelope`] as JSON; a claim check's stub when
    /// `payloadRef` is set.
    pub envelope: String,
    /// A claim-checked event (its envelope larger than an item holds or
    /// the sink takes): the S3 object holding the whole envelope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payload_ref: Option<crate::claim::PayloadRef>,
    /// RFC 3339, UTC.
    pub created_at: String,
    /// Failed publish attempts recorded by the sweeper.
    #[serde(default)]
    pub attempts: u32,
    /// Pending-index partition key (`OUTBOX#<shard>`); absent once dead-lettered.
    #[serde(rename = "GSI1PK", default, skip_serializing_if = "Option::is_none")]
    pub pending_pk: Option<String>,
    /// Pending-index sort key (the ULID).
    #[serde(rename = "GSI1SK", default, skip_serializing_if = "Option::is_none")]
    pub pending_sk: Option<String>,
    /// Epoch seconds before which the sweeper leaves the item alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at: Option<i64>,
    /// The last failure the sweeper recorded (sanitized).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// When it was dead-lettered (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_lettered_at: Option<String>,
    /// Why it was dead-lettered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_reason: Option<String>,
    /// Dead-letter-index partition key (`DEAD#<shard>`).
    #[serde(rename = "GSI2PK", default, skip_serializing_if = "Option::is_none")]
    pub dead_pk: Option<String>,
    /// Dead-letter-index sort key (the ULID).
    #[serde(rename = "GSI2SK", default, skip_serializing_if = "Option::is_none")]
    pub dead_sk: Option<String>,
    /// On a dead letter an operator is republishing: the claim's token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_token: Option<String>,
    /// Epoch seconds after which that claim lapses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claimed_until: Option<i64>,
    /// Held behind an older event of its aggregate (strict ordering): that
    /// event's sort key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_behind: Option<String>,
    /// When it was first held (epoch seconds; strict ordering).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_since: Option<i64>,
    /// The region whose writer wrote it (`homeRegion`, global tables): only
    /// that region publishes it. Absent on items written before it was
    /// recorded, or with `HOME_REGION_RULE=off`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home_region: Option<String>,
}

/// The JSON of an event the writer accepts: its aggregate id can route it
/// on the sink, and it is not a stub (its `payloadRef` set: only the claim
/// check makes one, from the whole envelope, with its object).
fn accepted_json(
    envelope: &EventEnvelope,
    limits: &size::EventLimits,
) -> Result<String, OutboxError> {
    limits
        .check_aggregate_id(&envelope.aggregate_id)
        .map_err(OutboxError::InvalidEvent)?;
    if envelope.is_stub() {
        return Err(OutboxError::InvalidEvent(
            "payloadRef is the outbox's own field: give the whole payload".into(),
        ));
    }
    envelope.to_json()
}

impl OutboxItem {
    /// Whether the sweeper may publish it at `now`: no failed attempt
    /// recorded, or its `nextAttemptAt` has come.
    pub fn is_due(&self, now: time::OffsetDateTime) -> bool {
        self.next_attempt_at
            .is_none_or(|at| at <= now.unix_timestamp())
    }

    /// Builds the outbox item for `envelope`, stored in the item collection
    /// `pk`, and checks it against the configured sink's `limits` (the
    /// entry's size as that sink counts it; an SNS FIFO group id) and the
    /// 400 KB DynamoDB item limit. The default key schema.
    pub fn new(
        pk: &str,
        envelope: &EventEnvelope,
        limits: &size::EventLimits,
        shards: u16,
    ) -> Result<Self, OutboxError> {
        Self::in_table(&keys::KeySchema::default(), pk, envelope, limits, shards)
    }

    /// The same, in a table with the key schema `schema` (its outbox
    /// prefix; the item's size with its attribute names).
    pub fn in_table(
        schema: &keys::KeySchema,
        pk: &str,
        envelope: &EventEnvelope,
        limits: &size::EventLimits,
        shards: u16,
    ) -> Result<Self, OutboxError> {
        let json = accepted_json(envelope, limits)?;
        Self::checked(schema, pk, envelope, json, None, limits, shards).map(|(item, _)| item)
    }

    /// The same with the claim check `claim`: an event whose item would be
    /// larger than its threshold, or whose entry the sink would refuse for
    /// its size, becomes a stub item (the envelope's [stub](EventEnvelope::stub),
    /// `payloadRef`) and the [`Offload`](crate::claim::Offload) to store
    /// before the transaction commits.
    pub fn claim_checked(
        schema: &keys::KeySchema,
        pk: &str,
        envelope: &EventEnvelope,
        limits: &size::EventLimits,
        shards: u16,
        claim: &crate::claim::ClaimCheck,
    ) -> Result<(Self, Option<crate::claim::Offload>), OutboxError> {
        let json = accepted_json(envelope, limits)?;
        let entry = limits.entry_size(&envelope.event_type, &envelope.event_id.to_string(), &json);
        if entry <= limits.max_bytes() {
            match Self::checked(schema, pk, envelope, json.clone(), None, limits, shards) {
                Ok((item, bytes)) if bytes <= claim.threshold => return Ok((item, None)),
                // Over the threshold, or over the item limit: claim-checked.
                Ok(_) | Err(OutboxError::ItemTooLarge { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        if json.len() > crate::claim::MAX_PAYLOAD_BYTES {
            return Err(OutboxError::PayloadTooLarge {
                event_id: envelope.event_id,
                size: json.len(),
                limit: crate::claim::MAX_PAYLOAD_BYTES,
            });
        }
        let body = json.into_bytes();
        let payload_ref = claim.reference(envelope.event_id, &body);
        let stub = envelope.stub(payload_ref.clone());
        let (item, _) = Self::checked(
            schema,
            pk,
            &stub,
            stub.to_json()?,
            Some(payload_ref.clone()),
            limits,
            shards,
        )?;
        let offload = crate::claim::Offload {
            event_id: envelope.event_id,
            payload_ref,
            body,
        };
        Ok((item, Some(offload)))
    }

    /// The item of `envelope` whose JSON is `json`, checked against the
    /// sink's entry limit and the item limit, with its size.
    fn checked(
        schema: &keys::KeySchema,
        pk: &str,
        envelope: &EventEnvelope,
        json: String,
        payload_ref: Option<crate::claim::PayloadRef>,
        limits: &size::EventLimits,
        shards: u16,
    ) -> Result<(Self, usize), OutboxError> {
        let entry = limits.entry_size(&envelope.event_type, &envelope.event_id.to_string(), &json);
        if entry > limits.max_bytes() {
            return Err(OutboxError::EventTooLarge {
                event_id: envelope.event_id,
                size: entry,
                limit: limits.max_bytes(),
            });
        }
        let created_at = envelope
            .occurred_at
            .format(&time::format_description::well_known::Rfc3339)
            .map_err(|e| OutboxError::Serialize(e.to_string()))?;
        let item = Self {
            pk: pk.to_owned(),
            sk: schema.outbox_sk(envelope.event_id),
            event_id: envelope.event_id,
            event_type: envelope.event_type.clone(),
            aggregate_id: envelope.aggregate_id.clone(),
            aggregate_version: Some(envelope.aggregate_version),
            traceparent: envelope.traceparent.clone(),
            envelope: json,
            payload_ref,
            created_at,
            attempts: 0,
            pending_pk: Some(schema.pending_pk(keys::shard_of(&envelope.aggregate_id, shards))),
            pending_sk: Some(envelope.event_id.to_string()),
            next_attempt_at: None,
            last_error: None,
            dead_lettered_at: None,
            dead_letter_reason: None,
            dead_pk: None,
            dead_sk: None,
            claim_token: None,
            claimed_until: None,
            held_behind: None,
            held_since: None,
            home_region: schema.home_region.clone(),
        };
        let bytes = size::item_size(&schema.to_table(item.to_attributes()?));
        if bytes > size::MAX_ITEM_BYTES {
            return Err(OutboxError::ItemTooLarge {
                event_id: envelope.event_id,
                size: bytes,
                limit: size::MAX_ITEM_BYTES,
            });
        }
        Ok((item, bytes))
    }

    /// The item's primary key.
    pub fn key(&self) -> ItemKey {
        ItemKey::new(self.pk.clone(), self.sk.clone())
    }

    /// The item as DynamoDB attributes.
    pub fn to_attributes(&self) -> Result<HashMap<String, AttributeValue>, OutboxError> {
        serde_dynamo::to_item(self).map_err(|e| OutboxError::Serialize(e.to_string()))
    }

    /// Decodes an item read through the SDK.
    pub fn from_attributes(item: HashMap<String, AttributeValue>) -> Result<Self, DecodeError> {
        Self::from_item(serde_dynamo::Item::from(item))
    }

    /// Decodes a stream image or any `serde_dynamo` item, and checks that it
    /// is publishable: the sort key names the same event id and the envelope
    /// is a JSON object.
    pub fn from_item(item: serde_dynamo::Item) -> Result<Self, DecodeError> {
        // Not `serde_dynamo::from_item`: it rebuilds the map (rehashing
        // every attribute name) before decoding (docs/performance.md §2).
        let decoded: Self =
            serde_dynamo::from_attribute_value(serde_dynamo::AttributeValue::M(item.into_inner()))
                .map_err(|e| DecodeError(e.to_string()))?;
        decoded.validate()?;
        Ok(decoded)
    }

    fn validate(&self) -> Result<(), DecodeError> {
        // Whatever the table's outbox prefix: the sort key ends in the id.
        let id = self.event_id.to_string();
        if self.sk.strip_suffix(&id).is_none_or(str::is_empty) {
            return Err(DecodeError(format!(
                "sort key {} does not carry event id {}",
                self.sk, self.event_id
            )));
        }
        if !self.envelope.trim_start().starts_with('{')
            || serde_json::from_str::<serde::de::IgnoredAny>(&self.envelope).is_err()
        {
            return Err(DecodeError("envelope is not a JSON object".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn envelope(payload: serde_json::Value) -> EventEnvelope {
        EventEnvelope::new("OrderCreated", "Order", "o-1", 1, payload).unwrap()
    }

    fn item_of(env: &EventEnvelope) -> OutboxItem {
        item_in(env, &size::EventLimits::eventbridge("outbox.orders")).unwrap()
    }

    fn item_in(env: &EventEnvelope, limits: &size::EventLimits) -> Result<OutboxItem, OutboxError> {
        OutboxItem::new("ORDER#o-1", env, limits, 8)
    }

    fn blob(bytes: usize) -> EventEnvelope {
        envelope(json!({"blob": "x".repeat(bytes)}))
    }

    #[test]
    fn an_item_is_due_without_a_failure_or_once_its_next_attempt_comes() {
        let mut item = item_of(&envelope(json!({})));
        let now = time::OffsetDateTime::from_unix_timestamp(1_000).unwrap();
        assert!(item.is_due(now));
        item.next_attempt_at = Some(1_000);
        assert!(item.is_due(now));
        item.next_attempt_at = Some(1_001);
        assert!(!item.is_due(now));
    }

    /// Issue #28 item 1: the writer records its home region on the item.
    #[test]
    fn the_item_carries_the_writers_home_region() {
        let env = envelope(json!({}));
        let limits = crate::size::EventLimits::eventbridge("outbox.orders");
        let schema = keys::KeySchema::default().with_home_region(Some("eu-west-1".into()));
        let item = OutboxItem::in_table(&schema, "ORDER#o-1", &env, &limits, 8).unwrap();
        assert_eq!(item.home_region.as_deref(), Some("eu-west-1"));
        let region = item.to_attributes().unwrap()[keys::attr::HOME_REGION].clone();
        assert_eq!(region, AttributeValue::S("eu-west-1".into()));
        assert!(!item_of(&env)
            .to_attributes()
            .unwrap()
            .contains_key(keys::attr::HOME_REGION));
    }

    #[test]
    fn round_trips_through_attributes() {
        let env = envelope(json!({"total": 10}));
        let item = item_of(&env);
        let event_id = env.event_id.to_string();
        assert_eq!(item.sk, format!("OUTBOX#{event_id}"));
        assert_eq!(item.pending_sk, Some(event_id));
        assert!(item.pending_pk.as_deref().unwrap().starts_with("OUTBOX#"));
        let attrs = item.to_attributes().unwrap();
        assert!(
            !attrs.contains_key("lastError"),
            "absent options are not stored"
        );
        assert_eq!(attrs["attempts"], AttributeValue::N("0".into()));
        let back = OutboxItem::from_attributes(attrs).unwrap();
        assert_eq!(back, item);
        let published: EventEnvelope = serde_json::from_str(&back.envelope).unwrap();
        assert_eq!(published, env);
    }

    #[test]
    fn attribute_names_are_the_keys_module_constants() {
        use crate::keys::attr;
        let env = envelope(json!({}))
            .with_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
            .unwrap();
        let mut item = item_of(&env);
        item.next_attempt_at = Some(1);
        item.last_error = Some("e".into());
        item.dead_lettered_at = Some("t".into());
        item.dead_letter_reason = Some("r".into());
        item.dead_pk = Some("DEAD#0".into());
        item.dead_sk = Some("x".into());
        item.held_behind = Some("OUTBOX#x".into());
        item.held_since = Some(1);
        let mut names: Vec<String> = item.to_attributes().unwrap().into_keys().collect();
        names.sort();
        let mut expected = vec![
            keys::PK,
            keys::SK,
            attr::EVENT_ID,
            attr::EVENT_TYPE,
            attr::AGGREGATE_ID,
            attr::AGGREGATE_VERSION,
            attr::HELD_BEHIND,
            attr::HELD_SINCE,
            attr::TRACEPARENT,
            attr::ENVELOPE,
            attr::CREATED_AT,
            attr::ATTEMPTS,
            keys::PENDING_PK,
            keys::PENDING_SK,
            attr::NEXT_ATTEMPT_AT,
            attr::LAST_ERROR,
            attr::DEAD_LETTERED_AT,
            attr::DEAD_LETTER_REASON,
            keys::DEAD_PK,
            keys::DEAD_SK,
        ];
        expected.sort();
        assert_eq!(names, expected);
        // The shard follows the aggregate, not the event.
        let shard = keys::shard_of("o-1", 8);
        assert_eq!(item.pending_pk, Some(keys::pending_pk(shard)));
    }

    #[test]
    fn events_are_checked_against_the_configured_sink() {
        let eventbridge = size::EventLimits::eventbridge("outbox.orders");
        // 300 KB: fine for EventBridge (1 MB) and for DynamoDB (400 KB).
        assert!(item_in(&blob(300 * 1024), &eventbridge).is_ok());
        // Past 400 KB the item limit binds first.
        let too_large = item_in(&blob(410 * 1024), &eventbridge);
        assert!(matches!(too_large, Err(OutboxError::ItemTooLarge { .. })));
        // A setting below the default binds.
        let small = size::EventLimits::EventBridge {
            source: "outbox.orders".into(),
            max_bytes: 200 * 1024,
        };
        assert!(matches!(
            item_in(&blob(250 * 1024), &small),
            Err(OutboxError::EventTooLarge { limit, .. }) if limit == 200 * 1024
        ));
        // SNS counts its attributes too: an event that fits 256 KiB as an
        // EventBridge entry can be too large as an SNS message.
        let sns = size::EventLimits::Sns {
            fifo: false,
            max_bytes: size::DEFAULT_SNS_BYTES,
        };
        let overhead = {
            let json = blob(0).to_json().unwrap();
            size::eventbridge_entry_size("outbox.orders", "OrderCreated", &json)
        };
        // 20 bytes under 256 KiB as an EventBridge entry.
        let env = blob(size::DEFAULT_SNS_BYTES - 20 - overhead);
        let json = env.to_json().unwrap();
        assert!(
            size::eventbridge_entry_size("outbox.orders", "OrderCreated", &json)
                <= size::DEFAULT_SNS_BYTES
        );
        let too_large = item_in(&env, &sns);
        assert!(matches!(too_large, Err(OutboxError::EventTooLarge { .. })));
    }

    #[test]
    fn a_fifo_topic_refuses_an_aggregate_id_that_cannot_be_a_group_id() {
        let fifo = size::EventLimits::Sns {
            fifo: true,
            max_bytes: size::DEFAULT_SNS_BYTES,
        };
        let long = "a".repeat(129);
        let env = EventEnvelope::new("OrderCreated", "Order", &long, 1, json!({})).unwrap();
        assert!(matches!(
            OutboxItem::new("ORDER#x", &env, &fifo, 8),
            Err(OutboxError::InvalidEvent(m)) if m.contains("group id")
        ));
        let ok = EventEnvelope::new("OrderCreated", "Order", &long[..128], 1, json!({})).unwrap();
        assert!(OutboxItem::new("ORDER#x", &ok, &fifo, 8).is_ok());
        // Not FIFO: no such limit.
        assert!(OutboxItem::new("ORDER#x", &env, &size::EventLimits::eventbridge("s"), 8).is_ok());
    }

    #[test]
    fn undecodable_images_are_typed_errors() {
        let item = item_of(&envelope(json!({})));
        let mut attrs = item.to_attributes().unwrap();
        attrs.remove("envelope");
        assert!(OutboxItem::from_attributes(attrs).is_err());

        let mut attrs = item.to_attributes().unwrap();
        attrs.insert("envelope".into(), AttributeValue::S("not json".into()));
        assert!(OutboxItem::from_attributes(attrs).is_err());

        let mut attrs = item.to_attributes().unwrap();
        attrs.insert(
            "SK".into(),
            AttributeValue::S(format!("OUTBOX#{}", Ulid::new())),
        );
        assert!(OutboxItem::from_attributes(attrs).is_err());
    }
}
