//! The key schema, in one place.
//!
//! | item            | `PK`                    | `SK`              | pending index (`GSI1PK` / `GSI1SK`) | dead-letter index (`GSI2PK` / `GSI2SK`) |
//! |-----------------|-------------------------|-------------------|-------------------------------------|-----------------------------------------|
//! | business item   | the aggregate's key (`ORDER#<id>` in the example) | the caller's (`META`) | –                 | –                                       |
//! | outbox event    | the business item's `PK` | `OUTBOX#<ulid>`  | `OUTBOX#<shard>` / `<ulid>`         | –                                       |
//! | dead letter     | the business item's `PK` | `OUTBOX#<ulid>`  | – (removed)                         | `DEAD#<shard>` / `<ulid>`               |
//! | shard settings  | `OUTBOX_SETTINGS`       | `META`            | –                                   | –                                       |
//! | stack settings  | `OUTBOX_SETTINGS`       | `STACK#<region>#<stack>#<function>` | –                 | –                                       |
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
//! The stack settings records hold the variables the publisher and the
//! sweeper run with, one record per region, stack and function, written at
//! cold start, by every sweep and by a warm publisher every five minutes ([`stack_settings_key`], `keys/stacks.rs`):
//! writers ([`crate::transaction::OutboxSettings::from_stack`]) and
//! `outboxctl` read them to learn the key schema, the shards, the home
//! region, the sink and the ordering of the stack, so nothing is restated
//! or exported; a second stack on the table is refused while the first is
//! live ([`rivals`]).
//!
//! Attribute names are constants in [`attr`]; nothing else spells them.
//! The business item's own keys and attributes belong to the service (the
//! orders example's are in the `outbox-writer` crate).

mod schema;
mod stacks;

pub use schema::{check_region, KeySchema};
pub use stacks::{
    choose_stack, rivals, schedule_period, stack_settings_key, RecordedSettings, StackChoiceError,
    LIVE_WITHIN, STACK_SETTINGS_PREFIX,
};

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

/// Attribute names of outbox items (as `OutboxItem` serializes them) and of
/// the settings item. Update expressions and filters use these constants.
pub mod attr {
    /// The event id (a ULID).
    pub const EVENT_ID: &str = "eventId";
    /// The region whose writer wrote the item (global tables): only that
    /// region's publisher and sweeper publish it. Absent on items written
    /// before it was recorded, or with `HOME_REGION_RULE=off`.
    pub const HOME_REGION: &str = "homeRegion";
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
    /// On a held event: when it was first held (epoch seconds). An
    /// aggregate held for longer than the sweep period is parked.
    pub const HELD_SINCE: &str = "heldSince";
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
    /// When the publisher gave the item the stack's pending-index keys
    /// (epoch seconds): the writer had not (docs/adopt.md "What the
    /// publisher checks"). Its `MODIFY` is dropped by the mapping's filter.
    pub const KEYS_REPAIRED_AT: &str = "keysRepairedAt";
    /// On the settings item: the highest `OUTBOX_SHARDS` ever used.
    pub const SHARDS_HIGH_WATER: &str = "shardsHighWater";
    /// On a stack settings record: the variables the function runs with
    /// (a map of strings).
    pub const VARIABLES: &str = "variables";
    /// On a stack settings record: which function recorded it, and when.
    pub const RECORDED_BY: &str = "recordedBy";
    /// On a stack settings record: when the stack's function first
    /// recorded (RFC 3339): of two stacks on one table, the first publishes.
    pub const RECORDED_SINCE: &str = "recordedSince";
}

/// `OUTBOX#<ulid>`.
pub fn outbox_sk(event_id: Ulid) -> String {
    format!("{OUTBOX_PREFIX}{event_id}")
}

/// Whether a sort key belongs to an outbox item.
pub fn is_outbox_sk(sk: &str) -> bool {
    sk.starts_with(OUTBOX_PREFIX)
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
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
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
mod tests;
