//! Order per aggregate (#26), through the real publisher and sweeper
//! binaries under the local Lambda runtime, their AWS calls going through
//! the fault proxy to DynamoDB Local and moto (SNS FIFO topic, FIFO
//! subscriber queue, OnFailure queue), stream records delivered by the
//! local mapping emulator with the template's settings.
//!
//! Each case that strict ordering fixes is run in relaxed mode too, where
//! it shows the inversion that strict mode prevents.
//!
//! This file holds those cases, run in both modes; the cases of strict
//! mode alone are grouped by concern in the modules below.

mod claims;
mod failures;
mod holds;
mod parked;

use std::time::Duration;

use outbox_core::keys;
use outbox_core::OutboxItem;
use testkit::proxy::Fault;
use testkit::rig::{scheduled, stream_event, Rig};

/// Now, in seconds since the epoch (the modules below compare stored
/// times with it).
fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// Checks that the subscriber got the versions `expected` of aggregate
/// `a` in `ordering`'s run and nothing is left; in strict mode, prints how
/// long after A1 the later versions went out, released by `how`.
async fn assert_out_in_order(rig: &Rig, ordering: &str, expected: &[u64], how: &str) {
    let received = rig.received_at("a").await;
    let versions: Vec<u64> = received.iter().map(|(v, _)| *v).collect();
    assert_eq!(versions, expected, "{ordering}");
    if ordering == "strict" {
        let after = received[1..]
            .iter()
            .zip(2..)
            .map(|((_, sent), v)| format!("A{v} {} ms", sent.saturating_sub(received[0].1)));
        let after: Vec<String> = after.collect();
        println!("release latency ({how}): {} after A1", after.join(", "));
    }
    assert!(rig.stack.outbox_items().await.is_empty(), "{ordering}");
}

/// The mapping gives up the batch holding A1 (the sink is down past its
/// retries); A2 and A3 arrive after the sink is back. Strict: the
/// publisher holds them, the OnFailure redrive publishes A1 and releases
/// A2 and A3 in the same run. Relaxed: A2 and A3 overtake A1.
#[tokio::test]
async fn a_batch_the_mapping_gives_up_keeps_order_in_strict_mode() {
    for (ordering, expected) in [("strict", vec![1, 2, 3]), ("relaxed", vec![2, 3, 1])] {
        let rig = Rig::new().await;
        let (publisher, sweeper) = rig.functions(ordering);
        let mut pump = rig.stack.pump(&publisher, Some(&rig.failures));
        rig.event("a", 1, 8).await;
        rig.proxy
            .inject("PublishBatch", Fault::refuse_all("InternalError"), None);
        pump.run_until_idle().await.expect("pump");
        assert_eq!(
            pump.stats.on_failure_messages, 1,
            "{ordering}: the mapping gave up A1"
        );

        rig.proxy.heal();
        rig.event("a", 2, 8).await;
        rig.event("a", 3, 8).await;
        pump.run_until_idle().await.expect("pump");
        if ordering == "strict" {
            let held: Vec<OutboxItem> = rig.stack.outbox_items().await;
            assert_eq!(held.len(), 3, "A2 and A3 wait behind A1");
            assert_eq!(held.iter().filter(|i| i.held_behind.is_some()).count(), 2);
        }
        let sqs = aws_sdk_sqs::Client::new(&rig.stack.sdk);
        let drained = testkit::lambda::drain_queue_through(&sqs, &rig.failures, &sweeper).await;
        assert_eq!(drained.reported, 0, "{ordering}: the window settled");
        // Strict: A2 and A3 released by the redrive that published A1.
        assert_out_in_order(&rig, ordering, &expected, "OnFailure redrive").await;
    }
}

/// Two publisher invocations at once (a `ParallelizationFactor` of 2: Lambda
/// keeps order per item only): A2's invocation starts first, while A1 is
/// still in the table. Strict: A2 is held (its invocation answers at once)
/// and the scheduled sweep releases it once the other invocation published
/// A1. Relaxed: A2 goes out first.
#[tokio::test]
async fn concurrent_invocations_keep_order_in_strict_mode() {
    for (ordering, expected) in [("strict", vec![1, 2]), ("relaxed", vec![2, 1])] {
        let rig = Rig::new().await;
        let first = rig.function("publisher", ordering, &[]);
        let second = rig.function("publisher", ordering, &[]);
        rig.event("a", 1, 8).await;
        rig.event("a", 2, 8).await;
        let records = rig.stack.outbox_inserts().await;
        assert_eq!(records.len(), 2);
        // Warm both sandboxes, so that start-up does not decide the race.
        for f in [&first, &second] {
            rig.invoke(f, &stream_event(Vec::new())).await;
        }
        let a2 = stream_event(vec![records[1].clone()]);
        let a1 = stream_event(vec![records[0].clone()]);
        let (answer2, answer1) = if ordering == "strict" {
            // A1's invocation starts while A2's runs (it reads A1 first).
            tokio::join!(rig.answer(&first, &a2), async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                rig.answer(&second, &a1).await
            })
        } else {
            // The worst interleaving, for certain: A2's batch ends first.
            let answer2 = rig.answer(&first, &a2).await;
            (answer2, rig.answer(&second, &a1).await)
        };
        for answer in [answer1, answer2] {
            assert_eq!(
                answer["batchItemFailures"],
                serde_json::json!([]),
                "{ordering}: nothing reported"
            );
        }
        if ordering == "strict" {
            // The scheduled sweep releases A2, after A1.
            let sweeper = rig.function("sweeper", ordering, &[]);
            rig.invoke(&sweeper, &scheduled()).await;
        }
        // Strict: A2 held, then released by the sweep.
        let how = "concurrent invocation, then a sweep";
        assert_out_in_order(&rig, ordering, &expected, how).await;
    }
}

/// `OUTBOX_SHARDS` is lowered between A1 and A2 while A1 backs off: A1 is
/// in shard `h % 8`, A2 in shard 0, and the sweeper sweeps shards at once.
/// Strict: A2 waits for A1 whatever the shards. Relaxed: A2 goes out while
/// A1 backs off.
#[tokio::test]
async fn lowering_the_shard_count_keeps_order_in_strict_mode() {
    // An aggregate whose shard is not 0 with 8 shards.
    let aggregate = (0..)
        .map(|i| format!("agg-{i}"))
        .find(|a| keys::shard_of(a, 8) != 0)
        .unwrap();
    for (ordering, expected) in [("strict", vec![1, 2]), ("relaxed", vec![2, 1])] {
        let rig = Rig::new().await;
        // A1's backoff: 5 to 10 s, ample for the first sweep to see it not due.
        let sweep = [("STRANDED_AFTER_SECONDS", "0"), ("RETRY_BASE_SECONDS", "5")];
        let sweeper_8 = rig.function(
            "sweeper",
            ordering,
            &[&sweep[..], &[("OUTBOX_SHARDS", "8")]].concat(),
        );
        let sweeper_1 = rig.function(
            "sweeper",
            ordering,
            &[&sweep[..], &[("OUTBOX_SHARDS", "1")]].concat(),
        );
        rig.event(&aggregate, 1, 8).await;
        rig.proxy
            .inject("PublishBatch", Fault::refuse_all("InternalError"), None);
        rig.invoke(&sweeper_8, &scheduled()).await;
        let a1 = rig.stack.outbox_items().await.remove(0);
        assert_eq!(a1.attempts, 1, "{ordering}: A1 backs off");

        rig.proxy.heal();
        rig.event(&aggregate, 2, 1).await;
        // A1 is not due yet.
        rig.invoke(&sweeper_1, &scheduled()).await;
        // A1 is due.
        tokio::time::sleep(Duration::from_millis(10_500)).await;
        rig.invoke(&sweeper_1, &scheduled()).await;
        rig.assert_all_out(&aggregate, &expected, ordering).await;
    }
}
