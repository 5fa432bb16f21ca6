//! `make bench`, the parts that need the local AWS API: calls per 1,000
//! published events, writer round trips, and sweep cost versus table size.
//! Counts, not times: they are the same on every run. Run through
//! `infra/local/with-local.sh cargo bench --bench aws_calls`.
//!
//! `main` runs the sections in order (or the one `BENCH_ONLY` names); each
//! section is a module of this folder, the helpers they share in `common`.

mod commit;
mod common;
mod latency;
mod logs;
mod publisher_calls;
mod recheck;
mod round_trips;
mod sinks;
mod strict;
mod sweep;

use commit::commit_to_publish;
use common::quick;
use latency::send_latency;
use logs::log_bytes;
use publisher_calls::publisher_calls;
use recheck::recheck_calls;
use round_trips::writer_round_trips;
use sinks::sink_calls;
use strict::strict_calls;
use sweep::sweep_cost;

/// The sections, in the order a full run prints them.
const SECTIONS: [&str; 9] = [
    "publisher",
    "sinks",
    "strict",
    "recheck",
    "latency",
    "commit",
    "round-trips",
    "logs",
    "sweep",
];

/// The same, longest first in quick mode (seconds alone, in order:
/// about 40, 21, 19, 18, 8, 7, 3, 2; the sinks' three runs not timed yet).
const QUICK_LONGEST_FIRST: [&str; 9] = [
    "latency",
    "commit",
    "sinks",
    "publisher",
    "strict",
    "recheck",
    "logs",
    "sweep",
    "round-trips",
];

/// Runs one section (or `cost`: the ones infra/bench/cost.py reads, without
/// the sweep's 100,000-item fills); false for a name no section has.
async fn run(section: &str, quick: bool) -> bool {
    match section {
        "publisher" => publisher_calls(if quick { 100 } else { 1000 }).await,
        "sinks" => sink_calls(if quick { 100 } else { 1000 }).await,
        "strict" => strict_calls(if quick { 100 } else { 1000 }).await,
        "recheck" => recheck_calls(if quick { 100 } else { 1000 }).await,
        "latency" => send_latency(if quick { (200, 1) } else { (2000, 3) }).await,
        "commit" => commit_to_publish(if quick { 20 } else { 60 }).await,
        "round-trips" => writer_round_trips().await,
        "logs" => log_bytes(if quick { 3 } else { 20 }).await,
        "sweep" => {
            let sizes: &[usize] = if quick {
                &[1_000]
            } else {
                &[1_000, 10_000, 100_000]
            };
            sweep_cost(sizes).await
        }
        "cost" => {
            Box::pin(run("publisher", quick)).await;
            Box::pin(run("round-trips", quick)).await;
            Box::pin(run("logs", quick)).await;
        }
        _ => return false,
    }
    true
}

#[tokio::main]
async fn main() {
    let quick = quick();
    // BENCH_ONLY=strict (or latency, commit, cost…): that section alone, for
    // example after a change to the guard, without the sweep's
    // 100,000-item fills. BENCH_ONLY=list prints the sections' names:
    // `make test` runs each in its own process, side by side
    // (infra/local/run-benches.sh).
    let only = std::env::var("BENCH_ONLY").ok();
    if only.as_deref() == Some("list") {
        // Quick mode lists the longest first (infra/local/run-benches.sh
        // starts them in this order), measured in `make test`'s output.
        let list: &[&str] = if quick {
            &QUICK_LONGEST_FIRST
        } else {
            &SECTIONS
        };
        println!("{}", list.join("\n"));
        return;
    }
    println!("# AWS calls against DynamoDB Local and moto (the publisher's on the wire by the fault proxy, the writer's and the sweeper's by an SDK interceptor)\n");
    match only {
        Some(section) => {
            if !run(&section, quick).await {
                eprintln!(
                    "aws_calls: no section {section:?} (BENCH_ONLY: list, cost, {})",
                    SECTIONS.join(", ")
                );
                std::process::exit(2);
            }
        }
        None => {
            for section in SECTIONS {
                run(section, quick).await;
            }
        }
    }
}
