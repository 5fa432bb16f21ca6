//! Batching within the sink's limits (entries, bytes, one event of an
//! aggregate a call), an entry too large for any call, and the deletes
//! that keep up with the sends.

use super::*;
use crate::MAX_BATCH_WRITE;

#[tokio::test]
async fn batches_of_ten_and_one_delete_list() {
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let report = run(&sink, &store, &items(25), Mode::Stream).await;
    assert!(all_published(&report));
    assert_eq!(call_sizes(&sink), [10, 10, 5]);
    assert_eq!(store.log().deleted.len(), 25);
    assert_eq!(report.first_unhandled(), None);
}

#[tokio::test]
async fn batches_respect_the_byte_limit() {
    let all = items_of(6, 6);
    // Envelopes differ by a byte or two (their timestamps): room for two of
    // the longest, never three of the shortest.
    let longest = all.iter().map(|i| i.envelope.len()).max().unwrap();
    let sink = FakeSink::new().with_max_bytes(longest * 2 + 1);
    let report = run(&sink, &MemoryStore::default(), &entries(all), Mode::Stream).await;
    assert!(all_published(&report));
    assert_eq!(call_sizes(&sink), [2, 2, 2]);
}

#[tokio::test]
async fn a_call_never_carries_two_events_of_one_aggregate() {
    let sink = FakeSink::new();
    // o0, o1, o0, o1, ...: every call stops where an aggregate repeats.
    let entries = entries(items_of(6, 2));
    let report = run(&sink, &MemoryStore::default(), &entries, Mode::Stream).await;
    assert!(all_published(&report));
    assert_eq!(sink.calls(), [["E0", "E1"], ["E2", "E3"], ["E4", "E5"]]);
}

#[tokio::test]
async fn oversized_entries_are_dead_lettered_without_a_call() {
    let store = MemoryStore::default();
    let mut all = items_of(3, 3);
    let sink = FakeSink::new().with_max_bytes(all[0].envelope.len() + 10);
    all[1].envelope = format!("{{\"x\":\"{}\"}}", "y".repeat(sink.max_bytes()));
    let report = run(&sink, &store, &entries(all), Mode::Stream).await;
    assert_eq!(report.outcomes[1], DeadLettered);
    assert_eq!(report.published, 2);
    assert!(sink.calls().iter().flatten().all(|t| t != "E1"));
}

/// #40 item 2: deletes keep up with the sends. 100 events of distinct
/// aggregates, 10 per sink call: when each call starts, every full batch of
/// 25 published events has been issued for deletion (with the memory
/// store, which answers at once, already done: fewer than 25 wait), and
/// every event is deleted.
#[tokio::test]
async fn deletes_keep_up_with_the_sends() {
    let store: &'static MemoryStore = Box::leak(Box::new(MemoryStore::new(1)));
    let entries = stored(store, items_of(100, 100));
    let sink = FakeSink::new().watch(store);
    let report = run(&sink, store, &entries, Mode::Stream).await;
    assert_eq!(report.published, 100);
    let calls = sink.calls();
    assert_eq!(calls.len(), 10);
    let stored = sink.stored();
    let mut sent = 0;
    for (call, remaining) in calls.iter().zip(stored) {
        let deleted = 100 - remaining;
        assert!(
            sent - deleted < MAX_BATCH_WRITE,
            "{} published and not deleted when a call starts",
            sent - deleted
        );
        sent += call.len();
    }
    assert!(store.items().is_empty());
    assert_eq!(store.log().deleted.len(), 100);
}
