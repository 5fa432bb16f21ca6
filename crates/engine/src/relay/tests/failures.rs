//! Failures and retries in a stream run: in-call retries and their sends,
//! where the stream stops, poison and unusable records, the deadline, and
//! the classification of error codes.

use super::*;

#[tokio::test]
async fn transient_failures_are_retried_alone() {
    let sink = FakeSink::new().fail("E3", FailureKind::Transient, 2);
    let report = run(&sink, &MemoryStore::default(), &items(5), Mode::Stream).await;
    assert!(all_published(&report), "{report:?}");
    let calls = sink.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[1], vec!["E3"]);
    assert_eq!(calls[2], vec!["E3"]);
}

#[tokio::test]
async fn the_stream_stops_at_the_first_failure() {
    let sink = FakeSink::new().fail("E12", FailureKind::Transient, 100);
    let store = MemoryStore::default();
    let report = run(&sink, &store, &items(25), Mode::Stream).await;
    // The second call holds the failure at 12; the rest of that call went
    // out with it; the third call is not made.
    assert_stopped_at(&report, 12, 20);
    // 1 + 3 attempts at the second batch (1 full, 2 retries of E12 alone).
    assert_eq!(sink.calls().len(), 4);
    assert!(
        store.log().failures.is_empty(),
        "the stream records nothing"
    );
}

#[tokio::test]
async fn an_entry_is_sent_at_most_max_sends_per_entry_times() {
    // Each call is transmitted 3 times (the SDK's attempts) and fails its
    // entry: 3 + 1 sends, then no more (the policy alone would allow 3
    // calls, 9 sends).
    let sink = FakeSink::new()
        .fail("E0", FailureKind::Transient, 100)
        .sends_per_call(3);
    let store = MemoryStore::default();
    let report = run(&sink, &store, &items(1), Mode::Stream).await;
    assert_eq!(sink.calls().len(), 2);
    assert_eq!(report.first_unhandled(), Some(0));
}

fn poison(aggregate: &str) -> Entry {
    Entry::Poison {
        key: ItemKey::new(format!("ORDER#{aggregate}"), "OUTBOX#x"),
        aggregate_id: Some(aggregate.to_owned()),
        reason: "does not decode".into(),
    }
}

#[tokio::test]
async fn poison_is_dead_lettered_before_anything_after_it() {
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let mut entries = items(3);
    entries.insert(1, poison("p"));
    let report = run(&sink, &store, &entries, Mode::Stream).await;
    assert_eq!(report.outcomes[1], DeadLettered);
    assert_eq!(report.published, 3);
    assert_eq!(sink.calls(), vec![vec!["E0"], vec!["E1", "E2"]]);
    assert_eq!(store.log().dead_lettered.len(), 1);
}

#[tokio::test]
async fn a_poison_whose_dead_letter_fails_stops_the_stream_before_the_rest() {
    let sink = FakeSink::new();
    let store = MemoryStore::default().fail_dead_letters(true);
    let mut entries = items(3);
    entries.insert(1, poison("p"));
    let report = run(&sink, &store, &entries, Mode::Stream).await;
    assert_eq!(report.first_unhandled(), Some(1));
    assert_eq!(sink.calls(), vec![vec!["E0"]], "nothing after it is sent");
    assert!(all_are(&report.outcomes[2..], NotAttempted));
}

#[tokio::test]
async fn sink_poison_whose_dead_letter_fails_is_left_for_the_sweeper() {
    let sink = FakeSink::new().fail("E1", FailureKind::Poison, 100);
    let store = MemoryStore::default().fail_dead_letters(true);
    let report = run(&sink, &store, &items(3), Mode::Stream).await;
    // Its call-mates were accepted in the same call: reporting it would
    // send them again on every retry.
    assert_eq!(report.outcomes[1], Deferred);
    assert_eq!(report.first_unhandled(), None);
    assert_eq!(report.published, 2);
    assert_eq!(report.store_errors, 1);
}

#[tokio::test]
async fn an_unusable_record_is_reported_never_dead_lettered() {
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let mut entries = items(2);
    entries.insert(
        0,
        Entry::Unusable {
            key: ItemKey::new("ORDER#u", "OUTBOX#u"),
            reason: "no NewImage".into(),
        },
    );
    let report = run(&sink, &store, &entries, Mode::Stream).await;
    assert_eq!(report.first_unhandled(), Some(0));
    assert!(sink.calls().is_empty());
    assert!(store.log().dead_lettered.is_empty());
}

#[tokio::test]
async fn nothing_starts_past_the_deadline() {
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let deadline = Deadline::after(Duration::ZERO);
    let report = run_until(&sink, &store, &items(3), Mode::Stream, &deadline).await;
    assert!(all_are(&report.outcomes, NotAttempted));
    assert!(sink.calls().is_empty());
}

#[tokio::test]
async fn a_sink_that_never_answers_is_cut_at_the_deadline() {
    let (sink, store) = (FakeSink::new().hang(), MemoryStore::default());
    let deadline = Deadline::after(Duration::from_millis(200));
    let report = run_until(&sink, &store, &items(3), Mode::Stream, &deadline).await;
    assert_eq!(report.first_unhandled(), Some(0));
    assert!(matches!(&report.outcomes[0], Failed(f) if f.code == "DeadlineReached"));
}

/// #43: a published event whose delete and hand-over both fail is
/// reported, so that the stream delivers it again, instead of keeping its
/// normal key until the day-old sweep (strict ordering held its
/// aggregate's later events that long in a 20,000-order chaos run).
#[tokio::test]
async fn a_published_event_neither_deleted_nor_handed_over_is_reported() {
    let sink = FakeSink::new();
    let store = MemoryStore::default().fail_cleanup(true);
    let entries = stored(&store, items_of(2, 2));
    let report = run(&sink, &store, &entries, Mode::Stream).await;
    assert_eq!(published_types(&sink), ["E0", "E1"]);
    assert!(
        matches!(&report.outcomes[0], Failed(f) if f.code == crate::NOT_DELETED),
        "{:?}",
        report.outcomes
    );
    assert_eq!(report.first_unhandled(), Some(0));
    assert_eq!(store.items().len(), 2, "both still in the table");
}
