//! [`Run`]: the state of one relay run, and every change of it. The steps
//! (`guard.rs`, `waves.rs`, `outcomes.rs`) read it and change it through
//! these methods only: its fields are private to this file.

use std::collections::{HashMap, HashSet};

use outbox_core::keys::ItemKey;
use outbox_core::OutboxItem;

use super::{Entry, Mode, RelayOutcome, RelayReport, Writes};
use crate::{Claim, CollectionRead, Deadline, Guarded, MAX_BATCH_WRITE};

/// The state of one run of [`Relay::run_once`](super::Relay).
pub(super) struct Run {
    mode: Mode,
    /// The deadline of deletes and bookkeeping writes.
    finish: Deadline,
    outcomes: Vec<RelayOutcome>,
    published: Vec<ItemKey>,
    /// How many of `published` (from the start) a delete was asked for.
    deleted_upto: usize,
    /// Published events whose delete failed.
    undeleted: Vec<ItemKey>,
    store_errors: usize,
    /// Where the last batch's scan stopped.
    batch_end: usize,
    /// Strict ordering.
    strict: bool,
    /// Entries whose guard passed.
    cleared: HashSet<usize>,
    /// Aggregates held in this run, with the sort key of the event they
    /// are held at (a later event of theirs is held behind it).
    held_at: HashMap<String, String>,
    /// Strict ordering: the guard reads made ahead, one per item collection
    /// (partition key) of the run, from its newest event down.
    reads: HashMap<String, CollectionRead>,
    /// Sweep mode: the claim this run publishes under.
    claim: Option<Claim>,
    /// Entries another sweeper run had claimed (left to it).
    claimed_elsewhere: HashSet<usize>,
    /// Entries held by the guard in this run, with the sort key each is
    /// held behind.
    held_entries: Vec<(usize, String)>,
    collection_reads: usize,
    /// Per event published, commit to acknowledgement (ms).
    latencies: Vec<u64>,
}

impl Run {
    /// A run of `entries` entries, none attempted yet.
    pub(super) fn new(
        mode: Mode,
        finish: Deadline,
        entries: usize,
        strict: bool,
        claim: Option<Claim>,
    ) -> Self {
        Self {
            mode,
            finish,
            outcomes: vec![RelayOutcome::NotAttempted; entries],
            published: Vec::new(),
            deleted_upto: 0,
            undeleted: Vec::new(),
            store_errors: 0,
            batch_end: 0,
            strict,
            cleared: HashSet::new(),
            held_at: HashMap::new(),
            reads: HashMap::new(),
            claim,
            claimed_elsewhere: HashSet::new(),
            held_entries: Vec::new(),
            collection_reads: 0,
            latencies: Vec::new(),
        }
    }

    // What the run is.

    pub(super) fn mode(&self) -> Mode {
        self.mode
    }

    pub(super) fn sweep(&self) -> bool {
        matches!(self.mode, Mode::Sweep { .. })
    }

    pub(super) fn strict(&self) -> bool {
        self.strict
    }

    /// The deadline of deletes and bookkeeping writes.
    pub(super) fn finish(&self) -> Deadline {
        self.finish
    }

    /// The claim this run publishes under (sweep and operator modes).
    pub(super) fn claim(&self) -> Option<&Claim> {
        self.claim.as_ref()
    }

    /// The token of the claim this run publishes under (sweep mode): its
    /// bookkeeping writes may clear that claim, and no other live one.
    pub(super) fn claim_token(&self) -> Option<&str> {
        self.claim.as_ref().map(|c| c.token.as_str())
    }

    /// What a bookkeeping write of this run needs.
    pub(super) fn writes(&self) -> Writes<'_> {
        Writes {
            claim: self.claim_token(),
            finish: &self.finish,
        }
    }

    // What the run has seen so far.

    pub(super) fn outcome(&self, i: usize) -> &RelayOutcome {
        &self.outcomes[i]
    }

    /// Where the last batch's scan stopped.
    pub(super) fn batch_end(&self) -> usize {
        self.batch_end
    }

    /// Whether entry `i`'s guard passed.
    pub(super) fn is_cleared(&self, i: usize) -> bool {
        self.cleared.contains(&i)
    }

    /// Whether entry `i` was held by the guard in this run.
    pub(super) fn held_by_guard(&self, i: usize) -> bool {
        self.held_entries.iter().any(|(j, _)| *j == i)
    }

    /// Whether another sweeper run had claimed entry `i`.
    pub(super) fn claimed_elsewhere(&self, i: usize) -> bool {
        self.claimed_elsewhere.contains(&i)
    }

    /// The sort key the aggregate is held at in this run, if it is.
    pub(super) fn held_at(&self, aggregate: &str) -> Option<&String> {
        self.held_at.get(aggregate)
    }

    /// What the read made ahead for the collection `pk` proves about the
    /// event `sk`, when it covers it.
    pub(super) fn read_about(&self, pk: &str, sk: &str) -> Option<Guarded> {
        self.reads.get(pk).and_then(|r| r.about(sk))
    }

    /// The keys published so far, in order.
    pub(super) fn published(&self) -> &[ItemKey] {
        &self.published
    }

    /// Whether the event of sort key `sk` in collection `pk` was published
    /// in this run (after its own guard passed).
    pub(super) fn published_in(&self, pk: &str, sk: &str) -> bool {
        self.published.iter().any(|k| k.pk == pk && k.sk == sk)
    }

    /// Strict ordering: whether the read made ahead for `item`'s collection
    /// clears it (its aggregate not held, its item present, and no older
    /// event of its aggregate in the table but one published in this run).
    pub(super) fn cleared_ahead(&self, item: &OutboxItem, held: &HashSet<String>) -> bool {
        !held.contains(&item.aggregate_id)
            && self.read_about(&item.pk, &item.sk).is_some_and(|g| {
                g.present
                    && g.older
                        .as_ref()
                        .is_none_or(|o| self.published_in(&item.pk, o))
            })
    }

    // The transitions.

    /// Entry `i`'s outcome.
    pub(super) fn settle(&mut self, i: usize, outcome: RelayOutcome) {
        self.outcomes[i] = outcome;
    }

    /// Records the outcome of entry `i`, settled alone. A failure holds its
    /// aggregate; in stream mode it ends the run (returns `false`), in sweep
    /// mode the entry stays pending (its write failed) and the run goes on.
    pub(super) fn record_alone(
        &mut self,
        i: usize,
        entry: &Entry,
        outcome: RelayOutcome,
        held: &mut HashSet<String>,
    ) -> bool {
        if !matches!(outcome, RelayOutcome::Failed(_)) {
            self.outcomes[i] = outcome;
            return true;
        }
        if let Some(aggregate) = entry.aggregate() {
            held.insert(aggregate.to_owned());
        }
        if !self.sweep() {
            self.outcomes[i] = outcome;
            return false;
        }
        self.store_errors += 1;
        self.outcomes[i] = RelayOutcome::Deferred;
        true
    }

    /// A bookkeeping write (dead letter, failure record, hold, hand-over,
    /// release) failed.
    pub(super) fn store_error(&mut self) {
        self.store_errors += 1;
    }

    /// Entry `i`'s guard passed (strict ordering).
    pub(super) fn clear(&mut self, i: usize) {
        self.cleared.insert(i);
    }

    /// `reads` consistent reads of an item collection were made.
    pub(super) fn count_reads(&mut self, reads: usize) {
        self.collection_reads += reads;
    }

    /// The read made ahead for the collection `pk`.
    pub(super) fn read_ahead(&mut self, pk: String, read: CollectionRead) {
        self.reads.insert(pk, read);
    }

    /// Entry `i`, the event `sk` of `aggregate`, is held behind `behind`:
    /// the aggregate's later events in the run are held behind it.
    pub(super) fn hold(&mut self, i: usize, aggregate: &str, sk: &str, behind: &str) {
        self.held_at.insert(aggregate.to_owned(), sk.to_owned());
        self.held_entries.push((i, behind.to_owned()));
    }

    /// The event `sk` of `aggregate` is left pending (poison whose
    /// dead-letter write failed): its aggregate's later events in the run
    /// are held behind it, unless it is held already.
    pub(super) fn hold_aggregate_at(&mut self, aggregate: &str, sk: &str) {
        self.held_at
            .entry(aggregate.to_owned())
            .or_insert_with(|| sk.to_owned());
    }

    /// Another sweeper run's live claim holds entry `i`: left to it.
    pub(super) fn claimed_by_another(&mut self, i: usize) {
        self.claimed_elsewhere.insert(i);
    }

    /// The sink accepted entry `i` (`key`), `latency` ms after its commit.
    pub(super) fn acknowledged(&mut self, i: usize, key: ItemKey, latency: u64) {
        self.published.push(key);
        self.latencies.push(latency);
        self.outcomes[i] = RelayOutcome::Published;
    }

    /// The last batch's scan stopped at `j`.
    pub(super) fn batch_ended(&mut self, j: usize) {
        self.batch_end = j;
    }

    /// The full batches of [`MAX_BATCH_WRITE`] of what was published and
    /// not yet deleted, now asked to be deleted.
    pub(super) fn full_delete_batches(&mut self) -> Vec<ItemKey> {
        let full = (self.published.len() - self.deleted_upto) / MAX_BATCH_WRITE * MAX_BATCH_WRITE;
        let keys = self.published[self.deleted_upto..self.deleted_upto + full].to_vec();
        self.deleted_upto += full;
        keys
    }

    /// Everything published and not yet deleted, now asked to be deleted.
    pub(super) fn rest_to_delete(&mut self) -> Vec<ItemKey> {
        let keys = self.published[self.deleted_upto..].to_vec();
        self.deleted_upto = self.published.len();
        keys
    }

    /// Published events whose delete failed.
    pub(super) fn not_deleted(&mut self, keys: Vec<ItemKey>) {
        self.undeleted.extend(keys);
    }

    /// The published events whose delete failed, handed to the caller.
    pub(super) fn take_undeleted(&mut self) -> Vec<ItemKey> {
        std::mem::take(&mut self.undeleted)
    }

    /// The run's report: its outcomes counted (`delete_failed`: the
    /// published events not deleted).
    pub(super) fn report(&mut self, delete_failed: usize) -> RelayReport {
        let outcomes = self.outcomes.clone();
        let count = |f: fn(&RelayOutcome) -> bool| outcomes.iter().filter(|o| f(o)).count();
        RelayReport {
            published: self.published.len(),
            dead_lettered: count(|o| *o == RelayOutcome::DeadLettered),
            failed: count(|o| matches!(o, RelayOutcome::Failed(_))),
            deferred: count(|o| *o == RelayOutcome::Deferred),
            gone: count(|o| *o == RelayOutcome::Gone),
            not_attempted: count(|o| *o == RelayOutcome::NotAttempted),
            claimed_elsewhere: self.claimed_elsewhere.len(),
            delete_failed,
            store_errors: self.store_errors,
            held: self.held_entries.len(),
            released: 0,
            collection_reads: self.collection_reads,
            commit_to_publish_ms: std::mem::take(&mut self.latencies),
            outcomes,
        }
    }
}
