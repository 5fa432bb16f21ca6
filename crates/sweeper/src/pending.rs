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

#[derive(Debug, Default)]
struct Walk {
    count: usize,
    scanned: usize,
    queries: usize,
    first_sort_key: Option<String>,
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
        let pending = self
            .walk(
                keys::PENDING_INDEX,
                keys::PENDING_PK,
                keys::pending_pk(self.shard),
                Some(keys::PENDING_SK),
            )
            .await?;
        let dead = self
            .walk(
                keys::DEAD_LETTER_INDEX,
                keys::DEAD_PK,
                keys::dead_pk(self.shard),
                None,
            )
            .await?;
        let oldest_age_seconds = pending
            .first_sort_key
            .and_then(|s| Ulid::from_string(&s).ok())
            .map(|oldest| {
                let now_ms = (now.unix_timestamp_nanos() / 1_000_000).max(0) as u64;
                now_ms.saturating_sub(oldest.timestamp_ms()) as f64 / 1000.0
            })
            .unwrap_or(0.0);
        Ok(Stats {
            pending: pending.count,
            oldest_age_seconds,
            dead_letters: dead.count,
            scanned: pending.scanned + dead.scanned,
            queries: pending.queries + dead.queries,
        })
    }

    /// Pages through one partition of an index: counts its items and, when
    /// `sort_key` is given, returns the first (smallest) sort key, reading
    /// only that attribute; otherwise it only counts (`Select: COUNT`).
    async fn walk(
        &self,
        index: &'static str,
        pk_name: &str,
        pk_value: String,
        sort_key: Option<&str>,
    ) -> Result<Walk, QueryError> {
        let mut walk = Walk::default();
        let mut start = None;
        loop {
            let mut query = self
                .store
                .client()
                .query()
                .table_name(self.store.table())
                .index_name(index)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", pk_name)
                .expression_attribute_values(":pk", AttributeValue::S(pk_value.clone()))
                .scan_index_forward(true)
                .set_exclusive_start_key(start);
            query = match sort_key {
                Some(name) => query
                    .expression_attribute_names("#sk", name)
                    .projection_expression("#sk"),
                None => query.select(Select::Count),
            };
            let out = query.send().await.map_err(|e| QueryError {
                index,
                code: e.code().unwrap_or("Unknown").to_owned(),
            })?;
            walk.queries += 1;
            walk.scanned += out.scanned_count().max(0) as usize;
            walk.count += out.count().max(0) as usize;
            if let (None, Some(name)) = (&walk.first_sort_key, sort_key) {
                walk.first_sort_key = out
                    .items()
                    .first()
                    .and_then(|i| i.get(name))
                    .and_then(|v| v.as_s().ok())
                    .cloned();
            }
            start = out.last_evaluated_key().cloned();
            if start.is_none() {
                return Ok(walk);
            }
        }
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
