//! `BENCH_ONLY=strict`: strict ordering's calls against relaxed, in three
//! arrival patterns.

use std::time::Duration;

use crate::common::{count, publisher_rig};

/// Strict ordering's cost (docs/ordering.md), counted at the proxy as in
/// the section above: `n` events in three arrival patterns, each in both
/// modes. The events are written as the writer writes them (one outbox item
/// per event, `aggregateVersion` recorded).
pub(super) async fn strict_calls(n: usize) {
    println!("## Strict ordering, {n} events per case (publisher binary, every call counted by the proxy)\n");
    println!("| case | relaxed: calls per 1,000 events | strict: calls per 1,000 events | strict: collection reads (`Query`) per 1,000 | strict: holds (`UpdateItem`) |");
    println!("|---|---|---|---|---|");
    let cases: [(&str, usize, bool); 3] = [
        (
            "distinct aggregates (each event its aggregate's first)",
            n,
            false,
        ),
        (
            "created and paid in one batch (v1 and v2 arrive together)",
            n / 2,
            false,
        ),
        ("created, then paid in a later batch", n / 2, true),
    ];
    for (name, aggregates, later) in cases {
        let mut row = Vec::new();
        for ordering in ["relaxed", "strict"] {
            let (stack, proxy, function) = publisher_rig(ordering).await;
            let mut pump = stack.pump(&function, None);
            let versions = if aggregates == n { 1 } else { 2 };
            let put = |a: usize, v: u64| {
                let aggregate = format!("{name}-{a}");
                let stack = &stack;
                async move {
                    stack
                        .put_aggregate_event(&aggregate, v, Duration::ZERO, a as u64, 8)
                        .await
                }
            };
            if later {
                // Every order created, the mapping drains; then every one paid.
                for v in 1..=versions {
                    for a in 0..aggregates {
                        put(a, v).await;
                    }
                    pump.run_until_idle().await.expect("pump");
                }
            } else {
                // Each order created and paid at once: v1, v2 side by side.
                for a in 0..aggregates {
                    for v in 1..=versions {
                        put(a, v).await;
                    }
                }
            }
            pump.run_until_idle().await.expect("pump");
            assert_eq!(
                stack.outbox_items().await.len(),
                0,
                "{name}: everything published"
            );
            let calls = proxy.action_counts();
            let total: usize = calls.values().sum();
            let per_1000 = |x: usize| x as f64 * 1000.0 / n as f64;
            row.push((
                per_1000(total),
                per_1000(count(&calls, "dynamodb:Query")),
                count(&calls, "dynamodb:UpdateItem"),
            ));
        }
        println!(
            "| {name} | {:.1} | **{:.1}** | {:.1} | {} |",
            row[0].0,
            row[1].0,
            row[1].1,
            // The cold start's settings write is an UpdateItem too.
            row[1].2.saturating_sub(1)
        );
    }
    println!();
}
