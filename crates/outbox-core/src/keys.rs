//! The key schema, in one place.
//!
//! | item            | `PK`                    | `SK`              | pending index (`GSI1PK` / `GSI1SK`) | dead-letter index (`GSI2PK` / `GSI2SK`) |
//! |-----------------|-------------------------|-------------------|-------------------------------------|-----------------------------------------|
//! | business item   | the aggregate's key (`ORDER#<id>` in the example) | the caller's (`META`) | –                 | –                                       |
//! | outbox event    | the business item's `PK` | `OUTBOX#<ulid>`  | `OUTBOX#<shard>` / `<ulid>`         | –                                       |
//! | dead letter     | the business item's `PK` | `OUTBOX#<ulid>`  | – (removed)                         | `DEAD#<shard>` / `<ulid>`               |
//! | shard settings  | `OUTBOX_SETTINGS`       | `META`            | –                                   | –                                       |
//! | stack settings  | `OUTBOX_SETTINGS`       | `STACK#<region>#<function>` | –                         | –                                       |
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
//! sweeper run with, one record per region and function, written at cold
//! start ([`stack_settings_key`]): `outboxctl` reads its region's record to
//! learn the key schema, the home region, the sink and the ordering of the
//! stack, so an operator exports nothing.
//!
//! Attribute names are constants in [`attr`]; nothing else spells them.
//! The business item's own keys and attributes belong to the service (the
//! orders example's are in the `outbox-writer` crate).

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
    /// On the settings item: the highest `OUTBOX_SHARDS` ever used.
    pub const SHARDS_HIGH_WATER: &str = "shardsHighWater";
    /// On a stack settings record: the variables the function runs with
    /// (a map of strings).
    pub const VARIABLES: &str = "variables";
    /// On a stack settings record: which function recorded it, and when.
    pub const RECORDED_BY: &str = "recordedBy";
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

/// Sort-key prefix of the stack settings records (one per region and
/// function, beside the shard settings item).
pub const STACK_SETTINGS_PREFIX: &str = "STACK#";

/// The key of the settings record `function` writes in `region`:
/// `OUTBOX_SETTINGS` / `STACK#<region>#<function>`. One per region, so on
/// a global table one region's record never overwrites another's.
pub fn stack_settings_key(region: &str, function: &str) -> ItemKey {
    ItemKey::new(
        SETTINGS_PK,
        format!("{STACK_SETTINGS_PREFIX}{region}#{function}"),
    )
}

/// The table's key schema: the names the outbox uses in *your* table, with
/// this module's constants as defaults. One value for the writer library,
/// the publisher, the sweeper, the inbox and `outboxctl`, read from the
/// environment ([`KeySchema::from_lookup`]) and validated at cold start.
///
/// | variable | default | what |
/// |---|---|---|
/// | `PARTITION_KEY` | `PK` | the table's partition key attribute |
/// | `SORT_KEY` | `SK` | the table's sort key attribute |
/// | `OUTBOX_PREFIX` | `OUTBOX#` | the outbox items' sort-key prefix (and the pending index's partition-key prefix) |
/// | `PENDING_INDEX` | `GSI1` | the sparse pending index |
/// | `PENDING_INDEX_PARTITION_KEY` | `GSI1PK` | its partition key attribute |
/// | `PENDING_INDEX_SORT_KEY` | `GSI1SK` | its sort key attribute |
/// | `DEAD_LETTER_INDEX` | `GSI2` | the sparse dead-letter index |
/// | `DEAD_LETTER_INDEX_PARTITION_KEY` | `GSI2PK` | its partition key attribute |
/// | `DEAD_LETTER_INDEX_SORT_KEY` | `GSI2SK` | its sort key attribute |
/// | `TTL_ATTRIBUTE` | `expiresAt` | the table's TTL attribute (idempotency and inbox records) |
///
/// [`crate::OutboxItem`] serializes with the default names; the adapters
/// rename at the table's edge ([`KeySchema::to_table`],
/// [`KeySchema::from_table`]), which costs nothing with the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySchema {
    /// `PARTITION_KEY`.
    pub partition_key: String,
    /// `SORT_KEY`.
    pub sort_key: String,
    /// `OUTBOX_PREFIX`.
    pub outbox_prefix: String,
    /// `PENDING_INDEX`.
    pub pending_index: String,
    /// `PENDING_INDEX_PARTITION_KEY`.
    pub pending_partition_key: String,
    /// `PENDING_INDEX_SORT_KEY`.
    pub pending_sort_key: String,
    /// `DEAD_LETTER_INDEX`.
    pub dead_letter_index: String,
    /// `DEAD_LETTER_INDEX_PARTITION_KEY`.
    pub dead_letter_partition_key: String,
    /// `DEAD_LETTER_INDEX_SORT_KEY`.
    pub dead_letter_sort_key: String,
    /// `TTL_ATTRIBUTE`.
    pub ttl_attribute: String,
    /// The home region (global tables, docs/architecture.md
    /// "Multi-region"): `HOME_REGION` (the stacks set it to the function's
    /// region, `AWS::Region`); `None` when unset or with
    /// `HOME_REGION_RULE=off`. Writers record it on each item;
    /// the publisher publishes only its own region's items (and items
    /// without one). Not a name: [`KeySchema::is_default`] ignores it.
    pub home_region: Option<String>,
}

impl Default for KeySchema {
    fn default() -> Self {
        Self {
            partition_key: PK.into(),
            sort_key: SK.into(),
            outbox_prefix: OUTBOX_PREFIX.into(),
            pending_index: PENDING_INDEX.into(),
            pending_partition_key: PENDING_PK.into(),
            pending_sort_key: PENDING_SK.into(),
            dead_letter_index: DEAD_LETTER_INDEX.into(),
            dead_letter_partition_key: DEAD_PK.into(),
            dead_letter_sort_key: DEAD_SK.into(),
            ttl_attribute: TTL_ATTRIBUTE.into(),
            home_region: None,
        }
    }
}

/// The outbox item's own attribute names, which no key setting may take.
const ITEM_ATTRIBUTES: [&str; 20] = [
    attr::EVENT_ID,
    attr::HOME_REGION,
    attr::EVENT_TYPE,
    attr::AGGREGATE_ID,
    attr::AGGREGATE_VERSION,
    attr::HELD_BEHIND,
    attr::HELD_SINCE,
    attr::ENVELOPE,
    attr::CREATED_AT,
    attr::TRACEPARENT,
    attr::ATTEMPTS,
    attr::NEXT_ATTEMPT_AT,
    attr::LAST_ERROR,
    attr::DEAD_LETTERED_AT,
    attr::DEAD_LETTER_REASON,
    attr::CLAIM_TOKEN,
    attr::CLAIMED_UNTIL,
    attr::SHARDS_HIGH_WATER,
    attr::VARIABLES,
    attr::RECORDED_BY,
];

impl KeySchema {
    /// The schema from environment variables (table above); unset or
    /// empty ones keep their defaults.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, crate::error::ConfigError> {
        let mut schema = Self::default();
        let fields: [(&'static str, &mut String); 10] = [
            ("PARTITION_KEY", &mut schema.partition_key),
            ("SORT_KEY", &mut schema.sort_key),
            ("OUTBOX_PREFIX", &mut schema.outbox_prefix),
            ("PENDING_INDEX", &mut schema.pending_index),
            (
                "PENDING_INDEX_PARTITION_KEY",
                &mut schema.pending_partition_key,
            ),
            ("PENDING_INDEX_SORT_KEY", &mut schema.pending_sort_key),
            ("DEAD_LETTER_INDEX", &mut schema.dead_letter_index),
            (
                "DEAD_LETTER_INDEX_PARTITION_KEY",
                &mut schema.dead_letter_partition_key,
            ),
            (
                "DEAD_LETTER_INDEX_SORT_KEY",
                &mut schema.dead_letter_sort_key,
            ),
            ("TTL_ATTRIBUTE", &mut schema.ttl_attribute),
        ];
        for (name, field) in fields {
            if let Some(value) = lookup(name).filter(|v| !v.trim().is_empty()) {
                *field = value;
            }
        }
        let set = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let rule = set("HOME_REGION_RULE").unwrap_or_else(|| "on".to_owned());
        schema.home_region = match rule.as_str() {
            "on" => set("HOME_REGION")
                .map(|region| check_region("HOME_REGION", &region).map(|()| region))
                .transpose()?,
            "off" => None,
            _ => {
                return Err(crate::error::ConfigError::Invalid {
                    name: "HOME_REGION_RULE",
                    value: rule,
                    reason: "on or off".to_owned(),
                })
            }
        };
        schema.validate()?;
        Ok(schema)
    }

    /// The same schema with `region` as its home region.
    pub fn with_home_region(mut self, region: Option<String>) -> Self {
        self.home_region = region;
        self
    }

    /// Whether this schema's publisher publishes an item whose home region
    /// is `item_region`: an item without one (written before the rule, or
    /// with it off) always; otherwise only in its home region, when this
    /// schema has one.
    pub fn publishes_region(&self, item_region: Option<&str>) -> bool {
        match (self.home_region.as_deref(), item_region) {
            (Some(home), Some(item)) => home == item,
            _ => true,
        }
    }

    /// The schema as the variables [`KeySchema::from_lookup`] reads (the
    /// names only; the home region is the stack's).
    pub fn variables(&self) -> Vec<(&'static str, String)> {
        vec![
            ("PARTITION_KEY", self.partition_key.clone()),
            ("SORT_KEY", self.sort_key.clone()),
            ("OUTBOX_PREFIX", self.outbox_prefix.clone()),
            ("PENDING_INDEX", self.pending_index.clone()),
            (
                "PENDING_INDEX_PARTITION_KEY",
                self.pending_partition_key.clone(),
            ),
            ("PENDING_INDEX_SORT_KEY", self.pending_sort_key.clone()),
            ("DEAD_LETTER_INDEX", self.dead_letter_index.clone()),
            (
                "DEAD_LETTER_INDEX_PARTITION_KEY",
                self.dead_letter_partition_key.clone(),
            ),
            (
                "DEAD_LETTER_INDEX_SORT_KEY",
                self.dead_letter_sort_key.clone(),
            ),
            ("TTL_ATTRIBUTE", self.ttl_attribute.clone()),
        ]
    }

    /// Checks every name: attribute names 1–255 bytes, index names 3–255
    /// of `[A-Za-z0-9_.-]`, the prefix 1–64 characters of no `!` or `~` (the
    /// pending index's sort-key markers); the seven attributes distinct from
    /// each other and from the outbox item's own attributes; the two index
    /// names distinct.
    pub fn validate(&self) -> Result<(), crate::error::ConfigError> {
        let invalid =
            |name: &'static str, value: &str, reason: &str| crate::error::ConfigError::Invalid {
                name,
                value: value.to_owned(),
                reason: reason.to_owned(),
            };
        let attributes = [
            ("PARTITION_KEY", &self.partition_key),
            ("SORT_KEY", &self.sort_key),
            ("PENDING_INDEX_PARTITION_KEY", &self.pending_partition_key),
            ("PENDING_INDEX_SORT_KEY", &self.pending_sort_key),
            (
                "DEAD_LETTER_INDEX_PARTITION_KEY",
                &self.dead_letter_partition_key,
            ),
            ("DEAD_LETTER_INDEX_SORT_KEY", &self.dead_letter_sort_key),
            ("TTL_ATTRIBUTE", &self.ttl_attribute),
        ];
        for (i, (name, value)) in attributes.iter().enumerate() {
            if value.is_empty() || value.len() > 255 {
                return Err(invalid(name, value, "an attribute name is 1 to 255 bytes"));
            }
            if ITEM_ATTRIBUTES.contains(&value.as_str()) {
                return Err(invalid(
                    name,
                    value,
                    "the outbox item has an attribute of that name",
                ));
            }
            if let Some((other, _)) = attributes[..i].iter().find(|(_, v)| v == value) {
                return Err(invalid(name, value, &format!("{other} has the same name")));
            }
        }
        let index_name = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-');
        for (name, value) in [
            ("PENDING_INDEX", &self.pending_index),
            ("DEAD_LETTER_INDEX", &self.dead_letter_index),
        ] {
            if value.len() < 3 || value.len() > 255 || !value.chars().all(index_name) {
                return Err(invalid(
                    name,
                    value,
                    "an index name is 3 to 255 characters of letters, digits, '_', '.' and '-'",
                ));
            }
        }
        if self.pending_index == self.dead_letter_index {
            return Err(invalid(
                "DEAD_LETTER_INDEX",
                &self.dead_letter_index,
                "PENDING_INDEX has the same name",
            ));
        }
        let prefix = &self.outbox_prefix;
        if prefix.is_empty() || prefix.chars().count() > 64 || prefix.contains(['!', '~']) {
            return Err(invalid(
                "OUTBOX_PREFIX",
                prefix,
                "a prefix is 1 to 64 characters, without '!' or '~'",
            ));
        }
        Ok(())
    }

    /// Whether this is the default schema (no renaming at the table's edge).
    pub fn is_default(&self) -> bool {
        Self {
            home_region: None,
            ..self.clone()
        } == Self::default()
    }

    /// `<prefix><ulid>`: an outbox item's sort key.
    pub fn outbox_sk(&self, event_id: Ulid) -> String {
        format!("{}{event_id}", self.outbox_prefix)
    }

    /// Whether a sort key is an outbox item's.
    pub fn is_outbox_sk(&self, sk: &str) -> bool {
        sk.starts_with(&self.outbox_prefix)
    }

    /// The event id of an outbox sort key.
    pub fn event_id_from_sk(&self, sk: &str) -> Option<Ulid> {
        sk.strip_prefix(&self.outbox_prefix)
            .and_then(|s| Ulid::from_string(s).ok())
    }

    /// `<prefix><shard>`, or with a home region `<prefix><region>#<shard>`:
    /// the pending index's partition key.
    pub fn pending_pk(&self, shard: u16) -> String {
        match &self.home_region {
            Some(region) => format!("{}{region}#{shard}", self.outbox_prefix),
            None => format!("{}{shard}", self.outbox_prefix),
        }
    }

    /// `DEAD#<shard>`, or with a home region `DEAD#<region>#<shard>`: the
    /// partition key of the dead-letter index. The region is part of both
    /// indexes' keys, so that a region's sweeper and statistics read only
    /// that region's items (global tables).
    pub fn dead_pk(&self, shard: u16) -> String {
        match &self.home_region {
            Some(region) => format!("DEAD#{region}#{shard}"),
            None => dead_pk(shard),
        }
    }

    /// The last sort key of the outbox range of an item collection:
    /// `<prefix>~` (`~` sorts after every ULID character).
    pub fn outbox_sk_end(&self) -> String {
        format!("{}~", self.outbox_prefix)
    }

    /// The publisher mapping's filter pattern for this schema: inserts of
    /// outbox items only, on the `dynamodb` key alone (the only key
    /// DynamoDB mappings filter on): the sort key starts with the outbox
    /// prefix; the new image has the envelope (a `REMOVE` has none) and no
    /// `lastError`, `deadLetteredAt`, `heldBehind` or `claimedUntil` (the
    /// functions' own bookkeeping, dead-letter, hold and claim `MODIFY`s).
    /// `infra/outbox.yaml`'s pattern is this one for the default schema
    /// (`tests/template.rs`).
    pub fn stream_filter_pattern(&self) -> String {
        self.pattern_with(None).to_string()
    }

    /// The mapping's filter patterns (any one admits a record): with a home
    /// region, [`KeySchema::stream_filter_pattern`] narrowed to items of
    /// that region, and to items without a region (written before the
    /// rule); without one, that pattern alone. `infra/outbox.yaml` builds
    /// the same from `AWS::Region` (`tests/template.rs`).
    pub fn stream_filter_patterns(&self) -> Vec<String> {
        match &self.home_region {
            Some(region) => vec![
                self.pattern_with(Some(serde_json::json!({"S": [region]})))
                    .to_string(),
                self.pattern_with(Some(serde_json::json!({"S": [{"exists": false}]})))
                    .to_string(),
            ],
            None => vec![self.stream_filter_pattern()],
        }
    }

    fn pattern_with(&self, region: Option<serde_json::Value>) -> serde_json::Value {
        let absent = |kind: &str| serde_json::json!({ kind: [{"exists": false}] });
        let mut pattern = serde_json::json!({
            "dynamodb": {
                "Keys": { self.sort_key.as_str(): {"S": [{"prefix": self.outbox_prefix}]} },
                "NewImage": {
                    attr::ENVELOPE: {"S": [{"exists": true}]},
                    attr::LAST_ERROR: absent("S"),
                    attr::DEAD_LETTERED_AT: absent("S"),
                    attr::HELD_BEHIND: absent("S"),
                    attr::CLAIMED_UNTIL: absent("N"),
                }
            }
        });
        if let Some(region) = region {
            pattern["dynamodb"]["NewImage"][attr::HOME_REGION] = region;
        }
        pattern
    }

    /// `attribute_not_exists(<partition key>)`: no item has this key yet.
    pub fn absent(&self) -> String {
        format!("attribute_not_exists({})", self.partition_key)
    }

    /// `key` as the table's attribute map.
    pub fn key(&self, key: &ItemKey) -> HashMap<String, AttributeValue> {
        HashMap::from([
            (
                self.partition_key.clone(),
                AttributeValue::S(key.pk.clone()),
            ),
            (self.sort_key.clone(), AttributeValue::S(key.sk.clone())),
        ])
    }

    /// The key of a table item or key map.
    pub fn item_key(&self, item: &HashMap<String, AttributeValue>) -> Option<ItemKey> {
        let pk = item.get(&self.partition_key)?.as_s().ok()?;
        let sk = item.get(&self.sort_key)?.as_s().ok()?;
        Some(ItemKey::new(pk.clone(), sk.clone()))
    }

    /// The pairs (default name, table name) that differ.
    fn renames(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            (PK, self.partition_key.as_str()),
            (SK, self.sort_key.as_str()),
            (PENDING_PK, self.pending_partition_key.as_str()),
            (PENDING_SK, self.pending_sort_key.as_str()),
            (DEAD_PK, self.dead_letter_partition_key.as_str()),
            (DEAD_SK, self.dead_letter_sort_key.as_str()),
        ]
        .into_iter()
        .filter(|(from, to)| from != to)
    }

    /// An item with the default key names (as [`crate::OutboxItem`]
    /// serializes) renamed to the table's.
    pub fn to_table(
        &self,
        mut item: HashMap<String, AttributeValue>,
    ) -> HashMap<String, AttributeValue> {
        self.rename_to_table(&mut item);
        item
    }

    /// A table item with its key names renamed to the defaults (as
    /// [`crate::OutboxItem`] decodes).
    pub fn from_table(
        &self,
        mut item: HashMap<String, AttributeValue>,
    ) -> HashMap<String, AttributeValue> {
        self.rename_from_table(&mut item);
        item
    }

    /// [`KeySchema::to_table`] in place, for any attribute value type (a
    /// stream image's too).
    pub fn rename_to_table<V>(&self, item: &mut HashMap<String, V>) {
        let moved: Vec<(String, V)> = self
            .renames()
            .filter_map(|(from, to)| item.remove(from).map(|v| (to.to_owned(), v)))
            .collect();
        item.extend(moved);
    }

    /// [`KeySchema::from_table`] in place, for any attribute value type.
    pub fn rename_from_table<V>(&self, item: &mut HashMap<String, V>) {
        let moved: Vec<(String, V)> = self
            .renames()
            .filter_map(|(from, to)| item.remove(to).map(|v| (from.to_owned(), v)))
            .collect();
        item.extend(moved);
    }
}

/// Checks a region name (the home region, and the lost region
/// `outboxctl adopt-region` takes over): 1 to 32 lower-case letters,
/// digits and `-`, so that it is safe inside the index keys; the error
/// names `setting`.
pub fn check_region(setting: &'static str, region: &str) -> Result<(), crate::error::ConfigError> {
    let valid = !region.is_empty()
        && region.len() <= 32
        && region
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if valid {
        Ok(())
    } else {
        Err(crate::error::ConfigError::Invalid {
            name: setting,
            value: region.to_owned(),
            reason: "a region is 1 to 32 lower-case letters, digits and '-'".to_owned(),
        })
    }
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
    fn the_key_schema_defaults_to_the_design_card_and_validates_each_setting() {
        let lookup = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            KeySchema::from_lookup(lookup(&[])).unwrap(),
            KeySchema::default()
        );
        assert!(KeySchema::default().is_default());
        let custom = KeySchema::from_lookup(lookup(&[
            ("PARTITION_KEY", "pk"),
            ("SORT_KEY", "sk"),
            ("OUTBOX_PREFIX", "evt#"),
            ("PENDING_INDEX", "outbox-pending"),
            ("PENDING_INDEX_PARTITION_KEY", "opk"),
        ]))
        .unwrap();
        let id = Ulid::from_parts(1, 2);
        assert_eq!(custom.outbox_sk(id), format!("evt#{id}"));
        assert_eq!(custom.event_id_from_sk(&custom.outbox_sk(id)), Some(id));
        assert_eq!(custom.pending_pk(3), "evt#3");
        assert_eq!(custom.absent(), "attribute_not_exists(pk)");
        for (pairs, named) in [
            (&[("PARTITION_KEY", "eventId")][..], "PARTITION_KEY"),
            (&[("SORT_KEY", "PK")][..], "SORT_KEY"),
            (&[("PENDING_INDEX", "a b")][..], "PENDING_INDEX"),
            (&[("DEAD_LETTER_INDEX", "GSI1")][..], "DEAD_LETTER_INDEX"),
            (&[("OUTBOX_PREFIX", "a!")][..], "OUTBOX_PREFIX"),
            (&[("TTL_ATTRIBUTE", "GSI2SK")][..], "TTL_ATTRIBUTE"),
        ] {
            let pairs: &'static [(&'static str, &'static str)] = pairs;
            let e = KeySchema::from_lookup(lookup(pairs)).unwrap_err();
            assert!(e.to_string().contains(named), "{e}");
        }
    }

    #[test]
    fn items_are_renamed_to_the_table_and_back() {
        let schema = KeySchema {
            partition_key: "pk".into(),
            sort_key: "sk".into(),
            pending_partition_key: "opk".into(),
            ..KeySchema::default()
        };
        let item = HashMap::from([
            (PK.to_owned(), AttributeValue::S("a".into())),
            (SK.to_owned(), AttributeValue::S("b".into())),
            (PENDING_PK.to_owned(), AttributeValue::S("c".into())),
            (PENDING_SK.to_owned(), AttributeValue::S("d".into())),
            (attr::EVENT_ID.to_owned(), AttributeValue::S("e".into())),
        ]);
        let table = schema.to_table(item.clone());
        let mut names: Vec<&str> = table.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, ["GSI1SK", "eventId", "opk", "pk", "sk"]);
        assert_eq!(schema.item_key(&table), Some(ItemKey::new("a", "b")));
        assert_eq!(schema.from_table(table), item);
    }

    #[test]
    fn keys_follow_the_design_card() {
        let id = Ulid::from_string("01J9ZQ7Y8X4M2N3P5Q6R7S8T9V").unwrap();
        assert_eq!(outbox_sk(id), "OUTBOX#01J9ZQ7Y8X4M2N3P5Q6R7S8T9V");
        let schema = KeySchema::default();
        assert_eq!(schema.event_id_from_sk(&outbox_sk(id)), Some(id));
        assert_eq!(schema.event_id_from_sk("META"), None);
        assert_eq!(schema.event_id_from_sk("OUTBOX#not-a-ulid"), None);
        assert!(is_outbox_sk("OUTBOX#x") && !is_outbox_sk("META"));
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

    /// Issue #28: the home region, from `HOME_REGION` (not from
    /// `AWS_REGION`: the stacks set it explicitly); none with the rule
    /// off; a clear error naming the variable.
    #[test]
    fn the_home_region_comes_from_the_environment_and_decides_who_publishes() {
        let schema = |vars: &[(&str, &str)]| {
            let vars: Vec<(String, String)> = vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            KeySchema::from_lookup(move |k| {
                vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
            })
        };
        assert_eq!(schema(&[]).unwrap().home_region, None);
        assert_eq!(
            schema(&[("AWS_REGION", "eu-west-1")]).unwrap().home_region,
            None
        );
        let lambda = schema(&[("HOME_REGION", "eu-west-1")]).unwrap();
        assert_eq!(lambda.home_region.as_deref(), Some("eu-west-1"));
        assert!(lambda.is_default(), "the region is not a name");
        let explicit = schema(&[("AWS_REGION", "eu-west-1"), ("HOME_REGION", "us-east-2")]);
        assert_eq!(explicit.unwrap().home_region.as_deref(), Some("us-east-2"));
        let off = schema(&[("HOME_REGION", "eu-west-1"), ("HOME_REGION_RULE", "off")]);
        assert_eq!(off.unwrap().home_region, None);
        for (vars, name) in [
            (&[("HOME_REGION_RULE", "yes")][..], "HOME_REGION_RULE"),
            (&[("HOME_REGION", "EU West")][..], "HOME_REGION"),
        ] {
            match schema(vars) {
                Err(crate::error::ConfigError::Invalid { name: got, .. }) => assert_eq!(got, name),
                other => panic!("{vars:?}: {other:?}"),
            }
        }

        assert!(lambda.publishes_region(Some("eu-west-1")));
        assert!(!lambda.publishes_region(Some("us-east-1")));
        assert!(
            lambda.publishes_region(None),
            "items written before the rule"
        );
        let anywhere = KeySchema::default();
        assert!(anywhere.publishes_region(Some("us-east-1")));

        // The region is part of both indexes' keys.
        assert_eq!(lambda.pending_pk(3), "OUTBOX#eu-west-1#3");
        assert_eq!(lambda.dead_pk(3), "DEAD#eu-west-1#3");
        assert_eq!(
            lambda.clone().with_home_region(None).pending_pk(3),
            "OUTBOX#3"
        );
        assert_eq!(anywhere.dead_pk(3), dead_pk(3));

        // The filter: one pattern without a region, two with one.
        assert_eq!(
            anywhere.stream_filter_patterns(),
            [anywhere.stream_filter_pattern()]
        );
        let patterns: Vec<serde_json::Value> = lambda
            .stream_filter_patterns()
            .iter()
            .map(|p| serde_json::from_str(p).unwrap())
            .collect();
        assert_eq!(patterns.len(), 2);
        assert_eq!(
            patterns[0]["dynamodb"]["NewImage"][attr::HOME_REGION],
            serde_json::json!({"S": ["eu-west-1"]})
        );
        assert_eq!(
            patterns[1]["dynamodb"]["NewImage"][attr::HOME_REGION],
            serde_json::json!({"S": [{"exists": false}]})
        );
    }
}
