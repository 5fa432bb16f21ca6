//! Strict ordering (#26): the item collection as the guard. Reads ahead,
//! events held behind older ones still in the table, events already gone,
//! the sweep's release of what was held, dead letters that park their
//! aggregate.

use super::*;

#[tokio::test]
async fn strict_ordering_reads_every_first_event_ahead_and_keeps_batches_full() {
    // One read per aggregate, all made before batching, and calls as in
    // relaxed mode: for first events (no shortcut for them), and for 20
    // aggregates' second events, their first ones long gone.
    let second_events = (0..20).map(|a| event(&format!("agg{a}"), 2)).collect();
    for (case, items, sizes) in [
        ("first events", items_of(25, 25), vec![10, 10, 5]),
        ("second events", second_events, vec![10, 10]),
    ] {
        let (sink, store) = (FakeSink::new(), MemoryStore::default());
        let entries = stored(&store, items);
        let report = strict(&sink, &store, &entries, Mode::Stream).await;
        assert!(all_published(&report), "{case}");
        assert_eq!(report.collection_reads, entries.len(), "{case}");
        assert_eq!(call_sizes(&sink), sizes, "{case}: as in relaxed mode");
    }
}

#[tokio::test]
async fn one_read_covers_the_events_of_an_aggregate_in_one_run() {
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let entries = stored(&store, vec![event("a", 1), event("a", 2), event("a", 3)]);
    let report = strict(&sink, &store, &entries, Mode::Stream).await;
    assert!(all_published(&report));
    assert_eq!(report.collection_reads, 1, "from A3 down, limit 4");
    assert_eq!(published_types(&sink), ["a-v1", "a-v2", "a-v3"]);
}

#[tokio::test]
async fn an_event_waits_for_an_older_one_between_it_and_one_published_in_the_run() {
    // Two lanes of one shard: this run has [A1, A3], the other lane A2.
    // A1 goes out; A3 is held behind A2, not published because A1 was.
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let (a1, a2, a3) = (event("a", 1), event("a", 2), event("a", 3));
    store.insert(a2.clone());
    let entries = stored(&store, vec![a1, a3.clone()]);
    let report = strict(&sink, &store, &entries, Mode::Stream).await;
    assert_eq!(published_types(&sink), ["a-v1"]);
    assert_eq!(report.outcomes[1], Deferred);
    assert_eq!(as_stored(&store, &a3).held_behind, Some(a2.sk.clone()));
}

#[tokio::test]
async fn a_second_first_event_of_an_aggregate_waits_for_the_first() {
    // Two events at version 1 (a schema migration, a reused id): the
    // newer one is read like any other, and held.
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let (first, second) = (event("a", 1), event("a", 1));
    store.insert(first.clone());
    let entries = stored(&store, vec![second]);
    let report = strict(&sink, &store, &entries, Mode::Stream).await;
    assert!(sink.calls().is_empty());
    assert_eq!(report.outcomes, vec![Deferred]);
    assert!(report.collection_reads >= 1);
}

#[tokio::test]
async fn an_event_already_gone_is_not_sent_again() {
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let report = strict(&sink, &store, &[Entry::Item(event("a", 2))], Mode::Stream).await;
    assert!(sink.calls().is_empty());
    assert_eq!(report.outcomes, vec![Gone]);
    assert_eq!((report.gone, report.first_unhandled()), (1, None));
}

#[tokio::test]
async fn strict_ordering_holds_an_event_behind_an_older_one_still_in_the_table() {
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let a1 = event("a", 1);
    store.insert(a1.clone());
    let (a2, b1, a3) = (event("a", 2), event("b", 1), event("a", 3));
    let entries = stored(&store, vec![a2.clone(), b1, a3.clone()]);
    let report = strict(&sink, &store, &entries, Mode::Stream).await;
    assert_eq!(
        published_types(&sink),
        ["b-v1"],
        "another aggregate is not blocked"
    );
    assert_eq!(
        report.first_unhandled(),
        None,
        "a held event is not reported"
    );
    assert_eq!(
        (report.held, report.collection_reads),
        (2, 2),
        "one read per aggregate, none again"
    );
    assert_eq!(as_stored(&store, &a2).held_behind, Some(a1.sk.clone()));
    assert_eq!(as_stored(&store, &a3).held_behind, Some(a2.sk.clone()));
    let pending_sk = as_stored(&store, &a2).pending_sk.unwrap();
    assert!(outbox_core::keys::is_redriven_sk(&pending_sk));
}

#[tokio::test]
async fn a_stream_run_that_holds_an_event_answers_at_once() {
    // No wait, no read again: the held event is the scheduled sweep's,
    // which publishes it once the older one is gone.
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let a1 = event("a", 1);
    store.insert(a1.clone());
    let a2 = stored(&store, vec![event("a", 2)]);
    let report = strict(&sink, &store, &a2, Mode::Stream).await;
    assert!(sink.calls().is_empty());
    let counts = (report.held, report.released, report.collection_reads);
    assert_eq!(counts, (1, 0, 1), "held, none released, one read");
    store.delete_published(&[a1.key()], &far()).await;
    let swept = entries(store.items());
    let report = strict(&sink, &store, &swept, sweep_mode()).await;
    assert_eq!(published_types(&sink), ["a-v2"]);
    assert!(all_published(&report));
    assert!(store.items().is_empty());
}

#[tokio::test]
async fn strict_sweep_releases_the_events_behind_what_it_published() {
    // A1 was given up by the mapping; A2 and A3 were held behind it. The
    // OnFailure window holds A1 only: A2 and A3 follow in the same run.
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let (a1, a2, a3) = (event("a", 1), event("a", 2), event("a", 3));
    stored(&store, vec![a1.clone(), a2.clone(), a3.clone()]);
    for (held, behind) in [(&a2, &a1), (&a3, &a2)] {
        store
            .hold(&held.key(), &behind.sk, None, &far())
            .await
            .unwrap();
    }
    let report = strict(&sink, &store, &[Entry::Item(a1)], sweep_mode()).await;
    assert_eq!(published_types(&sink), ["a-v1", "a-v2", "a-v3"]);
    assert_eq!((report.published, report.released), (3, 2));
    assert!(store.items().is_empty());
}

#[tokio::test]
async fn a_dead_letter_parks_its_aggregate_in_strict_mode() {
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let (a1, a2) = (event("a", 1), event("a", 2));
    stored(&store, vec![a1.clone(), a2.clone()]);
    dead_letter(&store, &a1).await;
    let report = strict(&sink, &store, &[Entry::Item(a2.clone())], sweep_mode()).await;
    assert!(sink.calls().is_empty());
    assert_eq!(report.held, 1);
    // Relaxed: the dead letter parks nothing.
    let report = run(&sink, &store, &[Entry::Item(a2)], sweep_mode()).await;
    assert!(all_published(&report));
}
