//! The outbox store: every read and write that the publisher, the sweeper
//! and the operator commands make on outbox items, their two sparse indexes
//! and the settings item. The port is split by the role that uses it
//! ([`PublishStore`]: the relay; [`SweepStore`]: the scheduled sweep;
//! [`OperatorStore`]: the operator's commands; [`OutboxStore`]: all three),
//! with two adapters.
//!
//! # Layout
//! - this file: the three role traits.
//! - `types.rs`: the types they speak in ([`StoreError`], [`PendingItem`],
//!   [`DeadLetterRecord`], [`CollectionRead`], …).
//! - `memory/`: [`MemoryStore`] (feature `testing`), one in-memory store
//!   that the unit tests, benches and examples share; `roles.rs` implements
//!   the three roles.
//!
//! The DynamoDB adapter is the runtime's (`outbox_runtime::DynamoStore`).
//!
//! Every write is either a delete (harmless when the item is already gone)
//! or an update conditioned on the item still existing in the state it
//! expects, so nothing here can resurrect an item another process deleted.
//! Every call is bounded by the caller's [`Deadline`]; whole calls are
//! retried by the SDK only (the runtime's client settings), unprocessed
//! batch items by [`crate::RetryPolicy`].

#[cfg(any(test, feature = "testing"))]
mod memory;
mod types;

use std::future::Future;

use ulid::Ulid;

use crate::Deadline;
use outbox_core::keys::ItemKey;
use outbox_core::keys::RecordedSettings;
use outbox_core::OutboxItem;

#[cfg(any(test, feature = "testing"))]
pub use memory::{MemoryStore, WriteLog};
pub use types::*;

/// What publishing needs (the relay, for the publisher, the sweeper and
/// the operator's `--now`): deletes after publishing, dead letters, failed
/// attempts, claims, the strict guard's reads and holds, the redelivery
/// check, and the settings a function records at cold start.
pub trait PublishStore: Send + Sync {
    /// Deletes the items of published events, in batches (a lone key in a
    /// call of its own), retrying unprocessed ones while `deadline` allows.
    /// Returns the keys it could not delete (they stay, and the sweeper
    /// will republish them).
    fn delete_published(
        &self,
        keys: &[ItemKey],
        deadline: &Deadline,
    ) -> impl Future<Output = Vec<ItemKey>> + Send;

    /// Marks an item dead-lettered: reason and time recorded, moved from the
    /// pending index to the dead-letter index. Conditional on the item
    /// existing and not being dead-lettered already.
    fn dead_letter(
        &self,
        letter: DeadLetter<'_>,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Marked, StoreError>> + Send;

    /// Records a failed attempt: `attempts`, the sanitized error and the
    /// time before which no sweeper retries it (a hold it had ends:
    /// `heldBehind` and `heldSince` go), and hands the event to the
    /// scheduled sweep (its pending sort key becomes `!<ulid>`, read by every
    /// scheduled sweep whatever the event's age). Conditional on the item
    /// existing, still pending and no live claim but `claim` (the writer's
    /// own token, if it holds one) holding it.
    fn record_failure(
        &self,
        key: &ItemKey,
        attempts: u32,
        next_attempt_at: i64,
        error: &str,
        claim: Option<&str>,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Marked, StoreError>> + Send;

    /// Writes the pending-index keys this stack's sweeper reads on an
    /// outbox item that was written without them (no index keys, other
    /// names, another region's, a shard out of range): `pending_pk` and
    /// `pending_sk` (the table's names for them), so that whatever happens
    /// after, the event is in an index the stack reads, and
    /// `keysRepairedAt`. Conditional on the item existing, not being a dead
    /// letter, being this store's region's (or of none) and its pending
    /// partition key being still `seen` (what the stream record showed;
    /// `None`: absent). Otherwise, from the item as it is:
    /// [`Marked::Gone`] when it is gone, dead-lettered or another region's;
    /// [`Marked::Claimed`] when it is already under keys this stack reads
    /// (written since the record: nothing to repair); [`Marked::Refused`]
    /// when it is under other keys again. The publisher calls it before it
    /// sends such an event (docs/adopt.md "What the publisher checks").
    fn make_sweepable(
        &self,
        key: &ItemKey,
        seen: Option<&str>,
        pending_pk: &str,
        pending_sk: &str,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Marked, StoreError>> + Send;

    /// The keys among `keys` whose events this store's region may still
    /// publish: in the table, not dead-lettered, and of its home region (or
    /// of none). One strongly consistent `BatchGetItem` per 100 keys (the
    /// keys and two attributes projected): the publisher's check of a
    /// batch that may be a redelivery. Keys DynamoDB leaves unprocessed
    /// until the deadline count as publishable (a duplicate rather than a
    /// loss).
    fn publishable(
        &self,
        keys: &[ItemKey],
        deadline: &Deadline,
    ) -> impl Future<Output = Result<std::collections::HashSet<ItemKey>, StoreError>> + Send;

    /// Claims a pending event for one sweeper run before it publishes it:
    /// records `claim` on it, conditional on it still being pending and no
    /// live claim but `claim` itself (an SDK retry of a claim that was
    /// applied) holding it, and (global tables) on its home region being
    /// this store's. [`ClaimOutcome::ClaimedElsewhere`] when a concurrent
    /// run's live claim holds it (two OnFailure windows that overlap, a
    /// scheduled sweep beside a redrive, a run that died holding it): this
    /// run leaves it, so no two sweeper runs publish one event.
    /// [`ClaimOutcome::Gone`] when it is no longer pending: published and
    /// deleted meanwhile (the pending index is read eventually consistent),
    /// dead-lettered, or another region's. A failed attempt, a hold and a
    /// dead letter clear the claim.
    fn claim_pending(
        &self,
        key: &ItemKey,
        claim: &Claim,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<ClaimOutcome, StoreError>> + Send;

    /// Strict ordering's guard read: the outbox keys of `key`'s item
    /// collection at or below `key`, newest first, at most `limit` of them
    /// (`key`'s own, when it is still in the table, and the older ones:
    /// pending, backing off, held or dead-lettered). One strongly
    /// consistent, keys-only `Query` (`SK BETWEEN OUTBOX# AND <key>`,
    /// descending, `Limit`): its cost does not grow with the backlog below.
    fn collection_below(
        &self,
        key: &ItemKey,
        limit: i32,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<CollectionRead, StoreError>> + Send;

    /// Holds a pending event behind the older event `behind` of its
    /// aggregate (strict ordering): records `heldBehind` and hands it to
    /// the scheduled sweep (its pending sort key becomes `!<ulid>`, which
    /// every scheduled sweep selects whatever its age) and when it was
    /// first held (`heldSince`, kept by later holds). Conditional on it
    /// still being pending and no live claim but `claim` (the writer's own
    /// token, if it holds one) holding it: [`Marked::Gone`] otherwise (the
    /// claim's owner is publishing it). An update: the stream record it
    /// makes is a `MODIFY`, which the publisher mapping's filter drops.
    fn hold(
        &self,
        key: &ItemKey,
        behind: &str,
        claim: Option<&str>,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Marked, StoreError>> + Send;

    /// The pending events of `key`'s item collection newer than it, oldest
    /// first (one strongly consistent `Query`): what strict ordering
    /// releases once `key`'s event was published. Only the events this
    /// store's region publishes (their `homeRegion` is its home region, or
    /// they have none): on a global table another region's events are that
    /// region's to release.
    fn newer_pending(
        &self,
        key: &ItemKey,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Vec<PendingItem>, StoreError>> + Send;

    /// Gives a claim up: the dead letter is as before, with `error` as its
    /// reason when given. Conditional on the claim being `claim`'s.
    fn release_claim(
        &self,
        key: &ItemKey,
        claim: &Claim,
        error: Option<&str>,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Marked, StoreError>> + Send;

    /// Records the settings a function runs with (one `UpdateItem` of its
    /// region's and stack's record, [`outbox_core::keys::stack_settings_key`]),
    /// for [`PublishStore::recorded_settings`]: the variables and `by`
    /// replaced, `since` kept once set.
    fn record_settings(
        &self,
        settings: &RecordedSettings,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Every settings record in the table, of every region and function
    /// (one consistent `Query`). Only the table's partition and sort key
    /// names matter to it, so an operator's tool can read them before it
    /// knows the rest of the schema.
    fn recorded_settings(
        &self,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Vec<RecordedSettings>, StoreError>> + Send;
}

/// What the scheduled sweep reads and reports: the shard count, the pending
/// index page by page, each shard's statistics, the older-event check of a
/// redriven event, the dead letters, and the adoption of items written
/// without a home region.
pub trait SweepStore: Send + Sync {
    /// The configured shard count (`OUTBOX_SHARDS`).
    fn configured_shards(&self) -> u16;

    /// How many shards to read: the configured count or the highest count
    /// ever recorded, whichever is larger (and records the configured one).
    fn shard_count(
        &self,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<u16, StoreError>> + Send;

    /// One page of a shard of the pending index, oldest first. Not-yet-due
    /// items are returned too: they hold their aggregate's later events.
    fn pending_page(
        &self,
        query: &PendingQuery,
        cursor: Option<Cursor>,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Page, StoreError>> + Send;

    /// The oldest pending id of a shard and its counts (pending, dead
    /// letters), each count stopping at `count_limit` items.
    fn shard_stats(
        &self,
        shard: u16,
        count_limit: i32,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<ShardStats, StoreError>> + Send;

    /// Whether the item collection of `key` (its aggregate) holds a pending
    /// outbox item older than it: one strongly consistent `Query` of the
    /// collection's outbox keys older than `key`. A redriven event waits
    /// behind it, so that its aggregate's events still go out oldest first.
    fn older_pending(
        &self,
        key: &ItemKey,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// One page of a shard of the dead-letter index, oldest first.
    fn dead_letter_page(
        &self,
        shard: u16,
        limit: i32,
        cursor: Option<Cursor>,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<DeadLetterPage, StoreError>> + Send;

    /// With a home region: moves the items of `shard` still under the keys
    /// without a region (written before the rule) to this region's keys, so
    /// that this region's sweep and statistics see them; their pending sort
    /// keys stay, so they become due as they would have. Returns how many
    /// moved. Without a home region (and in the in-memory store): nothing.
    fn adopt_unregioned(
        &self,
        shard: u16,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<usize, StoreError>> + Send {
        let _ = (shard, deadline);
        async { Ok(0) }
    }
}

/// What only the operator's commands do: find, redrive, claim and discard
/// dead letters, make a parked aggregate due, and read the shard count and
/// the stack settings recorded in the table.
pub trait OperatorStore: Send + Sync {
    /// The highest shard count the writers and sweepers recorded, read
    /// without writing (the operator's view); the configured count when
    /// none is recorded.
    fn recorded_shards(
        &self,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<u16, StoreError>> + Send;

    /// The dead letter of `event_id` in `shard`, if that shard holds it.
    fn find_dead_letter(
        &self,
        shard: u16,
        event_id: Ulid,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Option<DeadLetterRecord>, StoreError>> + Send;

    /// Puts a dead letter back into the pending index, attempts reset, with
    /// its `eventId` unchanged, **due at once**: its pending sort key is
    /// [`outbox_core::keys::redriven_sk`], which the next scheduled sweep selects
    /// whatever the event's age. Conditional on it still being
    /// dead-lettered: of two concurrent redrives, one wins ([`Marked::Gone`]
    /// for the other).
    fn redrive(
        &self,
        letter: &DeadLetterRecord,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Marked, StoreError>> + Send;

    /// Claims a dead letter for the caller alone (`outboxctl dead-letters
    /// redrive --now`): records `claim` on it, conditional on it still being
    /// a dead letter that no live claim holds, and returns the item as it
    /// now is (`None` when it is gone or claimed by someone else). A
    /// claimed dead letter stays out of the pending index, so no publisher
    /// or sweeper publishes it meanwhile, and [`OperatorStore::redrive`] and
    /// [`OperatorStore::discard`] leave it alone until the claim expires.
    fn claim_dead_letter(
        &self,
        letter: &DeadLetterRecord,
        claim: &Claim,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Option<OutboxItem>, StoreError>> + Send;

    /// Deletes a dead letter; conditional on it still being one.
    fn discard(
        &self,
        letter: &DeadLetterRecord,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Marked, StoreError>> + Send;

    /// Releases a pending event an operator asked for (`outboxctl
    /// release`): due now (`nextAttemptAt` now) and handed to the scheduled
    /// sweep (`!<ulid>`), its attempts, error and hold kept. Conditional on
    /// it still being pending and no live claim holding it.
    fn make_due(
        &self,
        key: &ItemKey,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Marked, StoreError>> + Send;
}

/// The whole port: what `outboxctl`'s operations, and any adapter, speak.
/// Every type with the three roles has it.
pub trait OutboxStore: PublishStore + SweepStore + OperatorStore {}

impl<T: PublishStore + SweepStore + OperatorStore> OutboxStore for T {}

/// Keeps stored error text short and printable.
pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(512)
        .collect()
}
