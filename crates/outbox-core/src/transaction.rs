//! [`OutboxTransaction`]: the caller's writes and their outbox events in one
//! `TransactWriteItems`.

use std::collections::HashMap;

use crate::size::{self, MAX_TRANSACTION_ACTIONS, MAX_TRANSACTION_BYTES};
use crate::table::ItemTable;
use crate::{EventEnvelope, OutboxError, OutboxItem};
use aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError;
use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};
use aws_smithy_runtime_api::client::result::SdkError;
use ulid::Ulid;

mod settings;

pub use settings::{FromStack, OutboxSettings, StackSettingsError};

/// One condition that failed, with the item as it was (`ALL_OLD`), when it
/// existed.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedCondition {
    /// Position of the action in the transaction.
    pub index: usize,
    /// The label the caller gave the action.
    pub label: String,
    /// The item that failed the check, without an extra read; `None` when
    /// the item did not exist.
    pub item: Option<HashMap<String, AttributeValue>>,
}

/// Why a transaction was not committed. Nothing was written in any case.
#[derive(Debug, thiserror::Error)]
pub enum TransactionError {
    /// Nothing to write.
    #[error("the transaction has no actions")]
    Empty,
    /// More actions than one `TransactWriteItems` takes.
    #[error("the transaction has {count} actions; DynamoDB allows {limit}")]
    TooManyActions {
        /// Actions in the transaction.
        count: usize,
        /// DynamoDB's limit.
        limit: usize,
    },
    /// Larger than one `TransactWriteItems` takes.
    #[error("the transaction is about {size} bytes; DynamoDB allows {limit}")]
    TooLarge {
        /// Its estimated size.
        size: usize,
        /// DynamoDB's limit.
        limit: usize,
    },
    /// Two actions name the same item.
    #[error("actions `{first}` and `{second}` write the same item")]
    DuplicateItem {
        /// The first action's label.
        first: String,
        /// The second action's label.
        second: String,
    },
    /// The idempotency token is not 1 to 36 characters.
    #[error("idempotency token must be 1 to 36 characters")]
    InvalidToken,
    /// An event could not be stored.
    #[error(transparent)]
    Event(#[from] OutboxError),
    /// A condition failed: which actions, with the items that failed them.
    #[error("condition failed on {}", .0.iter().map(|c| c.label.as_str()).collect::<Vec<_>>().join(", "))]
    ConditionFailed(Vec<FailedCondition>),
    /// Another transaction was writing the same item.
    #[error("transaction conflicted with another one on `{label}`; retry")]
    Conflict {
        /// The action on the contended item.
        label: String,
    },
    /// DynamoDB throttled the call.
    #[error("request was throttled; retry later")]
    Throttled,
    /// The token was used with other parameters within 10 minutes.
    #[error("the idempotency token was used with different parameters")]
    IdempotentParameterMismatch,
    /// A transaction with this token has not finished yet.
    #[error("a transaction with this idempotency token is still in progress")]
    InProgress,
    /// Cancelled for another reason.
    #[error("DynamoDB rejected the transaction: {code}: {message}")]
    Rejected {
        /// The cancellation reason's code.
        code: String,
        /// Its message.
        message: String,
    },
    /// The call failed below the service (connection, timeout, an
    /// unexpected service error); the SDK's error is the source.
    #[error("the DynamoDB call failed")]
    Aws(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// An event is claim-checked ([`crate::claim`]) and the transaction
    /// was sent without a payload store: use
    /// [`OutboxTransaction::send_with_payloads`].
    #[error("event {event_id} is stored in S3 first (a claim check): send the transaction with send_with_payloads")]
    NoPayloadStore {
        /// The first claim-checked event.
        event_id: Ulid,
    },
    /// A claim-checked event's object could not be stored: nothing was
    /// committed (objects stored before it are orphans, which the bucket's
    /// lifecycle rule expires).
    #[error("the payload of event {event_id} was not stored in S3: {source}")]
    Payload {
        /// The event.
        event_id: Ulid,
        /// What S3 answered.
        #[source]
        source: crate::claim::PayloadError,
    },
}

impl TransactionError {
    /// The refusal's code, the same in every writer package.
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty => "Empty",
            Self::TooManyActions { .. } => "TooManyActions",
            Self::TooLarge { .. } => "TooLarge",
            Self::DuplicateItem { .. } => "DuplicateItem",
            Self::InvalidToken => "InvalidToken",
            Self::Event(e) => e.code(),
            Self::ConditionFailed(_) => "ConditionFailed",
            Self::Conflict { .. } => "Conflict",
            Self::Throttled => "Throttled",
            Self::IdempotentParameterMismatch => "IdempotentParameterMismatch",
            Self::InProgress => "InProgress",
            Self::Rejected { .. } => "Rejected",
            Self::Aws(_) => "Aws",
            Self::NoPayloadStore { .. } => "NoPayloadStore",
            Self::Payload { .. } => "PayloadNotStored",
        }
    }
}

impl TransactionError {
    /// The failed condition of the action labelled `label`, if that is why
    /// the transaction was cancelled.
    pub fn failed_condition(&self, label: &str) -> Option<&FailedCondition> {
        match self {
            Self::ConditionFailed(failed) => failed.iter().find(|c| c.label == label),
            _ => None,
        }
    }

    /// Whether retrying the same transaction later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::Conflict { .. } | Self::Throttled | Self::InProgress | Self::Aws(_)
        ) || matches!(
            self,
            Self::Payload {
                source: crate::claim::PayloadError::Failed {
                    transient: true,
                    ..
                },
                ..
            }
        )
    }
}

/// A committed transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// The ids of the events written, in the order they were added.
    pub event_ids: Vec<Ulid>,
}

#[derive(Debug, Clone)]
struct Action {
    label: String,
    item: TransactWriteItem,
    identity: Option<String>,
    size: usize,
}

/// Builds one `TransactWriteItems` from the caller's puts, updates, condition
/// checks and deletes plus one or more outbox events, and sends it. Limits
/// are checked before the call (100 actions, 4 MB, one action per item, the
/// event and item size limits); every action returns the old item when its
/// condition fails (`ReturnValuesOnConditionCheckFailure: ALL_OLD`), so the
/// error says which condition failed and on what, without another read.
///
/// Errors from the builder methods are kept and returned by
/// [`build`](Self::build) and [`send`](Self::send), so calls chain.
///
/// # Example
///
/// ```
/// use aws_sdk_dynamodb::types::{AttributeValue, Put};
/// use outbox_core::EventEnvelope;
/// use outbox_core::size::EventLimits;
/// use outbox_core::transaction::{OutboxSettings, OutboxTransaction, TransactionError};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let settings = OutboxSettings::new("orders", EventLimits::eventbridge("outbox.orders"), 8);
/// let invoice = Put::builder()
///     .table_name("orders")
///     .item("PK", AttributeValue::S("INVOICE#42".into()))
///     .item("SK", AttributeValue::S("META".into()))
///     .condition_expression("attribute_not_exists(PK)")
///     .build()?;
/// let event = EventEnvelope::new(
///     "InvoiceIssued", "Invoice", "42", 1,
///     serde_json::json!({"invoiceId": "42", "amountCents": 1200}),
/// )?;
///
/// let tx = OutboxTransaction::new(&settings)
///     .put("invoice", invoice)
///     .event("INVOICE#42", &event)
///     .idempotency_token("invoice-42-issue");
/// // `build` checks the limits and returns what `send(&client)` would send.
/// let actions = tx.build()?;
/// assert_eq!(actions.len(), 2);
///
/// // Two actions on one item are refused before any call.
/// let same = Put::builder()
///     .table_name("orders")
///     .item("PK", AttributeValue::S("INVOICE#42".into()))
///     .item("SK", AttributeValue::S("META".into()))
///     .build()?;
/// let twice = OutboxTransaction::new(&settings)
///     .put("a", same.clone())
///     .put("b", same);
/// assert!(matches!(twice.build(), Err(TransactionError::DuplicateItem { .. })));
/// # Ok(())
/// # }
/// ```
///
/// Sending it is one call: `let committed = tx.send(&client).await?;`.
#[derive(Debug, Clone)]
pub struct OutboxTransaction {
    settings: OutboxSettings,
    actions: Vec<Action>,
    event_ids: Vec<Ulid>,
    offloads: Vec<crate::claim::Offload>,
    token: Option<String>,
    error: Option<TransactionErrorSeed>,
}

// `TransactionError` is not `Clone` (it may wrap SDK text); the builder keeps
// only the kinds it can produce itself.
#[derive(Debug, Clone)]
enum TransactionErrorSeed {
    Event(OutboxError),
    InvalidToken,
}

impl OutboxTransaction {
    /// An empty transaction on the table of `settings`.
    pub fn new(settings: &OutboxSettings) -> Self {
        Self {
            settings: settings.clone(),
            actions: Vec::new(),
            event_ids: Vec::new(),
            offloads: Vec::new(),
            token: None,
            error: None,
        }
    }

    /// Adds a put.
    pub fn put(self, label: &str, put: Put) -> Self {
        self.add(label, put)
    }

    /// Adds an update.
    pub fn update(self, label: &str, update: Update) -> Self {
        self.add(label, update)
    }

    /// Adds a condition check.
    pub fn condition_check(self, label: &str, check: ConditionCheck) -> Self {
        self.add(label, check)
    }

    /// Adds a delete.
    pub fn delete(self, label: &str, delete: Delete) -> Self {
        self.add(label, delete)
    }

    /// Adds an outbox event, stored in the item collection `pk` (the
    /// aggregate's partition key) as `SK=OUTBOX#<event id>`. Its label is
    /// `event:<event id>`. With a claim check configured, an event too
    /// large for an item or the sink is stored in S3 first
    /// ([`send_with_payloads`](Self::send_with_payloads)) and its item holds
    /// the envelope's stub.
    pub fn event(mut self, pk: &str, envelope: &EventEnvelope) -> Self {
        let keys = &self.settings.keys;
        let (limits, shards) = (&self.settings.limits, self.settings.shards);
        let stored = match &self.settings.claim_check {
            None => OutboxItem::in_table(keys, pk, envelope, limits, shards).map(|i| (i, None)),
            Some(claim) => OutboxItem::claim_checked(keys, pk, envelope, limits, shards, claim),
        };
        let mut offload = None;
        let item = match stored
            .and_then(|(item, o)| {
                offload = o;
                item.to_attributes()
            })
            .map(|item| keys.to_table(item))
        {
            Ok(item) => item,
            Err(e) => {
                self.error.get_or_insert(TransactionErrorSeed::Event(e));
                return self;
            }
        };
        let put = match Put::builder()
            .table_name(&self.settings.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#outboxSk)")
            .expression_attribute_names("#outboxSk", keys.sort_key.as_str())
            .build()
        {
            Ok(put) => put,
            Err(e) => {
                let e = OutboxError::Serialize(e.to_string());
                self.error.get_or_insert(TransactionErrorSeed::Event(e));
                return self;
            }
        };
        self.event_ids.push(envelope.event_id);
        self.offloads.extend(offload);
        self.put(&format!("event:{}", envelope.event_id), put)
    }

    /// The objects [`send_with_payloads`](Self::send_with_payloads) stores
    /// before it commits: the whole envelopes of the claim-checked events.
    pub fn offloads(&self) -> &[crate::claim::Offload] {
        &self.offloads
    }

    /// Makes the call idempotent for ten minutes (`ClientRequestToken`): a
    /// retry after an ambiguous failure (a timeout after the commit) returns
    /// success instead of writing twice.
    pub fn idempotency_token(mut self, token: impl Into<String>) -> Self {
        let token = token.into();
        if token.is_empty() || token.chars().count() > 36 {
            self.error.get_or_insert(TransactionErrorSeed::InvalidToken);
        } else {
            self.token = Some(token);
        }
        self
    }

    /// Number of actions so far.
    pub fn len(&self) -> usize {
        self.actions.len()
    }

    /// Whether no action was added.
    pub fn is_empty(&self) -> bool {
        self.actions.is_empty()
    }

    /// Checks every limit and returns the actions that would be sent.
    pub fn build(&self) -> Result<Vec<TransactWriteItem>, TransactionError> {
        match &self.error {
            Some(TransactionErrorSeed::Event(e)) => return Err(TransactionError::Event(e.clone())),
            Some(TransactionErrorSeed::InvalidToken) => return Err(TransactionError::InvalidToken),
            None => {}
        }
        if self.actions.is_empty() {
            return Err(TransactionError::Empty);
        }
        if self.actions.len() > MAX_TRANSACTION_ACTIONS {
            return Err(TransactionError::TooManyActions {
                count: self.actions.len(),
                limit: MAX_TRANSACTION_ACTIONS,
            });
        }
        let total: usize = self.actions.iter().map(|a| a.size).sum();
        if total > MAX_TRANSACTION_BYTES {
            return Err(TransactionError::TooLarge {
                size: total,
                limit: MAX_TRANSACTION_BYTES,
            });
        }
        let mut seen: HashMap<&str, &str> = HashMap::new();
        for action in &self.actions {
            if let Some(identity) = &action.identity {
                if let Some(first) = seen.insert(identity, &action.label) {
                    return Err(TransactionError::DuplicateItem {
                        first: first.to_owned(),
                        second: action.label.clone(),
                    });
                }
            }
        }
        Ok(self.actions.iter().map(|a| a.item.clone()).collect())
    }

    /// Sends the transaction: one `TransactWriteItems` call, through the
    /// SDK client or any other [`ItemTable`]. A transaction with a
    /// claim-checked event is refused ([`TransactionError::NoPayloadStore`]):
    /// see [`send_with_payloads`](Self::send_with_payloads).
    pub async fn send(self, table: &impl ItemTable) -> Result<Committed, TransactionError> {
        if let Some(offload) = self.offloads.first() {
            self.build()?;
            return Err(TransactionError::NoPayloadStore {
                event_id: offload.event_id,
            });
        }
        self.commit(table).await
    }

    /// Stores the whole envelope of every claim-checked event in S3 (one
    /// `PutObject` each, in order, S3 checking its SHA-256), then sends the
    /// transaction as [`send`](Self::send) does. The objects go first: a
    /// transaction that is then cancelled leaves at most orphan objects
    /// (the bucket's lifecycle rule expires them), never an item whose
    /// object is missing. An object that could not be stored fails the
    /// call before anything is committed.
    pub async fn send_with_payloads(
        self,
        table: &impl ItemTable,
        payloads: &impl crate::claim::PayloadStore,
    ) -> Result<Committed, TransactionError> {
        self.build()?;
        // One after the other: the first failure stops the rest, so a
        // failed call leaves as few orphans as it can.
        for offload in &self.offloads {
            payloads
                .put_payload(offload)
                .await
                .map_err(|source| TransactionError::Payload {
                    event_id: offload.event_id,
                    source,
                })?;
        }
        self.commit(table).await
    }

    async fn commit(self, table: &impl ItemTable) -> Result<Committed, TransactionError> {
        let items = self.build()?;
        let result = table.transact_write(items, self.token.clone()).await;
        match result {
            Ok(_) => Ok(Committed {
                event_ids: self.event_ids,
            }),
            Err(err) => Err(self.map_error(err)),
        }
    }

    fn map_error<R>(&self, err: SdkError<TransactWriteItemsError, R>) -> TransactionError
    where
        R: std::fmt::Debug + Send + Sync + 'static,
    {
        use aws_smithy_types::error::metadata::ProvideErrorMetadata;
        let service = match err {
            SdkError::ServiceError(service) => service.into_err(),
            other => return TransactionError::Aws(Box::new(other)),
        };
        match service {
            TransactWriteItemsError::TransactionCanceledException(cancelled) => {
                let reasons = cancelled.cancellation_reasons();
                let label = |i: usize| {
                    self.actions
                        .get(i)
                        .map(|a| a.label.clone())
                        .unwrap_or_default()
                };
                let failed: Vec<FailedCondition> = reasons
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| r.code() == Some("ConditionalCheckFailed"))
                    .map(|(index, r)| FailedCondition {
                        index,
                        label: label(index),
                        item: r.item().cloned().filter(|item| !item.is_empty()),
                    })
                    .collect();
                if !failed.is_empty() {
                    return TransactionError::ConditionFailed(failed);
                }
                for (index, reason) in reasons.iter().enumerate() {
                    match reason.code() {
                        Some("TransactionConflict") => {
                            return TransactionError::Conflict {
                                label: label(index),
                            }
                        }
                        Some(code) if crate::codes::is_throttling(code) => {
                            return TransactionError::Throttled
                        }
                        Some("None") | None => {}
                        Some(code) => {
                            return TransactionError::Rejected {
                                code: code.to_owned(),
                                message: format!(
                                    "action `{}`: {}",
                                    label(index),
                                    reason.message().unwrap_or("")
                                ),
                            }
                        }
                    }
                }
                TransactionError::Rejected {
                    code: "TransactionCanceled".into(),
                    message: cancelled.message().unwrap_or("").to_owned(),
                }
            }
            TransactWriteItemsError::IdempotentParameterMismatchException(_) => {
                TransactionError::IdempotentParameterMismatch
            }
            TransactWriteItemsError::TransactionInProgressException(_) => {
                TransactionError::InProgress
            }
            TransactWriteItemsError::ProvisionedThroughputExceededException(_)
            | TransactWriteItemsError::RequestLimitExceeded(_)
            | TransactWriteItemsError::ThrottlingException(_) => TransactionError::Throttled,
            other => match other.code() {
                Some("ValidationException") => TransactionError::Rejected {
                    code: "ValidationException".into(),
                    message: other.message().unwrap_or("").to_owned(),
                },
                _ => TransactionError::Aws(Box::new(other)),
            },
        }
    }

    fn push(
        mut self,
        label: &str,
        item: TransactWriteItem,
        identity: Option<String>,
        size: usize,
    ) -> Self {
        self.actions.push(Action {
            label: label.to_owned(),
            item,
            identity,
            size,
        });
        self
    }

    /// The one path of the four write actions: the failed item comes back
    /// (`ALL_OLD`), two actions on one item are found, the size is counted.
    fn add<W: WriteAction>(self, label: &str, mut write: W) -> Self {
        write.return_all_old();
        let (table, key) = write.target();
        let identity = self.identity(table, key);
        let (condition, values) = write.condition();
        let size =
            size::item_size(key) + write.expression_len() + expression_size(condition, values);
        self.push(label, write.into_item(), identity, size)
    }

    /// `table` plus the key attributes' values, when all are present.
    fn identity(&self, table: &str, item: &HashMap<String, AttributeValue>) -> Option<String> {
        let mut identity = table.to_owned();
        for name in &self.settings.key_attributes {
            let value = item.get(name)?;
            identity.push('\u{0}');
            identity.push_str(&format!("{value:?}"));
        }
        Some(identity)
    }
}

/// What `put`, `update`, `condition_check` and `delete` differ in, so that
/// [`OutboxTransaction::add`] handles them alike.
trait WriteAction {
    fn return_all_old(&mut self);
    /// The table and the item (a put) or key (the others) it writes.
    fn target(&self) -> (&str, &HashMap<String, AttributeValue>);
    fn condition(&self) -> (Option<&str>, &Option<HashMap<String, AttributeValue>>);
    /// An update's expression, counted in the request size.
    fn expression_len(&self) -> usize {
        0
    }
    fn into_item(self) -> TransactWriteItem;
}

/// The methods every action implements alike: the `ALL_OLD` request, the
/// condition and its values, and wrapping into a `TransactWriteItem`.
macro_rules! write_action {
    ($action:ty, $target:ident, $condition:expr, $wrap:ident $(, $len:expr)?) => {
        impl WriteAction for $action {
            fn return_all_old(&mut self) {
                self.return_values_on_condition_check_failure
                    .get_or_insert(ReturnValuesOnConditionCheckFailure::AllOld);
            }
            fn target(&self) -> (&str, &HashMap<String, AttributeValue>) {
                (&self.table_name, &self.$target)
            }
            fn condition(&self) -> (Option<&str>, &Option<HashMap<String, AttributeValue>>) {
                let condition: fn(&Self) -> Option<&str> = $condition;
                (condition(self), &self.expression_attribute_values)
            }
            $(fn expression_len(&self) -> usize {
                let len: fn(&Self) -> usize = $len;
                len(self)
            })?
            fn into_item(self) -> TransactWriteItem {
                TransactWriteItem::builder().$wrap(self).build()
            }
        }
    };
}

write_action!(Put, item, |a| a.condition_expression.as_deref(), put);
write_action!(
    Update,
    key,
    |a| a.condition_expression.as_deref(),
    update,
    |a| a.update_expression.len()
);
write_action!(
    ConditionCheck,
    key,
    |a| Some(&a.condition_expression),
    condition_check
);
write_action!(Delete, key, |a| a.condition_expression.as_deref(), delete);

fn expression_size(
    condition: Option<&str>,
    values: &Option<HashMap<String, AttributeValue>>,
) -> usize {
    condition.map_or(0, str::len) + values.as_ref().map_or(0, size::item_size)
}

#[cfg(test)]
mod tests;
