//! What a sweep run does that a stream run does not: it goes on past a
//! failure and holds the failed aggregate, holds an aggregate whose event
//! is not due, and leaves what another run claimed.

use super::*;

#[tokio::test]
async fn a_sweep_goes_on_and_holds_the_failed_aggregate() {
    // Three aggregates, round robin: E0 (o0) fails for good.
    let sink = FakeSink::new().fail("E0", FailureKind::Rejected, 100);
    let store = MemoryStore::default();
    let entries = entries(items_of(9, 3));
    let report = run(&sink, &store, &entries, sweep_mode()).await;
    let out = &report.outcomes;
    assert!(matches!(out[0], Failed(_)));
    // o0's later events are held; o1 and o2 go on.
    let sent = published_types(&sink);
    for i in [3, 6] {
        assert_eq!(out[i], Deferred, "E{i}");
        assert!(!sent.contains(&format!("E{i}")), "{sent:?}");
    }
    for i in [1, 2, 4, 5, 7, 8] {
        assert_eq!(out[i], Published, "E{i}");
    }
    assert_eq!(store.log().failures.len(), 1, "the attempt is recorded");
}

#[tokio::test]
async fn an_item_not_due_holds_its_aggregate() {
    let sink = FakeSink::new();
    let mut all = items_of(4, 2);
    all[0].next_attempt_at = Some(OffsetDateTime::now_utc().unix_timestamp() + 600);
    let report = run(&sink, &MemoryStore::default(), &entries(all), sweep_mode()).await;
    assert_eq!(
        report.outcomes,
        vec![Deferred, Published, Deferred, Published]
    );
}

#[tokio::test]
async fn a_sweep_leaves_an_event_another_run_claimed() {
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let entries = stored(&store, items_of(2, 2));
    claim_elsewhere(&store, &entries[0]).await;
    let report = run(&sink, &store, &entries, sweep_mode()).await;
    assert_eq!(report.outcomes, vec![Deferred, Published]);
    assert_eq!(report.claimed_elsewhere, 1);
    assert_eq!(published_types(&sink), ["E1"]);
}

/// #43: an event published and deleted after the sweep's (eventually
/// consistent) index read is gone, not claimed elsewhere: nothing is sent
/// and nothing keeps the window unsettled.
#[tokio::test]
async fn a_sweep_does_not_count_an_event_deleted_meanwhile_as_claimed_elsewhere() {
    let (sink, store) = (FakeSink::new(), MemoryStore::default());
    let all = items_of(2, 2);
    store.insert(all[1].clone());
    let entries = entries(all);
    // The relay itself: `run` would store the entries the sweep read.
    let report = relay(&sink, &store, Ordering::Relaxed, 1)
        .run(&entries, sweep_mode(), &mut HashSet::new(), &far())
        .await;
    assert_eq!(report.outcomes, vec![Gone, Published]);
    assert_eq!((report.claimed_elsewhere, report.gone), (0, 1));
    assert_eq!(published_types(&sink), ["E1"]);
}

/// #43: a sink call the run's own deadline cuts is not an attempt. At
/// 20,000 orders a sweeper short of time recorded such cuts as failed
/// attempts: its events backed off, and one more would have dead-lettered
/// an event the sink never refused. Now each goes back to the schedule,
/// due, its attempts unchanged and its claim released, and the run counts
/// as stopped early (an OnFailure window stays unsettled).
#[tokio::test]
async fn a_call_cut_at_the_deadline_is_not_an_attempt() {
    let (sink, store) = (FakeSink::new().hang(), MemoryStore::default());
    let mut all = items_of(2, 2);
    // One attempt short of the dead letter (sweep_mode: 5 at most).
    all[0].attempts = 4;
    let deadline = Deadline::after(Duration::from_millis(200));
    let entries = entries(all.clone());
    let report = run_until(&sink, &store, &entries, sweep_mode(), &deadline).await;
    assert_eq!(report.outcomes, vec![NotAttempted; 2]);
    assert_eq!((report.failed, report.dead_lettered), (0, 0));
    assert!(store.log().dead_lettered.is_empty());
    let now = OffsetDateTime::now_utc().unix_timestamp();
    assert_eq!(store.items().len(), 2);
    for item in store.items() {
        let sk = &item.sk;
        let before = all.iter().find(|i| i.sk == *sk).map(|i| i.attempts);
        assert_eq!(Some(item.attempts), before, "{sk}: attempts unchanged");
        assert!(item.next_attempt_at.is_some_and(|at| at <= now), "due");
        assert!(item
            .last_error
            .as_deref()
            .is_some_and(|e| e.starts_with(crate::DEADLINE_REACHED)));
        assert!(item.claim_token.is_none(), "claim released");
    }
}

/// A retry the deadline cuts keeps the sink's own refusal of the call
/// before: that refusal was an attempt, and is recorded as one.
#[tokio::test]
async fn a_retry_cut_at_the_deadline_keeps_the_refusal_before_it() {
    use std::sync::atomic::{AtomicU32, Ordering as AtomicOrdering};
    let calls = std::sync::Arc::new(AtomicU32::new(0));
    let seen = calls.clone();
    let sink = FakeSink::new()
        .fail("E0", FailureKind::Transient, 1)
        .before_answer(move |_| {
            let second = seen.fetch_add(1, AtomicOrdering::SeqCst) > 0;
            Box::pin(async move {
                if second {
                    tokio::time::sleep(Duration::from_secs(5)).await;
                }
            })
        });
    let (store, deadline) = (
        MemoryStore::default(),
        Deadline::after(Duration::from_millis(300)),
    );
    let report = run_until(&sink, &store, &items(1), sweep_mode(), &deadline).await;
    assert_eq!(calls.load(AtomicOrdering::SeqCst), 2, "the retry was sent");
    assert!(
        matches!(&report.outcomes[0], Failed(f) if f.code == "Scripted"),
        "{:?}",
        report.outcomes
    );
    assert_eq!(store.log().failures.len(), 1, "the attempt is recorded");
}
