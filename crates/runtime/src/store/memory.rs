//! [`MemoryStore`]: the store port in memory, for unit tests of logic,
//! benches and examples (feature `testing`). It keeps items as the table
//! would (both indexes follow their attributes) and logs every write asked
//! of it. Adapters are tested against a real DynamoDB API, never this.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Mutex, MutexGuard};

use aws_sdk_dynamodb::types::AttributeValue;
use ulid::Ulid;

use super::{
    sanitize, Claim, CollectionRead, Created, Cursor, DeadLetter, DeadLetterPage, DeadLetterRecord,
    Marked, OutboxStore, Page, PendingItem, PendingQuery, ShardStats, StoreError,
};
use crate::config::RecordedSettings;
use crate::retry::Deadline;
use outbox_core::keys::{self, ItemKey};
use outbox_core::now_utc_millis;
use outbox_core::OutboxItem;

/// The writes a [`MemoryStore`] was asked for, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteLog {
    /// Keys of published items it was asked to delete.
    pub deleted: Vec<ItemKey>,
    /// Keys it was asked to dead-letter.
    pub dead_lettered: Vec<ItemKey>,
    /// Failed attempts recorded: key and attempts.
    pub failures: Vec<(ItemKey, u32)>,
}

/// The store port in memory.
#[derive(Debug)]
pub struct MemoryStore {
    items: Mutex<BTreeMap<ItemKey, OutboxItem>>,
    log: Mutex<WriteLog>,
    logging: bool,
    shards: u16,
    recorded: AtomicU16,
    fail_dead_letters: AtomicBool,
    settings: Mutex<Vec<RecordedSettings>>,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new(1)
    }
}

/// Whether `item` is still `letter`'s dead letter, and no live claim holds it.
fn is_free_dead_letter(item: &OutboxItem, letter: &DeadLetterRecord) -> bool {
    item.dead_lettered_at.is_some()
        && item.dead_sk.as_deref() == Some(letter.event_id.as_str())
        && unclaimed(item)
}

/// Whether no live claim holds the item.
fn unclaimed(item: &OutboxItem) -> bool {
    item.claimed_until
        .is_none_or(|until| until < now_utc_millis().unix_timestamp())
}

/// Whether no live claim but `claim` (the writer's own) holds the item.
fn unclaimed_but(item: &OutboxItem, claim: Option<&str>) -> bool {
    unclaimed(item) || (claim.is_some() && item.claim_token.as_deref() == claim)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl MemoryStore {
    /// An empty store configured with `shards` shards.
    pub fn new(shards: u16) -> Self {
        Self {
            items: Mutex::new(BTreeMap::new()),
            log: Mutex::new(WriteLog::default()),
            logging: true,
            shards,
            recorded: AtomicU16::new(0),
            fail_dead_letters: AtomicBool::new(false),
            settings: Mutex::default(),
        }
    }

    /// The same, logging nothing (a bench that calls it millions of times).
    pub fn quiet(shards: u16) -> Self {
        Self {
            logging: false,
            ..Self::new(shards)
        }
    }

    /// Makes every dead-letter write fail (a throttled table).
    pub fn fail_dead_letters(self, fail: bool) -> Self {
        self.fail_dead_letters.store(fail, Ordering::SeqCst);
        self
    }

    /// Stores `item` as a writer would.
    pub fn insert(&self, item: OutboxItem) {
        lock(&self.items).insert(item.key(), item);
    }

    /// Every stored item, by key.
    pub fn items(&self) -> Vec<OutboxItem> {
        lock(&self.items).values().cloned().collect()
    }

    /// The writes asked so far.
    pub fn log(&self) -> WriteLog {
        lock(&self.log).clone()
    }

    /// As the DynamoDB adapter: `update` a pending item and hand it to the
    /// scheduled sweep (`!<ulid>` pending key, claim cleared), unless a
    /// live claim other than `claim` holds it.
    fn hand_to_schedule(
        &self,
        key: &ItemKey,
        claim: Option<&str>,
        update: impl FnOnce(&mut OutboxItem),
    ) -> Marked {
        match lock(&self.items).get_mut(key) {
            Some(item) if item.pending_pk.is_some() && unclaimed_but(item, claim) => {
                update(item);
                item.pending_sk = Some(keys::redriven_sk(item.event_id));
                item.claim_token = None;
                item.claimed_until = None;
                Marked::Updated
            }
            _ => Marked::Gone,
        }
    }

    fn record(&self, write: impl FnOnce(&mut WriteLog)) {
        if self.logging {
            write(&mut lock(&self.log));
        }
    }
}

/// A cursor holding the last sort key a page returned.
fn cursor_after(sk: &str) -> Cursor {
    Cursor::from([("after".to_owned(), AttributeValue::S(sk.to_owned()))])
}

fn after(cursor: &Option<Cursor>) -> Option<String> {
    cursor
        .as_ref()
        .and_then(|c| c.get("after"))
        .and_then(|v| v.as_s().ok())
        .cloned()
}

fn record_of(item: &OutboxItem, shard: u16) -> DeadLetterRecord {
    DeadLetterRecord {
        event_id: item.dead_sk.clone().unwrap_or_default(),
        event_type: item.event_type.clone(),
        aggregate_id: item.aggregate_id.clone(),
        attempts: item.attempts,
        reason: item.dead_letter_reason.clone().unwrap_or_default(),
        dead_lettered_at: item.dead_lettered_at.clone().unwrap_or_default(),
        key: item.key(),
        shard,
        envelope: Some(item.envelope.clone()),
    }
}

impl MemoryStore {
    /// The items of one index partition, by sort key, after the cursor.
    fn partition(
        &self,
        keep: impl Fn(&OutboxItem) -> Option<String>,
        cursor: &Option<Cursor>,
    ) -> Vec<(String, OutboxItem)> {
        let start = after(cursor);
        let mut rows: Vec<(String, OutboxItem)> = lock(&self.items)
            .values()
            .filter_map(|item| keep(item).map(|sk| (sk, item.clone())))
            .filter(|(sk, _)| start.as_ref().is_none_or(|s| sk > s))
            .collect();
        rows.sort_by(|a, b| a.0.cmp(&b.0));
        rows
    }
}

impl OutboxStore for MemoryStore {
    async fn delete_published(&self, keys: &[ItemKey], _: &Deadline) -> Vec<ItemKey> {
        let mut items = lock(&self.items);
        for key in keys {
            items.remove(key);
        }
        self.record(|log| log.deleted.extend_from_slice(keys));
        Vec::new()
    }

    async fn dead_letter(
        &self,
        letter: DeadLetter<'_>,
        _: &Deadline,
    ) -> Result<Marked, StoreError> {
        if self.fail_dead_letters.load(Ordering::SeqCst) {
            return Err(StoreError::new("dead_letter", "ThrottlingException"));
        }
        self.record(|log| log.dead_lettered.push(letter.key.clone()));
        let mut items = lock(&self.items);
        let Some(item) = items.get_mut(letter.key) else {
            return Ok(Marked::Gone);
        };
        if item.dead_lettered_at.is_some() || !unclaimed_but(item, letter.claim) {
            return Ok(Marked::Gone);
        }
        let shard = keys::shard_of(letter.aggregate_id.unwrap_or(&letter.key.pk), self.shards);
        item.dead_lettered_at = Some(
            now_utc_millis()
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default(),
        );
        item.dead_letter_reason = Some(sanitize(letter.reason));
        item.dead_pk = Some(keys::dead_pk(shard));
        item.dead_sk = Some(item.event_id.to_string());
        if let Some(attempts) = letter.attempts {
            item.attempts = attempts;
        }
        item.pending_pk = None;
        item.pending_sk = None;
        item.next_attempt_at = None;
        item.claim_token = None;
        item.claimed_until = None;
        Ok(Marked::Updated)
    }

    async fn record_failure(
        &self,
        key: &ItemKey,
        attempts: u32,
        next_attempt_at: i64,
        error: &str,
        claim: Option<&str>,
        _: &Deadline,
    ) -> Result<Marked, StoreError> {
        self.record(|log| log.failures.push((key.clone(), attempts)));
        Ok(self.hand_to_schedule(key, claim, |item| {
            item.attempts = attempts;
            item.next_attempt_at = Some(next_attempt_at);
            item.last_error = Some(sanitize(error));
            item.held_behind = None;
            item.held_since = None;
        }))
    }

    async fn publishable(
        &self,
        keys: &[ItemKey],
        _: &Deadline,
    ) -> Result<std::collections::HashSet<ItemKey>, StoreError> {
        let items = lock(&self.items);
        Ok(keys
            .iter()
            .filter(|key| {
                items
                    .get(*key)
                    .is_some_and(|item| item.dead_lettered_at.is_none())
            })
            .cloned()
            .collect())
    }

    fn configured_shards(&self) -> u16 {
        self.shards
    }

    async fn shard_count(&self, _: &Deadline) -> Result<u16, StoreError> {
        let before = self.recorded.fetch_max(self.shards, Ordering::SeqCst);
        Ok(before.max(self.shards))
    }

    async fn recorded_shards(&self, _: &Deadline) -> Result<u16, StoreError> {
        let recorded = self.recorded.load(Ordering::SeqCst);
        Ok(if recorded == 0 { self.shards } else { recorded }.max(1))
    }

    async fn record_settings(
        &self,
        settings: &RecordedSettings,
        _: &Deadline,
    ) -> Result<(), StoreError> {
        let mut records = lock(&self.settings);
        records.retain(|r| (&r.region, &r.function) != (&settings.region, &settings.function));
        records.push(settings.clone());
        Ok(())
    }

    async fn recorded_settings(&self, _: &Deadline) -> Result<Vec<RecordedSettings>, StoreError> {
        Ok(lock(&self.settings).clone())
    }

    async fn pending_page(
        &self,
        query: &PendingQuery,
        cursor: Option<Cursor>,
        _: &Deadline,
    ) -> Result<Page, StoreError> {
        let pk = keys::pending_pk(query.shard);
        let created = query.created.clone();
        let rows = self.partition(
            |item| {
                let sk = item.pending_sk.clone()?;
                let keep = item.pending_pk.as_deref() == Some(pk.as_str())
                    && match &created {
                        Created::Before(id) => sk < id.to_string(),
                        Created::Between(from, to) => {
                            sk >= from.to_string() && sk <= to.to_string()
                        }
                        Created::Redriven => keys::is_redriven_sk(&sk),
                        Created::Any => true,
                    };
                keep.then_some(sk)
            },
            &cursor,
        );
        let limit = query.limit.max(1) as usize;
        let next = (rows.len() > limit).then(|| cursor_after(&rows[limit - 1].0));
        let items: Vec<PendingItem> = rows
            .into_iter()
            .take(limit)
            .map(|(_, item)| PendingItem::Item(item))
            .collect();
        Ok(Page {
            scanned: items.len(),
            items,
            next,
        })
    }

    async fn shard_stats(
        &self,
        shard: u16,
        count_limit: i32,
        _: &Deadline,
    ) -> Result<ShardStats, StoreError> {
        let limit = count_limit.max(0) as usize;
        let pending_pk = keys::pending_pk(shard);
        let pending = self.partition(
            |i| {
                (i.pending_pk.as_deref() == Some(pending_pk.as_str()))
                    .then(|| i.pending_sk.clone())
                    .flatten()
            },
            &None,
        );
        let dead_pk = keys::dead_pk(shard);
        let dead = self.partition(
            |i| {
                (i.dead_pk.as_deref() == Some(dead_pk.as_str()))
                    .then(|| i.dead_sk.clone())
                    .flatten()
            },
            &None,
        );
        Ok(ShardStats {
            oldest: pending
                .first()
                .and_then(|(sk, _)| Ulid::from_string(sk).ok()),
            pending: pending.len().min(limit),
            pending_capped: pending.len() >= limit,
            dead_letters: dead.len().min(limit),
            dead_letters_capped: dead.len() >= limit,
            scanned: pending.len().min(limit) + dead.len().min(limit) + 1,
            queries: 3,
        })
    }

    async fn older_pending(&self, key: &ItemKey, _: &Deadline) -> Result<bool, StoreError> {
        Ok(lock(&self.items).values().any(|i| {
            i.pk == key.pk && keys::is_outbox_sk(&i.sk) && i.sk < key.sk && i.pending_pk.is_some()
        }))
    }

    async fn claim_pending(
        &self,
        key: &ItemKey,
        claim: &Claim,
        _: &Deadline,
    ) -> Result<Marked, StoreError> {
        let mut items = lock(&self.items);
        match items.get_mut(key) {
            Some(item)
                if item.pending_pk.is_some()
                    && (unclaimed(item) || item.claim_token.as_deref() == Some(&claim.token)) =>
            {
                item.claim_token = Some(claim.token.clone());
                item.claimed_until = Some(claim.until);
                Ok(Marked::Updated)
            }
            _ => Ok(Marked::Gone),
        }
    }

    async fn collection_below(
        &self,
        key: &ItemKey,
        limit: i32,
        _: &Deadline,
    ) -> Result<CollectionRead, StoreError> {
        let below: Vec<(String, bool)> = lock(&self.items)
            .values()
            .rev()
            .filter(|i| i.pk == key.pk && keys::is_outbox_sk(&i.sk) && i.sk <= key.sk)
            .map(|i| (i.sk.clone(), i.dead_lettered_at.is_some()))
            .collect();
        let limit = limit.max(1) as usize;
        Ok(CollectionRead {
            top: key.sk.clone(),
            // As DynamoDB: a read that stops at its limit says there may be
            // more.
            complete: below.len() < limit,
            not_ours: below
                .iter()
                .take(limit)
                .filter(|(_, dead)| *dead)
                .map(|(sk, _)| sk.clone())
                .collect(),
            keys: below.into_iter().take(limit).map(|(sk, _)| sk).collect(),
        })
    }

    async fn hold(
        &self,
        key: &ItemKey,
        behind: &str,
        claim: Option<&str>,
        _: &Deadline,
    ) -> Result<Marked, StoreError> {
        Ok(self.hand_to_schedule(key, claim, |item| {
            item.held_behind = Some(behind.to_owned());
            item.held_since
                .get_or_insert(now_utc_millis().unix_timestamp());
        }))
    }

    async fn make_due(&self, key: &ItemKey, _: &Deadline) -> Result<Marked, StoreError> {
        Ok(self.hand_to_schedule(key, None, |item| {
            item.next_attempt_at = Some(now_utc_millis().unix_timestamp());
        }))
    }

    async fn newer_pending(
        &self,
        key: &ItemKey,
        _: &Deadline,
    ) -> Result<Vec<PendingItem>, StoreError> {
        Ok(lock(&self.items)
            .values()
            .filter(|i| {
                i.pk == key.pk
                    && keys::is_outbox_sk(&i.sk)
                    && i.sk > key.sk
                    && i.pending_pk.is_some()
            })
            .cloned()
            .map(PendingItem::Item)
            .collect())
    }

    async fn dead_letter_page(
        &self,
        shard: u16,
        limit: i32,
        cursor: Option<Cursor>,
        _: &Deadline,
    ) -> Result<DeadLetterPage, StoreError> {
        let pk = keys::dead_pk(shard);
        let rows = self.partition(
            |i| {
                (i.dead_pk.as_deref() == Some(pk.as_str()))
                    .then(|| i.dead_sk.clone())
                    .flatten()
            },
            &cursor,
        );
        let limit = limit.max(1) as usize;
        let next = (rows.len() > limit).then(|| cursor_after(&rows[limit - 1].0));
        Ok(DeadLetterPage {
            items: rows
                .iter()
                .take(limit)
                .map(|(_, item)| record_of(item, shard))
                .collect(),
            next,
        })
    }

    async fn find_dead_letter(
        &self,
        shard: u16,
        event_id: Ulid,
        _: &Deadline,
    ) -> Result<Option<DeadLetterRecord>, StoreError> {
        let pk = keys::dead_pk(shard);
        let id = event_id.to_string();
        Ok(lock(&self.items)
            .values()
            .find(|i| {
                i.dead_pk.as_deref() == Some(pk.as_str()) && i.dead_sk.as_deref() == Some(&id)
            })
            .map(|i| record_of(i, shard)))
    }

    async fn redrive(&self, letter: &DeadLetterRecord, _: &Deadline) -> Result<Marked, StoreError> {
        let mut items = lock(&self.items);
        match items.get_mut(&letter.key) {
            Some(item) if is_free_dead_letter(item, letter) => {
                item.claim_token = None;
                item.claimed_until = None;
                item.pending_pk = Some(keys::pending_pk(letter.shard));
                item.pending_sk = Some(keys::redriven_sk(item.event_id));
                item.attempts = 0;
                item.dead_pk = None;
                item.dead_sk = None;
                item.dead_lettered_at = None;
                item.dead_letter_reason = None;
                item.next_attempt_at = None;
                Ok(Marked::Updated)
            }
            _ => Ok(Marked::Gone),
        }
    }

    async fn claim_dead_letter(
        &self,
        letter: &DeadLetterRecord,
        claim: &Claim,
        _: &Deadline,
    ) -> Result<Option<OutboxItem>, StoreError> {
        let mut items = lock(&self.items);
        match items.get_mut(&letter.key) {
            Some(item) if is_free_dead_letter(item, letter) => {
                item.claim_token = Some(claim.token.clone());
                item.claimed_until = Some(claim.until);
                Ok(Some(item.clone()))
            }
            _ => Ok(None),
        }
    }

    async fn release_claim(
        &self,
        key: &ItemKey,
        claim: &Claim,
        error: Option<&str>,
        _: &Deadline,
    ) -> Result<Marked, StoreError> {
        let mut items = lock(&self.items);
        match items.get_mut(key) {
            Some(item) if item.claim_token.as_deref() == Some(claim.token.as_str()) => {
                item.claim_token = None;
                item.claimed_until = None;
                if let Some(error) = error {
                    item.dead_letter_reason = Some(sanitize(error));
                }
                Ok(Marked::Updated)
            }
            _ => Ok(Marked::Gone),
        }
    }

    async fn delete_claimed(
        &self,
        key: &ItemKey,
        claim: &Claim,
        _: &Deadline,
    ) -> Result<Marked, StoreError> {
        let mut items = lock(&self.items);
        if items
            .get(key)
            .is_some_and(|i| i.claim_token.as_deref() == Some(claim.token.as_str()))
        {
            items.remove(key);
            Ok(Marked::Updated)
        } else {
            Ok(Marked::Gone)
        }
    }

    async fn discard(&self, letter: &DeadLetterRecord, _: &Deadline) -> Result<Marked, StoreError> {
        let mut items = lock(&self.items);
        if items
            .get(&letter.key)
            .is_some_and(|i| i.dead_lettered_at.is_some() && unclaimed(i))
        {
            items.remove(&letter.key);
            Ok(Marked::Updated)
        } else {
            Ok(Marked::Gone)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use outbox_core::size::EventLimits;
    use outbox_core::EventEnvelope;

    fn item(aggregate: &str) -> OutboxItem {
        let env = EventEnvelope::new("E", "Order", aggregate, 1, json!({})).unwrap();
        OutboxItem::new(
            &format!("ORDER#{aggregate}"),
            &env,
            &EventLimits::eventbridge("src"),
            1,
        )
        .unwrap()
    }

    /// The memory store keeps both indexes as the table does: a dead letter
    /// leaves the pending index, a redrive brings it back, a discard deletes
    /// it, and a second redrive or discard finds nothing to do.
    #[tokio::test]
    async fn dead_letters_move_between_the_indexes() {
        let store = MemoryStore::new(1);
        let deadline = Deadline::after(Duration::from_secs(5));
        let (a, b) = (item("a"), item("b"));
        store.insert(a.clone());
        store.insert(b.clone());
        let all = PendingQuery {
            shard: 0,
            created: Created::Any,
            limit: 1,
        };
        let first = store.pending_page(&all, None, &deadline).await.unwrap();
        assert_eq!(first.items.len(), 1);
        let second = store
            .pending_page(&all, first.next, &deadline)
            .await
            .unwrap();
        assert_eq!((second.items.len(), second.next.is_none()), (1, true));

        let letter = DeadLetter {
            key: &a.key(),
            aggregate_id: Some("a"),
            reason: "poison",
            attempts: None,
            claim: None,
        };
        assert_eq!(
            store.dead_letter(letter, &deadline).await.unwrap(),
            Marked::Updated
        );
        assert_eq!(
            store.dead_letter(letter, &deadline).await.unwrap(),
            Marked::Gone
        );
        let dead = store
            .dead_letter_page(0, 10, None, &deadline)
            .await
            .unwrap();
        assert_eq!(dead.items.len(), 1);
        let found = store
            .find_dead_letter(0, a.event_id, &deadline)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(found, dead.items[0]);
        let stats = store.shard_stats(0, 100, &deadline).await.unwrap();
        assert_eq!((stats.pending, stats.dead_letters), (1, 1));

        assert_eq!(
            store.redrive(&found, &deadline).await.unwrap(),
            Marked::Updated
        );
        assert_eq!(
            store.redrive(&found, &deadline).await.unwrap(),
            Marked::Gone
        );
        assert_eq!(
            store.discard(&found, &deadline).await.unwrap(),
            Marked::Gone
        );
        let stats = store.shard_stats(0, 100, &deadline).await.unwrap();
        assert_eq!((stats.pending, stats.dead_letters), (2, 0));
        assert_eq!(store.log().dead_lettered, vec![a.key(), a.key()]);
    }
}
