//! Logic tests of the relay with an in-memory sink. The adapters themselves
//! are tested against the local AWS API in the workspace's `tests/`.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;
use time::OffsetDateTime;

use super::relay::{Entry, Mode, Relay, RelayOutcome, RelayReport};
use super::*;
use crate::retry::{Backoff, Deadline, Jitter, RetryPolicy};
use crate::store::{MemoryStore, OperatorStore, PublishStore, SweepStore, MAX_BATCH_WRITE};
use outbox_core::keys::ItemKey;
use outbox_core::EventEnvelope;

/// Fails entries by position in the overall stream of entries it has been
/// given, and records every call.
struct ScriptedSink {
    calls: Mutex<Vec<Vec<String>>>,
    /// (event type, failure, how many times it fails before succeeding)
    script: Mutex<Vec<(String, PublishFailure, u32)>>,
    max_entries: usize,
    max_bytes: usize,
    hang: bool,
    /// Transmissions per call (an SDK that retries a timed-out attempt).
    sends_per_call: u32,
    /// A store whose item count each call records (in `stored`).
    watch: Option<&'static MemoryStore>,
    stored: Mutex<Vec<usize>>,
    /// Yield once inside each call, so that calls made together overlap.
    overlap: bool,
    /// The aggregates of the calls in flight, and the most calls in flight
    /// at once.
    in_flight: Mutex<(Vec<HashSet<String>>, usize)>,
}

impl ScriptedSink {
    fn new() -> Self {
        Self {
            calls: Mutex::new(Vec::new()),
            script: Mutex::new(Vec::new()),
            max_entries: 10,
            max_bytes: 256 * 1024,
            hang: false,
            sends_per_call: 1,
            watch: None,
            stored: Mutex::new(Vec::new()),
            overlap: false,
            in_flight: Mutex::new((Vec::new(), 0)),
        }
    }
    fn overlapping() -> Self {
        Self {
            overlap: true,
            ..Self::new()
        }
    }
    fn most_in_flight(&self) -> usize {
        self.in_flight.lock().unwrap().1
    }
    fn fail(self, event_type: &str, kind: FailureKind, times: u32) -> Self {
        self.script.lock().unwrap().push((
            event_type.to_owned(),
            PublishFailure::new(kind, "Scripted", "scripted failure"),
            times,
        ));
        self
    }
    fn calls(&self) -> Vec<Vec<String>> {
        self.calls.lock().unwrap().clone()
    }
}

impl EventSink for ScriptedSink {
    fn max_entries(&self) -> usize {
        self.max_entries
    }
    fn max_bytes(&self) -> usize {
        self.max_bytes
    }
    fn entry_size(&self, item: &OutboxItem) -> usize {
        item.envelope.len()
    }
    async fn publish_batch(
        &self,
        items: &[&OutboxItem],
        _max_sends: u32,
        sends: &crate::aws::SendCounter,
    ) -> Vec<EntryOutcome> {
        for _ in 0..self.sends_per_call {
            sends.record();
        }
        self.calls
            .lock()
            .unwrap()
            .push(items.iter().map(|i| i.event_type.clone()).collect());
        if let Some(store) = self.watch {
            self.stored.lock().unwrap().push(store.items().len());
        }
        if self.hang {
            std::future::pending::<()>().await;
        }
        if self.overlap {
            let aggregates: HashSet<String> =
                items.iter().map(|i| i.aggregate_id.clone()).collect();
            {
                let mut flight = self.in_flight.lock().unwrap();
                for other in &flight.0 {
                    assert!(
                        other.is_disjoint(&aggregates),
                        "two calls in flight carry one aggregate"
                    );
                }
                flight.0.push(aggregates.clone());
                flight.1 = flight.1.max(flight.0.len());
            }
            tokio::task::yield_now().await;
            let mut flight = self.in_flight.lock().unwrap();
            flight.0.retain(|a| *a != aggregates);
        }
        let mut script = self.script.lock().unwrap();
        items
            .iter()
            .map(|item| {
                for (event_type, failure, times) in script.iter_mut() {
                    if *event_type == item.event_type && *times > 0 {
                        *times -= 1;
                        return Err(failure.clone());
                    }
                }
                Ok(())
            })
            .collect()
    }
    async fn verify(&self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// `E<i>` events; `aggregates` distinct aggregates, round robin.
fn items_of(n: usize, aggregates: usize) -> Vec<OutboxItem> {
    (0..n)
        .map(|i| {
            let aggregate = format!("o{}", i % aggregates);
            let env =
                EventEnvelope::new(&format!("E{i}"), "Order", &aggregate, 1, json!({})).unwrap();
            OutboxItem::new(
                &format!("ORDER#{aggregate}"),
                &env,
                &outbox_core::size::EventLimits::eventbridge("src"),
                8,
            )
            .unwrap()
        })
        .collect()
}

fn items(n: usize) -> Vec<Entry> {
    items_of(n, n).into_iter().map(Entry::Item).collect()
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

async fn run(
    sink: &ScriptedSink,
    store: &MemoryStore,
    entries: &[Entry],
    mode: Mode,
) -> RelayReport {
    run_until(sink, store, entries, mode, &far()).await
}

async fn run_until(
    sink: &ScriptedSink,
    store: &MemoryStore,
    entries: &[Entry],
    mode: Mode,
    deadline: &Deadline,
) -> RelayReport {
    run_ordered(
        sink,
        store,
        entries,
        mode,
        deadline,
        crate::Ordering::Relaxed,
    )
    .await
}

async fn run_ordered(
    sink: &ScriptedSink,
    store: &MemoryStore,
    entries: &[Entry],
    mode: Mode,
    deadline: &Deadline,
    ordering: crate::Ordering,
) -> RelayReport {
    run_with(sink, store, entries, mode, deadline, ordering, 1).await
}

/// A relay run with `concurrency` sink calls in flight at once.
async fn run_with(
    sink: &ScriptedSink,
    store: &MemoryStore,
    entries: &[Entry],
    mode: Mode,
    deadline: &Deadline,
    ordering: crate::Ordering,
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
    sink: &ScriptedSink,
    store: &MemoryStore,
    entries: &[Entry],
    mode: Mode,
) -> RelayReport {
    run_ordered(sink, store, entries, mode, &far(), crate::Ordering::Strict).await
}

/// Event `v` of aggregate `aggregate` (`<aggregate>-v<v>` as its type).
fn event(aggregate: &str, v: u64) -> OutboxItem {
    let env = EventEnvelope::new(
        &format!("{aggregate}-v{v}"),
        "Order",
        aggregate,
        v,
        json!({}),
    )
    .unwrap();
    // Distinct, increasing ULIDs whatever the clock's resolution.
    std::thread::sleep(Duration::from_millis(2));
    OutboxItem::new(
        &format!("ORDER#{aggregate}"),
        &env,
        &outbox_core::size::EventLimits::eventbridge("src"),
        8,
    )
    .unwrap()
}

fn published_types(sink: &ScriptedSink) -> Vec<String> {
    sink.calls().into_iter().flatten().collect()
}

fn all_published(report: &RelayReport) -> bool {
    report
        .outcomes
        .iter()
        .all(|o| *o == RelayOutcome::Published)
}

#[tokio::test]
async fn batches_of_ten_and_one_delete_list() {
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let report = run(&sink, &store, &items(25), Mode::Stream).await;
    assert!(all_published(&report));
    let sizes: Vec<usize> = sink.calls().iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![10, 10, 5]);
    assert_eq!(store.log().deleted.len(), 25);
    assert_eq!(report.first_unhandled(), None);
}

#[tokio::test]
async fn batches_respect_the_byte_limit() {
    let mut sink = ScriptedSink::new();
    let all = items(6);
    // Envelopes differ by a byte or two (their timestamps): room for two of
    // the longest, never three of the shortest.
    let longest = all
        .iter()
        .map(|e| match e {
            Entry::Item(item) => item.envelope.len(),
            _ => unreachable!(),
        })
        .max()
        .unwrap_or_default();
    sink.max_bytes = longest * 2 + 1;
    let report = run(&sink, &MemoryStore::default(), &all, Mode::Stream).await;
    assert!(all_published(&report));
    assert_eq!(
        sink.calls().iter().map(Vec::len).collect::<Vec<_>>(),
        vec![2, 2, 2]
    );
}

#[tokio::test]
async fn a_call_never_carries_two_events_of_one_aggregate() {
    let sink = ScriptedSink::new();
    // o0, o1, o0, o1, ...: every call stops where an aggregate repeats.
    let entries: Vec<Entry> = items_of(6, 2).into_iter().map(Entry::Item).collect();
    let report = run(&sink, &MemoryStore::default(), &entries, Mode::Stream).await;
    assert!(all_published(&report));
    assert_eq!(
        sink.calls(),
        vec![vec!["E0", "E1"], vec!["E2", "E3"], vec!["E4", "E5"]]
    );
}

#[tokio::test]
async fn transient_failures_are_retried_alone() {
    let sink = ScriptedSink::new().fail("E3", FailureKind::Transient, 2);
    let report = run(&sink, &MemoryStore::default(), &items(5), Mode::Stream).await;
    assert!(all_published(&report), "{report:?}");
    let calls = sink.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[1], vec!["E3"]);
    assert_eq!(calls[2], vec!["E3"]);
}

#[tokio::test]
async fn the_stream_stops_at_the_first_failure() {
    let sink = ScriptedSink::new().fail("E12", FailureKind::Transient, 100);
    let store = MemoryStore::default();
    let report = run(&sink, &store, &items(25), Mode::Stream).await;
    let out = &report.outcomes;
    // The second call holds the failure at 12; the rest of that call went
    // out with it; the third call is not made.
    assert!(out[..12].iter().all(|o| *o == RelayOutcome::Published));
    assert!(matches!(out[12], RelayOutcome::Failed(_)));
    assert!(out[13..20].iter().all(|o| *o == RelayOutcome::Published));
    assert!(out[20..].iter().all(|o| *o == RelayOutcome::NotAttempted));
    assert_eq!(report.first_unhandled(), Some(12));
    // 1 + 3 attempts at the second batch (1 full, 2 retries of E12 alone).
    assert_eq!(sink.calls().len(), 4);
    assert!(
        store.log().failures.is_empty(),
        "the stream records nothing"
    );
}

#[tokio::test]
async fn a_sweep_goes_on_and_holds_the_failed_aggregate() {
    // Three aggregates, round robin: E0 (o0) fails for good.
    let sink = ScriptedSink::new().fail("E0", FailureKind::Rejected, 100);
    let store = MemoryStore::default();
    let entries: Vec<Entry> = items_of(9, 3).into_iter().map(Entry::Item).collect();
    let report = run(&sink, &store, &entries, sweep_mode()).await;
    let out = &report.outcomes;
    assert!(matches!(out[0], RelayOutcome::Failed(_)));
    // o0's later events are held; o1 and o2 go on.
    for i in [3, 6] {
        assert_eq!(out[i], RelayOutcome::Deferred, "E{i}");
    }
    for i in [1, 2, 4, 5, 7, 8] {
        assert_eq!(out[i], RelayOutcome::Published, "E{i}");
    }
    assert_eq!(store.log().failures.len(), 1, "the attempt is recorded");
    assert!(sink
        .calls()
        .iter()
        .flatten()
        .all(|t| t != "E3" && t != "E6"));
}

#[tokio::test]
async fn an_item_not_due_holds_its_aggregate() {
    let sink = ScriptedSink::new();
    let mut all = items_of(4, 2);
    all[0].next_attempt_at = Some(OffsetDateTime::now_utc().unix_timestamp() + 600);
    let entries: Vec<Entry> = all.into_iter().map(Entry::Item).collect();
    let report = run(&sink, &MemoryStore::default(), &entries, sweep_mode()).await;
    assert_eq!(
        report.outcomes,
        vec![
            RelayOutcome::Deferred,
            RelayOutcome::Published,
            RelayOutcome::Deferred,
            RelayOutcome::Published
        ]
    );
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
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let mut entries = items(3);
    entries.insert(1, poison("p"));
    let report = run(&sink, &store, &entries, Mode::Stream).await;
    assert_eq!(report.outcomes[1], RelayOutcome::DeadLettered);
    assert_eq!(report.published, 3);
    assert_eq!(sink.calls(), vec![vec!["E0"], vec!["E1", "E2"]]);
    assert_eq!(store.log().dead_lettered.len(), 1);
}

#[tokio::test]
async fn a_poison_whose_dead_letter_fails_stops_the_stream_before_the_rest() {
    let sink = ScriptedSink::new();
    let store = MemoryStore::default().fail_dead_letters(true);
    let mut entries = items(3);
    entries.insert(1, poison("p"));
    let report = run(&sink, &store, &entries, Mode::Stream).await;
    assert_eq!(report.first_unhandled(), Some(1));
    assert_eq!(sink.calls(), vec![vec!["E0"]], "nothing after it is sent");
    assert!(report.outcomes[2..]
        .iter()
        .all(|o| *o == RelayOutcome::NotAttempted));
}

#[tokio::test]
async fn sink_poison_whose_dead_letter_fails_is_left_for_the_sweeper() {
    let sink = ScriptedSink::new().fail("E1", FailureKind::Poison, 100);
    let store = MemoryStore::default().fail_dead_letters(true);
    let report = run(&sink, &store, &items(3), Mode::Stream).await;
    // Its call-mates were accepted in the same call: reporting it would
    // send them again on every retry.
    assert_eq!(report.outcomes[1], RelayOutcome::Deferred);
    assert_eq!(report.first_unhandled(), None);
    assert_eq!(report.published, 2);
    assert_eq!(report.store_errors, 1);
}

#[tokio::test]
async fn oversized_entries_are_dead_lettered_without_a_call() {
    let mut sink = ScriptedSink::new();
    let store = MemoryStore::default();
    let mut all = items_of(3, 3);
    sink.max_bytes = all[0].envelope.len() + 10;
    all[1].envelope = format!("{{\"x\":\"{}\"}}", "y".repeat(sink.max_bytes));
    let entries: Vec<Entry> = all.into_iter().map(Entry::Item).collect();
    let report = run(&sink, &store, &entries, Mode::Stream).await;
    assert_eq!(report.outcomes[1], RelayOutcome::DeadLettered);
    assert_eq!(report.published, 2);
    assert!(sink.calls().iter().flatten().all(|t| t != "E1"));
}

#[tokio::test]
async fn an_unusable_record_is_reported_never_dead_lettered() {
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
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
    let sink = ScriptedSink::new();
    let report = run_until(
        &sink,
        &MemoryStore::default(),
        &items(3),
        Mode::Stream,
        &Deadline::after(Duration::ZERO),
    )
    .await;
    assert!(report
        .outcomes
        .iter()
        .all(|o| *o == RelayOutcome::NotAttempted));
    assert!(sink.calls().is_empty());
}

#[tokio::test]
async fn a_sink_that_never_answers_is_cut_at_the_deadline() {
    let mut sink = ScriptedSink::new();
    sink.hang = true;
    let report = run_until(
        &sink,
        &MemoryStore::default(),
        &items(3),
        Mode::Stream,
        &Deadline::after(Duration::from_millis(200)),
    )
    .await;
    assert_eq!(report.first_unhandled(), Some(0));
    assert!(matches!(&report.outcomes[0], RelayOutcome::Failed(f) if f.code == "DeadlineReached"));
}

#[test]
fn classification() {
    assert_eq!(classify("ThrottlingException", &[]), FailureKind::Transient);
    assert_eq!(classify("InternalFailure", &[]), FailureKind::Transient);
    assert_eq!(
        classify("MalformedDetail", &["MalformedDetail"]),
        FailureKind::Poison
    );
    assert_eq!(
        classify("AccessDeniedException", &["MalformedDetail"]),
        FailureKind::Rejected
    );
    assert_eq!(classify("SomethingNew", &[]), FailureKind::Rejected);
}

// Strict ordering (#26): the item collection as the guard.

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

#[tokio::test]
async fn strict_ordering_reads_every_first_event_ahead_and_keeps_batches_full() {
    // No shortcut for an aggregate's first event: one read each, all made
    // before batching, and calls as in relaxed mode.
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let entries = stored(&store, items_of(25, 25));
    let report = strict(&sink, &store, &entries, Mode::Stream).await;
    assert!(all_published(&report));
    assert_eq!(report.collection_reads, 25);
    assert_eq!(sink.calls().len(), 3, "batches as in relaxed mode");
}

#[tokio::test]
async fn one_read_covers_the_events_of_an_aggregate_in_one_run() {
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
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
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let (a1, a2, a3) = (event("a", 1), event("a", 2), event("a", 3));
    store.insert(a2.clone());
    let entries = stored(&store, vec![a1, a3.clone()]);
    let report = strict(&sink, &store, &entries, Mode::Stream).await;
    assert_eq!(published_types(&sink), ["a-v1"]);
    assert_eq!(report.outcomes[1], RelayOutcome::Deferred);
    let a3_now = store
        .items()
        .into_iter()
        .find(|i| i.key() == a3.key())
        .unwrap();
    assert_eq!(a3_now.held_behind.as_deref(), Some(a2.sk.as_str()));
}

#[tokio::test]
async fn a_second_first_event_of_an_aggregate_waits_for_the_first() {
    // Two events at version 1 (a schema migration, a reused id): the
    // newer one is read like any other, and held.
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let (first, second) = (event("a", 1), event("a", 1));
    store.insert(first.clone());
    let entries = stored(&store, vec![second]);
    let report = strict(&sink, &store, &entries, Mode::Stream).await;
    assert!(sink.calls().is_empty());
    assert_eq!(report.outcomes, vec![RelayOutcome::Deferred]);
    assert!(report.collection_reads >= 1);
}

#[tokio::test]
async fn an_event_already_gone_is_not_sent_again() {
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let report = strict(&sink, &store, &[Entry::Item(event("a", 2))], Mode::Stream).await;
    assert!(sink.calls().is_empty());
    assert_eq!(report.outcomes, vec![RelayOutcome::Gone]);
    assert_eq!((report.gone, report.first_unhandled()), (1, None));
}

#[tokio::test]
async fn strict_ordering_holds_an_event_behind_an_older_one_still_in_the_table() {
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let a1 = event("a", 1);
    store.insert(a1.clone());
    let (a2, b1, a3) = (event("a", 2), event("b", 1), event("a", 3));
    for item in [&a2, &b1, &a3] {
        store.insert(item.clone());
    }
    let entries: Vec<Entry> = [a2.clone(), b1, a3.clone()]
        .into_iter()
        .map(Entry::Item)
        .collect();
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
    let stored: Vec<OutboxItem> = store.items();
    let find = |key: &ItemKey| stored.iter().find(|i| i.key() == *key).unwrap().clone();
    assert_eq!(find(&a2.key()).held_behind.as_deref(), Some(a1.sk.as_str()));
    assert_eq!(find(&a3.key()).held_behind.as_deref(), Some(a2.sk.as_str()));
    assert!(outbox_core::keys::is_redriven_sk(
        find(&a2.key()).pending_sk.as_deref().unwrap()
    ));
}

#[tokio::test]
async fn a_stream_run_that_holds_an_event_answers_at_once() {
    // No wait, no read again: the held event is the scheduled sweep's,
    // which publishes it once the older one is gone.
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let a1 = event("a", 1);
    store.insert(a1.clone());
    let entries = stored(&store, vec![event("a", 2)]);
    let report = strict(&sink, &store, &entries, Mode::Stream).await;
    assert!(sink.calls().is_empty());
    assert_eq!(
        (report.held, report.released, report.collection_reads),
        (1, 0, 1)
    );
    store.delete_published(&[a1.key()], &far()).await;
    let swept: Vec<Entry> = store.items().into_iter().map(Entry::Item).collect();
    let report = strict(&sink, &store, &swept, sweep_mode()).await;
    assert_eq!(published_types(&sink), ["a-v2"]);
    assert!(all_published(&report));
    assert!(store.items().is_empty());
}

#[tokio::test]
async fn strict_sweep_releases_the_events_behind_what_it_published() {
    // A1 was given up by the mapping; A2 and A3 were held behind it. The
    // OnFailure window holds A1 only: A2 and A3 follow in the same run.
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let (a1, a2, a3) = (event("a", 1), event("a", 2), event("a", 3));
    for item in [&a1, &a2, &a3] {
        store.insert(item.clone());
    }
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
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let (a1, a2) = (event("a", 1), event("a", 2));
    store.insert(a1.clone());
    store.insert(a2.clone());
    store
        .dead_letter(
            crate::store::DeadLetter {
                key: &a1.key(),
                aggregate_id: Some("a"),
                reason: "poison",
                attempts: None,
                claim: None,
            },
            &far(),
        )
        .await
        .unwrap();
    let report = strict(&sink, &store, &[Entry::Item(a2.clone())], sweep_mode()).await;
    assert!(sink.calls().is_empty());
    assert_eq!(report.held, 1);
    // Relaxed: the dead letter parks nothing.
    let report = run(&sink, &store, &[Entry::Item(a2)], sweep_mode()).await;
    assert!(all_published(&report));
}

#[tokio::test]
async fn an_entry_is_sent_at_most_max_sends_per_entry_times() {
    // Each call is transmitted 3 times (the SDK's attempts) and fails its
    // entry: 3 + 1 sends, then no more (the policy alone would allow 3
    // calls, 9 sends).
    let mut sink = ScriptedSink::new().fail("E0", FailureKind::Transient, 100);
    sink.sends_per_call = 3;
    let store = MemoryStore::default();
    let report = run(&sink, &store, &items(1), Mode::Stream).await;
    assert_eq!(sink.calls().len(), 2);
    assert_eq!(report.first_unhandled(), Some(0));
}

#[tokio::test]
async fn a_sweep_leaves_an_event_another_run_claimed() {
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let all = items_of(2, 2);
    for item in &all {
        store.insert(item.clone());
    }
    let other = crate::store::Claim::new(Duration::from_secs(60));
    store
        .claim_pending(&all[0].key(), &other, &far())
        .await
        .unwrap();
    let entries: Vec<Entry> = all.into_iter().map(Entry::Item).collect();
    let report = run(&sink, &store, &entries, sweep_mode()).await;
    assert_eq!(
        report.outcomes,
        vec![RelayOutcome::Deferred, RelayOutcome::Published]
    );
    assert_eq!(published_types(&sink), ["E1"]);
}

#[tokio::test]
async fn strict_reads_ahead_and_keeps_batches_full() {
    // 20 aggregates' second events, their first ones long gone: one read
    // each, made before batching, and calls of ten as in relaxed mode.
    let (sink, store) = (ScriptedSink::new(), MemoryStore::default());
    let entries = stored(
        &store,
        (0..20).map(|a| event(&format!("agg{a}"), 2)).collect(),
    );
    let report = strict(&sink, &store, &entries, Mode::Stream).await;
    assert!(all_published(&report));
    assert_eq!(report.collection_reads, 20);
    let sizes: Vec<usize> = sink.calls().iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![10, 10]);
}

/// #40 item 2: deletes keep up with the sends. 100 events of distinct
/// aggregates, 10 per sink call: when each call starts, every full batch of
/// 25 published events has been issued for deletion (with the memory
/// store, which answers at once, already done: fewer than 25 wait), and
/// every event is deleted.
#[tokio::test]
async fn deletes_keep_up_with_the_sends() {
    let store: &'static MemoryStore = Box::leak(Box::new(MemoryStore::new(1)));
    let entries = items(100);
    for entry in &entries {
        if let Entry::Item(item) = entry {
            store.insert(item.clone());
        }
    }
    let mut sink = ScriptedSink::new();
    sink.watch = Some(store);
    let report = run(&sink, store, &entries, Mode::Stream).await;
    assert_eq!(report.published, 100);
    let calls = sink.calls();
    assert_eq!(calls.len(), 10);
    let stored = sink.stored.lock().unwrap().clone();
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

/// The default `SEND_CONCURRENCY`.
const WAVE: usize = crate::DEFAULT_SEND_CONCURRENCY;

async fn concurrent(
    sink: &ScriptedSink,
    store: &MemoryStore,
    entries: &[Entry],
    mode: Mode,
    ordering: crate::Ordering,
) -> RelayReport {
    run_with(sink, store, entries, mode, &far(), ordering, WAVE).await
}

async fn relaxed_waves(
    sink: &ScriptedSink,
    store: &MemoryStore,
    entries: &[Entry],
    mode: Mode,
) -> RelayReport {
    concurrent(sink, store, entries, mode, crate::Ordering::Relaxed).await
}

#[tokio::test]
async fn calls_for_distinct_aggregates_are_in_flight_together() {
    for ordering in [crate::Ordering::Relaxed, crate::Ordering::Strict] {
        let (sink, store) = (ScriptedSink::overlapping(), MemoryStore::default());
        let entries = stored(&store, items_of(100, 100));
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
    for ordering in [crate::Ordering::Relaxed, crate::Ordering::Strict] {
        let (sink, store) = (ScriptedSink::overlapping(), MemoryStore::default());
        let entries = stored(&store, items_of(100, 20));
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
    let sink = ScriptedSink::overlapping().fail("E25", FailureKind::Transient, 100);
    let store = MemoryStore::default();
    let entries = stored(&store, items_of(100, 100));
    let report = relaxed_waves(&sink, &store, &entries, Mode::Stream).await;
    let out = &report.outcomes;
    assert!(out[..25].iter().all(|o| *o == RelayOutcome::Published));
    assert!(matches!(out[25], RelayOutcome::Failed(_)));
    assert!(out[26..50].iter().all(|o| *o == RelayOutcome::Published));
    assert!(out[50..].iter().all(|o| *o == RelayOutcome::NotAttempted));
    assert_eq!(report.first_unhandled(), Some(25));
    assert_eq!(report.published, 49);
    // Published items are deleted; the failed one and the rest stay.
    assert_eq!(store.items().len(), 51);
}

#[tokio::test]
async fn deletes_go_out_beside_the_next_wave() {
    let store: &'static MemoryStore = Box::leak(Box::new(MemoryStore::new(1)));
    let entries = stored(store, items_of(100, 100));
    let mut sink = ScriptedSink::overlapping();
    sink.watch = Some(store);
    let report = relaxed_waves(&sink, store, &entries, Mode::Stream).await;
    assert_eq!(report.published, 100);
    // The first wave's two full delete batches are issued with the second
    // wave, ahead of its sends (the memory store answers at once, so this
    // shows the order they are issued in, not their overlap: that is
    // timed in the bench, `BENCH_ONLY=latency`).
    let calls = sink.calls();
    let stored_at_call = sink.stored.lock().unwrap().clone();
    assert_eq!(calls.len(), 10);
    assert_eq!(stored_at_call[5], 50, "two delete batches beside wave two");
    assert_eq!(store.log().deleted.len(), 100);
    assert!(store.items().is_empty());
}

#[tokio::test]
async fn a_concurrent_sweep_claims_and_publishes_each_event_once() {
    let (sink, store) = (ScriptedSink::overlapping(), MemoryStore::default());
    let entries = stored(&store, items_of(60, 30));
    let report = relaxed_waves(&sink, &store, &entries, sweep_mode()).await;
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
    let (sink, store) = (ScriptedSink::overlapping(), MemoryStore::default());
    let entries = stored(&store, items_of(60, 30));
    let other = crate::store::Claim::new(Duration::from_secs(60));
    let Entry::Item(e4) = &entries[4] else {
        unreachable!()
    };
    store
        .claim_pending(&e4.key(), &other, &far())
        .await
        .unwrap();
    let report = relaxed_waves(&sink, &store, &entries, sweep_mode()).await;
    assert_eq!(report.outcomes[4], RelayOutcome::Deferred);
    assert_eq!(report.outcomes[34], RelayOutcome::Deferred);
    assert_eq!(report.published, 58, "{report:?}");
    let sent = published_types(&sink);
    assert!(!sent.iter().any(|t| t == "E4" || t == "E34"), "{sent:?}");
    assert_eq!(store.items().len(), 2);
}

#[tokio::test]
async fn a_failure_in_a_sweep_wave_holds_its_aggregate_and_the_rest_goes_out() {
    // 20 aggregates × 5 events: E0 (o0) fails for good in the first wave;
    // o0's later events are deferred and never sent; the others go out.
    let sink = ScriptedSink::overlapping().fail("E0", FailureKind::Rejected, 100);
    let store = MemoryStore::default();
    let entries = stored(&store, items_of(100, 20));
    let report = relaxed_waves(&sink, &store, &entries, sweep_mode()).await;
    assert!(matches!(report.outcomes[0], RelayOutcome::Failed(_)));
    for i in [20, 40, 60, 80] {
        assert_eq!(report.outcomes[i], RelayOutcome::Deferred, "E{i}");
    }
    assert_eq!(report.published, 95, "{report:?}");
    let sent = published_types(&sink);
    assert!(
        !sent
            .iter()
            .any(|t| ["E20", "E40", "E60", "E80"].contains(&t.as_str())),
        "{sent:?}"
    );
    assert_eq!(store.log().failures.len(), 1, "the attempt is recorded");
}

#[tokio::test]
async fn commit_to_publish_latency_is_reported_per_event_published() {
    let (sink, store) = (ScriptedSink::overlapping(), MemoryStore::default());
    let entries = stored(&store, items_of(30, 30));
    let report = relaxed_waves(&sink, &store, &entries, Mode::Stream).await;
    assert_eq!(report.commit_to_publish_ms.len(), 30);
    // Every event was made moments ago: well under a minute each.
    assert!(report.commit_to_publish_ms.iter().all(|ms| *ms < 60_000));
}

/// Operator mode (`redrive --now`): a claimed dead letter that is published
/// is deleted; one whose publish fails stays a dead letter, its claim
/// released with the failure as its reason, so the next `--now` can take it.
#[tokio::test]
async fn a_claimed_dead_letter_is_deleted_once_published_and_kept_when_not() {
    use crate::store::{Claim, DeadLetter, Marked};
    let store = MemoryStore::quiet(1);
    let all = items_of(2, 2);
    let deadline = far();
    for item in &all {
        store.insert(item.clone());
        let letter = DeadLetter {
            key: &item.key(),
            aggregate_id: Some(&item.aggregate_id),
            reason: "poison",
            attempts: None,
            claim: None,
        };
        assert_eq!(
            store.dead_letter(letter, &deadline).await.unwrap(),
            Marked::Updated
        );
    }
    let letters = store
        .dead_letter_page(0, 10, None, &deadline)
        .await
        .unwrap();
    let sink = ScriptedSink::new().fail("E1", FailureKind::Transient, 100);
    let retry = fast();
    let relay = Relay {
        sink: &sink,
        store: &store,
        retry: &retry,
        ordering: crate::Ordering::Strict,
        concurrency: 1,
    };
    for letter in &letters.items {
        let claim = Claim::new(Duration::from_secs(300));
        let item = store
            .claim_dead_letter(letter, &claim, &deadline)
            .await
            .unwrap()
            .expect("a free dead letter");
        let published = item.event_type == "E0";
        let report = relay
            .run_claimed(&[Entry::Item(item)], &claim, &deadline)
            .await;
        if published {
            assert_eq!(report.outcomes, vec![RelayOutcome::Published]);
        } else {
            assert!(matches!(report.outcomes[..], [RelayOutcome::Failed(_)]));
        }
    }
    let left = store.items();
    assert_eq!(left.len(), 1, "the published one is deleted");
    assert_eq!(left[0].event_type, "E1");
    let kept = store
        .dead_letter_page(0, 10, None, &deadline)
        .await
        .unwrap();
    assert_eq!(kept.items.len(), 1, "the other stays a dead letter");
    assert!(
        kept.items[0].reason.contains("redrive --now"),
        "{}",
        kept.items[0].reason
    );
    let again = Claim::new(Duration::from_secs(300));
    assert!(
        store
            .claim_dead_letter(&kept.items[0], &again, &deadline)
            .await
            .unwrap()
            .is_some(),
        "its claim was released"
    );
}
