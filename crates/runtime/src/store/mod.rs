//! The outbox store: every read and write that the publisher, the sweeper
//! and the operator commands make on outbox items, their two sparse indexes
//! and the settings item. The port is split by the role that uses it
//! ([`PublishStore`]: the relay; [`SweepStore`]: the scheduled sweep;
//! [`OperatorStore`]: the operator's commands; [`OutboxStore`]: all three),
//! with two adapters.
//!
//! # Layout
//! - this file: the three role traits and the types they speak in.
//! - `dynamo/`: [`DynamoStore`], the DynamoDB adapter: `mod.rs` (the client,
//!   calls, conditions, codecs, and [`DynamoStore::adopt`], a lost region's
//!   items handed over), one file per role (`publish.rs`, `sweep.rs`,
//!   `operator.rs`).
//! - `memory/`: [`MemoryStore`] (feature `testing`), one in-memory store
//!   that the unit tests, benches and examples share; `roles.rs` implements
//!   the three roles.
//!
//! Every write is either a delete (harmless when the item is already gone)
//! or an update conditioned on the item still existing in the state it
//! expects, so nothing here can resurrect an item another process deleted.
//! Every call is bounded by the caller's [`Deadline`]; whole calls are
//! retried by the SDK only ([`crate::aws`]), unprocessed batch items by
//! [`crate::retry::RetryPolicy`].

mod dynamo;
#[cfg(any(test, feature = "testing"))]
mod memory;

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::types::AttributeValue;
use serde::Serialize;
use ulid::Ulid;

use crate::config::RecordedSettings;
use crate::retry::Deadline;
use outbox_core::keys::ItemKey;
use outbox_core::OutboxItem;

pub use dynamo::{record_shard_count, DynamoStore};
#[cfg(any(test, feature = "testing"))]
pub use memory::{MemoryStore, WriteLog};

/// Most requests in one `BatchWriteItem`.
pub const MAX_BATCH_WRITE: usize = 25;

/// Most keys in one `BatchGetItem`.
pub(crate) const MAX_BATCH_GET: usize = 100;

/// A store call failed (after the SDK's retries, or cut by the deadline).
#[derive(Debug, Clone, thiserror::Error)]
#[error("outbox store {operation} failed: {code}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
pub struct StoreError {
    /// What the store was doing.
    pub operation: &'static str,
    /// The service's error code (from the SDK's error metadata), or ours
    /// (`DeadlineReached`, `NoOldItem`).
    pub code: String,
    /// The service's message, when it gave one.
    pub message: Option<String>,
}

impl StoreError {
    pub(crate) fn new(operation: &'static str, code: impl Into<String>) -> Self {
        Self {
            operation,
            code: code.into(),
            message: None,
        }
    }
}

/// Which index an adopted item was found in (`outboxctl adopt-region`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdoptedFrom {
    /// Pending: the sweeper publishes it.
    Pending,
    /// Dead-lettered: it stays dead-lettered, in this region's index, for
    /// an operator to redrive or discard.
    DeadLetter,
}

/// What became of an item found in another region's keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdoptOutcome {
    /// Moved to this region's keys.
    Adopted,
    /// `--dry-run`: it would have been moved.
    WouldAdopt,
    /// Gone meanwhile (published and deleted by its region, or moved by
    /// another run): nothing written, nothing resurrected.
    Gone,
}

/// One item handed over from another region (or from the keys without a
/// region) to this store's home region: the audit line of
/// `outboxctl adopt-region`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Adoption {
    /// The item's key.
    pub key: ItemKey,
    /// Its event id, when the item has one.
    pub event_id: Option<String>,
    /// The index it was found in.
    pub index: AdoptedFrom,
    /// What was done.
    pub outcome: AdoptOutcome,
}

/// What a conditional write found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Marked {
    /// The item was written.
    Updated,
    /// The item was gone (published and deleted by someone else) or no
    /// longer in the state the write expects; nothing was written.
    Gone,
}

/// An item to dead-letter.
#[derive(Debug, Clone, Copy)]
pub struct DeadLetter<'a> {
    /// The item.
    pub key: &'a ItemKey,
    /// The aggregate (it picks the dead-letter shard); the partition key
    /// stands in when the item does not decode.
    pub aggregate_id: Option<&'a str>,
    /// Why: recorded on the item, sanitized.
    pub reason: &'a str,
    /// Attempts to record, when the sweeper gives up.
    pub attempts: Option<u32>,
    /// The token of the claim the writer holds on it (a sweeper run), if
    /// any: the write leaves an item that another run's live claim holds
    /// alone ([`Marked::Gone`]), so a claim is cleared only by its owner.
    pub claim: Option<&'a str>,
}

/// Where in a shard of the pending index to read, by creation time (the
/// ULID sort key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// Created before this id (the stranded ones).
    Before(Ulid),
    /// Created between these ids, both included (an OnFailure window).
    Between(Ulid, Ulid),
    /// Redriven items only (their sort keys are `!<ulid>`): due at once.
    Redriven,
    /// The whole shard (the operator's status).
    Any,
}

/// A query of one shard of the pending index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingQuery {
    /// The shard of the index.
    pub shard: u16,
    /// Which creation times.
    pub created: Created,
    /// Items read per page.
    pub limit: i32,
}

/// Where a paged query goes on.
pub type Cursor = HashMap<String, AttributeValue>;

/// A pending item as read from the index.
// Nearly every value is an item: boxing it would cost an allocation per
// event to shrink the rare other variant.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum PendingItem {
    /// It decodes.
    Item(OutboxItem),
    /// It does not decode: it can never be published, it is dead-lettered.
    Undecodable {
        /// Its primary key.
        key: ItemKey,
        /// The event id its sort key carries, read with the table's key
        /// schema (its own `OUTBOX_PREFIX`), when the sort key is one.
        event_id: Option<Ulid>,
        /// What did not decode.
        reason: String,
    },
}

/// One page of pending items, oldest first.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// The items, oldest first.
    pub items: Vec<PendingItem>,
    /// Items DynamoDB read for this page (its read cost).
    pub scanned: usize,
    /// Where the next page starts; `None` after the last.
    pub next: Option<Cursor>,
}

/// What one shard holds, read at a bounded cost.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardStats {
    /// The oldest pending event id (one item read).
    pub oldest: Option<Ulid>,
    /// Pending items counted, at most the count limit.
    pub pending: usize,
    /// Whether `pending` stopped at the limit (then it is a lower bound).
    pub pending_capped: bool,
    /// Dead letters counted, at most the count limit.
    pub dead_letters: usize,
    /// Whether `dead_letters` stopped at the limit.
    pub dead_letters_capped: bool,
    /// Items DynamoDB read.
    pub scanned: usize,
    /// Queries sent.
    pub queries: usize,
}

/// A dead letter as the dead-letter index holds it.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterRecord {
    /// The event id (the index's sort key).
    pub event_id: String,
    /// The event type, empty when the item does not decode.
    pub event_type: String,
    /// The aggregate, empty when the item does not decode.
    pub aggregate_id: String,
    /// Failed attempts recorded.
    pub attempts: u32,
    /// Why it was dead-lettered.
    pub reason: String,
    /// When (RFC 3339).
    pub dead_lettered_at: String,
    /// The item's primary key.
    #[serde(skip)]
    pub key: ItemKey,
    /// The shard of both indexes it belongs to.
    #[serde(skip)]
    pub shard: u16,
    /// The stored envelope (JSON text), when there is one.
    #[serde(skip)]
    pub envelope: Option<String>,
}

/// A claim on a dead letter: a token only its holder knows, and when it
/// lapses (epoch seconds), so that a claim whose holder died does not hold
/// the dead letter for ever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claim {
    /// Names the holder (a fresh ULID per run).
    pub token: String,
    /// Epoch seconds after which the claim no longer holds.
    pub until: i64,
}

impl Claim {
    /// A new claim lasting `lease`.
    pub fn new(lease: std::time::Duration) -> Self {
        Self {
            token: Ulid::new().to_string(),
            until: outbox_core::now_utc_millis().unix_timestamp() + lease.as_secs() as i64,
        }
    }
}

/// One page of a shard's dead letters, oldest first.
#[derive(Debug, Clone, Default)]
pub struct DeadLetterPage {
    /// The dead letters.
    pub items: Vec<DeadLetterRecord>,
    /// Where the next page starts; `None` after the last.
    pub next: Option<Cursor>,
}

/// What one guard read ([`PublishStore::collection_below`]) saw of an item
/// collection: the outbox sort keys at or below `top`, newest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CollectionRead {
    /// The sort key the read started from.
    pub top: String,
    /// The outbox sort keys it returned, newest first.
    pub keys: Vec<String>,
    /// Whether the collection holds no outbox item below the last of
    /// `keys` (the read was not cut by its limit).
    pub complete: bool,
    /// Those of `keys` that this store's region must not publish: another
    /// region's (global tables: adopted by it, say), or dead-lettered. They
    /// still count as older events.
    pub not_ours: Vec<String>,
}

/// What a [`CollectionRead`] proves about one event of the collection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guarded {
    /// The event's own item is still in the table, and still this
    /// region's to publish (an event already deleted was published: it is
    /// not published again; one another region adopted is that region's;
    /// a dead letter is the operator's).
    pub present: bool,
    /// The nearest older outbox item of its aggregate in the table, if any.
    pub older: Option<String>,
}

impl CollectionRead {
    /// What the read proves about the event of sort key `sk`: `None` when
    /// it does not cover it (`sk` above the read's top, or the read stopped
    /// at its limit before reaching below `sk`).
    pub fn about(&self, sk: &str) -> Option<Guarded> {
        if sk > self.top.as_str() {
            return None;
        }
        let present = self.keys.iter().any(|k| k == sk) && !self.not_ours.iter().any(|k| k == sk);
        let older = self.keys.iter().find(|k| k.as_str() < sk).cloned();
        if older.is_none() && !self.complete {
            return None;
        }
        Some(Guarded { present, older })
    }
}

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
    /// this store's. [`Marked::Gone`] when it is not: published and
    /// deleted meanwhile (the pending index is read eventually consistent),
    /// dead-lettered, or claimed by a concurrent run (two OnFailure windows
    /// that overlap, a scheduled sweep beside a redrive): then this run
    /// leaves it, so no two sweeper runs publish one event. A failed attempt,
    /// a hold and a dead letter clear the claim.
    fn claim_pending(
        &self,
        key: &ItemKey,
        claim: &Claim,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Marked, StoreError>> + Send;

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
    /// region's record, [`outbox_core::keys::stack_settings_key`]), for
    /// [`OperatorStore::recorded_settings`].
    fn record_settings(
        &self,
        settings: &RecordedSettings,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
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

    /// Every settings record in the table, of every region and function
    /// (one consistent `Query`). Only the table's partition and sort key
    /// names matter to it, so an operator's tool can read them before it
    /// knows the rest of the schema.
    fn recorded_settings(
        &self,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Vec<RecordedSettings>, StoreError>> + Send;
}

/// The whole port: what `outboxctl`'s operations, and any adapter, speak.
/// Every type with the three roles has it.
pub trait OutboxStore: PublishStore + SweepStore + OperatorStore {}

impl<T: PublishStore + SweepStore + OperatorStore> OutboxStore for T {}

/// Keeps stored error text short and printable.
pub(crate) fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(512)
        .collect()
}
