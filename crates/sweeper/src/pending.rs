//! Queries on the sparse indexes. They read outbox items only: the table's
//! other items never appear in these indexes, so the read cost of a sweep
//! depends on the backlog, not on the table's size.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Select};
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use outbox_core::keys::{self, ItemKey};
use outbox_core::store::DynamoStore;
use outbox_core::OutboxItem;
use time::OffsetDateTime;
use ulid::Ulid;

/// Where a paged query goes on.
pub type Cursor = HashMap<String, AttributeValue>;

/// A query failed.
#[derive(Debug, Clone, thiserror::Error)]
#[error("query on {index} failed: {code}")]
pub struct QueryError {
    pub index: &'static str,
    pub code: String,
}

/// One page of stranded items, oldest first.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub items: Vec<OutboxItem>,
    /// Items that do not decode: dead-lettered, never published.
    pub undecodable: Vec<(ItemKey, String)>,
    /// Items DynamoDB read for this page (before the filter).
    pub scanned: usize,
    pub next: Option<Cursor>,
}

/// What is pending in one shard, and its dead letters.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    pub pending: usize,
    pub oldest_age_seconds: f64,
    pub dead_letters: usize,
    pub scanned: usize,
    pub queries: usize,
}

/// The queries of one shard.
pub struct Query<'a> {
    store: &'a DynamoStore,
    shard: u16,
}

/// The smallest ULID of a millisecond: every id created before `at` sorts
/// below it.
pub fn ulid_floor(at: OffsetDateTime) -> String {
    let ms = (at.unix_timestamp_nanos() / 1_000_000).max(0) as u64;
    Ulid::from_parts(ms, 0).to_string()
}

impl<'a> Query<'a> {
    pub fn new(store: &'a DynamoStore, shard: u16) -> Self {
        Self { store, shard }
    }

    /// Items created before `cutoff` whose next attempt is due at `now`,
    /// oldest first, at most `limit` read.
    pub async fn stranded_page(
        &self,
        cutoff: OffsetDateTime,
        now: OffsetDateTime,
        limit: i32,
        start: Option<Cursor>,
    ) -> Result<Page, QueryError> {
        let out = self
            .store
            .client()
            .query()
            .table_name(self.store.table())
            .index_name(keys::PENDING_INDEX)
            .key_condition_expression("#pk = :pk AND #sk < :cutoff")
            .filter_expression("attribute_not_exists(nextAttemptAt) OR nextAttemptAt <= :now")
            .expression_attribute_names("#pk", keys::PENDING_PK)
            .expression_attribute_names("#sk", keys::PENDING_SK)
            .expression_attribute_values(":pk", AttributeValue::S(keys::pending_pk(self.shard)))
            .expression_attribute_values(":cutoff", AttributeValue::S(ulid_floor(cutoff)))
            .expression_attribute_values(
                ":now",
                AttributeValue::N(now.unix_timestamp().to_string()),
            )
            .scan_index_forward(true)
            .limit(limit)
            .set_exclusive_start_key(start)
            .send()
            .await
            .map_err(|e| QueryError {
                index: keys::PENDING_INDEX,
                code: e.code().unwrap_or("Unknown").to_owned(),
            })?;
        let mut page = Page {
            scanned: out.scanned_count().max(0) as usize,
            next: out.last_evaluated_key().cloned(),
            ..Page::default()
        };
        for item in out.items.unwrap_or_default() {
            let key = ItemKey::from_attributes(&item);
            match OutboxItem::from_attributes(item) {
                Ok(decoded) => page.items.push(decoded),
                Err(e) => match key {
                    Some(key) => page.undecodable.push((key, e.to_string())),
                    None => tracing::error!("an index item has no primary key"),
                },
            }
        }
        Ok(page)
    }

    /// Counts pending items and finds the oldest (keys only), and counts
    /// dead letters.
    pub async fn stats(&self, now: OffsetDateTime) -> Result<Stats, QueryError> {
        let mut stats = Stats::default();
        let mut oldest: Option<Ulid> = None;
        let mut start = None;
        loop {
            let out = self
                .store
                .client()
                .query()
                .table_name(self.store.table())
                .index_name(keys::PENDING_INDEX)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", keys::PENDING_PK)
                .expression_attribute_names("#sk", keys::PENDING_SK)
                .expression_attribute_values(":pk", AttributeValue::S(keys::pending_pk(self.shard)))
                .projection_expression("#sk")
                .scan_index_forward(true)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| QueryError {
                    index: keys::PENDING_INDEX,
                    code: e.code().unwrap_or("Unknown").to_owned(),
                })?;
            stats.queries += 1;
            stats.scanned += out.scanned_count().max(0) as usize;
            stats.pending += out.count().max(0) as usize;
            if oldest.is_none() {
                oldest = out
                    .items()
                    .first()
                    .and_then(|i| i.get(keys::PENDING_SK))
                    .and_then(|v| v.as_s().ok())
                    .and_then(|s| Ulid::from_string(s).ok());
            }
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
        if let Some(oldest) = oldest {
            let now_ms = (now.unix_timestamp_nanos() / 1_000_000).max(0) as u64;
            stats.oldest_age_seconds = now_ms.saturating_sub(oldest.timestamp_ms()) as f64 / 1000.0;
        }
        let mut start = None;
        loop {
            let out = self
                .store
                .client()
                .query()
                .table_name(self.store.table())
                .index_name(keys::DEAD_LETTER_INDEX)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", keys::DEAD_PK)
                .expression_attribute_values(":pk", AttributeValue::S(keys::dead_pk(self.shard)))
                .select(Select::Count)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(|e| QueryError {
                    index: keys::DEAD_LETTER_INDEX,
                    code: e.code().unwrap_or("Unknown").to_owned(),
                })?;
            stats.queries += 1;
            stats.scanned += out.scanned_count().max(0) as usize;
            stats.dead_letters += out.count().max(0) as usize;
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                break;
            }
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floor_sorts_after_older_ids_and_before_newer() {
        let at = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
        let floor = ulid_floor(at);
        let older = Ulid::from_parts(1_800_000_000_000 - 1, u128::MAX >> 48).to_string();
        let same_ms = Ulid::from_parts(1_800_000_000_000, 1).to_string();
        assert!(older < floor);
        assert!(same_ms > floor);
        assert_eq!(
            ulid_floor(OffsetDateTime::UNIX_EPOCH - time::Duration::days(1)),
            Ulid::from_parts(0, 0).to_string()
        );
    }
}
