//! The publishing engine, apart from AWS: what turns committed outbox items
//! into published events and handles every outcome, written against two
//! ports, with no AWS SDK in its dependencies. The runtime
//! (`outbox_runtime`) holds the adapters (DynamoDB, EventBridge, SNS) and
//! the functions' plumbing; the publisher, the sweeper and `outboxctl` run
//! this engine through them. Not an API: its items serve this repository's
//! functions and may change in any release.
//!
//! # Layout
//! - `sink.rs`: the sink port, [`EventSink`]: one call publishes one batch
//!   already within the sink's limits and says, per entry and in order,
//!   what happened ([`EntryOutcome`], [`PublishFailure`], [`FailureKind`]);
//!   [`SendCounter`], the transmissions of a call.
//! - `claim.rs`: [`ClaimChecked`], a sink resolving claim-checked events
//!   (their object read through `outbox_core::claim::PayloadStore`, its
//!   hash checked; whole when it fits the sink, else the claim check; a
//!   missing or altered object poison).
//! - `store/`: the store port, by role ([`PublishStore`]: the relay;
//!   [`SweepStore`]: the scheduled sweep; [`OperatorStore`]: the operator's
//!   commands; [`OutboxStore`]: all three), the types they speak in
//!   ([`StoreError`], [`PendingItem`], [`CollectionRead`], …), and
//!   `memory/`: [`MemoryStore`] (feature `testing`).
//! - `relay/`: [`Relay`], the one place that publishes and handles what
//!   happened (batching, waves, in-call retries, deleting the published,
//!   dead-lettering the poison, recording or reporting the failed, strict
//!   order per aggregate), for the publisher, the sweeper and the
//!   operator's `redrive --now` alike: they differ only in the [`Mode`].
//! - `sweep/`: [`Sweeper`], the scheduled sweep of what the stream left
//!   behind and the redrive of an abandoned batch's [`Window`], through the
//!   relay in sweep mode; [`SweepReport`], what a run did and saw.
//! - `redrive.rs`: [`redrive_now`], the operator's `dead-letters redrive
//!   --now` of one dead letter (claim, older-event check, the relay in
//!   operator mode, release).
//! - `ordering.rs`: [`Ordering`], strict or relaxed order per aggregate.
//! - `retry.rs`: [`Backoff`], the persisted and in-call retry delays;
//!   [`Deadline`], which bounds every call; [`RetryPolicy`], the retries of
//!   what a successful call left undone (failed entries, unprocessed
//!   items).
//! - `fake.rs`: [`FakeSink`] (feature `testing`), the one configurable sink
//!   of the unit tests, benches and tests of other crates.
//!
//! The rule "is this item due" is `outbox_core::OutboxItem::is_due`, and
//! the key schema is `outbox_core::keys`: both are the contract's, shared
//! with the writer.

mod claim;
#[cfg(any(test, feature = "testing"))]
mod fake;
mod ordering;
mod redrive;
mod relay;
mod retry;
mod sink;
mod store;
mod sweep;

pub use claim::{
    ClaimChecked, CONCURRENT_READS, PAYLOAD_MISMATCH, PAYLOAD_MISSING, PAYLOAD_TOO_LARGE,
};
#[cfg(any(test, feature = "testing"))]
pub use fake::FakeSink;
pub use ordering::{Ordering, DEFAULT_SEND_CONCURRENCY};
pub use redrive::{redrive_now, RedriveNow, REDRIVE_CLAIM_LEASE};
pub use relay::{Entry, Mode, Relay, RelayOutcome, RelayReport, FINISH_GRACE, MAX_SENDS_PER_ENTRY};
pub use retry::{Backoff, Deadline, Jitter, RetryPolicy};
pub use sink::{
    answered, EntryOutcome, EventSink, FailureKind, PublishFailure, SendCounter, SinkError,
    DEADLINE_REACHED, NOT_DELETED,
};
pub use store::{
    sanitize, AdoptOutcome, AdoptedFrom, Adoption, Claim, ClaimOutcome, CollectionRead, Created,
    Cursor, DeadLetter, DeadLetterPage, DeadLetterRecord, Guarded, KeyValue, Marked, OperatorStore,
    OutboxStore, Page, PendingItem, PendingQuery, PublishStore, ShardStats, StoreError, SweepStore,
    MAX_BATCH_WRITE,
};
#[cfg(any(test, feature = "testing"))]
pub use store::{MemoryStore, WriteLog};
pub use sweep::{
    OnFailureMessage, RequestContext, StreamBatchInfo, SweepReport, SweepSettings, Sweeper, Window,
};
