//! The types the store's role traits speak in: errors, pages, claims, dead
//! letters, adoption results and the strict guard's collection reads.

use std::collections::HashMap;

use serde::Serialize;
use ulid::Ulid;

use outbox_core::keys::ItemKey;
use outbox_core::OutboxItem;

/// Most requests in one `BatchWriteItem`.
pub const MAX_BATCH_WRITE: usize = 25;

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
    /// A failure of `operation` with the service's (or our own) error code.
    pub fn new(operation: &'static str, code: impl Into<String>) -> Self {
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
    /// Nothing was written: another run's live claim holds the item, still
    /// pending in the index the stack reads. That run finishes it (or its
    /// claim lapses and the next sweep does).
    Claimed,
    /// Nothing was written and the item is still there, outside what the
    /// write expects and in nobody's hands: not in the pending index this
    /// stack reads (its keys missing, under other names, or another
    /// region's), or not a dead letter. A bookkeeping write that meets it
    /// has failed: the caller reports it, never counts it as done.
    Refused,
}

/// What a sweeper run's claim on a pending event found
/// ([`PublishStore::claim_pending`](super::PublishStore::claim_pending)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ClaimOutcome {
    /// Claimed: this run publishes it.
    Claimed,
    /// Another run's live claim holds it: that run is publishing it (or
    /// died, and the claim lapses). A window that meets one is not settled.
    ClaimedElsewhere,
    /// Not pending any more: published and deleted meanwhile (the pending
    /// index is read eventually consistent), dead-lettered, or (global
    /// tables) another region's. Nothing is left to do for it.
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

/// Where a paged query goes on: the last key a page read, attribute by
/// attribute, as the store gave it (DynamoDB's `LastEvaluatedKey`; the
/// memory store's last sort key). Opaque to the engine.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Cursor(pub HashMap<String, KeyValue>);

/// One attribute of a [`Cursor`]: a key attribute is a string, a number or
/// bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyValue {
    /// A string.
    S(String),
    /// A number, in its decimal text.
    N(String),
    /// Bytes.
    B(Vec<u8>),
}

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

/// What one guard read ([`super::PublishStore::collection_below`]) saw of an item
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
