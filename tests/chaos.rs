//! The chaos run (see `testkit::chaos` and `docs/reliability.md`).
//!
//! `make test` runs the small run on each sink (every fault kind, an outage
//! that outlasts the mapping's retries) and the two sabotage runs, whose
//! verdict must fail for the right reason. `make chaos` runs [`chaos`] (ignored
//! here): `CHAOS_SEED` (one seed, or a comma-separated list; default
//! 1,2,3), `CHAOS_ORDERS` (default 100), `CHAOS_SINKS` (default both) and
//! `CHAOS_WRITERS` (concurrent writers, default 4; 1 replays a seed exactly),
//! printing the verdict tables and writing each run's to
//! `target/chaos/run-<seed>-<sink>.md` (`infra/local/chaos.sh`, which `make
//! chaos` runs, runs them all on one pair of local servers and assembles
//! `target/chaos/report.md`).

use testkit::chaos::{run, ChaosConfig, SinkKind, Verdict};
use testkit::proxy::Sabotage;

fn report(verdicts: &[Verdict]) -> String {
    let mut out = String::new();
    out.push_str(Verdict::HEADER);
    out.push('\n');
    for v in verdicts {
        out.push_str(&v.row());
        out.push('\n');
    }
    for v in verdicts {
        out.push_str(&format!(
            "\n### seed {} · {} · {} orders\n\n{}",
            v.seed,
            v.sink,
            v.orders,
            v.fault_table()
        ));
    }
    out
}

fn judge(verdicts: &[Verdict]) {
    for v in verdicts {
        for example in v.examples.iter().take(20) {
            eprintln!("seed {} {}: {example}", v.seed, v.sink);
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

async fn small_run(sink: SinkKind) {
    let verdict = run(&ChaosConfig::small(7, sink))
        .await
        .expect("chaos harness");
    println!("{}", report(std::slice::from_ref(&verdict)));
    judge(&[verdict]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn small_run_on_eventbridge_loses_nothing() {
    small_run(SinkKind::EventBridge).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn small_run_on_sns_fifo_loses_nothing() {
    small_run(SinkKind::SnsFifo).await;
}

/// A sabotaged run: what its verdict says is wrong.
async fn sabotaged(sabotage: Sabotage) -> Vec<String> {
    // Scripted faults only (every kind once), no long outage: the verdict
    // must fail for the sabotage, whatever else happens.
    let mut config = ChaosConfig::small(11, SinkKind::EventBridge);
    config.orders = 12;
    config.fault_rate = 0.0;
    config.writer_fault_rate = 0.0;
    config.outage_beyond_retries = false;
    config.sabotage = Some(sabotage);
    let verdict = run(&config).await.expect("chaos harness");
    println!("{}\n{}", Verdict::HEADER, verdict.row());
    verdict.failures()
}

/// The verdict can fail: deletes answered as done but never made (no
/// fault the run counts) leave every published event to be sent again,
/// and no cause in the journals explains those duplicates.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_verdict_fails_when_deletes_are_silently_dropped() {
    let failures = sabotaged(Sabotage::DropDeletes).await;
    assert!(
        failures
            .iter()
            .any(|f| f.ends_with("unexplained duplicates")),
        "{failures:#?}"
    );
}

/// The verdict can fail: sink calls answered as published but never
/// forwarded lose their events (the publisher deletes them).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_verdict_fails_when_sink_calls_are_swallowed() {
    let failures = sabotaged(Sabotage::SwallowSinkCalls).await;
    assert!(
        failures.iter().any(|f| f.ends_with("events lost")),
        "{failures:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "make chaos: minutes long"]
async fn chaos() {
    let seeds: Vec<u64> = std::env::var("CHAOS_SEED")
        .unwrap_or_else(|_| "1,2,3".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let orders: usize = std::env::var("CHAOS_ORDERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    let sinks: Vec<SinkKind> = std::env::var("CHAOS_SINKS")
        .unwrap_or_else(|_| "eventbridge,sns-fifo".into())
        .split(',')
        .filter_map(|s| match s.trim() {
            "eventbridge" => Some(SinkKind::EventBridge),
            "sns-fifo" => Some(SinkKind::SnsFifo),
            _ => None,
        })
        .collect();
    // One writer makes the stream's order, and so the whole run, replayable.
    let writers: usize = std::env::var("CHAOS_WRITERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
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
                "{}\n\n### seed {} · {} · {} orders\n\n{holds}\n\n{}",
                verdict.row(),
                seed,
                verdict.sink,
                orders,
                verdict.fault_table()
            );
            std::fs::write(&file, text).expect("write the run's report");
            verdicts.push(verdict);
        }
    }
    let report = report(&verdicts);
    println!("{report}");
    let path = testkit::root()
        .join("target")
        .join("chaos")
        .join("report.md");
    std::fs::write(&path, &report).expect("write the report");
    eprintln!("written to {}", path.display());
    judge(&verdicts);
}
