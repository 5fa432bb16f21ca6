//! Idempotency keys: the `Idempotency-Key` header, scoped to its caller,
//! and the record that stores a command's response in the command's own
//! transaction, so that a retry replays it instead of writing again.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Put};
use outbox_core::keys::{self, ItemKey, KeySchema};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::OffsetDateTime;

use crate::backend::BackendError;
use crate::caller::Caller;

/// `IDEMPOTENCY#<hash of the caller's key>` (sort key `META`): the caller's
/// key is hashed so that whatever the client sends never becomes part of a
/// key verbatim.
fn idempotency_pk(key_hash: &str) -> String {
    format!("IDEMPOTENCY#{key_hash}")
}

/// A validated `Idempotency-Key`: 1 to 255 printable ASCII characters. Only
/// a SHA-256 of it, with its caller, is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Checks an `Idempotency-Key` header (1 to 255 visible ASCII characters).
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        if raw.is_empty() || raw.len() > 255 || !raw.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err("Idempotency-Key must be 1 to 255 printable ASCII characters");
        }
        Ok(Self(hex::encode(Sha256::digest(raw.as_bytes()))))
    }

    /// The record's key: the same header from two callers is two records.
    pub(crate) fn record_key(&self, caller: &Caller) -> ItemKey {
        let scoped = hash(&[caller.id(), &self.0]);
        ItemKey::new(idempotency_pk(&scoped), keys::META)
    }
}

/// A response stored with an idempotency key and replayed for a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// The HTTP status first answered.
    pub status: u16,
    /// The body first answered.
    pub body: String,
}

/// What a live record says about a request that carries its key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Prior {
    /// The same request ran before: answer with its response.
    Replay(StoredResponse),
    /// The key was used for a different request.
    KeyReused,
}

/// The stored record, item `IDEMPOTENCY#<hash> / META`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct IdempotencyRecord {
    #[serde(rename = "PK")]
    pub pk: String,
    #[serde(rename = "SK")]
    pub sk: String,
    /// Route and canonical body of the request, hashed.
    pub request_hash: String,
    pub response_status: u16,
    pub response_body: String,
    /// Epoch seconds; the table's TTL attribute.
    pub expires_at: i64,
}

impl IdempotencyRecord {
    pub(crate) fn new(
        key: &ItemKey,
        request_hash: &str,
        response: StoredResponse,
        ttl: Duration,
        now: i64,
    ) -> Self {
        Self {
            pk: key.pk.clone(),
            sk: key.sk.clone(),
            request_hash: request_hash.to_owned(),
            response_status: response.status,
            response_body: response.body,
            expires_at: now.saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)),
        }
    }

    /// The record as a conditional put: it is written only where no live
    /// record is. A record past its TTL may not be deleted yet; it no
    /// longer counts.
    pub(crate) fn put(
        &self,
        table: &str,
        schema: &KeySchema,
        now: i64,
    ) -> Result<Put, BackendError> {
        let mut item: HashMap<String, AttributeValue> =
            serde_dynamo::to_item(self).map_err(BackendError::Encode)?;
        schema.rename_to_table(&mut item);
        rename(&mut item, keys::TTL_ATTRIBUTE, &schema.ttl_attribute);
        Put::builder()
            .table_name(table)
            .set_item(Some(item))
            .condition_expression(format!("{} OR #expires < :now", schema.absent()))
            .expression_attribute_names("#expires", &schema.ttl_attribute)
            .expression_attribute_names(schema.absent_name().0, schema.absent_name().1)
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
            .build()
            .map_err(BackendError::Request)
    }

    /// What this record says about a request hashing to `request_hash`;
    /// `None` once it has expired.
    pub(crate) fn prior(&self, request_hash: &str, now: i64) -> Option<Prior> {
        if self.expires_at < now {
            return None;
        }
        Some(if self.request_hash == request_hash {
            Prior::Replay(StoredResponse {
                status: self.response_status,
                body: self.response_body.clone(),
            })
        } else {
            Prior::KeyReused
        })
    }

    /// [`IdempotencyRecord::prior`] of a stored item; an item that is not a
    /// record (it cannot be, by its key) says nothing.
    pub(crate) fn prior_of(
        schema: &KeySchema,
        item: &HashMap<String, AttributeValue>,
        request_hash: &str,
        now: i64,
    ) -> Option<Prior> {
        let mut item = item.clone();
        schema.rename_from_table(&mut item);
        rename(&mut item, &schema.ttl_attribute, keys::TTL_ATTRIBUTE);
        let record: Self = serde_dynamo::from_item(item).ok()?;
        record.prior(request_hash, now)
    }
}

/// Moves attribute `from` to `to` (the TTL attribute's name in the table).
fn rename(item: &mut HashMap<String, AttributeValue>, from: &str, to: &str) {
    if from != to {
        if let Some(value) = item.remove(from) {
            item.insert(to.to_owned(), value);
        }
    }
}

/// The hash that identifies a request: its route and canonical body.
pub(crate) fn request_hash(route: &str, body: &str) -> String {
    hash(&[route, body])
}

/// The current time as the records count it (epoch seconds).
pub(crate) fn now() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

fn hash(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for (i, part) in parts.iter().enumerate() {
        if i > 0 {
            hasher.update(b"\n");
        }
        hasher.update(part.as_bytes());
    }
    hex::encode(hasher.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(name: &str) -> Caller {
        Caller::jwt(name).unwrap()
    }

    #[test]
    fn keys_are_validated_hashed_and_scoped_to_the_caller() {
        assert!(IdempotencyKey::parse("").is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
        assert!(IdempotencyKey::parse("tab\there").is_err());
        assert!(IdempotencyKey::parse("ключ").is_err());
        let key = IdempotencyKey::parse("order-123 retry").unwrap();
        assert_eq!(key.0.len(), 64);
        let alice = key.record_key(&caller("alice"));
        assert!(!alice.pk.contains("order-123"));
        assert_eq!(alice, key.record_key(&caller("alice")));
        assert_ne!(alice, key.record_key(&caller("bob")));
    }

    #[test]
    fn records_replay_only_for_the_same_request_until_they_expire() {
        let key = IdempotencyKey::parse("k").unwrap().record_key(&caller("a"));
        let response = StoredResponse {
            status: 201,
            body: "{}".into(),
        };
        let record =
            IdempotencyRecord::new(&key, "h1", response.clone(), Duration::from_secs(60), 1_000);
        assert_eq!(record.prior("h1", 1_000), Some(Prior::Replay(response)));
        assert_eq!(record.prior("h2", 1_000), Some(Prior::KeyReused));
        assert_eq!(record.prior("h1", 1_061), None);
        // The stored form round-trips, TTL attribute included, with the
        // default key schema and with a table's own names.
        let custom = KeySchema {
            partition_key: "pk".into(),
            sort_key: "sk".into(),
            ttl_attribute: "ttl".into(),
            ..KeySchema::default()
        };
        for (schema, ttl, pk) in [
            (KeySchema::default(), keys::TTL_ATTRIBUTE, keys::PK),
            (custom, "ttl", "pk"),
        ] {
            let put = record.put("t", &schema, 1_000).unwrap();
            let item = put.item().clone();
            assert_eq!(item[ttl], AttributeValue::N("1060".into()));
            assert!(item.contains_key(pk));
            assert!(put
                .condition_expression()
                .is_some_and(|c| c.contains(&schema.absent())));
            let prior = IdempotencyRecord::prior_of(&schema, &item, "h2", 1_000);
            assert_eq!(prior, Some(Prior::KeyReused));
        }
    }
}
