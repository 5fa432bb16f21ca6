//! Strict ordering: the guard of each event (one consistent read of its
//! aggregate's item collection, made ahead for the run), the hold of an
//! event behind an older one, and the events behind what a sweep published.

#[allow(clippy::wildcard_imports)]
use super::*;

impl<S: EventSink, T: PublishStore> Relay<'_, S, T> {
    /// Strict ordering's guard for entry `i`: `None` when it may go out (no
    /// older event of its aggregate is in the table, or the nearest older
    /// one was published in this run, which passed its own guard: nothing
    /// sits between them); otherwise the entry is held (recorded on the
    /// item, handed to the sweeper), or found gone, and its outcome
    /// returned.
    ///
    /// Every event is read: by the read made ahead for its aggregate when
    /// that read covers it, or by its own. No read (sweep) for an event its
    /// aggregate already holds back, nor (stream) for one behind an event of
    /// its aggregate held in this run: it is held behind that one.
    pub(super) async fn guard(
        &self,
        i: usize,
        entries: &[Entry],
        run: &mut Run,
        held: &mut HashSet<String>,
        deadline: &Deadline,
    ) -> Option<RelayOutcome> {
        let Entry::Item(item) = &entries[i] else {
            return None;
        };
        if !run.strict() || run.is_cleared(i) {
            return None;
        }
        if held.contains(&item.aggregate_id) {
            // Stream: an earlier event of its aggregate was held in this
            // invocation, or left pending (poison whose dead-letter write
            // failed); hold this one behind it. Sweep: the same, or
            // deferred by the usual rule (settle_alone).
            let behind = match run.held_at(&item.aggregate_id) {
                Some(behind) => behind.clone(),
                None if run.sweep() => return None,
                None => keys::OUTBOX_PREFIX.to_owned(),
            };
            return Some(self.hold(i, item, &behind, run, held).await);
        }
        if let Mode::Sweep { now, .. } = run.mode() {
            if item
                .next_attempt_at
                .is_some_and(|at| at > now.unix_timestamp())
            {
                // Not due: settle_alone defers it and holds its aggregate.
                return None;
            }
        }
        let ahead = run.read_about(&item.pk, &item.sk);
        let read = match ahead {
            Some(guarded) => Ok(guarded),
            None => {
                run.count_reads(1);
                self.store
                    .collection_below(&item.key(), OWN_READ_LIMIT, deadline)
                    .await
                    .map(|read| {
                        // Two keys from its own: itself and the nearest
                        // older one, or all there is. A read that says less
                        // holds it.
                        read.about(&item.sk).unwrap_or_else(|| Guarded {
                            present: true,
                            older: Some(
                                read.keys
                                    .last()
                                    .cloned()
                                    .unwrap_or_else(|| keys::OUTBOX_PREFIX.to_owned()),
                            ),
                        })
                    })
            }
        };
        let guarded = match read {
            Ok(guarded) => guarded,
            Err(e) => {
                tracing::error!(event_id = %item.event_id, error = %e, "could not read the aggregate's older events");
                return Some(RelayOutcome::Failed(PublishFailure::new(
                    FailureKind::Transient,
                    "OrderCheckFailed",
                    e.to_string(),
                )));
            }
        };
        if !guarded.present {
            tracing::info!(event_id = %item.event_id, "event already gone from the table (published by another run); not sent again");
            return Some(RelayOutcome::Gone);
        }
        match guarded.older {
            Some(behind) if !run.published_in(&item.pk, &behind) => {
                Some(self.hold(i, item, &behind, run, held).await)
            }
            _ => {
                run.clear(i);
                None
            }
        }
    }

    /// Strict ordering: the guard reads, made all at once before anything
    /// is sent, so that the guard does not cut a batch at every event: one
    /// per item collection of `entries` (aggregate not held), from its
    /// newest event down, its limit one more than the run's events of it
    /// (due ones, in sweep mode), so that it covers them all when nothing
    /// else of theirs is in the table. A read that fails is made again at
    /// the event's turn.
    pub(super) async fn read_ahead(
        &self,
        entries: &[Entry],
        run: &mut Run,
        held: &HashSet<String>,
        deadline: &Deadline,
    ) {
        // Per collection, in order of first appearance: its newest event
        // and how many of its events the run has.
        let mut order: Vec<&str> = Vec::new();
        let mut newest: HashMap<&str, (ItemKey, i32)> = HashMap::new();
        for entry in entries {
            let Entry::Item(item) = entry else { continue };
            if held.contains(&item.aggregate_id) {
                continue;
            }
            if let Mode::Sweep { now, .. } = run.mode() {
                if item
                    .next_attempt_at
                    .is_some_and(|at| at > now.unix_timestamp())
                {
                    continue;
                }
            }
            let slot = newest.entry(&item.pk).or_insert_with(|| {
                order.push(&item.pk);
                (item.key(), 0)
            });
            if item.sk > slot.0.sk {
                slot.0 = item.key();
            }
            slot.1 += 1;
        }
        let wanted: Vec<(ItemKey, i32)> = order
            .iter()
            .filter_map(|pk| newest.get(pk).cloned())
            .collect();
        for chunk in wanted.chunks(READ_AHEAD_AT_ONCE) {
            if !deadline.allows(self.retry.backoff.base) {
                return;
            }
            let reads = futures::future::join_all(chunk.iter().map(|(key, count)| {
                self.store
                    .collection_below(key, count.saturating_add(1), deadline)
            }))
            .await;
            run.count_reads(chunk.len());
            for ((key, _), read) in chunk.iter().zip(reads) {
                if let Ok(read) = read {
                    run.read_ahead(key.pk.clone(), read);
                }
            }
        }
    }

    /// Holds entry `i` behind `behind`: recorded on the item (unless it is
    /// already), its aggregate held for the rest of the run.
    pub(super) async fn hold(
        &self,
        i: usize,
        item: &OutboxItem,
        behind: &str,
        run: &mut Run,
        held: &mut HashSet<String>,
    ) -> RelayOutcome {
        // Already recorded: held behind the same event, with its time (an
        // item held before `heldSince` existed gets it now; one whose
        // blocker changed names the new one), in the scheduled sweep's hands.
        let recorded = item.held_behind.as_deref() == Some(behind)
            && item.held_since.is_some()
            && item.pending_sk.as_deref().is_some_and(keys::is_redriven_sk);
        if !recorded {
            match self
                .store
                .hold(&item.key(), behind, run.claim_token(), &run.finish())
                .await
            {
                // Gone: published, or dead-lettered, by someone else.
                // Claimed: another run holds it, in the pending index.
                Ok(Marked::Updated | Marked::Gone | Marked::Claimed) => {}
                // Still there, in no index the stack reads: a hold would
                // leave it to nobody.
                Ok(Marked::Refused) => {
                    tracing::error!(event_id = %item.event_id, "hold refused: the item is not in the pending index this stack reads");
                    return RelayOutcome::Failed(PublishFailure::new(
                        FailureKind::Transient,
                        "HoldRefused",
                        "the item is still in the table but not in the pending index this stack reads",
                    ));
                }
                Err(e) => {
                    tracing::error!(event_id = %item.event_id, error = %e, "could not hold an event behind an older one");
                    return RelayOutcome::Failed(PublishFailure::new(
                        FailureKind::Transient,
                        "HoldFailed",
                        e.to_string(),
                    ));
                }
            }
        }
        tracing::info!(event_id = %item.event_id, behind, "event held behind an older event of its aggregate");
        held.insert(item.aggregate_id.clone());
        run.hold(i, &item.aggregate_id, &item.sk, behind);
        RelayOutcome::Deferred
    }

    /// Sweep mode, strict: the pending events behind each event published
    /// in the last round (one read per aggregate), not seen before in this
    /// run. Returns them, the reads made and the reads that failed.
    pub(super) async fn behind_published(
        &self,
        run: &Run,
        seen: &mut HashSet<ItemKey>,
        deadline: &Deadline,
    ) -> (Vec<Entry>, usize, usize) {
        // The newest published event of each item collection.
        let mut newest: HashMap<&str, &ItemKey> = HashMap::new();
        for key in run.published() {
            let slot = newest.entry(key.pk.as_str()).or_insert(key);
            if key.sk > slot.sk {
                *slot = key;
            }
        }
        let mut found = Vec::new();
        let (mut reads, mut errors) = (0, 0);
        for key in newest.into_values() {
            if !deadline.allows(self.retry.backoff.base) {
                break;
            }
            reads += 1;
            match self.store.newer_pending(key, deadline).await {
                Ok(items) => {
                    for stored in items {
                        let entry = Entry::from(stored);
                        let key = match &entry {
                            Entry::Item(item) => item.key(),
                            Entry::Poison { key, .. }
                            | Entry::Unusable { key, .. }
                            | Entry::Settled { key } => key.clone(),
                        };
                        if seen.insert(key) {
                            found.push(entry);
                        }
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "could not read the events behind a published one; the sweeper releases them");
                    errors += 1;
                }
            }
        }
        (found, reads, errors)
    }
}
