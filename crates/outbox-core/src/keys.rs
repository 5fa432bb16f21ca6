//! The key schema, in one place.
//!
//! | item            | `PK`                    | `SK`              | pending index (`GSI1PK` / `GSI1SK`) | dead-letter index (`GSI2PK` / `GSI2SK`) |
//! |-----------------|-------------------------|-------------------|-------------------------------------|-----------------------------------------|
//! | order           | `ORDER#<order id>`      | `META`            | –                                   | –                                       |
//! | outbox event    | `ORDER#<order id>`      | `OUTBOX#<ulid>`   | `OUTBOX#<shard>` / `<ulid>`         | –                                       |
//! | dead letter     | `ORDER#<order id>`      | `OUTBOX#<ulid>`   | – (removed)                         | `DEAD#<shard>` / `<ulid>`               |
//! | idempotency key | `IDEMPOTENCY#<sha256>`  | `META`            | –                                   | –                                       |
//! | shard settings  | `OUTBOX_SETTINGS`       | `META`            | –                                   | –                                       |
//!
//! The outbox item lives in the same item collection as the business item it
//! describes, so one `TransactWriteItems` covers both. The two indexes are
//! sparse: only items carrying their key attributes appear in them, so the
//! sweeper reads outbox items and nothing else. The shard spreads the pending
//! index over several partitions, because a constant partition key would be
//! one hot partition whose back-pressure throttles the base table's writes.
//!
//! The shard is a hash of the **aggregate id**, so all events of one
//! aggregate share a shard and the pending index returns them in ULID order:
//! the sweeper can republish each aggregate's events in order. The shard
//! settings item records the highest shard count ever used
//! ([`attr::SHARDS_HIGH_WATER`]), so lowering `OUTBOX_SHARDS` strands nothing:
//! the sweeper reads every shard up to that mark.
//!
//! Attribute names are constants in [`attr`]; nothing else spells them.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;
use ulid::Ulid;

/// Partition key attribute name.
pub const PK: &str = "PK";
/// Sort key attribute name.
pub const SK: &str = "SK";
/// Sort key of business items (and of idempotency records).
pub const META: &str = "META";
/// Prefix of outbox sort keys.
pub const OUTBOX_PREFIX: &str = "OUTBOX#";
/// Prefix of order partition keys.
pub const ORDER_PREFIX: &str = "ORDER#";
/// Prefix of idempotency partition keys.
pub const IDEMPOTENCY_PREFIX: &str = "IDEMPOTENCY#";

/// Sparse, sharded index of pending outbox items.
pub const PENDING_INDEX: &str = "GSI1";
/// Partition key of [`PENDING_INDEX`]: `OUTBOX#<shard>`.
pub const PENDING_PK: &str = "GSI1PK";
/// Sort key of [`PENDING_INDEX`]: the event's ULID.
pub const PENDING_SK: &str = "GSI1SK";
/// Sparse, sharded index of dead-lettered outbox items.
pub const DEAD_LETTER_INDEX: &str = "GSI2";
/// Partition key of [`DEAD_LETTER_INDEX`]: `DEAD#<shard>`.
pub const DEAD_PK: &str = "GSI2PK";
/// Sort key of [`DEAD_LETTER_INDEX`]: the event's ULID.
pub const DEAD_SK: &str = "GSI2SK";
/// TTL attribute (epoch seconds) used by idempotency records.
pub const TTL_ATTRIBUTE: &str = "expiresAt";
/// Partition key of the shard settings item (its sort key is [`META`]).
pub const SETTINGS_PK: &str = "OUTBOX_SETTINGS";

/// The condition that an item with this key does not exist yet
/// (`attribute_not_exists(PK)`).
pub fn absent() -> String {
    format!("attribute_not_exists({PK})")
}

/// Attribute names of the business item (`PK=ORDER#<id>, SK=META`) that
/// conditions and updates name.
pub mod order_attr {
    /// `PENDING`, `PAID`.
    pub const STATUS: &str = "status";
    /// The aggregate's version, one per event.
    pub const VERSION: &str = "version";
    /// The caller that owns the order (never returned by the API).
    pub const OWNER: &str = "ownerId";
    /// When the order last changed (RFC 3339).
    pub const UPDATED_AT: &str = "updatedAt";
}

/// Attribute names of outbox items (as `OutboxItem` serializes them) and of
/// the settings item. Update expressions and filters use these constants.
pub mod attr {
    /// The event id (a ULID).
    pub const EVENT_ID: &str = "eventId";
    /// The event type.
    pub const EVENT_TYPE: &str = "eventType";
    /// The aggregate id.
    pub const AGGREGATE_ID: &str = "aggregateId";
    /// The aggregate's version after the event (1 for its first event):
    /// strict ordering skips its read for a first event.
    pub const AGGREGATE_VERSION: &str = "aggregateVersion";
    /// On an event held behind an older event of its aggregate (strict
    /// ordering): the older event's sort key.
    pub const HELD_BEHIND: &str = "heldBehind";
    /// The envelope's JSON, published as it is.
    pub const ENVELOPE: &str = "envelope";
    /// When the event was created (RFC 3339).
    pub const CREATED_AT: &str = "createdAt";
    /// The W3C trace context.
    pub const TRACEPARENT: &str = "traceparent";
    /// Failed publish attempts recorded by the sweeper.
    pub const ATTEMPTS: &str = "attempts";
    /// Epoch seconds before which the sweeper leaves the item alone.
    pub const NEXT_ATTEMPT_AT: &str = "nextAttemptAt";
    /// The last failure recorded.
    pub const LAST_ERROR: &str = "lastError";
    /// When the item was dead-lettered; present only on dead letters.
    pub const DEAD_LETTERED_AT: &str = "deadLetteredAt";
    /// Why it was dead-lettered.
    pub const DEAD_LETTER_REASON: &str = "deadLetterReason";
    /// On a dead letter an operator is republishing: the claim's token.
    pub const CLAIM_TOKEN: &str = "claimToken";
    /// On a dead letter an operator is republishing: epoch seconds after
    /// which the claim lapses.
    pub const CLAIMED_UNTIL: &str = "claimedUntil";
    /// On the settings item: the highest `OUTBOX_SHARDS` ever used.
    pub const SHARDS_HIGH_WATER: &str = "shardsHighWater";
    /// On the settings item: the sink the functions run with (`SINK`).
    pub const SINK: &str = "sink";
    /// On the settings item: the bus name or topic ARN.
    pub const SINK_TARGET: &str = "sinkTarget";
    /// On the settings item: `EVENT_SOURCE`.
    pub const EVENT_SOURCE: &str = "eventSource";
    /// On the settings item: whether the topic is FIFO.
    pub const SINK_FIFO: &str = "sinkFifo";
    /// On the settings item: when and by which function the sink settings
    /// were last recorded.
    pub const SINK_RECORDED: &str = "sinkRecorded";
}

/// `ORDER#<id>`.
pub fn order_pk(order_id: &str) -> String {
    format!("{ORDER_PREFIX}{order_id}")
}

/// `OUTBOX#<ulid>`.
pub fn outbox_sk(event_id: Ulid) -> String {
    format!("{OUTBOX_PREFIX}{event_id}")
}

/// `IDEMPOTENCY#<hash of the caller's key>`. The caller's key is hashed so
/// that whatever the client sends never becomes part of a key verbatim.
pub fn idempotency_pk(key_hash: &str) -> String {
    format!("{IDEMPOTENCY_PREFIX}{key_hash}")
}

/// Whether a sort key belongs to an outbox item.
pub fn is_outbox_sk(sk: &str) -> bool {
    sk.starts_with(OUTBOX_PREFIX)
}

/// The event id carried by an outbox sort key, if it is one.
pub fn event_id_from_sk(sk: &str) -> Option<Ulid> {
    sk.strip_prefix(OUTBOX_PREFIX)
        .and_then(|s| Ulid::from_string(s).ok())
}

/// The shard of an aggregate's events: FNV-1a (64 bit) of the aggregate id's
/// UTF-8 bytes modulo `shards`. FNV is fixed by its definition, unlike
/// `std`'s hasher, so the shard of an item never changes between releases.
pub fn shard_of(aggregate_id: &str, shards: u16) -> u16 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in aggregate_id.as_bytes() {
        hash ^= u64::from(*byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // `shards` is at least 1 (validated by the configuration).
    (hash % u64::from(shards.max(1))) as u16
}

/// `OUTBOX#<shard>`: partition key of the pending index.
pub fn pending_pk(shard: u16) -> String {
    format!("{OUTBOX_PREFIX}{shard}")
}

/// The prefix of a redriven item's pending-index sort key. `!` sorts
/// before every ULID character, so a redriven item is due at once: the
/// scheduled sweep's key condition (`GSI1SK < <ulid of now - threshold>`)
/// selects it whatever its age, before the stranded ones, redriven items
/// among themselves in creation order.
pub const REDRIVEN_PREFIX: &str = "!";

/// The pending-index sort key of a redriven event: `!<ulid>`.
pub fn redriven_sk(event_id: Ulid) -> String {
    format!("{REDRIVEN_PREFIX}{event_id}")
}

/// Whether a pending-index sort key is a redriven event's.
pub fn is_redriven_sk(sk: &str) -> bool {
    sk.starts_with(REDRIVEN_PREFIX)
}

/// The bounds of every redriven sort key: `BETWEEN` these selects all
/// redriven items of a shard and nothing else (`~` sorts after every ULID
/// character).
pub fn redriven_range() -> (String, String) {
    (REDRIVEN_PREFIX.to_owned(), format!("{REDRIVEN_PREFIX}~"))
}

/// The event id of a pending-index sort key (`<ulid>` or `!<ulid>`).
pub fn event_id_from_pending_sk(sk: &str) -> Option<Ulid> {
    Ulid::from_string(sk.strip_prefix(REDRIVEN_PREFIX).unwrap_or(sk)).ok()
}

/// `DEAD#<shard>`: partition key of the dead-letter index.
pub fn dead_pk(shard: u16) -> String {
    format!("DEAD#{shard}")
}

/// The key of the shard settings item.
pub fn settings_key() -> ItemKey {
    ItemKey::new(SETTINGS_PK, META)
}

/// The primary key of an item, as DynamoDB wants it.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemKey {
    /// The partition key.
    pub pk: String,
    /// The sort key.
    pub sk: String,
}

impl ItemKey {
    /// A key of `pk` and `sk`.
    pub fn new(pk: impl Into<String>, sk: impl Into<String>) -> Self {
        Self {
            pk: pk.into(),
            sk: sk.into(),
        }
    }

    /// The key of an order's business item.
    pub fn order(order_id: &str) -> Self {
        Self::new(order_pk(order_id), META)
    }

    /// The key of an outbox item.
    pub fn outbox(pk: impl Into<String>, event_id: Ulid) -> Self {
        Self::new(pk, outbox_sk(event_id))
    }

    /// The key as an attribute map.
    pub fn to_attributes(&self) -> HashMap<String, AttributeValue> {
        HashMap::from([
            (PK.to_owned(), AttributeValue::S(self.pk.clone())),
            (SK.to_owned(), AttributeValue::S(self.sk.clone())),
        ])
    }

    /// Reads the key out of an item or key map.
    pub fn from_attributes(item: &HashMap<String, AttributeValue>) -> Option<Self> {
        let pk = item.get(PK)?.as_s().ok()?;
        let sk = item.get(SK)?.as_s().ok()?;
        Some(Self::new(pk.clone(), sk.clone()))
    }
}

impl std::fmt::Display for ItemKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.pk, self.sk)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redriven_sort_keys_sort_before_every_event_and_among_themselves_by_age() {
        let (old, new) = (
            Ulid::from_parts(1, 0),
            Ulid::from_parts(2_000_000_000_000, 5),
        );
        let (from, to) = redriven_range();
        for id in [old, new] {
            let sk = redriven_sk(id);
            assert!(sk < Ulid::from_parts(0, 1).to_string());
            assert!(from <= sk && sk <= to && is_redriven_sk(&sk));
            assert_eq!(event_id_from_pending_sk(&sk), Some(id));
            assert_eq!(event_id_from_pending_sk(&id.to_string()), Some(id));
        }
        assert!(redriven_sk(old) < redriven_sk(new));
        assert!(!is_redriven_sk(&new.to_string()));
    }

    #[test]
    fn keys_follow_the_design_card() {
        let id = Ulid::from_string("01J9ZQ7Y8X4M2N3P5Q6R7S8T9V").unwrap();
        assert_eq!(order_pk("abc"), "ORDER#abc");
        assert_eq!(outbox_sk(id), "OUTBOX#01J9ZQ7Y8X4M2N3P5Q6R7S8T9V");
        assert_eq!(event_id_from_sk(&outbox_sk(id)), Some(id));
        assert_eq!(event_id_from_sk("META"), None);
        assert_eq!(event_id_from_sk("OUTBOX#not-a-ulid"), None);
        assert!(is_outbox_sk("OUTBOX#x") && !is_outbox_sk("META"));
        assert_eq!(ItemKey::order("abc"), ItemKey::new("ORDER#abc", "META"));
    }

    #[test]
    fn shard_is_stable_and_in_range() {
        assert_eq!(shard_of("any", 1), 0);
        let mut seen = [0u32; 8];
        for _ in 0..8_000 {
            let s = shard_of(&Ulid::new().to_string(), 8);
            assert!(s < 8);
            seen[s as usize] += 1;
        }
        // Every shard gets a fair share (uniform would be 1,000 each).
        assert!(seen.iter().all(|n| *n > 700), "{seen:?}");
    }

    #[test]
    fn shard_of_a_known_id_never_changes() {
        // Pinned values (FNV-1a 64, computed independently): changing the
        // hash would move every pending item to another shard.
        let id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
        assert_eq!(shard_of(id, 8), 0);
        assert_eq!(shard_of(id, 7), 2);
        assert_eq!(shard_of(id, 1000), 560);
        assert_eq!(shard_of("order-42", 8), 4);
    }
}
