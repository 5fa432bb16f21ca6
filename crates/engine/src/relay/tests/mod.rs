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

/// An outbox item of `event_type`, version `v` of `aggregate`.
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

fn fast() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        backoff: Backoff {
            base: Duration::from_millis(1),
            cap: Duration::from_millis(2),
            jitter: Jitter::Full,
        },
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

/// A relay run with `concurrency` sink calls in flight at once.
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
            if let Entry::Item(item) = entry {
                if !stored.contains(&item.key()) {
                    store.insert(item.clone());
                }
            }
        }
    }
    let relay = Relay {
        sink,
        store,
        retry: &fast(),
        ordering,
        concurrency,
    };
    relay
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

fn all_published(report: &RelayReport) -> bool {
    report
        .outcomes
        .iter()
        .all(|o| *o == RelayOutcome::Published)
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
    assert!(out[..failed].iter().all(|o| *o == RelayOutcome::Published));
    assert!(matches!(out[failed], RelayOutcome::Failed(_)));
    assert!(out[failed + 1..sent]
        .iter()
        .all(|o| *o == RelayOutcome::Published));
    assert!(out[sent..].iter().all(|o| *o == RelayOutcome::NotAttempted));
    assert_eq!(report.first_unhandled(), Some(failed));
}
