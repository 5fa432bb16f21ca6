//! Sink calls in flight together (`SEND_CONCURRENCY`, in waves): distinct
//! aggregates only, each aggregate's events in order, a failure inside a
//! wave, deletes beside the next wave, concurrent sweeps and claims, the
//! commit-to-publish latency.

use super::*;

const WAVE: usize = crate::DEFAULT_SEND_CONCURRENCY;

async fn concurrent(
    sink: &FakeSink,
    store: &MemoryStore,
    entries: &[Entry],
    mode: Mode,
    ordering: Ordering,
) -> RelayReport {
    run_with(sink, store, entries, mode, &far(), ordering, WAVE).await
}

#[tokio::test]
async fn calls_for_distinct_aggregates_are_in_flight_together() {
    for ordering in [Ordering::Relaxed, Ordering::Strict] {
        let sink = FakeSink::new().overlapping();
        let (store, entries) = stored_items(100, 100);
        let report = concurrent(&sink, &store, &entries, Mode::Stream, ordering).await;
        assert!(all_published(&report), "{ordering:?}");
        assert_eq!(sink.calls().len(), 10, "{ordering:?}: calls unchanged");
        assert_eq!(sink.most_in_flight(), WAVE, "{ordering:?}");
        assert!(store.items().is_empty(), "{ordering:?}");
        assert_eq!(store.log().deleted.len(), 100, "{ordering:?}");
    }
}

#[tokio::test]
async fn an_aggregates_events_go_out_in_order_and_never_in_flight_together() {
    // 20 aggregates × 5 events, round robin: every wave stops where an
    // aggregate of the wave comes again (the sink asserts that no two calls
    // in flight share an aggregate).
    for ordering in [Ordering::Relaxed, Ordering::Strict] {
        let sink = FakeSink::new().overlapping();
        let (store, entries) = stored_items(100, 20);
        let report = concurrent(&sink, &store, &entries, Mode::Stream, ordering).await;
        assert!(all_published(&report), "{ordering:?}: {report:?}");
        assert_eq!(sink.calls().len(), 10, "{ordering:?}");
        assert_eq!(
            sink.most_in_flight(),
            2,
            "{ordering:?}: 20 aggregates a wave"
        );
        // E<i> is aggregate i % 20's event i / 20: sent in order of i.
        let sent: Vec<usize> = published_types(&sink)
            .iter()
            .map(|t| t[1..].parse().unwrap())
            .collect();
        let mut sorted = sent.clone();
        sorted.sort_unstable();
        assert_eq!(sent, sorted, "{ordering:?}");
    }
}

#[tokio::test]
async fn a_failure_in_a_wave_reports_the_first_record_not_published() {
    // E25 (third call of the first wave) fails for good; the wave's other
    // calls went out beside it; nothing after the wave is sent.
    let sink = FakeSink::new()
        .overlapping()
        .fail("E25", FailureKind::Transient, 100);
    let (store, entries) = stored_items(100, 100);
    let report = concurrent(&sink, &store, &entries, Mode::Stream, Ordering::Relaxed).await;
    assert_stopped_at(&report, 25, 50);
    assert_eq!(report.published, 49);
    // Published items are deleted; the failed one and the rest stay.
    assert_eq!(store.items().len(), 51);
}

#[tokio::test]
async fn deletes_go_out_beside_the_next_wave() {
    let store: &'static MemoryStore = Box::leak(Box::new(MemoryStore::new(1)));
    let entries = stored(store, items_of(100, 100));
    let sink = FakeSink::new().overlapping().watch(store);
    let report = concurrent(&sink, store, &entries, Mode::Stream, Ordering::Relaxed).await;
    assert_eq!(report.published, 100);
    // The first wave's two full delete batches are issued with the second
    // wave, ahead of its sends (the memory store answers at once, so this
    // shows the order they are issued in, not their overlap: that is
    // timed in the bench, `BENCH_ONLY=latency`).
    let calls = sink.calls();
    let stored_at_call = sink.stored();
    assert_eq!(calls.len(), 10);
    assert_eq!(stored_at_call[5], 50, "two delete batches beside wave two");
    assert_eq!(store.log().deleted.len(), 100);
    assert!(store.items().is_empty());
}

#[tokio::test]
async fn a_concurrent_sweep_claims_and_publishes_each_event_once() {
    let sink = FakeSink::new().overlapping();
    let (store, entries) = stored_items(60, 30);
    let report = concurrent(&sink, &store, &entries, sweep_mode(), Ordering::Relaxed).await;
    assert!(all_published(&report), "{report:?}");
    let mut sent = published_types(&sink);
    assert_eq!(sent.len(), 60);
    sent.sort();
    sent.dedup();
    assert_eq!(sent.len(), 60, "each event once");
    assert!(store.items().is_empty());
}

#[tokio::test]
async fn a_concurrent_sweep_leaves_what_another_run_claimed_and_sends_the_rest() {
    // 30 aggregates × 2 events; E4 (o4) claimed by another run: it and
    // o4's later event E34 are left to it, every other call of the waves
    // goes out.
    let sink = FakeSink::new().overlapping();
    let (store, entries) = stored_items(60, 30);
    claim_elsewhere(&store, &entries[4]).await;
    let report = concurrent(&sink, &store, &entries, sweep_mode(), Ordering::Relaxed).await;
    assert_eq!(report.outcomes[4], Deferred);
    assert_eq!(report.outcomes[34], Deferred);
    assert_eq!(report.published, 58, "{report:?}");
    let sent = published_types(&sink);
    assert!(!sent.iter().any(|t| t == "E4" || t == "E34"), "{sent:?}");
    assert_eq!(store.items().len(), 2);
}

#[tokio::test]
async fn a_failure_in_a_sweep_wave_holds_its_aggregate_and_the_rest_goes_out() {
    // 20 aggregates × 5 events: E0 (o0) fails for good in the first wave;
    // o0's later events are deferred and never sent; the others go out.
    let sink = FakeSink::new()
        .overlapping()
        .fail("E0", FailureKind::Rejected, 100);
    let (store, entries) = stored_items(100, 20);
    let report = concurrent(&sink, &store, &entries, sweep_mode(), Ordering::Relaxed).await;
    assert!(matches!(report.outcomes[0], Failed(_)));
    let sent = published_types(&sink);
    for i in [20, 40, 60, 80] {
        assert_eq!(report.outcomes[i], Deferred, "E{i}");
        assert!(!sent.contains(&format!("E{i}")), "{sent:?}");
    }
    assert_eq!(report.published, 95, "{report:?}");
    assert_eq!(store.log().failures.len(), 1, "the attempt is recorded");
}

#[tokio::test]
async fn commit_to_publish_latency_is_reported_per_event_published() {
    let sink = FakeSink::new().overlapping();
    let (store, entries) = stored_items(30, 30);
    let report = concurrent(&sink, &store, &entries, Mode::Stream, Ordering::Relaxed).await;
    assert_eq!(report.commit_to_publish_ms.len(), 30);
    // Every event was made moments ago: well under a minute each.
    assert!(report.commit_to_publish_ms.iter().all(|ms| *ms < 60_000));
}
