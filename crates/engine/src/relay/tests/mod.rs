//! Logic tests of the relay with [`FakeSink`] and the memory store, by
//! concern; this file holds what they share (events, runs of the relay in
//! each mode and ordering, the checks they repeat). The adapters
//! themselves are tested against the local AWS API in the workspace's
//! `tests/`.

mod batching;
mod concurrency;
mod failures;
mod operator;
mod strict;
mod sweep;

use std::collections::HashSet;
use std::time::Duration;

use serde_json::json;
use time::OffsetDateTime;

use super::*;
use crate::FakeSink;
use crate::{Backoff, Deadline, Jitter, RetryPolicy};
use crate::{DeadLetter, Marked, MemoryStore, OperatorStore, PublishStore, SweepStore};
use outbox_core::keys::ItemKey;
use outbox_core::EventEnvelope;
use RelayOutcome::{DeadLettered, Deferred, Failed, Gone, NotAttempted, Published};

fn item(event_type: &str, aggregate: &str, v: u64) -> OutboxItem {
    let env = EventEnvelope::new(event_type, "Order", aggregate, v, json!({})).unwrap();
    let limits = outbox_core::size::EventLimits::eventbridge("src");
    OutboxItem::new(&format!("ORDER#{aggregate}"), &env, &limits, 8).unwrap()
}

/// `E<i>` events; `aggregates` distinct aggregates, round robin.
fn items_of(n: usize, aggregates: usize) -> Vec<OutboxItem> {
    let item_of = |i| item(&format!("E{i}"), &format!("o{}", i % aggregates), 1);
    (0..n).map(item_of).collect()
}

fn items(n: usize) -> Vec<Entry> {
    entries(items_of(n, n))
}

/// The entries of `items`, not stored.
fn entries(items: Vec<OutboxItem>) -> Vec<Entry> {
    items.into_iter().map(Entry::Item).collect()
}

const FAST: RetryPolicy = RetryPolicy {
    max_attempts: 3,
    backoff: Backoff {
        base: Duration::from_millis(1),
        cap: Duration::from_millis(2),
        jitter: Jitter::Full,
    },
};

/// The relay over `sink` and `store`, retrying [`FAST`].
fn relay<'a>(
    sink: &'a FakeSink,
    store: &'a MemoryStore,
    ordering: Ordering,
    concurrency: usize,
) -> Relay<'a, FakeSink, MemoryStore> {
    let retry = &FAST;
    Relay {
        sink,
        store,
        retry,
        ordering,
        concurrency,
    }
}

fn far() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

fn sweep_mode() -> Mode {
    Mode::Sweep {
        now: OffsetDateTime::now_utc(),
        max_attempts: 5,
        backoff: Backoff::PERSISTED,
    }
}

async fn run(sink: &FakeSink, store: &MemoryStore, entries: &[Entry], mode: Mode) -> RelayReport {
    run_until(sink, store, entries, mode, &far()).await
}

async fn run_until(
    sink: &FakeSink,
    store: &MemoryStore,
    entries: &[Entry],
    mode: Mode,
    deadline: &Deadline,
) -> RelayReport {
    run_with(sink, store, entries, mode, deadline, Ordering::Relaxed, 1).await
}

async fn run_with(
    sink: &FakeSink,
    store: &MemoryStore,
    entries: &[Entry],
    mode: Mode,
    deadline: &Deadline,
    ordering: Ordering,
    concurrency: usize,
) -> RelayReport {
    if matches!(mode, Mode::Sweep { .. }) {
        // A sweep publishes what it read from the store (and claims it there).
        let stored: HashSet<ItemKey> = store.items().iter().map(|i| i.key()).collect();
        for entry in entries {
            let Entry::Item(item) = entry else { continue };
            if !stored.contains(&item.key()) {
                store.insert(item.clone());
            }
        }
    }
    relay(sink, store, ordering, concurrency)
        .run(entries, mode, &mut HashSet::new(), deadline)
        .await
}

async fn strict(
    sink: &FakeSink,
    store: &MemoryStore,
    entries: &[Entry],
    mode: Mode,
) -> RelayReport {
    run_with(sink, store, entries, mode, &far(), Ordering::Strict, 1).await
}

/// Event `v` of aggregate `aggregate` (`<aggregate>-v<v>` as its type).
fn event(aggregate: &str, v: u64) -> OutboxItem {
    let item = item(&format!("{aggregate}-v{v}"), aggregate, v);
    // Distinct, increasing ULIDs whatever the clock's resolution.
    std::thread::sleep(Duration::from_millis(2));
    item
}

fn published_types(sink: &FakeSink) -> Vec<String> {
    sink.calls().into_iter().flatten().collect()
}

fn call_sizes(sink: &FakeSink) -> Vec<usize> {
    sink.calls().iter().map(Vec::len).collect()
}

fn all_published(report: &RelayReport) -> bool {
    all_are(&report.outcomes, Published)
}

fn all_are(outcomes: &[RelayOutcome], outcome: RelayOutcome) -> bool {
    outcomes.iter().all(|o| *o == outcome)
}

/// The entries of `items`, each stored as the writer stores it.
fn stored(store: &MemoryStore, items: Vec<OutboxItem>) -> Vec<Entry> {
    items
        .into_iter()
        .map(|item| {
            store.insert(item.clone());
            Entry::Item(item)
        })
        .collect()
}

/// A new store holding `items_of(n, aggregates)`, and their entries.
fn stored_items(n: usize, aggregates: usize) -> (MemoryStore, Vec<Entry>) {
    let store = MemoryStore::default();
    let entries = stored(&store, items_of(n, aggregates));
    (store, entries)
}

/// `item` as `store` holds it now.
fn as_stored(store: &MemoryStore, item: &OutboxItem) -> OutboxItem {
    let key = item.key();
    store.items().into_iter().find(|i| i.key() == key).unwrap()
}

/// Claims `entry`'s item for another run (a concurrent sweep).
async fn claim_elsewhere(store: &MemoryStore, entry: &Entry) {
    let Entry::Item(item) = entry else { panic!() };
    let (key, other) = (item.key(), crate::Claim::new(Duration::from_secs(60)));
    store.claim_pending(&key, &other, &far()).await.unwrap();
}

/// Dead-letters `item` in `store` as a poison event, and says whether it
/// was still there.
async fn dead_letter(store: &MemoryStore, item: &OutboxItem) -> Marked {
    let key = item.key();
    let letter = DeadLetter {
        key: &key,
        aggregate_id: Some(item.aggregate_id.as_str()),
        reason: "poison",
        attempts: None,
        claim: None,
    };
    store.dead_letter(letter, &far()).await.unwrap()
}

/// Checks a stream run that stopped at entry `failed`: the entries before
/// it published, it failed, the rest of what went out with it (up to
/// `sent`) published, nothing from `sent` on attempted, and `failed` the
/// first not handled.
fn assert_stopped_at(report: &RelayReport, failed: usize, sent: usize) {
    let out = &report.outcomes;
    assert!(all_are(&out[..failed], Published));
    assert!(matches!(out[failed], Failed(_)));
    assert!(all_are(&out[failed + 1..sent], Published));
    assert!(all_are(&out[sent..], NotAttempted));
    assert_eq!(report.first_unhandled(), Some(failed));
}
