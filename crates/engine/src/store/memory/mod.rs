//! [`MemoryStore`]: the store port in memory, for unit tests of logic,
//! benches and examples (feature `testing`). It keeps items as the table
//! would (both indexes follow their attributes) and logs every write asked
//! of it. Adapters are tested against a real DynamoDB API, never this.

mod roles;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Mutex, MutexGuard};

use ulid::Ulid;

use super::{
    sanitize, Claim, ClaimOutcome, CollectionRead, Created, Cursor, DeadLetter, DeadLetterPage,
    DeadLetterRecord, KeyValue, Marked, OperatorStore, Page, PendingItem, PendingQuery,
    PublishStore, ShardStats, StoreError, SweepStore,
};
use crate::Deadline;
use outbox_core::keys::RecordedSettings;
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
    fail_cleanup: AtomicBool,
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

/// As the DynamoDB adapter reads a bookkeeping write's failed condition
/// from the item as it was: gone or dead-lettered, held by a live claim,
/// or refused (still there, out of the pending index).
fn judge_refusal(item: Option<&OutboxItem>) -> Marked {
    match item {
        None => Marked::Gone,
        Some(item) if item.dead_lettered_at.is_some() => Marked::Gone,
        Some(item) if item.pending_pk.is_some() && !unclaimed(item) => Marked::Claimed,
        Some(_) => Marked::Refused,
    }
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
            fail_cleanup: AtomicBool::new(false),
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

    /// Makes every delete of a published item and every failure record
    /// fail (a table that refuses writes right after a publish).
    pub fn fail_cleanup(self, fail: bool) -> Self {
        self.fail_cleanup.store(fail, Ordering::SeqCst);
        self
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
            other => judge_refusal(other.map(|item| &*item)),
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
    Cursor([("after".to_owned(), KeyValue::S(sk.to_owned()))].into())
}

fn after(cursor: &Option<Cursor>) -> Option<String> {
    cursor.as_ref().and_then(|c| match c.0.get("after") {
        Some(KeyValue::S(sk)) => Some(sk.clone()),
        _ => None,
    })
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use outbox_core::size::EventLimits;
    use outbox_core::EventEnvelope;

    fn item(aggregate: &str) -> OutboxItem {
        let env = EventEnvelope::new("E", "Order", aggregate, 1, json!({})).unwrap();
        let limits = EventLimits::eventbridge("src");
        OutboxItem::new(&format!("ORDER#{aggregate}"), &env, &limits, 1).unwrap()
    }

    /// The memory store keeps both indexes as the table does: a dead letter
    /// leaves the pending index, a redrive brings it back, a discard deletes
    /// it, and a second redrive or discard finds nothing to do.
    #[tokio::test]
    async fn dead_letters_move_between_the_indexes() {
        let store = MemoryStore::new(1);
        let far = Deadline::after(Duration::from_secs(5));
        let a = item("a");
        store.insert(a.clone());
        store.insert(item("b"));
        let all = PendingQuery {
            shard: 0,
            created: Created::Any,
            limit: 1,
        };
        let first = store.pending_page(&all, None, &far).await.unwrap();
        assert_eq!(first.items.len(), 1);
        let second = store.pending_page(&all, first.next, &far).await.unwrap();
        assert_eq!((second.items.len(), second.next.is_none()), (1, true));

        let letter = DeadLetter {
            key: &a.key(),
            aggregate_id: Some("a"),
            reason: "poison",
            attempts: None,
            claim: None,
        };
        let marks = [
            store.dead_letter(letter, &far).await.unwrap(),
            store.dead_letter(letter, &far).await.unwrap(),
        ];
        assert_eq!(marks, [Marked::Updated, Marked::Gone]);
        let dead = store.dead_letter_page(0, 10, None, &far).await.unwrap();
        assert_eq!(dead.items.len(), 1);
        let found = store
            .find_dead_letter(0, a.event_id, &far)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(found, dead.items[0]);
        let stats = store.shard_stats(0, 100, &far).await.unwrap();
        assert_eq!((stats.pending, stats.dead_letters), (1, 1));

        let marks = [
            store.redrive(&found, &far).await.unwrap(),
            store.redrive(&found, &far).await.unwrap(),
            store.discard(&found, &far).await.unwrap(),
        ];
        assert_eq!(marks, [Marked::Updated, Marked::Gone, Marked::Gone]);
        let stats = store.shard_stats(0, 100, &far).await.unwrap();
        assert_eq!((stats.pending, stats.dead_letters), (2, 0));
        assert_eq!(store.log().dead_lettered, vec![a.key(), a.key()]);
    }
}
