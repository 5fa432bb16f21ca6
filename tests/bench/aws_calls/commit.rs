//! `BENCH_ONLY=commit`: commit-to-publish latency from the publisher
//! binary's EMF, at a steady rate and through a short sink outage.

use std::time::Duration;

use crate::common::{publisher_rig, write_bench_json};
use testkit::proxy::Fault;

/// #41 item 3: `CommitToPublishLatency` as the publisher binary emits it
/// (its EMF lines), through the local pipeline: 5 events every 250 ms for
/// `ticks` ticks (20 events/s), each tick followed by the mapping's pass;
/// then the same with a short sink outage in the middle (for 1.5 seconds
/// every `PutEvents` entry is refused: the publisher retries within the
/// invocation, then reports, and the mapping delivers the batch again). The local mapping polls when
/// the bench asks it to, once per tick: its wait is in the figures, as
/// Lambda's polling (about a second) would be deployed.
pub(super) async fn commit_to_publish(ticks: usize) {
    println!("## Commit to publish: `CommitToPublishLatency` from the publisher binary's EMF, 20 events/s through the local pipeline\n");
    println!("| case | events | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    let mut rows = Vec::new();
    for case in ["steady rate", "a 1.5-second sink outage in the middle"] {
        let (stack, proxy, function) = publisher_rig("relaxed").await;
        let mut pump = stack.pump(&function, None);
        for tick in 0..ticks {
            if tick == ticks / 2 && case.starts_with("a 1.5-second") {
                let until = std::time::Instant::now() + Duration::from_millis(1500);
                proxy.set_chooser(Box::new(move |operation, _| {
                    (operation == "PutEvents" && std::time::Instant::now() < until)
                        .then(|| Fault::refuse_all("ThrottlingException"))
                }));
            }
            for i in 0..5 {
                stack
                    .put_aggregate_event(&format!("c2p-{tick}-{i}"), 1, Duration::ZERO, 0, 8)
                    .await;
            }
            pump.run_until_idle().await.expect("pump");
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        pump.run_until_idle().await.expect("pump");
        let mut values: Vec<u64> = function
            .emf()
            .iter()
            .filter_map(|doc| doc[outbox_runtime::COMMIT_TO_PUBLISH].as_array().cloned())
            .flatten()
            .filter_map(|v| v.as_u64())
            .collect();
        values.sort_unstable();
        assert!(!values.is_empty(), "{case}: latencies emitted");
        let at = |q: usize| values[(values.len() * q / 100).min(values.len() - 1)];
        let (p50, p99, max) = (at(50), at(99), values[values.len() - 1]);
        println!(
            "| {case} | {} | {p50} ms | {p99} ms | {max} ms |",
            values.len()
        );
        rows.push(serde_json::json!({"case": case, "events": values.len(), "p50_ms": p50, "p99_ms": p99, "max_ms": max}));
    }
    println!();
    write_bench_json(
        "commit-to-publish.json",
        serde_json::json!({
            "source": "cargo bench --bench aws_calls (BENCH_ONLY=commit): the publisher binary's CommitToPublishLatency EMF values through the local pipeline",
            "rows": rows,
        }),
    );
}
