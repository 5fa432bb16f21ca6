//! Duplicates only where the physics leaves no choice (#40), through the
//! real publisher binary under the local Lambda runtime, its AWS calls
//! going through the fault proxy (which kills it at a chosen call) to
//! DynamoDB Local and moto, stream records delivered by the mapping
//! emulator with the template's settings, events on an EventBridge bus
//! whose subscriber is a standard SQS queue (every copy is seen: no FIFO
//! deduplication hides one).
//!
//! Both orderings: relaxed answers "is this record stale?" with one
//! consistent `BatchGetItem` per suspect batch, strict with its guard read.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use outbox_engine::MAX_BATCH_WRITE;
use testkit::lambda::LambdaFunction;
use testkit::proxy::{Fault, FaultProxy};
use testkit::Stack;

/// The publisher of `stack`, deployed with `Ordering=ordering`, its calls
/// through `proxy`, killed by the proxy's crash faults.
fn publisher(stack: &Stack, proxy: &FaultProxy, ordering: &str) -> LambdaFunction {
    publisher_with(
        stack,
        proxy,
        ordering,
        outbox_engine::DEFAULT_SEND_CONCURRENCY,
    )
}

/// The same, with `SendConcurrency=concurrency`.
fn publisher_with(
    stack: &Stack,
    proxy: &FaultProxy,
    ordering: &str,
    concurrency: usize,
) -> LambdaFunction {
    // The endpoints: the fault proxy in front of the local servers.
    let endpoints = devkit::endpoint_env_at(&proxy.endpoint);
    let extra: Vec<(&str, &str)> = endpoints
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let function = stack.function(
        devkit::Function::Publisher,
        &[
            ("Ordering", ordering),
            ("SendConcurrency", &concurrency.to_string()),
        ],
        &extra,
    );
    let killer = function.killer();
    proxy.set_crash_hook(Arc::new(move || killer.kill()));
    function
}

/// How many times each event reached the subscriber.
async fn copies(stack: &Stack) -> HashMap<String, usize> {
    let mut copies = HashMap::new();
    for message in stack.drain_subscriber().await {
        let id = message["detail"]["eventId"]
            .as_str()
            .unwrap_or("?")
            .to_owned();
        *copies.entry(id).or_insert(0) += 1;
    }
    copies
}

/// Item 5: a publisher killed after its deletes were applied and before it
/// answered. The mapping delivers the batch again, to a new process: it
/// checks the batch (its first) and publishes nothing again. Three events
/// are deleted with a `BatchWriteItem`, a lone one with a `DeleteItem`.
#[tokio::test]
async fn a_publisher_killed_after_its_deletes_publishes_nothing_again() {
    for (events, deletes) in [(3, "BatchWriteItem"), (1, "DeleteItem")] {
        for ordering in ["relaxed", "strict"] {
            killed_after_deletes(events, deletes, ordering).await;
        }
    }
}

/// One case of the test above: `events` events of distinct aggregates, the
/// publisher (`ORDERING=ordering`) killed once its `deletes` call took
/// effect.
async fn killed_after_deletes(events: usize, deletes: &str, ordering: &str) {
    let case = format!("{ordering}, {events} event(s)");
    let stack = Stack::with_bus().await;
    let proxy = FaultProxy::start().await;
    let publisher = publisher(&stack, &proxy, ordering);
    for i in 0..events {
        stack
            .put_aggregate_event(&format!("o{i}"), 1, Duration::ZERO, 0, 8)
            .await;
    }
    proxy.inject(deletes, Fault::Crash { forward: true }, Some(1));
    let mut pump = stack.pump(&publisher, None);
    pump.run_until_idle().await.expect("pump");
    assert_eq!(pump.stats.function_errors, 1, "{case}: killed once");
    let copies = copies(&stack).await;
    assert_eq!(copies.len(), events, "{case}: {copies:?}");
    assert!(
        copies.values().all(|n| *n == 1),
        "{case}: each event once: {copies:?}"
    );
    assert!(stack.outbox_items().await.is_empty());
}

/// Items 2 and 5: deletes keep up with the sends. 100 events of distinct
/// aggregates, 10 per `PutEvents`; the publisher is killed during its
/// k-th sink call (the call takes effect). The redelivered batch repeats
/// what was published and not deleted at the kill:
/// - with `SendConcurrency` 1 (set here to check #40's bound, one call at
///   a time): at most that call's events, the delete batch beside it and
///   fewer than 25 more (the bound below computes it per k), the earlier
///   calls' events deleted 25 at a time beside the next calls
///   (before #40, a kill during the sixth call repeated 60 events);
/// - at the template's default (5 calls in flight, #41): a kill in the
///   first wave repeats at most that wave's 50 events, nothing after the
///   wave having gone out and nothing been deleted yet (a kill in the
///   second may repeat the whole batch of 100: its 50 and the two delete
///   batches in flight beside it, which the test cannot order).
#[tokio::test]
async fn a_kill_during_a_sink_call_repeats_at_most_the_calls_in_flight_and_the_deletes_beside_them()
{
    let default = outbox_engine::DEFAULT_SEND_CONCURRENCY;
    for (ordering, concurrency, k) in [
        ("relaxed", 1, 3),
        ("relaxed", 1, 6),
        ("strict", 1, 6),
        ("relaxed", default, 3),
        ("strict", default, 3),
    ] {
        let stack = Stack::with_bus().await;
        let proxy = FaultProxy::start().await;
        let publisher = publisher_with(&stack, &proxy, ordering, concurrency);
        for i in 0..100 {
            stack
                .put_aggregate_event(&format!("o{i}"), 1, Duration::ZERO, 0, 8)
                .await;
        }
        proxy.inject("PutEvents", Fault::Pass, Some(k - 1));
        proxy.inject("PutEvents", Fault::Crash { forward: true }, Some(1));
        let mut pump = stack.pump(&publisher, None);
        pump.run_until_idle().await.expect("pump");
        let case = format!("{ordering}, {concurrency} in flight, killed in sink call {k}");
        assert_eq!(pump.stats.function_errors, 1, "{case}: killed once");
        let copies = copies(&stack).await;
        assert_eq!(copies.len(), 100, "{case}: every event");
        let repeated: usize = copies.values().map(|n| n - 1).sum();
        println!("{case}: {repeated} events repeated");
        // What was published and not deleted when the k-th call's wave
        // began: each wave's full delete batches go out beside the next
        // wave (and are in flight beside the k-th call's).
        let (mut published, mut deleted) = (0, 0);
        for _ in 0..(k - 1) / concurrency {
            deleted += (published - deleted) / MAX_BATCH_WRITE * MAX_BATCH_WRITE;
            published += 10 * concurrency;
        }
        let bound = 10 * concurrency + (published - deleted);
        assert!(
            repeated <= bound,
            "{case}: {repeated} repeated, bound {bound}"
        );
        assert!(stack.outbox_items().await.is_empty());
    }
}

/// #41 with #40: a record that fails in the first call of a wave is
/// reported; the wave's later calls went out beside it and their events
/// were deleted. Lambda delivers the batch again from the failed record to
/// the same process, which has seen those records: it checks them against
/// the table and sends none of the deleted ones again. Each event reaches
/// the subscriber once (none of the failed entry's call-mates repeats
/// either: they were deleted too).
#[tokio::test]
async fn a_failure_in_a_wave_repeats_none_of_the_events_published_beside_it() {
    let stack = Stack::with_bus().await;
    let proxy = FaultProxy::start().await;
    let publisher = publisher(&stack, &proxy, "relaxed");
    let mut failing = String::new();
    for i in 0..50 {
        let item = stack
            .put_aggregate_event(&format!("w{i}"), 1, Duration::ZERO, 0, 8)
            .await;
        if i == 3 {
            failing = item.event_id.to_string();
        }
    }
    // Entry 3 (first call of the wave) refused in every call of the first
    // invocation: the wave's 5 calls and its retries alone.
    proxy.inject(
        "PutEvents",
        Fault::refuse(&[failing], "ThrottlingException"),
        Some(5 + 3),
    );
    let mut pump = stack.pump(&publisher, None);
    pump.run_until_idle().await.expect("pump");
    assert!(pump.stats.partial_failures >= 1, "entry 3 was reported");
    let copies = copies(&stack).await;
    assert_eq!(copies.len(), 50, "every event: {copies:?}");
    assert!(
        copies.values().all(|n| *n == 1),
        "each event once: {copies:?}"
    );
    assert!(stack.outbox_items().await.is_empty());
}

/// #43: the publisher publishes an event, its delete fails and so does the
/// write that hands it to the scheduled sweep (each call's three SDK
/// attempts refused). It then reports the record (`NotDeleted`): the
/// mapping delivers it again, the next invocation publishes it again and
/// deletes it. One duplicate, nothing left in the table. Before the fix the
/// item kept its normal key, for the day-old sweep alone, and strict
/// ordering held its aggregate's later events that long. The faults are
/// injected once the publisher is warm (its cold start writes its settings
/// with an `UpdateItem` too).
#[tokio::test]
async fn a_published_event_neither_deleted_nor_handed_over_goes_out_again_from_the_stream() {
    for ordering in ["relaxed", "strict"] {
        let stack = Stack::with_bus().await;
        let proxy = FaultProxy::start().await;
        let publisher = publisher(&stack, &proxy, ordering);
        stack
            .put_aggregate_event("warm", 1, Duration::ZERO, 0, 8)
            .await;
        let mut pump = stack.pump(&publisher, None);
        pump.run_until_idle().await.expect("pump");
        stack
            .put_aggregate_event("o1", 1, Duration::ZERO, 0, 8)
            .await;
        proxy.inject("DeleteItem", Fault::ServerError, Some(3));
        proxy.inject("UpdateItem", Fault::ServerError, Some(3));
        pump.run_until_idle().await.expect("pump");
        assert_eq!(pump.stats.function_errors, 0, "{ordering}");
        assert_eq!(
            pump.stats.partial_failures, 1,
            "{ordering}: the record reported once"
        );
        let copies = copies(&stack).await;
        assert_eq!(copies.len(), 2, "{ordering}: {copies:?}");
        assert_eq!(
            copies.values().copied().max(),
            Some(2),
            "{ordering}: one event sent twice: {copies:?}"
        );
        assert!(
            stack.outbox_items().await.is_empty(),
            "{ordering}: nothing left in the table"
        );
    }
}
