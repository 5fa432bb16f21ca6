//! Logic tests of the relay with an in-memory sink. The adapters themselves
//! are tested against the local AWS API in the workspace's `tests/`.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::json;

use super::*;
use crate::envelope::EventEnvelope;

/// Fails entries by position in the overall stream of entries it has been
/// given, and records every call.
struct ScriptedSink {
    calls: Mutex<Vec<Vec<String>>>,
    /// (event type, failure, how many times it fails before succeeding)
    script: Mutex<Vec<(String, PublishFailure, u32)>>,
    max_entries: usize,
    max_bytes: usize,
}

impl ScriptedSink {
    fn new() -> Self {
        Self {
            calls: Mutex::new(Vec::new()),
            script: Mutex::new(Vec::new()),
            max_entries: 10,
            max_bytes: 256 * 1024,
        }
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
    async fn publish_batch(&self, items: &[&OutboxItem]) -> Vec<EntryOutcome> {
        self.calls
            .lock()
            .unwrap()
            .push(items.iter().map(|i| i.event_type.clone()).collect());
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

fn items(n: usize) -> Vec<OutboxItem> {
    (0..n)
        .map(|i| {
            let env = EventEnvelope::new(&format!("E{i}"), "Order", "o", 1, json!({})).unwrap();
            OutboxItem::new("ORDER#o", &env, "src", 8).unwrap()
        })
        .collect()
}

fn fast() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        base: Duration::from_millis(1),
        cap: Duration::from_millis(2),
    }
}

fn far() -> Deadline {
    Deadline::after(Duration::from_secs(60))
}

#[tokio::test]
async fn batches_of_ten() {
    let sink = ScriptedSink::new();
    let out = publish_in_order(
        &sink,
        &items(25),
        Ordering::StopAtFirstFailure,
        &fast(),
        &far(),
    )
    .await;
    assert!(out.iter().all(|o| *o == ItemOutcome::Published));
    let sizes: Vec<usize> = sink.calls().iter().map(Vec::len).collect();
    assert_eq!(sizes, vec![10, 10, 5]);
}

#[tokio::test]
async fn batches_respect_the_byte_limit() {
    let mut sink = ScriptedSink::new();
    let all = items(6);
    sink.max_bytes = all[0].envelope.len() * 2 + 1;
    let out = publish_in_order(&sink, &all, Ordering::StopAtFirstFailure, &fast(), &far()).await;
    assert!(out.iter().all(|o| *o == ItemOutcome::Published));
    assert_eq!(
        sink.calls().iter().map(Vec::len).collect::<Vec<_>>(),
        vec![2, 2, 2]
    );
}

#[tokio::test]
async fn transient_failures_are_retried_alone() {
    let sink = ScriptedSink::new().fail("E3", FailureKind::Transient, 2);
    let out = publish_in_order(
        &sink,
        &items(5),
        Ordering::StopAtFirstFailure,
        &fast(),
        &far(),
    )
    .await;
    assert!(out.iter().all(|o| *o == ItemOutcome::Published), "{out:?}");
    let calls = sink.calls();
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[1], vec!["E3"]);
    assert_eq!(calls[2], vec!["E3"]);
}

#[tokio::test]
async fn exhausted_retries_stop_at_the_first_failure() {
    let sink = ScriptedSink::new().fail("E12", FailureKind::Transient, 100);
    let out = publish_in_order(
        &sink,
        &items(25),
        Ordering::StopAtFirstFailure,
        &fast(),
        &far(),
    )
    .await;
    // The first batch is published, the second holds the failure at 12; the
    // rest of that batch went out in the same call; the third batch is not tried.
    assert!(out[..12].iter().all(|o| *o == ItemOutcome::Published));
    assert!(matches!(out[12], ItemOutcome::Failed(_)));
    assert!(out[13..20].iter().all(|o| *o == ItemOutcome::Published));
    assert!(out[20..].iter().all(|o| *o == ItemOutcome::NotAttempted));
    // 1 + 3 attempts at the second batch (1 full, 2 retries of E12 alone).
    assert_eq!(sink.calls().len(), 4);
}

#[tokio::test]
async fn independent_ordering_goes_on() {
    let sink = ScriptedSink::new().fail("E2", FailureKind::Rejected, 100);
    let out = publish_in_order(&sink, &items(25), Ordering::Independent, &fast(), &far()).await;
    assert!(matches!(out[2], ItemOutcome::Failed(ref f) if f.kind == FailureKind::Rejected));
    assert_eq!(
        out.iter().filter(|o| **o == ItemOutcome::Published).count(),
        24
    );
    // Rejected failures are not retried in-invocation.
    assert_eq!(sink.calls().len(), 3);
}

#[tokio::test]
async fn poison_does_not_stop_the_batch() {
    let sink = ScriptedSink::new().fail("E1", FailureKind::Poison, 100);
    let out = publish_in_order(
        &sink,
        &items(3),
        Ordering::StopAtFirstFailure,
        &fast(),
        &far(),
    )
    .await;
    assert!(matches!(out[1], ItemOutcome::Poison(_)));
    assert_eq!(out[0], ItemOutcome::Published);
    assert_eq!(out[2], ItemOutcome::Published);
    assert_eq!(sink.calls().len(), 1);
}

#[tokio::test]
async fn oversized_entries_are_poison_without_a_call() {
    let mut sink = ScriptedSink::new();
    let mut all = items(3);
    sink.max_bytes = all[0].envelope.len() + 10;
    all[1].envelope = format!("{{\"x\":\"{}\"}}", "y".repeat(sink.max_bytes));
    let out = publish_in_order(&sink, &all, Ordering::StopAtFirstFailure, &fast(), &far()).await;
    assert!(matches!(out[1], ItemOutcome::Poison(ref f) if f.code == "EntryTooLarge"));
    assert_eq!(out[0], ItemOutcome::Published);
    assert_eq!(out[2], ItemOutcome::Published);
    assert!(sink.calls().iter().flatten().all(|t| t != "E1"));
}

#[tokio::test]
async fn nothing_starts_past_the_deadline() {
    let sink = ScriptedSink::new();
    let out = publish_in_order(
        &sink,
        &items(3),
        Ordering::StopAtFirstFailure,
        &fast(),
        &Deadline::after(Duration::ZERO),
    )
    .await;
    assert!(out.iter().all(|o| *o == ItemOutcome::NotAttempted));
    assert!(sink.calls().is_empty());
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
