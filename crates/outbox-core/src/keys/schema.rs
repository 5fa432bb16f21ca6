//! [`KeySchema`]: the outbox's names in a user's own table, from the
//! environment and validated; the home-region rule (`HOME_REGION`,
//! `HOME_REGION_RULE`: which region publishes an item, and its regional
//! pending and dead-letter keys); the stream filter built from the names.

#[allow(clippy::wildcard_imports)]
use super::*;

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

/// The placeholder of the partition key in [`KeySchema::absent`].
const ABSENT_PLACEHOLDER: &str = "#outboxPk";

/// The outbox item's own attribute names, which no key setting may take.
const ITEM_ATTRIBUTES: [&str; 22] = [
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
    attr::KEYS_REPAIRED_AT,
    attr::SHARDS_HIGH_WATER,
    attr::VARIABLES,
    attr::RECORDED_BY,
    attr::RECORDED_SINCE,
];

impl KeySchema {
    /// The variables the names are read from ([`KeySchema::from_lookup`])
    /// and written as ([`KeySchema::variables`]), one per name, in the
    /// order of the table above (the home region's two are not names).
    pub const VARIABLES: [&'static str; 10] = [
        "PARTITION_KEY",
        "SORT_KEY",
        "OUTBOX_PREFIX",
        "PENDING_INDEX",
        "PENDING_INDEX_PARTITION_KEY",
        "PENDING_INDEX_SORT_KEY",
        "DEAD_LETTER_INDEX",
        "DEAD_LETTER_INDEX_PARTITION_KEY",
        "DEAD_LETTER_INDEX_SORT_KEY",
        "TTL_ATTRIBUTE",
    ];

    /// The schema from environment variables (table above); unset or
    /// empty ones keep their defaults.
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, crate::error::ConfigError> {
        let mut schema = Self::default();
        for (name, field) in Self::VARIABLES.into_iter().zip(schema.names_mut()) {
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
        Self::VARIABLES
            .into_iter()
            .zip(self.names())
            .map(|(name, value)| (name, value.clone()))
            .collect()
    }

    /// The names, in the order of [`KeySchema::VARIABLES`].
    fn names(&self) -> [&String; 10] {
        [
            &self.partition_key,
            &self.sort_key,
            &self.outbox_prefix,
            &self.pending_index,
            &self.pending_partition_key,
            &self.pending_sort_key,
            &self.dead_letter_index,
            &self.dead_letter_partition_key,
            &self.dead_letter_sort_key,
            &self.ttl_attribute,
        ]
    }

    /// The names to set, in the order of [`KeySchema::VARIABLES`].
    fn names_mut(&mut self) -> [&mut String; 10] {
        [
            &mut self.partition_key,
            &mut self.sort_key,
            &mut self.outbox_prefix,
            &mut self.pending_index,
            &mut self.pending_partition_key,
            &mut self.pending_sort_key,
            &mut self.dead_letter_index,
            &mut self.dead_letter_partition_key,
            &mut self.dead_letter_sort_key,
            &mut self.ttl_attribute,
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

    /// The shard of a pending-index partition key that this schema's
    /// sweeper reads: `<prefix>[<home region>#]<shard>` with `shard` below
    /// `shards`, or, for an item without a home region, the key without one
    /// (the sweeper adopts those: `adopt_unregioned`). `None` for any other
    /// value: another region's key, another prefix, a shard out of range.
    pub fn pending_shard(
        &self,
        value: &str,
        item_region: Option<&str>,
        shards: u16,
    ) -> Option<u16> {
        let rest = value.strip_prefix(&self.outbox_prefix)?;
        let shard = match (&self.home_region, rest.split_once('#')) {
            (Some(home), Some((region, shard))) if region == home => shard,
            (_, None) if item_region.is_none() || self.home_region.is_none() => rest,
            _ => return None,
        };
        // Digits only: `u16::from_str` takes a leading `+`.
        if shard.is_empty() || !shard.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        shard.parse::<u16>().ok().filter(|n| *n < shards.max(1))
    }

    /// Whether an outbox item's pending-index keys (default names, as
    /// [`crate::OutboxItem`] decodes them) are ones this schema's sweeper
    /// reads: a partition key of [`KeySchema::pending_shard`] and a sort key
    /// of the event (`<ulid>`, or `!<ulid>` handed to the scheduled sweep).
    /// An item that is not, published from the stream, would be in no
    /// index the stack reads if anything failed after.
    pub fn sweepable(&self, item: &crate::OutboxItem, shards: u16) -> bool {
        let pk_ok = item.pending_pk.as_deref().is_some_and(|pk| {
            self.pending_shard(pk, item.home_region.as_deref(), shards)
                .is_some()
        });
        let sk_ok = item.pending_sk.as_deref().is_some_and(|sk| {
            let id = item.event_id.to_string();
            sk == id || sk.strip_prefix(REDRIVEN_PREFIX) == Some(id.as_str())
        });
        pk_ok && sk_ok
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
                    attr::KEYS_REPAIRED_AT: absent("N"),
                }
            }
        });
        if let Some(region) = region {
            pattern["dynamodb"]["NewImage"][attr::HOME_REGION] = region;
        }
        pattern
    }

    /// `attribute_not_exists(#outboxPk)`: no item has this key yet. The
    /// partition key goes through `ExpressionAttributeNames` (any name is
    /// safe, a reserved word or one with `-`, `.` or `#` too): add
    /// [`KeySchema::absent_name`] to the same request.
    pub fn absent(&self) -> String {
        format!("attribute_not_exists({ABSENT_PLACEHOLDER})")
    }

    /// The name [`KeySchema::absent`] refers to: (`#outboxPk`, the
    /// partition key), for `expression_attribute_names`.
    pub fn absent_name(&self) -> (&'static str, &str) {
        (ABSENT_PLACEHOLDER, self.partition_key.as_str())
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
        // A default name the table does not use (written by a writer left
        // on the defaults) is not read as the key it names: the table's
        // name for that key is what the indexes see.
        let names = self.names();
        let stale: Vec<&'static str> = self
            .renames()
            .map(|(from, _)| from)
            .filter(|from| !names.iter().any(|n| n.as_str() == *from))
            .collect();
        for from in stale {
            item.remove(from);
        }
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
