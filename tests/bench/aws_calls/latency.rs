//! `BENCH_ONLY=latency`: concurrent sends (#41), a 100-event batch's time
//! and one shard's sustained rate with the model's latencies injected at
//! the wire; the rig, the timed invoker and the wire's modes it uses.

use std::time::Duration;

use crate::common::{count, publisher_with, quick, write_bench_json};
use testkit::lambda::{debug_binary, release_binary, LambdaFunction};
use testkit::proxy::{Fault, FaultProxy};
use testkit::Stack;

/// Latency per call injected at the wire: the model's in-region latencies.
/// `PutEvents` is answered by the proxy after this long (a stub sink: moto's
/// own time, which grows with the machine's load, left out);
/// `BatchWriteItem` reaches DynamoDB Local and is answered this long later.
const PUT_EVENTS_LATENCY: Duration = Duration::from_millis(25);
const BATCH_WRITE_LATENCY: Duration = Duration::from_millis(10);

/// The publisher binary with `SendConcurrency=concurrency`, its calls
/// through a proxy.
async fn latency_rig(concurrency: usize) -> (Stack, FaultProxy, LambdaFunction) {
    let stack = Stack::with_bus().await;
    let proxy = FaultProxy::start().await;
    // Times: the shipped profile, but for make test's quick pass (a release
    // build takes minutes here; a debug build's CPU adds tens of ms a batch).
    let binary = if quick() {
        debug_binary("publisher")
    } else {
        release_binary("publisher")
    };
    let concurrency = concurrency.to_string();
    let parameters = [("SendConcurrency", concurrency.as_str())];
    let binary = binary.expect("publisher binary");
    let function = publisher_with(&stack, &proxy, &parameters, binary, &[]);
    (stack, proxy, function)
}

/// Times each invocation of the function (the mapping's wait for its
/// answer).
struct Timed<'a> {
    function: &'a LambdaFunction,
    spent: std::sync::Mutex<Vec<Duration>>,
}

impl<'a> Timed<'a> {
    fn new(function: &'a LambdaFunction) -> Self {
        Self {
            function,
            spent: Default::default(),
        }
    }
    /// The invocations' times from the `from`-th on, and their sum.
    fn since(&self, from: usize) -> (Vec<Duration>, Duration) {
        let spent = self.spent.lock().unwrap_or_else(|p| p.into_inner());
        let times = spent[from.min(spent.len())..].to_vec();
        let sum = times.iter().sum();
        (times, sum)
    }
}

impl devkit::Invoker for &Timed<'_> {
    async fn invoke(
        &self,
        event: aws_lambda_events::event::dynamodb::Event,
    ) -> Result<aws_lambda_events::event::streams::DynamoDbEventResponse, devkit::InvokeError> {
        let started = std::time::Instant::now();
        let answer = devkit::Invoker::invoke(&self.function, event).await;
        self.spent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(started.elapsed());
        answer
    }
}

/// Warms the process with a batch of one (its cold start and first-batch
/// check done), then answers its calls as `wire` says ([`Wire`]).
async fn warm_up(
    stack: &Stack,
    proxy: &FaultProxy,
    pump: &mut devkit::Pump<&Timed<'_>>,
    wire: Wire,
) {
    stack
        .put_aggregate_event("warm-up", 1, Duration::ZERO, 0, 8)
        .await;
    pump.run_until_idle().await.expect("pump");
    let (put, store) = match wire {
        Wire::Local => (
            Fault::Stub(PUT_EVENTS_LATENCY),
            Fault::Late(BATCH_WRITE_LATENCY),
        ),
        Wire::Stub => (
            Fault::Stub(PUT_EVENTS_LATENCY),
            Fault::Stub(BATCH_WRITE_LATENCY),
        ),
        Wire::Instant => (Fault::Stub(Duration::ZERO), Fault::Stub(Duration::ZERO)),
    };
    proxy.inject("PutEvents", put, None);
    proxy.inject("BatchWriteItem", store, None);
}

/// How the calls of a row of the section below are answered.
#[derive(Clone, Copy, PartialEq)]
enum Wire {
    /// `PutEvents` by the proxy after 25 ms; `BatchWriteItem` by DynamoDB
    /// Local, 10 ms later.
    Local,
    /// Both by the proxy, after 25 and 10 ms (DynamoDB Local's own time
    /// out; the deletes do not happen).
    Stub,
    /// Both by the proxy at once: what an invocation costs here besides the
    /// injected latency (the local runtime, the proxy, our CPU).
    Instant,
}

impl Wire {
    fn label(self) -> &'static str {
        match self {
            Wire::Local => "DynamoDB Local (+10 ms)",
            Wire::Stub => "the proxy, 25 / 10 ms",
            Wire::Instant => "the proxy, at once",
        }
    }
}

/// #41: a 100-event batch's time through the publisher binary, one sink
/// call at a time against `SendConcurrency` calls in flight, with the
/// model's latencies injected on the wire; then the sustained rate of one
/// stream shard (`sustained` events, BatchSize 100). A batch's time is its
/// invocation's, as the mapping waits for it (median of `repeats` on this
/// machine; `make test`'s quick run makes one); nothing here asserts a time.
pub(super) async fn send_latency((sustained, repeats): (usize, usize)) {
    let concurrent = outbox_engine::DEFAULT_SEND_CONCURRENCY;
    println!("## Concurrent sends: a 100-event batch with {} ms per `PutEvents` and {} ms per `BatchWriteItem` injected at the wire (publisher binary, {} build, relaxed ordering)\n", PUT_EVENTS_LATENCY.as_millis(), BATCH_WRITE_LATENCY.as_millis(), if quick() { "debug" } else { "release" });
    println!("| batch | `PutEvents` / `BatchWriteItem` answered by | `SendConcurrency` | invocation time (median of {repeats}) | `PutEvents` | `BatchWriteItem` | all calls per 1,000 events |");
    println!("|---|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for (case, aggregates, wire) in [
        ("100 events of 100 aggregates", 100, Wire::Local),
        ("20 aggregates × 5 events", 20, Wire::Local),
        ("100 events of 100 aggregates", 100, Wire::Stub),
        ("20 aggregates × 5 events", 20, Wire::Stub),
        ("100 events of 100 aggregates", 100, Wire::Instant),
    ] {
        for concurrency in [1, concurrent] {
            let mut times = Vec::new();
            let mut counts = std::collections::BTreeMap::new();
            for _ in 0..repeats {
                let (stack, proxy, function) = latency_rig(concurrency).await;
                let timed = Timed::new(&function);
                let mut pump = stack.pump(&timed, None);
                warm_up(&stack, &proxy, &mut pump, wire).await;
                for v in 1..=(100 / aggregates) as u64 {
                    for a in 0..aggregates {
                        stack
                            .put_aggregate_event(&format!("lat-{a}"), v, Duration::ZERO, 0, 8)
                            .await;
                    }
                }
                let before = proxy.action_counts();
                let invoked = pump.stats.invocations;
                pump.run_until_idle().await.expect("pump");
                assert_eq!(pump.stats.invocations - invoked, 1, "one batch of 100");
                times.push(timed.since(invoked).1);
                counts = proxy.action_counts();
                for (action, n) in before {
                    *counts.entry(action).or_default() -= n;
                }
            }
            times.sort();
            let median = times[times.len() / 2];
            let total: usize = counts.values().sum();
            println!(
                "| {case} | {} | {concurrency} | {:.0} ms | {} | {} | {:.0} |",
                wire.label(),
                median.as_secs_f64() * 1000.0,
                count(&counts, "events:PutEvents"),
                count(&counts, "dynamodb:BatchWriteItem"),
                total as f64 * 10.0,
            );
            rows.push(serde_json::json!({
                "case": case,
                "wire": wire.label(),
                "send_concurrency": concurrency,
                "median_ms": median.as_secs_f64() * 1000.0,
                "calls": counts,
            }));
        }
    }
    println!();
    println!("**One stream shard, sustained: {sustained} events of distinct aggregates in batches of 100, same latencies**\n");
    println!("| `PutEvents` / `BatchWriteItem` answered by | `SendConcurrency` | events per second, end to end (the local mapping's stream reads included) | events per second of invocation time (the function's ceiling per shard and lane) | invocations |");
    println!("|---|---|---|---|---|");
    let mut rates = Vec::new();
    for (wire, concurrency) in [
        (Wire::Local, 1),
        (Wire::Local, concurrent),
        (Wire::Stub, 1),
        (Wire::Stub, concurrent),
    ] {
        let (stack, proxy, function) = latency_rig(concurrency).await;
        let timed = Timed::new(&function);
        let mut pump = stack.pump(&timed, None);
        warm_up(&stack, &proxy, &mut pump, wire).await;
        for i in 0..sustained {
            stack
                .put_aggregate_event(&format!("rate-{i}"), 1, Duration::ZERO, 0, 8)
                .await;
        }
        let invoked = pump.stats.invocations;
        let started = std::time::Instant::now();
        pump.run_until_idle().await.expect("pump");
        let rate = sustained as f64 / started.elapsed().as_secs_f64();
        let invocations = pump.stats.invocations - invoked;
        let (_, busy) = timed.since(invoked);
        let ceiling = sustained as f64 / busy.as_secs_f64();
        println!(
            "| {} | {concurrency} | {rate:.0} | {ceiling:.0} | {invocations} |",
            wire.label()
        );
        rates.push(serde_json::json!({
            "wire": wire.label(),
            "send_concurrency": concurrency,
            "events_per_second": rate,
            "events_per_second_of_invocation_time": ceiling,
            "invocations": invocations,
        }));
    }
    println!();
    write_bench_json(
        "send-latency.json",
        serde_json::json!({
            "source": "cargo bench --bench aws_calls (BENCH_ONLY=latency): the publisher binary under the local Lambda runtime, latency injected by the proxy",
            "put_events_ms": PUT_EVENTS_LATENCY.as_millis() as u64,
            "batch_write_item_ms": BATCH_WRITE_LATENCY.as_millis() as u64,
            "batches": rows,
            "sustained": rates,
        }),
    );
}
