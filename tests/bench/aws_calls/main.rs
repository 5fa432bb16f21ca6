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
mod strict;
mod sweep;

use commit::commit_to_publish;
use common::quick;
use latency::send_latency;
use logs::log_bytes;
use publisher_calls::publisher_calls;
use recheck::recheck_calls;
use round_trips::writer_round_trips;
use strict::strict_calls;
use sweep::sweep_cost;

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
