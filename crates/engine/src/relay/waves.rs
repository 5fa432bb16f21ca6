//! Waves of sink calls: which entries are settled alone, how a wave and
//! its batches are cut (no aggregate twice), the sweep's claims, the sends
//! and what each answer means.

#[allow(clippy::wildcard_imports)]
use super::*;

impl<S: EventSink, T: PublishStore> Relay<'_, S, T> {
    /// Settles what cannot be batched (before anything after it is sent):
    /// an unusable record, a poison entry, an item its aggregate holds back
    /// (sweep) or one too large for the sink. `None`: it goes in a batch.
    pub(super) async fn settle_alone(
        &self,
        entry: &Entry,
        run: &mut Run,
        held: &mut HashSet<String>,
    ) -> Option<RelayOutcome> {
        let sweep = run.sweep();
        match entry {
            Entry::Settled { key } => {
                tracing::info!(key = %key, "redelivered record of an event no longer this region's to publish (published, adopted or dead-lettered); not sent again");
                Some(RelayOutcome::Gone)
            }
            Entry::Unusable { key, reason } => {
                tracing::error!(key = %key, reason = %reason, "outbox record cannot be handled; reporting it");
                Some(RelayOutcome::Failed(PublishFailure::new(
                    FailureKind::Rejected,
                    "Unusable",
                    reason.clone(),
                )))
            }
            Entry::Poison {
                key,
                aggregate_id,
                reason,
            } => Some(
                self.dead_letter(key, aggregate_id.as_deref(), reason, None, run.writes())
                    .await,
            ),
            Entry::Item(item) if sweep && !self.sendable(item, run.mode(), held) => {
                Some(RelayOutcome::Deferred)
            }
            Entry::Item(item) if self.sink.entry_size(item) > self.sink.max_bytes() => {
                let reason = format!(
                    "EntryTooLarge: entry is {} bytes; the sink accepts {}",
                    self.sink.entry_size(item),
                    self.sink.max_bytes()
                );
                if matches!(run.mode(), Mode::Operator) {
                    let failure = PublishFailure::new(FailureKind::Poison, "EntryTooLarge", reason);
                    return Some(self.keep_dead_letter(&item.key(), failure, run).await);
                }
                let attempts = sweep.then(|| item.attempts.saturating_add(1));
                Some(
                    self.dead_letter(
                        &item.key(),
                        Some(&item.aggregate_id),
                        &reason,
                        attempts,
                        run.writes(),
                    )
                    .await,
                )
            }
            Entry::Item(_) => None,
        }
    }

    /// The next wave from `start`: up to [`Relay::concurrency`] batches
    /// sent at once, no aggregate in two of them. It ends before an entry
    /// that must be settled alone or checked by its own guard first (a
    /// poison or unusable record, an item held back, not yet cleared by the
    /// strict guard's read ahead), and at an aggregate already in the wave:
    /// its later event goes out only after the call that carries the
    /// earlier one succeeded.
    pub(super) fn next_wave(
        &self,
        entries: &[Entry],
        start: usize,
        run: &mut Run,
        held: &mut HashSet<String>,
    ) -> Vec<Vec<usize>> {
        let mut in_wave: HashSet<String> = HashSet::new();
        let mut wave = Vec::new();
        let mut j = start;
        loop {
            let batch = self.next_batch(entries, j, run, held, &mut in_wave);
            if batch.is_empty() {
                break;
            }
            wave.push(batch);
            j = run.batch_end();
            if wave.len() >= self.concurrency.max(1)
                || j >= entries.len()
                || !self.batchable(entries, j, run, held)
            {
                break;
            }
        }
        wave
    }

    /// Whether entry `j` may start a batch of a wave without being settled
    /// alone or guarded first (see [`Relay::next_wave`]); in strict mode it
    /// is then marked cleared. Safe before `next_batch` checks the wave's
    /// aggregates: an older event of its aggregate in the wave is still in
    /// the table and not yet published, so the read ahead does not clear it.
    pub(super) fn batchable(
        &self,
        entries: &[Entry],
        j: usize,
        run: &mut Run,
        held: &HashSet<String>,
    ) -> bool {
        if !self.starts_wave(entries, j, run, held) {
            return false;
        }
        if run.strict() {
            run.clear(j);
        }
        true
    }

    /// Whether entry `j` can go straight into a wave: an item, its
    /// aggregate not held, not too large, due, and (strict) cleared by the
    /// read ahead. Otherwise its turn begins with a store call (a guard
    /// read, a hold, a dead letter) or with nothing sent.
    pub(super) fn starts_wave(
        &self,
        entries: &[Entry],
        j: usize,
        run: &Run,
        held: &HashSet<String>,
    ) -> bool {
        let Entry::Item(item) = &entries[j] else {
            return false;
        };
        !held.contains(&item.aggregate_id)
            && self.sink.entry_size(item) <= self.sink.max_bytes()
            && due(item, run.mode())
            && (!run.strict() || run.is_cleared(j) || run.cleared_ahead(item, held))
    }

    /// The next batch from `start`: contiguous items, one per aggregate and
    /// none of an aggregate in `in_wave` (the other batches of its wave),
    /// within the sink's limits (sweep: items held back are deferred and
    /// skipped once the batch has begun).
    pub(super) fn next_batch(
        &self,
        entries: &[Entry],
        start: usize,
        run: &mut Run,
        held: &mut HashSet<String>,
        in_wave: &mut HashSet<String>,
    ) -> Vec<usize> {
        let mut batch: Vec<usize> = Vec::new();
        let mut bytes = 0;
        let mut j = start;
        while j < entries.len() && batch.len() < self.sink.max_entries() {
            let Entry::Item(item) = &entries[j] else {
                break;
            };
            if run.sweep() && !self.sendable(item, run.mode(), held) {
                if batch.is_empty() {
                    break;
                }
                run.settle(j, RelayOutcome::Deferred);
                j += 1;
                continue;
            }
            if run.strict() && !batch.is_empty() && !run.is_cleared(j) {
                if !run.cleared_ahead(item, held) {
                    // Its guard runs first, as the start of the next batch.
                    break;
                }
                run.clear(j);
            }
            let size = self.sink.entry_size(item);
            if in_wave.contains(item.aggregate_id.as_str())
                || size > self.sink.max_bytes()
                || bytes + size > self.sink.max_bytes()
            {
                break;
            }
            in_wave.insert(item.aggregate_id.clone());
            bytes += size;
            batch.push(j);
            j += 1;
        }
        run.batch_ended(j);
        batch
    }

    /// Publishes one wave, its batches in flight together and the full
    /// delete batches of earlier waves beside them, then settles each entry
    /// in order. Returns whether the run stops (stream mode, after a
    /// failure: the wave's later batches went out already, so their events
    /// are published; the first failed entry is still the first in order
    /// not published).
    pub(super) async fn publish_wave(
        &self,
        entries: &[Entry],
        wave: &[Vec<usize>],
        run: &mut Run,
        held: &mut HashSet<String>,
        deadline: &Deadline,
    ) -> bool {
        // The full delete batches of what earlier waves published go out
        // beside this wave's claims and sends (issued first).
        let to_delete = run.full_delete_batches();
        let finish = run.finish();
        let (undeleted, (batches, results)) = futures::future::join(
            self.delete_at_once(&to_delete, &finish),
            self.claim_and_send(entries, wave, run, held, deadline),
        )
        .await;
        run.not_deleted(undeleted);
        if batches.is_empty() {
            return false;
        }
        // The acknowledged entries first (no store call), then, with what
        // they completed deleted, the failures' bookkeeping writes.
        let mut failures = Vec::new();
        for ((batch, items), (results, acknowledged)) in batches.iter().zip(results) {
            for ((index, item), result) in batch.iter().zip(items).zip(results) {
                match result {
                    Ok(()) => {
                        run.acknowledged(
                            *index,
                            item.key(),
                            acknowledged.saturating_sub(item.event_id.timestamp_ms()),
                        );
                    }
                    Err(failure) => failures.push((*index, *item, failure)),
                }
            }
        }
        if !failures.is_empty() {
            self.delete_full_batches(run).await;
        }
        let mut stop = false;
        for (index, item, failure) in failures {
            let outcome = match run.mode() {
                // The operator's dead letter stays one, whatever the failure.
                Mode::Operator => self.keep_dead_letter(&item.key(), failure, run).await,
                _ if failure.kind == FailureKind::Poison => {
                    self.sink_poison(item, &failure, run, held).await
                }
                Mode::Stream => {
                    tracing::warn!(event_id = %item.event_id, code = %failure.code, kind = ?failure.kind, "event not published");
                    held.insert(item.aggregate_id.clone());
                    stop = true;
                    RelayOutcome::Failed(failure)
                }
                // The run's own deadline cut the call: the sink refused
                // nothing, so it is not an attempt (a run short of time
                // must not back an event off, nor dead-letter it). The
                // claim goes, the event stays due for the next sweep; the
                // run counts as stopped early.
                Mode::Sweep { now, .. } if failure.is_deadline_reached() => {
                    tracing::warn!(event_id = %item.event_id, "sink call cut at the run's deadline; not an attempt, the event stays due");
                    held.insert(item.aggregate_id.clone());
                    if !self.return_untried(item, &failure, now, run.writes()).await {
                        run.store_error();
                    }
                    RelayOutcome::NotAttempted
                }
                Mode::Sweep {
                    now,
                    max_attempts,
                    backoff,
                } => {
                    tracing::warn!(event_id = %item.event_id, code = %failure.code, kind = ?failure.kind, "event not published");
                    held.insert(item.aggregate_id.clone());
                    let (outcome, ok) = self
                        .record_failure(item, failure, now, max_attempts, backoff, run.writes())
                        .await;
                    if !ok {
                        run.store_error();
                    }
                    outcome
                }
            };
            run.settle(index, outcome);
        }
        stop
    }

    /// Claims the wave's events (sweep mode) and sends its batches, all in
    /// flight together. Returns the batches sent, with their entries, and
    /// each call's results and the time it was acknowledged.
    #[allow(clippy::type_complexity)]
    pub(super) async fn claim_and_send<'e>(
        &self,
        entries: &'e [Entry],
        wave: &[Vec<usize>],
        run: &mut Run,
        held: &mut HashSet<String>,
        deadline: &Deadline,
    ) -> (
        Vec<(Vec<usize>, Vec<&'e OutboxItem>)>,
        Vec<(Vec<EntryOutcome>, u64)>,
    ) {
        let wave = match run.claim().cloned() {
            Some(claim) if run.sweep() => self.claim_wave(entries, wave, &claim, run, held).await,
            _ => wave.to_vec(),
        };
        let batches: Vec<(Vec<usize>, Vec<&OutboxItem>)> = wave
            .into_iter()
            .filter(|batch| !batch.is_empty())
            .map(|batch| {
                let items = batch
                    .iter()
                    .filter_map(|k| match &entries[*k] {
                        Entry::Item(item) => Some(item),
                        _ => None,
                    })
                    .collect();
                (batch, items)
            })
            .collect();
        let results = futures::future::join_all(batches.iter().map(|(_, items)| async {
            let results = publish_with_retries(self.sink, items, self.retry, deadline).await;
            (results, epoch_millis())
        }))
        .await;
        (batches, results)
    }

    /// Sweep mode: claims the wave's events (no two sweeper runs publish
    /// one event) and returns the batches without those it could not claim
    /// (left to the run that holds them, or due again).
    pub(super) async fn claim_wave(
        &self,
        entries: &[Entry],
        wave: &[Vec<usize>],
        claim: &Claim,
        run: &mut Run,
        held: &mut HashSet<String>,
    ) -> Vec<Vec<usize>> {
        let keyed: Vec<(usize, ItemKey)> = wave
            .iter()
            .flatten()
            .filter_map(|k| match &entries[*k] {
                Entry::Item(item) => Some((*k, item.key())),
                _ => None,
            })
            .collect();
        let finish = run.finish();
        let claims = futures::future::join_all(
            keyed
                .iter()
                .map(|(_, key)| self.store.claim_pending(key, claim, &finish)),
        )
        .await;
        let mut lost: HashSet<usize> = HashSet::new();
        for ((index, _), claimed) in keyed.iter().zip(claims) {
            let Entry::Item(item) = &entries[*index] else {
                continue;
            };
            let outcome = match claimed {
                Ok(ClaimOutcome::Claimed) => continue,
                Ok(ClaimOutcome::ClaimedElsewhere) => {
                    tracing::info!(event_id = %item.event_id, "event claimed by another sweeper run; left to it");
                    run.claimed_by_another(*index);
                    RelayOutcome::Deferred
                }
                Ok(ClaimOutcome::Gone) => {
                    tracing::info!(event_id = %item.event_id, "event no longer pending (published, dead-lettered or another region's); not sent");
                    RelayOutcome::Gone
                }
                Err(e) => {
                    tracing::error!(event_id = %item.event_id, error = %e, "could not claim an event; it stays due");
                    run.store_error();
                    RelayOutcome::Deferred
                }
            };
            run.settle(*index, outcome);
            held.insert(item.aggregate_id.clone());
            lost.insert(*index);
        }
        wave.iter()
            .map(|batch| {
                batch
                    .iter()
                    .copied()
                    .filter(|k| !lost.contains(k))
                    .collect()
            })
            .collect()
    }
}

/// Publishes one batch, retrying only the entries that failed transiently
/// in a call that succeeded (the SDK already retried a call that failed as
/// a whole: [`crate::aws`]), while the policy, the deadline and the send
/// budget allow: every entry of the batch is sent at most
/// [`MAX_SENDS_PER_ENTRY`] times, each SDK attempt counted (a retried
/// entry was in every call before). Each sink call is cut at the deadline
/// (its entries then fail as transient: not known to be sent).
async fn publish_with_retries<S: EventSink>(
    sink: &S,
    items: &[&OutboxItem],
    policy: &RetryPolicy,
    deadline: &Deadline,
) -> Vec<EntryOutcome> {
    let mut results: Vec<EntryOutcome> = vec![Ok(()); items.len()];
    let mut pending: Vec<usize> = (0..items.len()).collect();
    let mut attempt = 1;
    let mut sends_left = MAX_SENDS_PER_ENTRY;
    loop {
        let refs: Vec<&OutboxItem> = pending.iter().map(|i| items[*i]).collect();
        let counter = crate::SendCounter::default();
        let answer = match deadline
            .bound(sink.publish_batch(&refs, sends_left, &counter))
            .await
        {
            Some(answer) => answer,
            None => {
                tracing::warn!(
                    entries = refs.len(),
                    "sink call cut at the deadline; its entries count as not published"
                );
                vec![Err(PublishFailure::deadline_reached()); refs.len()]
            }
        };
        sends_left = sends_left.saturating_sub(counter.sends().max(1));
        let mut answer = answer.into_iter();
        let mut retry = Vec::new();
        for index in pending {
            // A sink that answers for fewer entries than it was given leaves
            // the rest unknown: treat them as transient failures.
            let result = answer.next().unwrap_or_else(|| {
                Err(PublishFailure::new(
                    FailureKind::Transient,
                    "MissingResult",
                    "the sink returned no result for this entry",
                ))
            });
            if matches!(&result, Err(f) if f.kind == FailureKind::Transient && !f.whole_call) {
                retry.push(index);
            }
            // A retry the deadline cut keeps the sink's own refusal of the
            // call before: that was an attempt, the cut is not.
            if attempt > 1 && matches!(&result, Err(f) if f.is_deadline_reached()) {
                continue;
            }
            results[index] = result;
        }
        if retry.is_empty() || sends_left == 0 || !policy.wait(attempt, deadline).await {
            return results;
        }
        attempt += 1;
        pending = retry;
    }
}
