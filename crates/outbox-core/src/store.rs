//! The outbox store: every read and write the publisher and the sweeper make
//! on outbox items and their two sparse indexes. A port ([`OutboxStore`])
//! and its DynamoDB adapter ([`DynamoStore`]).
//!
//! Every write here is either a delete (harmless when the item is already
//! gone) or an update conditioned on the item still existing, so nothing in
//! this module can resurrect an item another process deleted. Every call is
//! bounded by the caller's [`Deadline`] and retried (in-call backoff) on the
//! codes [`retry::is_transient`] names.

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, ReturnValuesOnConditionCheckFailure, Select, WriteRequest,
};
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use ulid::Ulid;

use crate::envelope::now_utc_millis;
use crate::item::OutboxItem;
use crate::keys::{self, attr, ItemKey};
use crate::retry::{self, Deadline, RetryPolicy};

/// Most requests in one `BatchWriteItem`.
pub const MAX_BATCH_WRITE: usize = 25;

/// A store call failed (after its retries, or cut by the deadline).
#[derive(Debug, Clone, thiserror::Error)]
#[error("outbox store {operation} failed: {code}")]
pub struct StoreError {
    pub operation: &'static str,
    pub code: String,
}

/// What a conditional update found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Marked {
    /// The item was updated.
    Updated,
    /// The item was gone (published and deleted by someone else) or no
    /// longer in the state the update expects; nothing was written.
    Gone,
}

/// An item to dead-letter.
#[derive(Debug, Clone, Copy)]
pub struct DeadLetter<'a> {
    pub key: &'a ItemKey,
    /// The aggregate (it picks the dead-letter shard); the partition key
    /// stands in when the item does not decode.
    pub aggregate_id: Option<&'a str>,
    pub reason: &'a str,
    /// Attempts to record, when the sweeper gives up.
    pub attempts: Option<u32>,
}

/// Where in a shard of the pending index to read, by creation time (the
/// ULID sort key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// Created before this id (the stranded ones).
    Before(Ulid),
    /// Created between these ids, both included (an OnFailure window).
    Between(Ulid, Ulid),
}

/// A query of one shard of the pending index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingQuery {
    pub shard: u16,
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
pub enum Stored {
    Item(OutboxItem),
    /// It does not decode: it can never be published, it is dead-lettered.
    Undecodable {
        key: ItemKey,
        reason: String,
    },
}

/// One page of pending items, oldest first.
#[derive(Debug, Clone, Default)]
pub struct Page {
    pub items: Vec<Stored>,
    /// Items DynamoDB read for this page (its read cost).
    pub scanned: usize,
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
    pub dead_letters: usize,
    pub dead_letters_capped: bool,
    pub scanned: usize,
    pub queries: usize,
}

/// The port the publisher and the sweeper read and write outbox items
/// through.
pub trait OutboxStore: Send + Sync {
    /// Deletes the items of published events, in batches, retrying
    /// unprocessed ones while `deadline` allows. Returns the keys it could
    /// not delete (they stay, and the sweeper will republish them).
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
    /// time before which no sweeper retries it. Conditional on the item
    /// existing and still pending.
    fn record_failure(
        &self,
        key: &ItemKey,
        attempts: u32,
        next_attempt_at: i64,
        error: &str,
        deadline: &Deadline,
    ) -> impl Future<Output = Result<Marked, StoreError>> + Send;

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
}

/// The DynamoDB adapter.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: aws_sdk_dynamodb::Client,
    table: String,
    shards: u16,
    retry: RetryPolicy,
}

impl DynamoStore {
    pub fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>, shards: u16) -> Self {
        Self {
            client,
            table: table.into(),
            shards,
            retry: RetryPolicy::default(),
        }
    }

    /// Runs `call` (one SDK request) bounded by `deadline`, retrying
    /// transient errors with the in-call backoff.
    async fn call<T, E, F, Fut>(
        &self,
        operation: &'static str,
        deadline: &Deadline,
        mut call: F,
    ) -> Result<T, Failed<E>>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, SdkError<E, aws_smithy_runtime_api::http::Response>>>,
        E: ProvideErrorMetadata,
    {
        let mut retry = 1;
        loop {
            let error = match deadline.bound(call()).await {
                Some(Ok(out)) => return Ok(out),
                Some(Err(e)) => e,
                None => return Err(Failed::Store(store_error(operation, "DeadlineReached"))),
            };
            let code = error_code(&error);
            let transient = retry::is_transient(&code)
                || matches!(
                    error,
                    SdkError::TimeoutError(_)
                        | SdkError::DispatchFailure(_)
                        | SdkError::ResponseError(_)
                );
            if !transient || !self.retry.wait(retry, deadline).await {
                return Err(match error {
                    SdkError::ServiceError(service) => Failed::Service(service.into_err(), code),
                    _ => Failed::Store(store_error(operation, &code)),
                });
            }
            retry += 1;
        }
    }

    async fn conditional_update(
        &self,
        key: &ItemKey,
        update: &str,
        condition: &str,
        values: HashMap<String, AttributeValue>,
        operation: &'static str,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let result = self
            .call(operation, deadline, || {
                self.client
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(key.to_attributes()))
                    .update_expression(update)
                    .condition_expression(condition)
                    .set_expression_attribute_values(Some(values.clone()))
                    .send()
            })
            .await;
        match result {
            Ok(_) => Ok(Marked::Updated),
            Err(Failed::Service(UpdateItemError::ConditionalCheckFailedException(_), _)) => {
                Ok(Marked::Gone)
            }
            Err(other) => Err(other.into_store(operation)),
        }
    }

    async fn count(
        &self,
        index: &'static str,
        pk_name: &str,
        pk_value: String,
        limit: i32,
        deadline: &Deadline,
    ) -> Result<(usize, bool, usize), StoreError> {
        let out = self
            .call("count", deadline, || {
                self.client
                    .query()
                    .table_name(&self.table)
                    .index_name(index)
                    .key_condition_expression("#pk = :pk")
                    .expression_attribute_names("#pk", pk_name)
                    .expression_attribute_values(":pk", AttributeValue::S(pk_value.clone()))
                    .select(Select::Count)
                    .limit(limit)
                    .send()
            })
            .await
            .map_err(|e| e.into_store("count"))?;
        let count = out.count().max(0) as usize;
        let capped = out.last_evaluated_key().is_some() || count >= limit.max(0) as usize;
        Ok((count, capped, out.scanned_count().max(0) as usize))
    }
}

/// A failed call: the service's own error (to match on) or a store error.
enum Failed<E> {
    Service(E, String),
    Store(StoreError),
}

impl<E> Failed<E> {
    fn into_store(self, operation: &'static str) -> StoreError {
        match self {
            Self::Service(_, code) => store_error(operation, &code),
            Self::Store(e) => e,
        }
    }
}

fn store_error(operation: &'static str, code: &str) -> StoreError {
    StoreError {
        operation,
        code: code.to_owned(),
    }
}

fn error_code<E: ProvideErrorMetadata>(
    error: &SdkError<E, aws_smithy_runtime_api::http::Response>,
) -> String {
    match error {
        SdkError::TimeoutError(_) => "Timeout".into(),
        SdkError::DispatchFailure(_) => "DispatchFailure".into(),
        SdkError::ResponseError(_) => "ResponseError".into(),
        SdkError::ServiceError(service) => {
            let code = service.err().code().unwrap_or("Unknown");
            if code == "Unknown" && service.raw().status().is_server_error() {
                "InternalServerError".into()
            } else {
                code.to_owned()
            }
        }
        other => other.code().unwrap_or("Unknown").to_owned(),
    }
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
}

/// Records `shards` as the shard count in use and returns the highest count
/// ever recorded (at least `shards`). The settings item only ever grows: a
/// conditional update that fails when a larger count is already there.
/// The writer calls it at cold start and the sweeper on every run, so a
/// lowered `OUTBOX_SHARDS` never hides the items of the higher shards.
pub async fn record_shard_count(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    shards: u16,
) -> Result<u16, StoreError> {
    let result = client
        .update_item()
        .table_name(table)
        .set_key(Some(keys::settings_key().to_attributes()))
        .update_expression("SET #hw = :n")
        .condition_expression("attribute_not_exists(#hw) OR #hw < :n")
        .expression_attribute_names("#hw", attr::SHARDS_HIGH_WATER)
        .expression_attribute_values(":n", n(shards))
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .send()
        .await;
    let recorded = match result {
        Ok(_) => return Ok(shards),
        Err(SdkError::ServiceError(e))
            if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
        {
            match e.err() {
                UpdateItemError::ConditionalCheckFailedException(c) => c.item().cloned(),
                _ => None,
            }
        }
        Err(e) => return Err(store_error("record_shard_count", &error_code(&e))),
    };
    // DynamoDB returns the item that failed the condition (ALL_OLD); without
    // it the mark is unknown, and guessing could hide shards.
    let recorded = recorded.ok_or_else(|| store_error("record_shard_count", "NoOldItem"))?;
    let high_water = recorded
        .get(attr::SHARDS_HIGH_WATER)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<u16>().ok())
        .unwrap_or(shards);
    Ok(high_water.max(shards))
}

impl OutboxStore for DynamoStore {
    async fn delete_published(&self, keys: &[ItemKey], deadline: &Deadline) -> Vec<ItemKey> {
        let mut failed = Vec::new();
        for chunk in keys.chunks(MAX_BATCH_WRITE) {
            let mut requests: Vec<WriteRequest> = chunk
                .iter()
                .filter_map(|key| {
                    DeleteRequest::builder()
                        .set_key(Some(key.to_attributes()))
                        .build()
                        .ok()
                        .map(|d| WriteRequest::builder().delete_request(d).build())
                })
                .collect();
            let mut attempt = 1;
            loop {
                let result = deadline
                    .bound(
                        self.client
                            .batch_write_item()
                            .request_items(&self.table, requests.clone())
                            .send(),
                    )
                    .await;
                // What is left to do: the unprocessed items, or all of them.
                requests = match result {
                    Some(Ok(out)) => out
                        .unprocessed_items()
                        .and_then(|u| u.get(&self.table))
                        .cloned()
                        .unwrap_or_default(),
                    Some(Err(e)) => {
                        tracing::warn!(code = %error_code(&e), "BatchWriteItem failed");
                        requests
                    }
                    None => {
                        tracing::warn!("BatchWriteItem cut by the deadline");
                        requests
                    }
                };
                if requests.is_empty() || !self.retry.wait(attempt, deadline).await {
                    break;
                }
                attempt += 1;
            }
            failed.extend(
                requests
                    .iter()
                    .filter_map(|r| r.delete_request())
                    .filter_map(|d| ItemKey::from_attributes(d.key())),
            );
        }
        failed
    }

    async fn dead_letter(
        &self,
        letter: DeadLetter<'_>,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let key = letter.key;
        let shard = keys::shard_of(letter.aggregate_id.unwrap_or(&key.pk), self.shards);
        let sort = keys::event_id_from_sk(&key.sk)
            .map(|id| id.to_string())
            .unwrap_or_else(|| key.sk.clone());
        let now = now_utc_millis()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let mut update = format!(
            "SET {} = :now, {} = :reason, {} = :dpk, {} = :dsk",
            attr::DEAD_LETTERED_AT,
            attr::DEAD_LETTER_REASON,
            keys::DEAD_PK,
            keys::DEAD_SK
        );
        let mut values = HashMap::from([
            (":now".to_owned(), s(now)),
            (":reason".to_owned(), s(sanitize(letter.reason))),
            (":dpk".to_owned(), s(keys::dead_pk(shard))),
            (":dsk".to_owned(), s(sort)),
        ]);
        if let Some(attempts) = letter.attempts {
            update.push_str(&format!(", {} = :attempts", attr::ATTEMPTS));
            values.insert(":attempts".to_owned(), n(attempts));
        }
        update.push_str(&format!(
            " REMOVE {}, {}, {}",
            keys::PENDING_PK,
            keys::PENDING_SK,
            attr::NEXT_ATTEMPT_AT
        ));
        self.conditional_update(
            key,
            &update,
            &format!(
                "attribute_exists({}) AND attribute_not_exists({})",
                keys::PK,
                attr::DEAD_LETTERED_AT
            ),
            values,
            "dead_letter",
            deadline,
        )
        .await
    }

    async fn record_failure(
        &self,
        key: &ItemKey,
        attempts: u32,
        next_attempt_at: i64,
        error: &str,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        self.conditional_update(
            key,
            &format!(
                "SET {} = :attempts, {} = :error, {} = :next",
                attr::ATTEMPTS,
                attr::LAST_ERROR,
                attr::NEXT_ATTEMPT_AT
            ),
            &format!(
                "attribute_exists({}) AND attribute_exists({})",
                keys::PK,
                keys::PENDING_PK
            ),
            HashMap::from([
                (":attempts".to_owned(), n(attempts)),
                (":error".to_owned(), s(sanitize(error))),
                (":next".to_owned(), n(next_attempt_at)),
            ]),
            "record_failure",
            deadline,
        )
        .await
    }

    fn configured_shards(&self) -> u16 {
        self.shards
    }

    async fn shard_count(&self, deadline: &Deadline) -> Result<u16, StoreError> {
        deadline
            .bound(record_shard_count(&self.client, &self.table, self.shards))
            .await
            .unwrap_or_else(|| Err(store_error("record_shard_count", "DeadlineReached")))
    }

    async fn pending_page(
        &self,
        query: &PendingQuery,
        cursor: Option<Cursor>,
        deadline: &Deadline,
    ) -> Result<Page, StoreError> {
        let (condition, bounds) = match &query.created {
            Created::Before(id) => (
                "#pk = :pk AND #sk < :before",
                vec![(":before", id.to_string())],
            ),
            Created::Between(from, to) => (
                "#pk = :pk AND #sk BETWEEN :from AND :to",
                vec![(":from", from.to_string()), (":to", to.to_string())],
            ),
        };
        let out = self
            .call("pending_page", deadline, || {
                let mut request = self
                    .client
                    .query()
                    .table_name(&self.table)
                    .index_name(keys::PENDING_INDEX)
                    .key_condition_expression(condition)
                    .expression_attribute_names("#pk", keys::PENDING_PK)
                    .expression_attribute_names("#sk", keys::PENDING_SK)
                    .expression_attribute_values(":pk", s(keys::pending_pk(query.shard)))
                    .scan_index_forward(true)
                    .limit(query.limit)
                    .set_exclusive_start_key(cursor.clone());
                for (name, value) in &bounds {
                    request = request.expression_attribute_values(*name, s(value.clone()));
                }
                request.send()
            })
            .await
            .map_err(|e| e.into_store("pending_page"))?;
        let mut page = Page {
            scanned: out.scanned_count().max(0) as usize,
            next: out.last_evaluated_key().cloned(),
            ..Page::default()
        };
        for item in out.items.unwrap_or_default() {
            let key = ItemKey::from_attributes(&item);
            match OutboxItem::from_attributes(item) {
                Ok(decoded) => page.items.push(Stored::Item(decoded)),
                Err(e) => match key {
                    Some(key) => page.items.push(Stored::Undecodable {
                        key,
                        reason: e.to_string(),
                    }),
                    None => tracing::error!("an index item has no primary key"),
                },
            }
        }
        Ok(page)
    }

    async fn shard_stats(
        &self,
        shard: u16,
        count_limit: i32,
        deadline: &Deadline,
    ) -> Result<ShardStats, StoreError> {
        let oldest = self
            .call("oldest_pending", deadline, || {
                self.client
                    .query()
                    .table_name(&self.table)
                    .index_name(keys::PENDING_INDEX)
                    .key_condition_expression("#pk = :pk")
                    .expression_attribute_names("#pk", keys::PENDING_PK)
                    .expression_attribute_names("#sk", keys::PENDING_SK)
                    .expression_attribute_values(":pk", s(keys::pending_pk(shard)))
                    .projection_expression("#sk")
                    .scan_index_forward(true)
                    .limit(1)
                    .send()
            })
            .await
            .map_err(|e| e.into_store("oldest_pending"))?;
        let (pending, pending_capped, pending_scanned) = self
            .count(
                keys::PENDING_INDEX,
                keys::PENDING_PK,
                keys::pending_pk(shard),
                count_limit,
                deadline,
            )
            .await?;
        let (dead_letters, dead_letters_capped, dead_scanned) = self
            .count(
                keys::DEAD_LETTER_INDEX,
                keys::DEAD_PK,
                keys::dead_pk(shard),
                count_limit,
                deadline,
            )
            .await?;
        Ok(ShardStats {
            oldest: oldest
                .items()
                .first()
                .and_then(|i| i.get(keys::PENDING_SK))
                .and_then(|v| v.as_s().ok())
                .and_then(|v| Ulid::from_string(v).ok()),
            pending,
            pending_capped,
            dead_letters,
            dead_letters_capped,
            scanned: oldest.scanned_count().max(0) as usize + pending_scanned + dead_scanned,
            queries: 3,
        })
    }
}

/// Keeps stored error text short and printable.
pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(512)
        .collect()
}
