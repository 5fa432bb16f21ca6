//! `BENCH_ONLY=recheck`: the calls of the check of a batch that may be a
//! redelivery (#40).

use std::time::Duration;

use crate::common::{count, publisher_binary, publisher_rig};
use testkit::proxy::FaultProxy;

/// The check of a batch that may be a redelivery (#40, relaxed ordering;
/// strict's guard read makes it at no extra call): `BatchGetItem` calls and
/// the keys they read (one read unit each: a consistent read of an item
/// under 4 KB, or of a missing one), per 1,000 events, at a trickle (one
/// event per batch, one process), in full batches (one process), and for a
/// batch delivered again to a new process after its first process
/// published and deleted it (the kill after the deletes).
pub(super) async fn recheck_calls(n: usize) {
    println!("## The redelivery check, {n} events per case (publisher binary, relaxed ordering, every call counted by the proxy)\n");
    println!("| case | invocations | cold starts | `BatchGetItem` per 1,000 events | read units (keys read) per 1,000 events | events sent again | all calls per 1,000 events |");
    println!("|---|---|---|---|---|---|---|");
    let trickle = (n / 10).max(1);
    for case in [
        "a trickle (one event per batch)",
        "full batches",
        "a batch delivered again to a new process",
    ] {
        let (stack, proxy, function) = publisher_rig("relaxed").await;
        let mut pump = stack.pump(&function, None);
        let events = if case.starts_with("a trickle") {
            trickle
        } else if case == "full batches" {
            n
        } else {
            n.min(100)
        };
        let put = |i: usize| {
            let stack = &stack;
            async move {
                stack
                    .put_aggregate_event(&format!("recheck-{i}"), 1, Duration::ZERO, 0, 8)
                    .await
            }
        };
        let mut invocations = 0;
        let mut cold = 0;
        if case.starts_with("a trickle") {
            for i in 0..events {
                put(i).await;
                pump.run_until_idle().await.expect("pump");
            }
        } else {
            for i in 0..events {
                put(i).await;
            }
            pump.run_until_idle().await.expect("pump");
        }
        invocations += pump.stats.invocations;
        cold += function
            .cold_starts
            .load(std::sync::atomic::Ordering::SeqCst);
        let mut counted = proxy.action_counts();
        let mut sent_again = 0;
        if case.starts_with("a batch delivered again") {
            // The same records, from the start of the stream, to a new
            // process: only this delivery is counted.
            let again = FaultProxy::start().await;
            let fresh = publisher_binary(&stack, &again, "relaxed");
            let before = stack.drain_subscriber().await.len();
            assert_eq!(before, events);
            let mut replay = stack.pump(&fresh, None);
            replay.run_until_idle().await.expect("pump");
            sent_again = stack.drain_subscriber().await.len();
            invocations = replay.stats.invocations;
            cold = fresh.cold_starts.load(std::sync::atomic::Ordering::SeqCst);
            counted = again.action_counts();
        }
        let count = |action: &str| count(&counted, action);
        let total: usize = counted.values().sum();
        let per_1000 = |x: usize| x as f64 * 1000.0 / events as f64;
        // One key per event of each checked batch: the cold start's batch
        // (the first), or the whole redelivered one.
        let keys_read = if case.starts_with("a trickle") {
            count("dynamodb:BatchGetItem")
        } else {
            events.min(100) * count("dynamodb:BatchGetItem")
        };
        println!(
            "| {case} | {invocations} | {cold} | {:.1} | {:.1} | {sent_again} | {:.1} |",
            per_1000(count("dynamodb:BatchGetItem")),
            per_1000(keys_read),
            per_1000(total),
        );
    }
    println!();
}
