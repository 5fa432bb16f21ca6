//! What becomes of each entry after its call: deletes in batches of 25,
//! dead letters, failed attempts and their backoff, the operator's kept
//! dead letters, the hand-over to the scheduled sweep, the report.

#[allow(clippy::wildcard_imports)]
use super::*;

impl<S: EventSink, T: PublishStore> Relay<'_, S, T> {
    /// Sweep mode: hands every event this run left pending on purpose
    /// (behind an earlier event of its aggregate that failed, is backing
    /// off or is held) to the scheduled sweep, unless it is already
    /// (`!<ulid>`): marked held behind the nearest earlier event of its
    /// aggregate in the run. So an OnFailure window is settled once each of
    /// its events is published, dead-lettered or in the schedule's hands,
    /// and none waits for the 24-hour threshold. A write that fails is a
    /// store error (the window is then not settled).
    pub(super) async fn hand_over(&self, entries: &[Entry], run: &mut Run) {
        for (i, entry) in entries.iter().enumerate() {
            let Entry::Item(item) = entry else { continue };
            if *run.outcome(i) != RelayOutcome::Deferred
                || run.held_by_guard(i)
                || run.claimed_elsewhere(i)
                || item.pending_sk.as_deref().is_some_and(keys::is_redriven_sk)
            {
                continue;
            }
            let behind = entries[..i]
                .iter()
                .rev()
                .find_map(|e| match e {
                    Entry::Item(earlier) if earlier.aggregate_id == item.aggregate_id => {
                        Some(earlier.sk.clone())
                    }
                    _ => None,
                })
                .unwrap_or_else(|| keys::OUTBOX_PREFIX.to_owned());
            match self
                .store
                .hold(&item.key(), &behind, run.claim_token(), &run.finish())
                .await
            {
                Ok(Marked::Refused) => {
                    tracing::error!(event_id = %item.event_id, "hand-over refused: the item is in no index this stack reads");
                    run.store_error();
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::error!(event_id = %item.event_id, error = %e, "could not hand a deferred event to the scheduled sweep");
                    run.store_error();
                }
            }
        }
    }

    /// Deletes the full batches of [`MAX_BATCH_WRITE`] of what was published
    /// and not yet deleted, before a store call that is not a send (a guard
    /// read, a dead-letter or failure write): what is published is not left
    /// waiting behind it.
    pub(super) async fn delete_full_batches(&self, run: &mut Run) {
        let keys = run.full_delete_batches();
        if keys.is_empty() {
            return;
        }
        let undeleted = self.delete_at_once(&keys, &run.finish()).await;
        run.not_deleted(undeleted);
    }

    /// Deletes everything published and not yet deleted.
    pub(super) async fn delete_rest(&self, run: &mut Run) {
        let keys = run.rest_to_delete();
        let undeleted = self.delete_at_once(&keys, &run.finish()).await;
        run.not_deleted(undeleted);
    }

    /// Deletes `keys`, its batches of [`MAX_BATCH_WRITE`] at once; returns
    /// those not deleted.
    pub(super) async fn delete_at_once(&self, keys: &[ItemKey], finish: &Deadline) -> Vec<ItemKey> {
        futures::future::join_all(
            keys.chunks(MAX_BATCH_WRITE)
                .map(|chunk| self.store.delete_published(chunk, finish)),
        )
        .await
        .into_iter()
        .flatten()
        .collect()
    }

    /// An entry the sink refused as poison: dead-lettered; if even that
    /// fails, left pending for the sweeper (its call-mates went out already:
    /// reporting it would send them again on every retry).
    pub(super) async fn sink_poison(
        &self,
        item: &OutboxItem,
        failure: &PublishFailure,
        run: &mut Run,
        held: &mut HashSet<String>,
    ) -> RelayOutcome {
        let attempts = run.sweep().then(|| item.attempts.saturating_add(1));
        match self
            .dead_letter(
                &item.key(),
                Some(&item.aggregate_id),
                &failure.to_string(),
                attempts,
                run.writes(),
            )
            .await
        {
            RelayOutcome::Failed(_) => {
                tracing::error!(event_id = %item.event_id, "poison event left pending for the sweeper (dead-letter write failed)");
                run.store_error();
                // Its aggregate's later events in the run are held behind
                // it, as behind a dead letter.
                held.insert(item.aggregate_id.clone());
                run.hold_aggregate_at(&item.aggregate_id, &item.sk);
                RelayOutcome::Deferred
            }
            other => other,
        }
    }

    /// Deletes what was published and counts the outcomes.
    /// A published event whose item could not be deleted is handed to the
    /// scheduled sweep at once (`!<ulid>` pending key, due now, its
    /// attempts unchanged): the next sweep publishes it again (same event
    /// id) and deletes it, so that, in strict mode, its aggregate's later
    /// events are not held behind it until it is stranded.
    pub(super) async fn finish(&self, entries: &[Entry], run: &mut Run) -> RelayReport {
        self.delete_rest(run).await;
        let undeleted = run.take_undeleted();
        let now = outbox_core::now_utc_millis().unix_timestamp();
        for key in &undeleted {
            if let (Mode::Operator, Some(claim)) = (run.mode(), run.claim()) {
                tracing::error!(key = %key, "republished dead letter not deleted; it stays a dead letter");
                let reason = "published by redrive --now, but its item was not deleted: a later redrive sends it again";
                if let Err(e) = self
                    .store
                    .release_claim(key, claim, Some(reason), &run.finish())
                    .await
                {
                    tracing::error!(key = %key, error = %e, "could not release the claim (it lapses)");
                    run.store_error();
                }
                continue;
            }
            tracing::error!(key = %key, "published event's outbox item not deleted; the next scheduled sweep republishes it");
            let attempts = entries
                .iter()
                .find_map(|e| match e {
                    Entry::Item(item) if item.key() == *key => Some(item.attempts),
                    _ => None,
                })
                .unwrap_or(0);
            let handed = self
                .store
                .record_failure(
                    key,
                    attempts,
                    now,
                    "published, but its item was not deleted",
                    run.claim_token(),
                    &run.finish(),
                )
                .await
                .and_then(|marked| match marked {
                    // Still there, in no index the stack reads: not handed.
                    Marked::Refused => Err(StoreError::new("record_failure", "Refused")),
                    other => Ok(other),
                });
            if let Err(e) = handed {
                run.store_error();
                // Stream mode: neither deleted nor handed over, the item
                // keeps its normal key, and only the day-old sweep would
                // take it (strict ordering would hold its aggregate's later
                // events that long). The record is reported instead, so
                // that the stream delivers it again: the next invocation
                // publishes it again (same `eventId`) and deletes it.
                let index = entries
                    .iter()
                    .position(|e| matches!(e, Entry::Item(item) if item.key() == *key));
                match (run.mode(), index) {
                    (Mode::Stream, Some(index)) => {
                        tracing::error!(key = %key, error = %e, "could not hand an undeleted event to the scheduled sweep; its record is reported for the stream to retry");
                        run.settle(
                            index,
                            RelayOutcome::Failed(PublishFailure::new(
                                FailureKind::Transient,
                                NOT_DELETED,
                                "published, but neither deleted nor handed to the scheduled sweep",
                            )),
                        );
                    }
                    _ => {
                        tracing::error!(key = %key, error = %e, "could not hand an undeleted event to the scheduled sweep");
                    }
                }
            }
        }
        run.report(undeleted.len())
    }

    /// Sweep mode: whether `item` may be sent now (its aggregate is not
    /// held and it is due). An item not due holds its aggregate.
    pub(super) fn sendable(
        &self,
        item: &OutboxItem,
        mode: Mode,
        held: &mut HashSet<String>,
    ) -> bool {
        let Mode::Sweep { now, .. } = mode else {
            return true;
        };
        if held.contains(&item.aggregate_id) {
            return false;
        }
        if item
            .next_attempt_at
            .is_some_and(|at| at > now.unix_timestamp())
        {
            held.insert(item.aggregate_id.clone());
            return false;
        }
        true
    }

    /// Operator mode: an event not published stays a dead letter: its claim
    /// is released with the failure as its reason. A release that fails is a
    /// store error (the claim lapses).
    pub(super) async fn keep_dead_letter(
        &self,
        key: &ItemKey,
        failure: PublishFailure,
        run: &mut Run,
    ) -> RelayOutcome {
        tracing::warn!(key = %key, code = %failure.code, kind = ?failure.kind, "dead letter not republished; it stays a dead letter");
        if let Some(claim) = run.claim() {
            let reason = format!("redrive --now: {failure}");
            if let Err(e) = self
                .store
                .release_claim(key, claim, Some(&reason), &run.finish())
                .await
            {
                tracing::error!(key = %key, error = %e, "could not release the claim (it lapses)");
                run.store_error();
            }
        }
        RelayOutcome::Failed(failure)
    }

    pub(super) async fn dead_letter(
        &self,
        key: &ItemKey,
        aggregate_id: Option<&str>,
        reason: &str,
        attempts: Option<u32>,
        writes: Writes<'_>,
    ) -> RelayOutcome {
        let letter = DeadLetter {
            key,
            aggregate_id,
            reason,
            attempts,
            claim: writes.claim,
        };
        match self.store.dead_letter(letter, writes.finish).await {
            Ok(marked @ (Marked::Updated | Marked::Gone)) => {
                tracing::error!(key = %key, reason, outcome = ?marked, "outbox item dead-lettered");
                RelayOutcome::DeadLettered
            }
            // Another run's live claim holds it, pending: that run sends it
            // (and dead-letters it when the sink refuses it again).
            Ok(Marked::Claimed) => {
                tracing::warn!(key = %key, reason, "not dead-lettered: another run's live claim holds the item; that run finishes it");
                RelayOutcome::Deferred
            }
            Ok(Marked::Refused) => {
                tracing::error!(key = %key, reason, "dead letter refused: the item is still in the table, in no index this stack reads");
                RelayOutcome::Failed(PublishFailure::new(
                    FailureKind::Transient,
                    "DeadLetterRefused",
                    "the item is still in the table, in no index this stack reads",
                ))
            }
            Err(e) => {
                tracing::error!(key = %key, error = %e, "could not dead-letter an outbox item");
                RelayOutcome::Failed(PublishFailure::new(
                    FailureKind::Transient,
                    "DeadLetterFailed",
                    e.to_string(),
                ))
            }
        }
    }

    /// Sweep mode: hands an event whose sink call the run's deadline cut
    /// back to the schedule, due now, its attempts unchanged (the write
    /// clears this run's claim). Whether the write succeeded (otherwise
    /// the claim lapses and the event is due anyway).
    pub(super) async fn return_untried(
        &self,
        item: &OutboxItem,
        failure: &PublishFailure,
        now: OffsetDateTime,
        writes: Writes<'_>,
    ) -> bool {
        match self
            .store
            .record_failure(
                &item.key(),
                item.attempts,
                now.unix_timestamp(),
                &failure.to_string(),
                writes.claim,
                writes.finish,
            )
            .await
        {
            Ok(Marked::Refused) => {
                tracing::error!(event_id = %item.event_id, "return to the schedule refused: the item is in no index this stack reads");
                false
            }
            Ok(_) => true,
            Err(e) => {
                tracing::error!(event_id = %item.event_id, error = %e, "could not return an untried event to the schedule; its claim lapses");
                false
            }
        }
    }

    /// Sweep mode: records a failed attempt (or dead-letters after the last
    /// one). Returns the outcome and whether the write succeeded.
    pub(super) async fn record_failure(
        &self,
        item: &OutboxItem,
        failure: PublishFailure,
        now: OffsetDateTime,
        max_attempts: u32,
        backoff: Backoff,
        writes: Writes<'_>,
    ) -> (RelayOutcome, bool) {
        let attempts = item.attempts.saturating_add(1);
        if attempts >= max_attempts {
            let reason = format!("gave up after {attempts} attempts; last error {failure}");
            let outcome = self
                .dead_letter(
                    &item.key(),
                    Some(&item.aggregate_id),
                    &reason,
                    Some(attempts),
                    writes,
                )
                .await;
            let ok = outcome == RelayOutcome::DeadLettered;
            return (
                if ok {
                    outcome
                } else {
                    RelayOutcome::Failed(failure)
                },
                ok,
            );
        }
        let next = now + backoff.delay(attempts);
        match self
            .store
            .record_failure(
                &item.key(),
                attempts,
                next.unix_timestamp(),
                &failure.to_string(),
                writes.claim,
                writes.finish,
            )
            .await
        {
            Ok(Marked::Updated) => (RelayOutcome::Failed(failure), true),
            Ok(Marked::Gone | Marked::Claimed) => {
                tracing::info!(event_id = %item.event_id, "item gone meanwhile, or in another run's hands");
                (RelayOutcome::Failed(failure), true)
            }
            Ok(Marked::Refused) => {
                tracing::error!(event_id = %item.event_id, "failure record refused: the item is in no index this stack reads");
                (RelayOutcome::Failed(failure), false)
            }
            Err(e) => {
                tracing::error!(event_id = %item.event_id, error = %e, "could not record a failed attempt; the item stays due");
                (RelayOutcome::Failed(failure), false)
            }
        }
    }
}
