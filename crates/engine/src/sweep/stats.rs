//! The sweep's statistics, at a bounded cost: per shard the oldest pending
//! event and capped counts, and with strict ordering the parked aggregates
//! (the figures of [`SweepReport`] that the oldest-age alarm reads).

use super::*;

impl<S: EventSink, T: PublishStore + SweepStore> Sweeper<S, T> {
    /// The statistics, at a bounded cost: per shard, the oldest pending id
    /// (one item) and two counts that stop at `count_limit` items. All or
    /// nothing: when a shard does not answer (or no time is left), nothing
    /// is emitted and the run is counted as incomplete.
    pub(crate) async fn stats(
        &self,
        shards: u16,
        now: OffsetDateTime,
        deadline: &Deadline,
        report: &mut SweepReport,
    ) {
        if !deadline.allows(Duration::ZERO) {
            tracing::warn!("no time left for the statistics; none emitted");
            report.stats_incomplete = true;
            return;
        }
        let limit = self.settings.count_limit;
        let results =
            join_all((0..shards).map(|s| self.store.shard_stats(s, limit, deadline))).await;
        let mut oldest: Option<Ulid> = None;
        let mut read = SweepReport::default();
        let mut per_shard_dead = Vec::new();
        for (shard, result) in results.into_iter().enumerate() {
            match result {
                Ok(stats) => {
                    if stats.dead_letters > 0 {
                        per_shard_dead.push(shard as u16);
                    }
                    read.pending += stats.pending;
                    read.pending_capped |= stats.pending_capped;
                    read.dead_letter_count += stats.dead_letters;
                    read.dead_letters_capped |= stats.dead_letters_capped;
                    report.items_read += stats.scanned;
                    report.queries += stats.queries;
                    oldest = match (oldest, stats.oldest) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                }
                Err(e) => {
                    tracing::error!(shard, error = %e, "shard statistics not read");
                    report.shard_errors += 1;
                    report.stats_incomplete = true;
                }
            }
        }
        if report.stats_incomplete {
            tracing::warn!("statistics incomplete; none emitted (the oldest-age alarm treats missing data as breaching)");
            return;
        }
        if self.settings.ordering == Ordering::Strict {
            match self.parked(&per_shard_dead, limit, deadline, report).await {
                Some(parked) => read.parked_aggregates = Some(parked),
                None => {
                    report.stats_incomplete = true;
                    return;
                }
            }
        }
        report.stats_read = true;
        report.parked_aggregates = read.parked_aggregates;
        report.pending = read.pending;
        report.pending_capped = read.pending_capped;
        report.dead_letter_count = read.dead_letter_count;
        report.dead_letters_capped = read.dead_letters_capped;
        report.oldest_pending_age_seconds = Some(
            oldest
                .map(|id| millis(now).saturating_sub(id.timestamp_ms()) as f64 / 1000.0)
                .unwrap_or(0.0),
        );
    }
}

impl<S: EventSink, T: PublishStore + SweepStore> Sweeper<S, T> {
    /// Strict ordering: the parked aggregates: those with a dead letter
    /// (their later events wait), and those this run found held for longer
    /// than the sweep period (`report.long_held`). Reads the dead letters
    /// of the shards that hold any (none, usually), at most `limit` per
    /// shard. `None` when a read failed.
    async fn parked(
        &self,
        shards: &[u16],
        limit: i32,
        deadline: &Deadline,
        report: &mut SweepReport,
    ) -> Option<usize> {
        let mut aggregates: HashSet<String> = report.long_held.iter().cloned().collect();
        for shard in shards {
            report.queries += 1;
            match self
                .store
                .dead_letter_page(*shard, limit, None, deadline)
                .await
            {
                Ok(page) => {
                    report.items_read += page.items.len();
                    aggregates.extend(
                        page.items
                            .into_iter()
                            .map(|letter| letter.aggregate_id)
                            .filter(|a| !a.is_empty()),
                    );
                }
                Err(e) => {
                    tracing::error!(shard, error = %e, "dead letters not read for the parked aggregates");
                    report.shard_errors += 1;
                    return None;
                }
            }
        }
        Some(aggregates.len())
    }
}
