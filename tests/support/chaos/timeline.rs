//! The timeline of a chaos run: the backlog sampled from the pending index
//! all along, the sink outages read from the publisher's journal, and both
//! written with the run's phases for `infra/local/plot_backlog.py`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use outbox_engine::SweepStore;

use crate::proxy::{Call, Fault};

use super::ChaosConfig;

/// A phase of the run: its name, and its start and end in seconds since
/// the run started.
pub(super) type Phase = (String, f64, f64);

/// One backlog sample: seconds since the run started, pending outbox
/// items, the oldest pending event's age in seconds.
pub(super) type Sample = (f64, usize, f64);

/// Samples the pending index (every shard: count and oldest id) until
/// `sampling` turns false.
pub(super) async fn sample_backlog(
    store: outbox_runtime::DynamoStore,
    started: Instant,
    every: Duration,
    sampling: Arc<AtomicBool>,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    loop {
        // Read before the sample: the last sample follows the run's end.
        let last = !sampling.load(Ordering::SeqCst);
        let mut pending = 0;
        let mut oldest: Option<ulid::Ulid> = None;
        for shard in 0..outbox_runtime::DEFAULT_OUTBOX_SHARDS {
            if let Ok(stats) = store
                .shard_stats(shard, 10_000_000, &crate::far_deadline())
                .await
            {
                pending += stats.pending;
                oldest = match (oldest, stats.oldest) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let age = oldest.map_or(0.0, |id| {
            now_ms.saturating_sub(id.timestamp_ms()) as f64 / 1000.0
        });
        samples.push((started.elapsed().as_secs_f64(), pending, age));
        if last {
            break;
        }
        // Sleep in short steps, so the end of the run is sampled at once.
        let until = Instant::now() + every;
        while Instant::now() < until && sampling.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    samples
}

/// Writes the backlog samples and the phases for `infra/local/plot_backlog.py`.
pub(super) fn write_timeline(config: &ChaosConfig, samples: &[Sample], timeline: &[Phase]) {
    let run = format!("{}-{}", config.seed, config.sink.name());
    let mut backlog = String::from("seconds,pending,oldest_age_seconds\n");
    for (seconds, pending, age) in samples {
        backlog.push_str(&format!("{seconds:.1},{pending},{age:.1}\n"));
    }
    let mut phases = String::from("name,start,end\n");
    for (name, start, end) in timeline {
        phases.push_str(&format!("\"{name}\",{start:.1},{end:.1}\n"));
    }
    let _ = std::fs::write(config.log_dir.join(format!("backlog-{run}.csv")), backlog);
    let _ = std::fs::write(config.log_dir.join(format!("phases-{run}.csv")), phases);
}

/// The sink outages, from the publisher's `journal`: runs of calls whose
/// entries were all refused, in seconds since `started`.
pub(super) fn sink_outages(journal: &[Call], started: Instant) -> Vec<Phase> {
    let mut outages = Vec::new();
    let run_start = SystemTime::now() - started.elapsed();
    let since = |t: SystemTime| t.duration_since(run_start).map_or(0.0, |d| d.as_secs_f64());
    let mut outage: Option<(f64, f64)> = None;
    for call in journal {
        let refused = matches!(call.fault, Some(Fault::RefuseEntries { .. }));
        match (&mut outage, refused) {
            (Some((_, end)), true) => *end = since(call.at),
            (None, true) => outage = Some((since(call.at), since(call.at))),
            (Some((start, end)), false) => {
                outages.push(("sink outage".into(), *start, *end));
                outage = None;
            }
            (None, false) => {}
        }
    }
    if let Some((start, end)) = outage {
        outages.push(("sink outage".into(), start, end));
    }
    outages
}
