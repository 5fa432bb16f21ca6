//! `make bench`, the parts that need the local AWS API: calls per 1,000
//! published events, writer round trips, and sweep cost versus table size.
//! Counts, not times: they are the same on every run. Run through
//! `infra/local/with-local.sh cargo bench --bench aws_calls`.

use std::time::Duration;

use sweeper::{SweepSettings, Sweeper};
use testkit::lambda::{debug_binary, loopback_env, release_binary, FunctionSpec, LambdaFunction};
use testkit::proxy::{Fault, FaultProxy};
use testkit::{far_deadline, request, Stack};

/// `make test`'s one quick pass (`--quick` or `BENCH_QUICK`), not a measurement.
fn quick() -> bool {
    std::env::args().any(|a| a == "--quick") || std::env::var("BENCH_QUICK").is_ok()
}

#[tokio::main]
async fn main() {
    let quick = quick();
    println!("# AWS calls against DynamoDB Local and moto (the publisher's on the wire by the fault proxy, the writer's and the sweeper's by an SDK interceptor)\n");
    // BENCH_ONLY=strict: strict ordering's section alone (after a change
    // to the guard, without the sweep's 100,000-item fills).
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "strict") {
        strict_calls(1000).await;
        return;
    }
    // BENCH_ONLY=latency: the concurrent sends' section alone.
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "latency") {
        send_latency(if quick { (200, 1) } else { (2000, 3) }).await;
        return;
    }
    // BENCH_ONLY=commit: the commit-to-publish latency's section alone.
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "commit") {
        commit_to_publish(if quick { 20 } else { 60 }).await;
        return;
    }
    // BENCH_ONLY=cost: the sections infra/bench/cost.py reads (the
    // publisher's calls, the writer's round trips and item sizes, the log
    // bytes), without the sweep's 100,000-item fills.
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "cost") {
        publisher_calls(if quick { 100 } else { 1000 }).await;
        writer_round_trips().await;
        log_bytes(if quick { 3 } else { 20 }).await;
        return;
    }
    // BENCH_ONLY=logs: the log bytes' section alone.
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "logs") {
        log_bytes(if quick { 3 } else { 20 }).await;
        return;
    }
    // BENCH_ONLY=recheck: the redelivery check's section alone.
    if std::env::var("BENCH_ONLY").is_ok_and(|v| v == "recheck") {
        recheck_calls(1000).await;
        return;
    }
    publisher_calls(if quick { 100 } else { 1000 }).await;
    strict_calls(if quick { 100 } else { 1000 }).await;
    recheck_calls(if quick { 100 } else { 1000 }).await;
    send_latency(if quick { (200, 1) } else { (2000, 3) }).await;
    commit_to_publish(if quick { 20 } else { 60 }).await;
    writer_round_trips().await;
    log_bytes(if quick { 3 } else { 20 }).await;
    let sizes: &[usize] = if quick {
        &[1_000]
    } else {
        &[1_000, 10_000, 100_000]
    };
    sweep_cost(sizes).await;
}

/// The publisher binary under the local Lambda runtime, fed by the mapping
/// emulator with the template's settings, every call it makes (cold start
/// included: the bus check and the settings writes) counted on the wire by
/// the proxy, whatever the service. The stream reads are the mapping's
/// (Lambda's, free), not the function's.
async fn publisher_calls(n: usize) {
    let stack = Stack::with_bus().await;
    stack.create_orders(n).await;
    let proxy = FaultProxy::start().await;
    let function = publisher_binary(&stack, &proxy, "relaxed");
    let mut pump = stack.pump(&function, None);
    pump.run_until_idle().await.expect("pump");
    let calls = proxy.action_counts();
    let count = |action: &str| calls.get(action).copied().unwrap_or(0);
    let put_events = count("events:PutEvents");
    let batch_write = count("dynamodb:BatchWriteItem");
    // A lone key left over from the batches of 25 goes in a DeleteItem.
    let delete_item = count("dynamodb:DeleteItem");
    let total: usize = calls.values().sum();
    let other = total - put_events - batch_write - delete_item;
    let cold_starts = function
        .cold_starts
        .load(std::sync::atomic::Ordering::SeqCst);
    let per_1000 = |x: usize| x as f64 * 1000.0 / n as f64;
    println!(
        "## Publisher, {n} events, mapping BatchSize {}, {} invocations, {cold_starts} cold start\n",
        pump.mapping().batch_size,
        pump.stats.invocations,
    );
    println!(
        "| call (every service, as the proxy saw it) | count | per 1,000 events | naive design (1 PutEvents + 1 DeleteItem per event) |"
    );
    println!("|---|---|---|---|");
    for (action, c) in &calls {
        let naive = match action.as_str() {
            "events:PutEvents" | "dynamodb:DeleteItem" => "1,000",
            _ => "–",
        };
        println!("| `{action}` | {c} | {:.1} | {naive} |", per_1000(*c));
    }
    if delete_item == 0 {
        println!("| `dynamodb:DeleteItem` | 0 | 0 | 1,000 |");
    }
    println!(
        "| **total** | {total} | **{:.1}** | **2,000** |",
        per_1000(total)
    );
    println!(
        "| function invocations | {} | {:.0} | – |\n",
        pump.stats.invocations,
        per_1000(pump.stats.invocations)
    );
    write_bench_json(
        "publisher-calls.json",
        serde_json::json!({
            "source": "cargo bench --bench aws_calls (the publisher binary under the local Lambda runtime, through the mapping emulator, every call counted by the proxy)",
            "events": n,
            "batch_size": pump.mapping().batch_size,
            "arrival": "all events committed before the mapping reads: full batches",
            "put_events": put_events,
            "batch_write_item": batch_write,
            "delete_item": delete_item,
            "other_calls": other,
            "cold_starts": cold_starts,
            "calls": calls,
            "invocations": pump.stats.invocations,
        }),
    );
}

/// The publisher binary as the templates deploy it on `stack` with the
/// parameter `Ordering=ordering`, its calls through `proxy`.
fn publisher_binary(stack: &Stack, proxy: &FaultProxy, ordering: &str) -> LambdaFunction {
    let env = loopback_env()
        .into_iter()
        .chain(devkit::endpoint_env_at(&proxy.endpoint))
        .chain(stack.env(devkit::Function::Publisher, &[("Ordering", ordering)]))
        .collect();
    LambdaFunction::new(FunctionSpec {
        name: "publisher".into(),
        binary: debug_binary("publisher").expect("publisher binary"),
        env,
        timeout: Duration::from_secs(60),
        log: std::env::temp_dir().join(format!("{}-publisher-{ordering}.log", stack.table)),
    })
}

/// Strict ordering's cost (docs/ordering.md), counted at the proxy as in
/// the section above: `n` events in three arrival patterns, each in both
/// modes. The events are written as the writer writes them (one outbox item
/// per event, `aggregateVersion` recorded).
async fn strict_calls(n: usize) {
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
            let stack = Stack::with_bus().await;
            let proxy = FaultProxy::start().await;
            let function = publisher_binary(&stack, &proxy, ordering);
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
            let count = |action: &str| calls.get(action).copied().unwrap_or(0);
            let total: usize = calls.values().sum();
            let per_1000 = |x: usize| x as f64 * 1000.0 / n as f64;
            row.push((
                per_1000(total),
                per_1000(count("dynamodb:Query")),
                count("dynamodb:UpdateItem"),
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

/// The check of a batch that may be a redelivery (#40, relaxed ordering;
/// strict's guard read makes it at no extra call): `BatchGetItem` calls and
/// the keys they read (one read unit each: a consistent read of an item
/// under 4 KB, or of a missing one), per 1,000 events, at a trickle (one
/// event per batch, one process), in full batches (one process), and for a
/// batch delivered again to a new process after its first process
/// published and deleted it (the kill after the deletes).
async fn recheck_calls(n: usize) {
    println!("## The redelivery check, {n} events per case (publisher binary, relaxed ordering, every call counted by the proxy)\n");
    println!("| case | invocations | cold starts | `BatchGetItem` per 1,000 events | read units (keys read) per 1,000 events | events sent again | all calls per 1,000 events |");
    println!("|---|---|---|---|---|---|---|");
    let trickle = (n / 10).max(1);
    for case in [
        "a trickle (one event per batch)",
        "full batches",
        "a batch delivered again to a new process",
    ] {
        let stack = Stack::with_bus().await;
        let proxy = FaultProxy::start().await;
        let function = publisher_binary(&stack, &proxy, "relaxed");
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
        let count = |action: &str| counted.get(action).copied().unwrap_or(0);
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
    let env = loopback_env()
        .into_iter()
        .chain(devkit::endpoint_env_at(&proxy.endpoint))
        .chain(stack.env(
            devkit::Function::Publisher,
            &[("SendConcurrency", &concurrency.to_string())],
        ))
        .collect();
    // Times: the shipped profile, but for make test's quick pass (a release
    // build takes minutes here; a debug build's CPU adds tens of ms a batch).
    let binary = if quick() {
        debug_binary("publisher")
    } else {
        release_binary("publisher")
    };
    let function = LambdaFunction::new(FunctionSpec {
        name: "publisher".into(),
        binary: binary.expect("publisher binary"),
        env,
        timeout: Duration::from_secs(60),
        log: std::env::temp_dir().join(format!("{}-publisher-latency.log", stack.table)),
    });
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
async fn send_latency((sustained, repeats): (usize, usize)) {
    let concurrent = outbox_runtime::DEFAULT_SEND_CONCURRENCY;
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
            let count = |a: &str| counts.get(a).copied().unwrap_or(0);
            let total: usize = counts.values().sum();
            println!(
                "| {case} | {} | {concurrency} | {:.0} ms | {} | {} | {:.0} |",
                wire.label(),
                median.as_secs_f64() * 1000.0,
                count("events:PutEvents"),
                count("dynamodb:BatchWriteItem"),
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

/// #41 item 3: `CommitToPublishLatency` as the publisher binary emits it
/// (its EMF lines), through the local pipeline: 5 events every 250 ms for
/// `ticks` ticks (20 events/s), each tick followed by the mapping's pass;
/// then the same with a short sink outage in the middle (for 1.5 seconds
/// every `PutEvents` entry is refused: the publisher retries within the
/// invocation, then reports, and the mapping delivers the batch again). The local mapping polls when
/// the bench asks it to, once per tick: its wait is in the figures, as
/// Lambda's polling (about a second) would be deployed.
async fn commit_to_publish(ticks: usize) {
    println!("## Commit to publish: `CommitToPublishLatency` from the publisher binary's EMF, 20 events/s through the local pipeline\n");
    println!("| case | events | p50 | p99 | max |");
    println!("|---|---|---|---|---|");
    let mut rows = Vec::new();
    for case in ["steady rate", "a 1.5-second sink outage in the middle"] {
        let stack = Stack::with_bus().await;
        let proxy = FaultProxy::start().await;
        let function = publisher_binary(&stack, &proxy, "relaxed");
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
            .filter_map(|doc| {
                doc[outbox_runtime::metrics::COMMIT_TO_PUBLISH]
                    .as_array()
                    .cloned()
            })
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

/// A bench result for `infra/bench/cost.py`, in `.local/bench/`.
fn write_bench_json(name: &str, value: serde_json::Value) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".local/bench");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let text = serde_json::to_string_pretty(&value).expect("json");
    std::fs::write(dir.join(name), text).expect("bench result written");
}

async fn writer_round_trips() {
    let stack = Stack::new().await;
    let service = writer::Api::new(writer::OrderService::from_config(
        stack.counted_ddb.clone(),
        &stack.config(&[]),
    ));
    let body = r#"{"customerId":"c","currency":"EUR","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}"#;
    let create = |key: &'static str| {
        request(
            "POST",
            "/orders",
            &[
                ("content-type", "application/json"),
                ("idempotency-key", key),
            ],
            Some(body),
        )
    };
    let mut rows = Vec::new();
    stack.calls.reset();
    let created = service.handle(create("k1")).await;
    rows.push(("create", stack.calls.calls()));
    let id = match created.body() {
        lambda_http::Body::Text(t) => serde_json::from_str::<serde_json::Value>(t).unwrap()
            ["orderId"]
            .as_str()
            .unwrap()
            .to_owned(),
        _ => unreachable!(),
    };
    stack.calls.reset();
    service.handle(create("k1")).await;
    rows.push(("create, replayed", stack.calls.calls()));
    let pay = || {
        request(
            "POST",
            &format!("/orders/{id}/payment"),
            &[("idempotency-key", "p1")],
            None,
        )
    };
    stack.calls.reset();
    service.handle(pay()).await;
    rows.push(("pay", stack.calls.calls()));
    stack.calls.reset();
    service.handle(pay()).await;
    rows.push(("pay, replayed", stack.calls.calls()));
    stack.calls.reset();
    service
        .handle(request("GET", &format!("/orders/{id}"), &[], None))
        .await;
    rows.push(("get", stack.calls.calls()));
    cost_inputs(&stack, &rows, &id).await;
    println!("## Writer round trips per command\n");
    println!("| command | calls | reads | which |");
    println!("|---|---|---|---|");
    for (name, calls) in rows {
        let reads = calls
            .iter()
            .filter(|c| c.starts_with("Get") || c.starts_with("BatchGet") || c.starts_with("Query"))
            .count();
        println!(
            "| {name} | {} | {reads} | {} |",
            calls.len(),
            calls.join(", ")
        );
    }
    println!();
}

/// What `infra/bench/cost.py` prices: the writer's calls per command and
/// the sizes of the items they write, as DynamoDB counts them, read back
/// from the table after one create and one payment, each with an
/// `Idempotency-Key`. Written to `.local/bench/cost-inputs.json`.
async fn cost_inputs(stack: &Stack, rows: &[(&str, Vec<String>)], id: &str) {
    use outbox_core::size::item_size;
    let items = stack.items().await;
    let size_of = |pred: &dyn Fn(&str, &str) -> bool| -> Vec<usize> {
        items
            .iter()
            .filter(|i| {
                let s = |k: &str| {
                    i.get(k)
                        .and_then(|v| v.as_s().ok())
                        .cloned()
                        .unwrap_or_default()
                };
                pred(&s("PK"), &s("SK"))
            })
            .map(item_size)
            .collect()
    };
    let order = size_of(&|pk, sk| pk == format!("ORDER#{id}") && sk == "META");
    let outbox = size_of(&|pk, sk| pk == format!("ORDER#{id}") && sk.starts_with("OUTBOX#"));
    let idempotency = size_of(&|pk, _| pk.starts_with("IDEMPOTENCY#"));
    let envelopes: Vec<usize> = items
        .iter()
        .filter_map(|i| {
            i.get("envelope")
                .and_then(|v| v.as_s().ok())
                .map(String::len)
        })
        .collect();
    let calls: serde_json::Map<String, serde_json::Value> = rows
        .iter()
        .map(|(name, calls)| (name.to_string(), serde_json::json!(calls)))
        .collect();
    let inputs = serde_json::json!({
        "source": "cargo bench --bench aws_calls (writer round trips), sizes as DynamoDB counts them (outbox_core::size::item_size)",
        "writer_calls": calls,
        "item_bytes": {
            "order_meta": order.iter().max(),
            "outbox_item": outbox.iter().max(),
            "outbox_items_seen": outbox.len(),
            "idempotency_record": idempotency.iter().max(),
            "envelope": envelopes.iter().max(),
        },
    });
    write_bench_json("cost-inputs.json", inputs);
}

async fn sweep_cost(sizes: &[usize]) {
    println!("## Sweep cost versus table size (10 stranded items, 8 shards)\n");
    println!("| unrelated items | items read | Query calls | all DynamoDB calls | PutEvents | republished |");
    println!("|---|---|---|---|---|---|");
    for &size in sizes {
        let stack = Stack::with_bus().await;
        stack.fill_unrelated("CUSTOMER", size).await;
        for _ in 0..10 {
            stack.put_event_aged(Duration::from_secs(2 * 86_400)).await;
        }
        let (sink, events_calls) = stack.eventbridge_sink();
        let sweeper = Sweeper::new(sink, stack.store(), SweepSettings::from(&stack.config(&[])));
        stack.calls.reset();
        let report = sweeper
            .sweep(time::OffsetDateTime::now_utc(), &far_deadline())
            .await;
        println!(
            "| {size} | {} | {} | {} | {} | {} |",
            report.items_read,
            stack.calls.count("Query"),
            stack.calls.calls().len(),
            events_calls.count("PutEvents"),
            report.republished
        );
    }
    println!();
}

/// Log bytes per invocation, read from the function binaries' real output
/// under the local Lambda runtime at the templates' log settings (JSON
/// format, `LogLevel` and the EMF documents' level as deployed): the bytes
/// of the lines Lambda's log-level filter lets through
/// (`testkit::lambda::passes_lambda_filter`), which is what CloudWatch Logs
/// ingests from the function. The writer: `n` creates and `n` payments
/// through API Gateway events; the publisher: `n` orders at a trickle, one
/// record an invocation (the cost model's arrival); the sweeper: `n`
/// scheduled runs. The first invocation of each (its cold start) apart.
/// Lambda's own lines (`SystemLogLevel`) are not the function's output:
/// `infra/bench/cost.py` prices them from `prices.json`.
async fn log_bytes(n: usize) {
    let stack = Stack::with_bus().await;
    let function = |f: devkit::Function, name: &str| {
        LambdaFunction::new(FunctionSpec {
            name: name.into(),
            binary: debug_binary(name).expect("function binary"),
            env: loopback_env()
                .into_iter()
                .chain(stack.env(f, &[]))
                .collect(),
            timeout: Duration::from_secs(60),
            log: std::env::temp_dir().join(format!("{}-{name}-logs.log", stack.table)),
        })
    };
    let bytes =
        |f: &LambdaFunction| -> usize { f.delivered_lines().iter().map(|l| l.len() + 1).sum() };
    let level = stack
        .env(devkit::Function::Publisher, &[])
        .into_iter()
        .find(|(k, _)| k == "AWS_LAMBDA_LOG_LEVEL")
        .map(|(_, v)| v)
        .unwrap_or_default();
    // (cold start, per later invocation): the bytes after the first of `n`
    // invocations, and the mean of the others.
    let split = |cold: usize, total: usize| (cold, (total - cold) as f64 / (n - 1).max(1) as f64);
    let event = |file: &str| -> serde_json::Value {
        serde_json::from_str(
            &std::fs::read_to_string(format!("{}/events/{file}", env!("CARGO_MANIFEST_DIR")))
                .expect("sample event"),
        )
        .expect("sample event is JSON")
    };

    let writer = function(devkit::Function::Writer, "writer");
    let mut ids = Vec::new();
    let mut cold = 0;
    for i in 0..n {
        let mut e = event("writer-create-order.json");
        e["headers"]["idempotency-key"] = format!("logs-create-{i}").into();
        let out = writer
            .invoke(e.to_string().as_bytes())
            .await
            .expect("writer answers");
        let out: serde_json::Value = serde_json::from_slice(&out).expect("API response");
        assert_eq!(out["statusCode"], 201, "{out}");
        let body: serde_json::Value =
            serde_json::from_str(out["body"].as_str().unwrap_or("{}")).unwrap_or_default();
        ids.push(body["orderId"].as_str().unwrap_or_default().to_owned());
        if i == 0 {
            cold = bytes(&writer);
        }
    }
    let create = split(cold, bytes(&writer));
    let before_pay = bytes(&writer);
    for (i, id) in ids.iter().enumerate() {
        let mut e = event("writer-pay-order.json");
        e["headers"]["idempotency-key"] = format!("logs-pay-{i}").into();
        e["rawPath"] = format!("/orders/{id}/payment").into();
        e["requestContext"]["http"]["path"] = e["rawPath"].clone();
        e["pathParameters"] = serde_json::json!({ "id": id });
        let out = writer
            .invoke(e.to_string().as_bytes())
            .await
            .expect("writer answers");
        let out: serde_json::Value = serde_json::from_slice(&out).expect("API response");
        assert_eq!(out["statusCode"], 200, "{out}");
    }
    let pay = (bytes(&writer) - before_pay) as f64 / ids.len().max(1) as f64;

    // The publisher's cold start takes the writer's events above in one
    // batch; then `n` orders at a trickle, one record an invocation.
    let publisher = function(devkit::Function::Publisher, "publisher");
    let mut pump = stack.pump(&publisher, None);
    pump.run_until_idle().await.expect("pump");
    let publisher_cold = bytes(&publisher);
    let invoked = pump.stats.invocations;
    for _ in 0..n {
        stack.create_orders(1).await;
        pump.run_until_idle().await.expect("pump");
    }
    let invocations = pump.stats.invocations - invoked;
    let published = (
        publisher_cold,
        (bytes(&publisher) - publisher_cold) as f64 / invocations.max(1) as f64,
    );

    let sweeper = function(devkit::Function::Sweeper, "sweeper");
    for i in 0..n {
        sweeper
            .invoke(event("sweeper-scheduled.json").to_string().as_bytes())
            .await
            .expect("sweeper answers");
        if i == 0 {
            cold = bytes(&sweeper);
        }
    }
    let swept = split(cold, bytes(&sweeper));

    println!("## Log bytes per invocation (the binaries' output that Lambda's filter lets through at LogLevel {level})\n");
    println!("| function | invocation | cold start | each later one |");
    println!("|---|---|---|---|");
    println!("| writer | create order | {} | {:.0} |", create.0, create.1);
    println!("| writer | pay order | – | {pay:.0} |");
    println!(
        "| publisher | one record ({invocations} invocations; its cold start took the writer's events in one batch) | {} | {:.0} |",
        published.0, published.1
    );
    println!(
        "| sweeper | scheduled run, nothing pending | {} | {:.0} |\n",
        swept.0, swept.1
    );
    write_bench_json(
        "logs.json",
        serde_json::json!({
            "source": "cargo bench --bench aws_calls (BENCH_ONLY=logs): the function binaries under the local Lambda runtime with the templates' environment, the bytes of the stdout lines Lambda's log-level filter lets through",
            "log_level": level,
            "invocations": n,
            "writer": {"create_cold_start": create.0, "create": create.1, "pay": pay},
            "publisher": {"cold_start": published.0, "one_record": published.1, "invocations": invocations},
            "sweeper": {"cold_start": swept.0, "scheduled": swept.1},
        }),
    );
}
