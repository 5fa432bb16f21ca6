//! The consumer's half of the outbox. Our events arrive *at least once* and
//! in any order; this library turns that into an exactly-once *effect*:
//!
//! - each event's changes go into one `TransactWriteItems` together with a
//!   conditional put of an inbox record `PK=INBOX#<eventId>, SK=META`
//!   (`attribute_not_exists`), kept for `INBOX_TTL_SECONDS` (default 7
//!   days) by the table's TTL. The TTL must exceed the *redelivery window*,
//!   the longest time in which the same event can arrive again
//!   (`INBOX_REDELIVERY_WINDOW_SECONDS`, default 5 days: EventBridge retries
//!   a target for 24 hours, then an SQS queue keeps a message 4 days); a
//!   shorter TTL is refused, because an unguarded effect (a counter) would
//!   then count a late redelivery twice;
//! - a transaction cancelled because the inbox record exists is
//!   [`EventOutcome::Duplicate`], not an error: the event was applied before;
//! - a *version guard* applies a state-carrying event to an entity only when
//!   `attribute_not_exists(version) OR version < :eventVersion`; an event at
//!   or below the stored version is [`EventOutcome::Stale`] and changes nothing
//!   (this also holds after the inbox record expired). `Stale` is decided
//!   from the stored item's version (`ALL_OLD`), never from the failure
//!   alone: when a guarded action's *own* condition failed and the stored
//!   version is older, the event is not stale, and the commit returns
//!   [`InboxError::ConditionFailed`] (never acknowledged silently).
//!
//! # Example
//!
//! ```
//! use aws_sdk_dynamodb::types::{AttributeValue, Put, Update};
//! use inbox::{Inbox, EventOutcome};
//! use outbox_core::EventEnvelope;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let inbox = Inbox::new("read-model", inbox::DEFAULT_TTL_SECONDS)?;
//! let event = EventEnvelope::new(
//!     "CustomerRenamed", "Customer", "c-1", 3,
//!     serde_json::json!({"customerId": "c-1", "name": "Ada"}),
//! )?;
//!
//! // The entity, replaced only by a newer version of it.
//! let profile = Put::builder()
//!     .table_name("read-model")
//!     .item("PK", AttributeValue::S("PROFILE#c-1".into()))
//!     .item("SK", AttributeValue::S("META".into()))
//!     .item("name", AttributeValue::S("Ada".into()))
//!     .item("version", AttributeValue::N(event.aggregate_version.to_string()))
//!     .build()?;
//! // A counter that must move once per event, however often it arrives.
//! let renames = Update::builder()
//!     .table_name("read-model")
//!     .key("PK", AttributeValue::S("STATS".into()))
//!     .key("SK", AttributeValue::S("RENAMES".into()))
//!     .update_expression("ADD renames :one")
//!     .expression_attribute_values(":one", AttributeValue::N("1".into()))
//!     .build()?;
//!
//! let tx = inbox
//!     .begin(&event)?
//!     .guarded_put("profile", profile, event.aggregate_version)
//!     .update("renames", renames);
//! // The inbox record, the guarded put and the counter: one transaction.
//! let actions = tx.build()?;
//! assert_eq!(actions.len(), 3);
//! assert!(actions[1].put.as_ref().unwrap().condition_expression.as_deref()
//!     .unwrap().contains("< :inboxEventVersion"));
//!
//! // In the handler: `match tx.commit(&client).await? { … }`, where
//! // `EventOutcome::Duplicate` and `EventOutcome::Stale` are successes.
//! # let _ = EventOutcome::Applied;
//! # Ok(())
//! # }
//! ```
//!
//! `docs/consumer.md` shows a whole consumer, and the `projector` crate is
//! one: an SQS-triggered Lambda keeping a read model.
//!
//! # Layout
//! - [`Inbox`]: the settings (table, TTL) and the inbox record.
//! - [`InboxTransaction`]: the consumer's actions plus the inbox record, on
//!   `outbox_core`'s transaction builder (the writer's), with guarded actions.
//! - [`EventOutcome`] and [`InboxError`]: what became of an event; whether a retry
//!   can help.
//! - `claim.rs`: [`resolve`], a large event's claim check (its stub)
//!   turned into the whole envelope from S3, hash checked ([`ClaimError`]);
//!   the S3 client is the `outbox_core::claim::PayloadStore` (feature `s3`
//!   of `dynamodb-outbox-core`).

use std::collections::HashMap;
use std::time::Duration;

mod claim;

pub use claim::{resolve, ClaimError};

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, TransactWriteItem, Update,
};
use outbox_core::transaction::{
    FailedCondition, OutboxSettings, OutboxTransaction, TransactionError,
};
use outbox_core::{EventEnvelope, KeySchema};
use time::OffsetDateTime;
use ulid::Ulid;

/// The default time an inbox record is kept: 7 days.
pub const DEFAULT_TTL_SECONDS: u64 = 7 * 24 * 3600;
/// The default redelivery window: the longest time in which one event can
/// arrive again at a consumer behind an EventBridge rule and an SQS queue
/// with AWS's defaults. An EventBridge target is retried for up to 24 hours
/// (`MaximumEventAgeInSeconds`), and the queue then keeps the message, which
/// may be received again, for 4 days (`MessageRetentionPeriod`). The
/// template's projector states its own (`INBOX_REDELIVERY_WINDOW_SECONDS`,
/// equal to this, tested against its settings).
pub const DEFAULT_REDELIVERY_WINDOW_SECONDS: u64 = 24 * 3600 + 4 * 24 * 3600;
/// Longest accepted TTL: one year.
pub const MAX_TTL_SECONDS: u64 = 365 * 24 * 3600;
/// The label of the inbox record's action in the transaction.
pub const INBOX_LABEL: &str = "inbox";
/// The attribute a version guard compares, unless set otherwise.
pub const DEFAULT_VERSION_ATTRIBUTE: &str = "version";
/// The default TTL attribute (epoch seconds), as on the outbox table
/// ([`Inbox::with_keys`] names another).
pub const TTL_ATTRIBUTE: &str = outbox_core::keys::TTL_ATTRIBUTE;

/// The inbox record's partition key for an event.
pub fn inbox_pk(event_id: Ulid) -> String {
    format!("INBOX#{event_id}")
}

/// What became of one event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventOutcome {
    /// Its changes and its inbox record were committed.
    Applied,
    /// Its inbox record existed: it was applied before; nothing changed.
    Duplicate,
    /// A guarded entity already holds this version or a newer one: nothing
    /// changed, and nothing will on any redelivery.
    Stale,
    /// The consumer does not handle this event type; nothing was written.
    /// (Returned by consumers, never by [`InboxTransaction::commit`].)
    Ignored,
}

impl EventOutcome {
    /// The metric name of the outcome.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "Applied",
            Self::Duplicate => "Duplicate",
            Self::Stale => "Stale",
            Self::Ignored => "Ignored",
        }
    }
}

/// Why an event could not be applied. Nothing was written in any case.
#[derive(Debug, thiserror::Error)]
pub enum InboxError {
    /// A setting is out of range.
    #[error("invalid inbox setting: {0}")]
    Config(String),
    /// A condition of the consumer's own failed: an unguarded action's, or
    /// a guarded action's own condition while the stored version was older
    /// than the event's (so the version guard held). Each failed action
    /// comes with the item as it was (`ALL_OLD`). Not a duplicate, not
    /// stale: the event was not applied, and acknowledging it would drop it.
    #[error("condition failed on {}", .0.iter().map(|c| c.label.as_str()).collect::<Vec<_>>().join(", "))]
    ConditionFailed(Vec<FailedCondition>),
    /// The transaction failed; [`InboxError::is_retryable`] says whether a
    /// retry can help.
    #[error(transparent)]
    Transaction(#[from] TransactionError),
    /// A claim-checked event's payload could not be read ([`resolve`]).
    #[error(transparent)]
    Claim(#[from] ClaimError),
}

impl InboxError {
    /// Whether delivering the event again later may succeed (throttling,
    /// conflicts with concurrent transactions, network errors). Validation
    /// errors and failed conditions of the consumer's own actions will fail
    /// the same way again.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Transaction(e) => e.is_retryable(),
            Self::Claim(e) => e.is_retryable(),
            Self::Config(_) | Self::ConditionFailed(_) => false,
        }
    }

    /// The failed condition of the action labelled `label`, with its item.
    pub fn failed_condition(&self, label: &str) -> Option<&FailedCondition> {
        match self {
            Self::ConditionFailed(failed) => failed.iter().find(|c| c.label == label),
            _ => None,
        }
    }
}

/// The inbox's settings: the table the inbox records live in (the
/// consumer's own table) and how long they are kept.
#[derive(Debug, Clone)]
pub struct Inbox {
    table: String,
    ttl: Duration,
    version_attribute: String,
    keys: KeySchema,
}

impl Inbox {
    /// An inbox in `table` keeping records `ttl_seconds`, which must exceed
    /// [`DEFAULT_REDELIVERY_WINDOW_SECONDS`] (and be at most
    /// [`MAX_TTL_SECONDS`]).
    pub fn new(table: impl Into<String>, ttl_seconds: u64) -> Result<Self, InboxError> {
        Self::with_redelivery_window(table, ttl_seconds, DEFAULT_REDELIVERY_WINDOW_SECONDS)
    }

    /// An inbox in `table` keeping records `ttl_seconds`, for a consumer in
    /// which one event can arrive again up to `window_seconds` after it
    /// first did (its source's retry period plus its queue's retention). The
    /// TTL must exceed the window: an inbox record that expires first lets
    /// a redelivery apply an unguarded effect twice.
    pub fn with_redelivery_window(
        table: impl Into<String>,
        ttl_seconds: u64,
        window_seconds: u64,
    ) -> Result<Self, InboxError> {
        let table = table.into();
        if table.is_empty() {
            return Err(InboxError::Config("the table name is empty".into()));
        }
        if ttl_seconds <= window_seconds || ttl_seconds > MAX_TTL_SECONDS {
            return Err(InboxError::Config(format!(
                "INBOX_TTL_SECONDS must be more than the redelivery window \
                 ({window_seconds} s, INBOX_REDELIVERY_WINDOW_SECONDS) and at most \
                 {MAX_TTL_SECONDS}, got {ttl_seconds}"
            )));
        }
        Ok(Self {
            table,
            ttl: Duration::from_secs(ttl_seconds),
            version_attribute: DEFAULT_VERSION_ATTRIBUTE.to_owned(),
            keys: KeySchema::default(),
        })
    }

    /// From `TABLE_NAME`, `INBOX_TTL_SECONDS` and
    /// `INBOX_REDELIVERY_WINDOW_SECONDS` (both optional) as `lookup`
    /// returns them (`std::env::var(..).ok()` in a function).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, InboxError> {
        let table = lookup("TABLE_NAME")
            .ok_or_else(|| InboxError::Config("TABLE_NAME is not set".into()))?;
        let number = |name: &str, default: u64| match lookup(name) {
            None => Ok(default),
            Some(text) => text
                .trim()
                .parse()
                .map_err(|_| InboxError::Config(format!("{name} is not a number: {text:?}"))),
        };
        let ttl = number("INBOX_TTL_SECONDS", DEFAULT_TTL_SECONDS)?;
        let window = number(
            "INBOX_REDELIVERY_WINDOW_SECONDS",
            DEFAULT_REDELIVERY_WINDOW_SECONDS,
        )?;
        let keys =
            KeySchema::from_lookup(&lookup).map_err(|e| InboxError::Config(e.to_string()))?;
        Ok(Self::with_redelivery_window(table, ttl, window)?.with_keys(keys))
    }

    /// From the process environment: see [`Inbox::from_lookup`].
    pub fn from_env() -> Result<Self, InboxError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The consumer's table keys its items with `schema`'s partition and
    /// sort key names and expires them on its TTL attribute (the defaults:
    /// `PK`, `SK`, `expiresAt`).
    pub fn with_keys(mut self, schema: KeySchema) -> Self {
        self.keys = schema;
        self
    }

    /// Guards compare this attribute instead of `version`.
    pub fn with_version_attribute(mut self, name: impl Into<String>) -> Self {
        self.version_attribute = name.into();
        self
    }

    /// The table the inbox records go to.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// How long an inbox record lives.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The inbox record of `event`, processed at `now`: a put that fails if
    /// the record exists. It holds ids and times only, never the payload.
    pub fn record(&self, event: &EventEnvelope, now: OffsetDateTime) -> Result<Put, InboxError> {
        let expires = now
            .unix_timestamp()
            .saturating_add(self.ttl.as_secs() as i64);
        let mut item = HashMap::from([
            (
                self.keys.partition_key.clone(),
                AttributeValue::S(inbox_pk(event.event_id)),
            ),
            (self.keys.sort_key.clone(), AttributeValue::S("META".into())),
            (
                "eventId".to_owned(),
                AttributeValue::S(event.event_id.to_string()),
            ),
            (
                "eventType".to_owned(),
                AttributeValue::S(event.event_type.clone()),
            ),
            (
                "aggregateVersion".to_owned(),
                AttributeValue::N(event.aggregate_version.to_string()),
            ),
            (
                self.keys.ttl_attribute.clone(),
                AttributeValue::N(expires.to_string()),
            ),
        ]);
        if let Ok(at) = now.format(&time::format_description::well_known::Rfc3339) {
            item.insert("processedAt".to_owned(), AttributeValue::S(at));
        }
        Put::builder()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression(self.keys.absent())
            .expression_attribute_names(self.keys.absent_name().0, self.keys.absent_name().1)
            .build()
            .map_err(|e| InboxError::Config(format!("inbox record: {e}")))
    }

    /// A transaction for `event` that starts with its inbox record.
    pub fn begin(&self, event: &EventEnvelope) -> Result<InboxTransaction, InboxError> {
        let settings = OutboxSettings::new(
            &self.table,
            outbox_core::size::EventLimits::eventbridge("inbox"),
            1,
        )
        .with_keys(self.keys.clone());
        self.begin_with_outbox(&settings, event)
    }

    /// The same, for a consumer that also writes outbox events of its own
    /// ([`InboxTransaction::event`]) under `settings`.
    pub fn begin_with_outbox(
        &self,
        settings: &OutboxSettings,
        event: &EventEnvelope,
    ) -> Result<InboxTransaction, InboxError> {
        let record = self.record(event, OffsetDateTime::now_utc())?;
        Ok(InboxTransaction {
            tx: OutboxTransaction::new(settings).put(INBOX_LABEL, record),
            guarded: Vec::new(),
            version_attribute: self.version_attribute.clone(),
        })
    }
}

/// One event's changes and its inbox record: one `TransactWriteItems`.
///
/// Actions added with [`guarded_put`](Self::guarded_put) or
/// [`guarded_update`](Self::guarded_update) carry the version guard; when
/// only guarded conditions fail, the event is [`EventOutcome::Stale`]. The
/// transaction's own checks apply (100 actions, 4 MB, one action per item).
#[derive(Debug, Clone)]
pub struct InboxTransaction {
    tx: OutboxTransaction,
    /// Each guarded action's label and the version it carries.
    guarded: Vec<(String, u64)>,
    version_attribute: String,
}

impl InboxTransaction {
    /// Adds a put.
    pub fn put(mut self, label: &str, put: Put) -> Self {
        self.tx = self.tx.put(label, put);
        self
    }

    /// Adds an update.
    pub fn update(mut self, label: &str, update: Update) -> Self {
        self.tx = self.tx.update(label, update);
        self
    }

    /// Adds a condition check.
    pub fn condition_check(mut self, label: &str, check: ConditionCheck) -> Self {
        self.tx = self.tx.condition_check(label, check);
        self
    }

    /// Adds a delete.
    pub fn delete(mut self, label: &str, delete: Delete) -> Self {
        self.tx = self.tx.delete(label, delete);
        self
    }

    /// Adds an outbox event of the consumer's own, committed with the
    /// rest (a consumer that is also a producer). The event goes to the
    /// outbox table of the settings given to [`Inbox::begin_with_outbox`]
    /// (by default, the inbox's table).
    pub fn event(mut self, pk: &str, event: &EventEnvelope) -> Self {
        self.tx = self.tx.event(pk, event);
        self
    }

    /// Adds a put applied only when the stored item has no version or an
    /// older one than `version` (the put's own condition, if any, must hold
    /// too). The put should store `version`.
    pub fn guarded_put(mut self, label: &str, mut put: Put, version: u64) -> Self {
        guard(
            &mut put.condition_expression,
            &mut put.expression_attribute_names,
            &mut put.expression_attribute_values,
            &self.version_attribute,
            version,
        );
        self.guarded.push((label.to_owned(), version));
        self.tx = self.tx.put(label, put);
        self
    }

    /// Adds an update applied only when the stored item has no version or
    /// an older one than `version`. The update should set the version.
    pub fn guarded_update(mut self, label: &str, mut update: Update, version: u64) -> Self {
        guard(
            &mut update.condition_expression,
            &mut update.expression_attribute_names,
            &mut update.expression_attribute_values,
            &self.version_attribute,
            version,
        );
        self.guarded.push((label.to_owned(), version));
        self.tx = self.tx.update(label, update);
        self
    }

    /// Checks every limit and returns the actions that would be sent.
    pub fn build(&self) -> Result<Vec<TransactWriteItem>, InboxError> {
        Ok(self.tx.build()?)
    }

    /// Sends the transaction and classifies a cancellation: the inbox
    /// record's condition → [`EventOutcome::Duplicate`] (whatever else failed);
    /// only guarded actions whose stored item holds this version or a newer
    /// one (read from `ALL_OLD`) → [`EventOutcome::Stale`]; anything else,
    /// including a guarded action's own condition failing on an older
    /// item → [`InboxError::ConditionFailed`] with the items as they were.
    /// `table` is the SDK client, or any other
    /// [`ItemTable`](outbox_core::table::ItemTable) (`MemoryTable` in unit tests).
    pub async fn commit(
        self,
        table: &impl outbox_core::table::ItemTable,
    ) -> Result<EventOutcome, InboxError> {
        let guarded = self.guarded;
        match self.tx.send(table).await {
            Ok(_) => Ok(EventOutcome::Applied),
            Err(TransactionError::ConditionFailed(failed)) => {
                classify(failed, &guarded, &self.version_attribute)
            }
            Err(e) => Err(InboxError::Transaction(e)),
        }
    }
}

fn classify(
    failed: Vec<FailedCondition>,
    guarded: &[(String, u64)],
    version_attribute: &str,
) -> Result<EventOutcome, InboxError> {
    // The version guard failed only if the stored item holds the event's
    // version or a newer one; otherwise the action's own condition did.
    let guard_failed = |c: &FailedCondition| {
        let Some((_, version)) = guarded.iter().find(|(label, _)| *label == c.label) else {
            return false;
        };
        let stored = c
            .item
            .as_ref()
            .and_then(|item| item.get(version_attribute))
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse::<u64>().ok());
        matches!(stored, Some(stored) if stored >= *version)
    };
    if failed.iter().any(|c| c.label == INBOX_LABEL) {
        Ok(EventOutcome::Duplicate)
    } else if !failed.is_empty() && failed.iter().all(guard_failed) {
        Ok(EventOutcome::Stale)
    } else {
        Err(InboxError::ConditionFailed(failed))
    }
}

type Names = HashMap<String, String>;
type Values = HashMap<String, AttributeValue>;

/// `(<condition>) AND (attribute_not_exists(#v) OR #v < :v)`, in place,
/// with the placeholders added to the action's maps.
fn guard(
    condition: &mut Option<String>,
    names: &mut Option<Names>,
    values: &mut Option<Values>,
    attribute: &str,
    version: u64,
) {
    names
        .get_or_insert_with(Names::new)
        .insert("#inboxVersion".into(), attribute.to_owned());
    values.get_or_insert_with(Values::new).insert(
        ":inboxEventVersion".into(),
        AttributeValue::N(version.to_string()),
    );
    let guard = "(attribute_not_exists(#inboxVersion) OR #inboxVersion < :inboxEventVersion)";
    *condition = Some(match condition.take() {
        Some(c) if !c.trim().is_empty() => format!("({c}) AND {guard}"),
        _ => guard.to_owned(),
    });
}

#[cfg(test)]
mod tests;
