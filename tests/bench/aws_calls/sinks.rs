//! The publisher's calls per 1,000 events on each EventBridge sink, side
//! by side in one run: the classic bus (10 entries a `PutEvents`) with
//! relaxed order, and the Custom Event Bus (`eventbridge-bus`, 100 entries
//! a call, on the local bus) with relaxed order and with strict, its
//! default (the guard's reads reported beside it). Every call counted on
//! the wire by the proxy, cold start included; the stream reads are the
//! mapping's, not the function's.

use testkit::proxy::FaultProxy;
use testkit::Stack;

use crate::common::{count, publisher_with, write_bench_json};

/// One run: its name, the calls per action, the invocations.
struct Run {
    sink: &'static str,
    ordering: &'static str,
    calls: std::collections::BTreeMap<String, usize>,
    invocations: usize,
}

async fn classic(n: usize) -> Run {
    let stack = Stack::with_bus().await;
    let proxy = FaultProxy::start().await;
    let binary = testkit::lambda::debug_binary("publisher").expect("publisher binary");
    let function = publisher_with(&stack, &proxy, &[("Ordering", "relaxed")], binary, &[]);
    run(&stack, &proxy, &function, n, "eventbridge", "relaxed").await
}

async fn custom_bus(n: usize, ordering: &'static str) -> Run {
    let mut stack = Stack::new().await;
    let bus = devkit::LocalBus::start(&stack.sdk)
        .await
        .expect("local bus");
    stack.use_custom_bus(&bus).await;
    let proxy = FaultProxy::start_with_bus(bus.endpoint()).await;
    let binary = testkit::lambda::debug_binary("publisher").expect("publisher binary");
    // The template's Ordering parameter (auto: strict for this sink).
    let parameters: &[(&str, &str)] = if ordering == "relaxed" {
        &[("Ordering", "relaxed")]
    } else {
        &[]
    };
    let function = publisher_with(&stack, &proxy, parameters, binary, &[proxy.bus_env()]);
    let run = run(&stack, &proxy, &function, n, "eventbridge-bus", ordering).await;
    let stats = bus.stats();
    assert_eq!(stats.deduplicated, 0, "no call sent twice: {stats:?}");
    run
}

async fn run(
    stack: &Stack,
    proxy: &FaultProxy,
    function: &testkit::lambda::LambdaFunction,
    n: usize,
    sink: &'static str,
    ordering: &'static str,
) -> Run {
    // Each event its aggregate's first (one order each), as the
    // publisher's own bench counts.
    stack.create_orders(n).await;
    let mut pump = stack.pump(function, None);
    pump.run_until_idle().await.expect("pump");
    Run {
        sink,
        ordering,
        calls: proxy.action_counts(),
        invocations: pump.stats.invocations,
    }
}

/// Prints the table and writes `sink-calls.json`.
pub(super) async fn sink_calls(n: usize) {
    let runs = vec![
        classic(n).await,
        custom_bus(n, "relaxed").await,
        custom_bus(n, "strict").await,
    ];
    let per_1000 = |x: usize| x as f64 * 1000.0 / n as f64;
    println!("## Calls per 1,000 events by EventBridge sink, {n} events (distinct aggregates, full batches)\n");
    println!("| sink | order | PutEvents | BatchWriteItem + DeleteItem | Query (strict's guard) | other | total | invocations |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut json = Vec::new();
    for r in &runs {
        let put_events = count(&r.calls, "events:PutEvents");
        let deletes =
            count(&r.calls, "dynamodb:BatchWriteItem") + count(&r.calls, "dynamodb:DeleteItem");
        let guard = count(&r.calls, "dynamodb:Query");
        let total: usize = r.calls.values().sum();
        let other = total - put_events - deletes - guard;
        println!(
            "| `{}` | {} | {:.1} | {:.1} | {:.1} | {:.1} | **{:.1}** | {} |",
            r.sink,
            r.ordering,
            per_1000(put_events),
            per_1000(deletes),
            per_1000(guard),
            per_1000(other),
            per_1000(total),
            r.invocations
        );
        json.push(serde_json::json!({
            "sink": r.sink,
            "ordering": r.ordering,
            "calls": r.calls,
            "per_1000_events": per_1000(total),
            "invocations": r.invocations,
        }));
    }
    println!();
    write_bench_json(
        "sink-calls.json",
        serde_json::json!({
            "source": "cargo bench --bench aws_calls (BENCH_ONLY=sinks): the publisher binary through the mapping emulator, every call counted by the proxy",
            "events": n,
            "runs": json,
        }),
    );
}
