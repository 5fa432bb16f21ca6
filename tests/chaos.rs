//! The chaos run (see `testkit::chaos` and `docs/reliability.md`).
//!
//! `make test` runs the small run on each sink (every fault kind, an outage
//! that outlasts the mapping's retries) and the seven sabotage runs, whose
//! verdict must fail for the right reason. `make chaos` runs [`chaos`] (ignored
//! here): `CHAOS_SEED` (one seed, or a comma-separated list; default
//! 1,2,3), `CHAOS_ORDERS` (default 100), `CHAOS_SINKS` (`eventbridge`,
//! `sns-fifo`, `eventbridge-bus`; default all three),
//! `CHAOS_WRITERS` (concurrent writers, default 4; 1 replays a seed exactly),
//! `CHAOS_PARALLELIZATION` (the mapping's `ParallelizationFactor`, default 2)
//! and `CHAOS_ORDERING` (`strict` by default, so that order is judged on
//! every sink; `auto`, the template's default: strict on SNS FIFO, relaxed
//! on EventBridge; or `relaxed`),
//! printing the verdict tables and writing each run's to
//! `target/chaos/run-<seed>-<sink>.md` (`infra/local/chaos.sh`, which `make
//! chaos` runs, runs them all on one pair of local servers and assembles
//! `target/chaos/report.md`).

use outbox_engine::Ordering;
use testkit::chaos::{run, ChaosConfig, SinkKind, Verdict};
use testkit::proxy::Sabotage;

fn report(verdicts: &[Verdict]) -> String {
    let mut out = format!("{}\n", Verdict::HEADER);
    for v in verdicts {
        out.push_str(&format!("{}\n", v.row()));
    }
    for v in verdicts {
        out.push_str(&format!("\n{}\n\n{}", heading(v), v.fault_table()));
    }
    out
}

/// A run's heading in the report.
fn heading(v: &Verdict) -> String {
    format!(
        "### seed {} · {} · {} orders · ORDERING {} · ParallelizationFactor {}",
        v.seed, v.sink, v.orders, v.ordering, v.parallelization
    )
}

fn judge(verdicts: &[Verdict]) {
    // Up to 20 examples of each kind (the words before the first colon):
    // thousands of items left pending must not hide the one unexplained
    // duplicate.
    for v in verdicts {
        let mut shown: std::collections::HashMap<&str, usize> = Default::default();
        for example in &v.examples {
            let kind = example.split(':').next().unwrap_or_default();
            let n = shown.entry(kind).or_default();
            *n += 1;
            if *n <= 20 {
                eprintln!("seed {} {}: {example}", v.seed, v.sink);
            }
        }
    }
    let failures: Vec<String> = verdicts
        .iter()
        .flat_map(|v| {
            v.failures()
                .into_iter()
                .map(move |f| format!("seed {} {}: {f}", v.seed, v.sink))
        })
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

/// One run's verdict, its report printed.
async fn verdict_of(config: ChaosConfig) -> Verdict {
    let verdict = run(&config).await.expect("chaos harness");
    println!("{}", report(std::slice::from_ref(&verdict)));
    verdict
}

/// One small run, judged (the run itself tops up the orders until every
/// scripted fault has had its call: `testkit::chaos::run`).
async fn small_run(config: ChaosConfig) {
    judge(&[verdict_of(config).await]);
}

/// At a `ParallelizationFactor` of 2 (two lanes of the shard invoked at
/// once, two publisher sandboxes) with `ORDERING=strict`, where the
/// template's defaults are 1 and relaxed for EventBridge: lanes that run
/// at once are where an aggregate's events overtake each other, and strict
/// order is what must hold there, on EventBridge too (the verdict judges
/// inversions with strict ordering).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn small_run_on_eventbridge_loses_nothing() {
    let mut config = ChaosConfig::small(7, SinkKind::EventBridge);
    config.parallelization = 2;
    config.ordering = Some(Ordering::Strict);
    small_run(config).await;
}

/// #66: large events mixed in, through the claim check (a bucket of the
/// run's as `PayloadBucket`), published whole on the bus from their
/// checked objects through every fault the small run injects.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn small_run_with_large_events_loses_nothing() {
    let mut config = ChaosConfig::small(11, SinkKind::EventBridge);
    config.large = 6;
    small_run(config).await;
}

/// The template's defaults (`ParallelizationFactor` 1; strict, the SNS
/// FIFO topic's default).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn small_run_on_sns_fifo_loses_nothing() {
    small_run(ChaosConfig::small(7, SinkKind::SnsFifo)).await;
}

/// The template's defaults for the Custom Event Bus (`ParallelizationFactor`
/// 1; strict, this sink's default): its FIFO subscriber's queue is where
/// order is judged, and the bus's 5-minute window drops the resends it
/// sees (the verdict counts what the subscriber received).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn small_run_on_the_custom_event_bus_loses_nothing() {
    small_run(ChaosConfig::small(7, SinkKind::CustomBus)).await;
}

fn message((event_id, version, sent_ms): (&str, u64, u64)) -> serde_json::Value {
    serde_json::json!({
        "detail": {"eventId": event_id, "aggregateId": "a", "aggregateVersion": version},
        "__sqs": {"SentTimestamp": sent_ms.to_string()},
    })
}

/// The order check on EventBridge (no servers): messages in the order the
/// rule sent them, whatever order the standard queue gave; first
/// deliveries only; an inversion fails the run with strict ordering and is
/// only reported with relaxed.
#[test]
fn inversions_on_eventbridge_are_judged_in_the_order_sent() {
    let judged = |messages: &[(&str, u64, u64)]| {
        let messages = messages.iter().copied().map(message).collect();
        let ordered = testkit::chaos::in_delivery_order(SinkKind::EventBridge, messages)
            .expect("timed messages");
        testkit::chaos::inversions(SinkKind::EventBridge, &ordered).len()
    };
    // Received v2 first, but sent v1 first.
    assert_eq!(judged(&[("e2", 2, 20), ("e1", 1, 10)]), 0);
    // A duplicate of v1 after v2 repeats what went out in order.
    assert_eq!(judged(&[("e1", 1, 10), ("e2", 2, 20), ("e1", 1, 30)]), 0);
    // v1 sent after v2, received in order or not.
    assert_eq!(judged(&[("e2", 2, 10), ("e1", 1, 20)]), 1);
    assert_eq!(judged(&[("e1", 1, 20), ("e2", 2, 10)]), 1);
    let mut untimed = message(("e1", 1, 0));
    untimed["__sqs"] = serde_json::json!({});
    assert!(testkit::chaos::in_delivery_order(SinkKind::EventBridge, vec![untimed]).is_err());

    let verdict = |ordering| Verdict {
        inversions: 1,
        ordering,
        ..Verdict::default()
    };
    let inverted = |v: Verdict| v.failures().iter().any(|f| f.contains("inversions"));
    assert!(inverted(verdict("strict")));
    assert!(!inverted(verdict("relaxed")));
}

/// A small run on `sink` with `sabotage` and only the scripted faults
/// (every kind once), no long outage: the verdict must fail for the
/// sabotage, whatever else happens.
fn sabotaged(sabotage: Sabotage, sink: SinkKind) -> ChaosConfig {
    ChaosConfig {
        orders: 12,
        fault_rate: 0.0,
        writer_fault_rate: 0.0,
        outage_beyond_retries: false,
        sabotage: Some(sabotage),
        ..ChaosConfig::small(11, sink)
    }
}

/// [`sabotaged`] with no fault at all (no script, no short outage, no
/// hang, no poison), for a sabotage that needs none to show, but the
/// outage that outlasts the mapping's retries when `give_up` (the
/// OnFailure path's).
fn without_faults(sabotage: Sabotage, sink: SinkKind, give_up: bool) -> ChaosConfig {
    ChaosConfig {
        orders: 8,
        poison: 0,
        scripted: false,
        outage_invocations: 0,
        outage_beyond_retries: give_up,
        hangs: 0,
        ..sabotaged(sabotage, sink)
    }
}

/// Runs a sabotaged `config` and asserts that its verdict names `reason`
/// among its failures.
async fn fails_with(config: ChaosConfig, reason: &str) {
    let failures = verdict_of(config).await.failures();
    assert!(
        failures.iter().any(|f| f.ends_with(reason)),
        "expected a failure ending in {reason:?}: {failures:#?}"
    );
}

/// The verdict can fail: deletes answered as done but never made (no
/// fault the run counts) leave every published event to be sent again,
/// and no cause in the journals explains those duplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_verdict_fails_when_deletes_are_silently_dropped() {
    let config = sabotaged(Sabotage::DropDeletes, SinkKind::EventBridge);
    fails_with(config, "unexplained duplicates").await;
}

/// The verdict can fail: sink calls answered as published but never
/// forwarded lose their events: the publisher deletes them, so they are
/// gone from the table, not merely left pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_verdict_fails_when_sink_calls_are_swallowed() {
    let config = sabotaged(Sabotage::SwallowSinkCalls, SinkKind::EventBridge);
    fails_with(
        config,
        "events deleted from the table without being delivered",
    )
    .await;
}

/// The verdict can fail: a sweeper invocation that sends an event twice,
/// both calls answered, has no cause for its second send (a resend in one
/// invocation is explained only by a call whose answer was lost).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_verdict_fails_when_a_sweep_sends_an_event_twice() {
    let config = sabotaged(Sabotage::SendTwice, SinkKind::EventBridge);
    fails_with(config, "unexplained duplicates").await;
}

/// The verdict can fail: a publisher answer that also reports a record its
/// invocation published (the batch's first, after whatever it reported:
/// the verdict reads every identifier, as Lambda does) is counted, though
/// the redelivered batch's check keeps it from sending anything twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_verdict_fails_when_the_publisher_reports_records_it_published() {
    let config = without_faults(Sabotage::ReportFirstRecord, SinkKind::EventBridge, false);
    fails_with(config, "reported a record their invocation had published").await;
}

/// The verdict can fail: a sink call acknowledged before it is forwarded
/// lets an aggregate's next event overtake its first, on the SNS FIFO
/// topic with strict ordering (its default).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_verdict_fails_when_an_aggregate_is_reordered() {
    let config = without_faults(Sabotage::AcknowledgeEarly, SinkKind::SnsFifo, false);
    fails_with(config, "per-aggregate inversions with strict ordering").await;
}

/// The verdict can fail: an OnFailure handler that does nothing (the
/// sweeper's invocations by the OnFailure queue answered as handled without
/// running) leaves the given-up batches' events to nobody: the scheduled
/// sweeps wait a day for stranded items, as deployed. Only the outage that
/// outlasts the mapping's retries, no other fault.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_verdict_fails_when_the_on_failure_handler_does_nothing() {
    let config = without_faults(Sabotage::IgnoreOnFailure, SinkKind::EventBridge, true);
    fails_with(
        config,
        "events of given-up batches not published by the OnFailure path",
    )
    .await;
}

/// The verdict can fail: a publisher that keeps every delete to the end
/// of its batch, killed once it has published 50 events of a batch,
/// repeats them all: more than the design lets a kill repeat. No other
/// fault.
/// `SendConcurrency` 1, not the template's 5: a kill may then repeat one
/// call's 10 events, the delete batch of 25 beside it and 9 more (44);
/// at 5 the design's 124 is more than a batch of 100 records holds, and no
/// kill could show the difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_verdict_fails_when_a_kill_repeats_more_than_the_design_allows() {
    let config = ChaosConfig {
        // 100 orders, written before the publisher starts: batches of up
        // to 100 records, so that one invocation publishes 50 before its
        // end.
        orders: 100,
        parameters: vec![("SendConcurrency".to_owned(), "1".to_owned())],
        ..without_faults(Sabotage::DeferDeletes, SinkKind::EventBridge, false)
    };
    fails_with(config, "instances repeated more than the design allows").await;
}

/// `name`'s value, or `default` when it is unset or no number.
fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "make chaos: minutes long"]
async fn chaos() {
    let seeds: Vec<u64> = std::env::var("CHAOS_SEED")
        .unwrap_or_else(|_| "1,2,3".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let orders = env_number("CHAOS_ORDERS", 100);
    let sinks: Vec<SinkKind> = std::env::var("CHAOS_SINKS")
        .unwrap_or_else(|_| "eventbridge,sns-fifo,eventbridge-bus".into())
        .split(',')
        .filter_map(|s| {
            SinkKind::ALL
                .into_iter()
                .find(|sink| sink.name() == s.trim())
        })
        .collect();
    // One writer makes the stream's order, and so the whole run, replayable.
    let writers = env_number("CHAOS_WRITERS", 4);
    let parallelization: usize = std::env::var("CHAOS_PARALLELIZATION")
        .ok()
        .map(|s| {
            s.parse()
                .unwrap_or_else(|_| panic!("CHAOS_PARALLELIZATION: 1 to 10, not {s:?}"))
        })
        .unwrap_or(2);
    let ordering = match std::env::var("CHAOS_ORDERING").as_deref() {
        Ok("auto") => None,
        Err(_) | Ok("strict") => Some(Ordering::Strict),
        Ok("relaxed") => Some(Ordering::Relaxed),
        Ok(other) => panic!("CHAOS_ORDERING: auto, strict or relaxed, not {other:?}"),
    };
    let dir = testkit::root().join("target").join("chaos");
    std::fs::create_dir_all(&dir).expect("target/chaos");
    std::fs::write(dir.join("header.md"), format!("{}\n", Verdict::HEADER)).expect("header");
    let mut verdicts = Vec::new();
    for seed in &seeds {
        for sink in &sinks {
            let mut config = ChaosConfig::small(*seed, *sink);
            config.orders = orders;
            // Poison in every run: the dead-letter write's faults must run.
            config.poison = 1 + (*seed % 3) as usize;
            // One outage outlasts the mapping's retries: the OnFailure path
            // runs in every full run.
            config.outage_beyond_retries = true;
            config.fault_rate = 0.1;
            config.writer_fault_rate = 0.05;
            config.writers = writers;
            config.hangs = 2;
            config.parallelization = parallelization;
            config.ordering = ordering;
            // Each function's timeout as the templates give it (the sweeper
            // 300 s): the evidence runs judge what deploys. At 6 s the
            // sweeper had 1.5 s of work per run and the held backlog of
            // 20,000 orders outgrew it.
            config.timeout = None;
            // Every 5 s on a big run: each sample counts the whole backlog.
            if orders > 1_000 {
                config.sample_every = std::time::Duration::from_secs(5);
            }
            let verdict = run(&config).await.expect("chaos harness");
            eprintln!("{}\n{}", Verdict::HEADER, verdict.row());
            // One file per run (its row first): infra/local/chaos.sh
            // assembles the report of the runs.
            let file = dir.join(format!("run-{seed}-{}.md", sink.name()));
            let failures = verdict.failures();
            let holds = if failures.is_empty() {
                "Verdict: every check holds.".to_owned()
            } else {
                format!("Verdict: FAILS: {}.", failures.join("; "))
            };
            let text = format!(
                "{}\n\n{}\n\n{holds}\n\n{}",
                verdict.row(),
                heading(&verdict),
                verdict.fault_table()
            );
            std::fs::write(&file, text).expect("write the run's report");
            // Every example (the log shows 20 of each kind), for the
            // diagnosis of a failed run.
            std::fs::write(
                dir.join(format!("examples-{seed}-{}.txt", sink.name())),
                verdict.examples.join("\n"),
            )
            .expect("write the run's examples");
            verdicts.push(verdict);
        }
    }
    let report = report(&verdicts);
    println!("{report}");
    let path = dir.join("report.md");
    std::fs::write(&path, &report).expect("write the report");
    eprintln!("written to {}", path.display());
    judge(&verdicts);
}
