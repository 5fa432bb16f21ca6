//! The DynamoDB adapter of the store port.

mod adopt;
mod operator;
mod publish;
mod sweep;

use std::collections::{HashMap, HashSet};
use std::future::Future;

use aws_sdk_dynamodb::operation::query::builders::QueryFluentBuilder;
use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, KeysAndAttributes, ReturnValuesOnConditionCheckFailure, Select,
    WriteRequest,
};
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use ulid::Ulid;

use crate::aws::{error_code, error_message};
use outbox_core::keys::RecordedSettings;
use outbox_core::keys::{self, attr, ItemKey};
use outbox_core::now_utc_millis;
use outbox_core::OutboxItem;
use outbox_engine::{
    sanitize, AdoptOutcome, AdoptedFrom, Adoption, Claim, ClaimOutcome, CollectionRead, Created,
    Cursor, DeadLetter, DeadLetterPage, DeadLetterRecord, KeyValue, Marked, OperatorStore, Page,
    PendingItem, PendingQuery, PublishStore, ShardStats, StoreError, SweepStore, MAX_BATCH_WRITE,
};
use outbox_engine::{Deadline, RetryPolicy};

type Item = HashMap<String, AttributeValue>;

/// Most keys in one `BatchGetItem`.
const MAX_BATCH_GET: usize = 100;

/// The engine's [`Cursor`] of a page's `LastEvaluatedKey` (key attributes
/// are strings, numbers or bytes; any other type is not a key and is left
/// out).
fn cursor_of(key: &Item) -> Cursor {
    Cursor(
        key.iter()
            .filter_map(|(name, value)| {
                let value = match value {
                    AttributeValue::S(s) => KeyValue::S(s.clone()),
                    AttributeValue::N(n) => KeyValue::N(n.clone()),
                    AttributeValue::B(b) => KeyValue::B(b.clone().into_inner()),
                    _ => return None,
                };
                Some((name.clone(), value))
            })
            .collect(),
    )
}

/// The `ExclusiveStartKey` of a [`Cursor`].
fn start_key(cursor: Cursor) -> Item {
    cursor
        .0
        .into_iter()
        .map(|(name, value)| {
            let value = match value {
                KeyValue::S(s) => AttributeValue::S(s),
                KeyValue::N(n) => AttributeValue::N(n),
                KeyValue::B(b) => AttributeValue::B(aws_smithy_types::Blob::new(b)),
            };
            (name, value)
        })
        .collect()
}

/// The DynamoDB adapter.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    client: aws_sdk_dynamodb::Client,
    table: String,
    shards: u16,
    retry: RetryPolicy,
    keys: keys::KeySchema,
}

impl DynamoStore {
    /// The store of `table`, whose writers use `shards` shards.
    pub fn new(client: aws_sdk_dynamodb::Client, table: impl Into<String>, shards: u16) -> Self {
        Self {
            client,
            table: table.into(),
            shards,
            retry: RetryPolicy::default(),
            keys: keys::KeySchema::default(),
        }
    }

    /// The same store, on a table with the key schema `schema`.
    pub fn with_keys(mut self, schema: keys::KeySchema) -> Self {
        self.keys = schema;
        self
    }

    /// The table's key schema.
    pub fn keys(&self) -> &keys::KeySchema {
        &self.keys
    }

    /// The table's name.
    pub fn table(&self) -> &str {
        &self.table
    }

    /// Sends one SDK request bounded by `deadline`. The SDK retries the
    /// call itself (crate::aws); nothing here retries it again.
    async fn call<T, E, Fut>(
        &self,
        operation: &'static str,
        deadline: &Deadline,
        call: Fut,
    ) -> Result<T, Failed<E>>
    where
        Fut: Future<Output = Result<T, SdkError<E, aws_smithy_runtime_api::http::Response>>>,
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        match deadline.bound(call).await {
            Some(Ok(out)) => Ok(out),
            Some(Err(error)) => {
                let code = error_code(&error);
                Err(match error {
                    SdkError::ServiceError(service) => Failed::Service(service.into_err(), code),
                    other => {
                        let mut e = StoreError::new(operation, code);
                        e.message = error_message(&other);
                        Failed::Store(e)
                    }
                })
            }
            None => Err(Failed::Store(StoreError::new(operation, "DeadlineReached"))),
        }
    }

    /// Why a claim's condition failed, from the item as it was: another
    /// run's live claim holds a pending event of this region
    /// ([`ClaimOutcome::ClaimedElsewhere`]), or the event is no longer this
    /// region's to publish: not pending, or another region's
    /// ([`ClaimOutcome::Gone`]).
    fn claim_refused(&self, old: &HashMap<String, AttributeValue>, now: i64) -> ClaimOutcome {
        let pending = old.contains_key(self.keys.pending_partition_key.as_str());
        let ours = match (&self.keys.home_region, old.get(attr::HOME_REGION)) {
            (Some(home), Some(AttributeValue::S(region))) => region == home,
            _ => true,
        };
        let live = old
            .get(attr::CLAIMED_UNTIL)
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse::<i64>().ok())
            .is_some_and(|until| until >= now);
        if pending && ours && live {
            ClaimOutcome::ClaimedElsewhere
        } else {
            ClaimOutcome::Gone
        }
    }

    /// An `UpdateItem` of `key`: (update, condition) expressions, their
    /// attribute names and values. A failed condition is read as `on_fail`
    /// says.
    #[allow(clippy::too_many_arguments)]
    async fn conditional_update(
        &self,
        key: &ItemKey,
        (update, condition): (&str, &str),
        names: &[(&str, &str)],
        values: HashMap<String, AttributeValue>,
        on_fail: OnFail,
        operation: &'static str,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let names: HashMap<String, String> = names
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        // The time the condition judged claims by (`unclaimed_but`).
        let clock = values
            .get(":clock")
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse::<i64>().ok())
            .unwrap_or_else(|| now_utc_millis().unix_timestamp());
        let result = self
            .call(
                operation,
                deadline,
                self.client
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(self.keys.key(key)))
                    .update_expression(update)
                    .condition_expression(condition)
                    .set_expression_attribute_names((!names.is_empty()).then_some(names))
                    .set_expression_attribute_values((!values.is_empty()).then_some(values))
                    .set_return_values_on_condition_check_failure(
                        (on_fail != OnFail::Gone)
                            .then_some(ReturnValuesOnConditionCheckFailure::AllOld),
                    )
                    .send(),
            )
            .await;
        match (result, on_fail) {
            (
                Err(Failed::Service(UpdateItemError::ConditionalCheckFailedException(failed), _)),
                OnFail::Judge,
            ) => Ok(self.judge_refusal(failed.item(), clock)),
            (
                Err(Failed::Service(UpdateItemError::ConditionalCheckFailedException(failed), _)),
                OnFail::Repair,
            ) => Ok(self.judge_repair(failed.item())),
            (other, _) => conditional(other, operation),
        }
    }

    /// Whether `old` is under pending-index keys this stack's sweeper reads
    /// (this schema's names and prefix, its home region or none).
    fn in_stack_index(&self, old: &Item) -> bool {
        let region = old.get(attr::HOME_REGION).and_then(|v| v.as_s().ok());
        old.get(self.keys.pending_partition_key.as_str())
            .and_then(|v| v.as_s().ok())
            .is_some_and(|pk| {
                self.keys
                    .pending_shard(pk, region.map(String::as_str), u16::MAX)
                    .is_some()
            })
    }

    /// Why a key repair ([`PublishStore::make_sweepable`]) found its
    /// condition false, from the item as it is: gone, dead-lettered or
    /// another region's ([`Marked::Gone`]); already under keys this stack
    /// reads, written since the stream record ([`Marked::Claimed`]); under
    /// other keys again ([`Marked::Refused`]).
    fn judge_repair(&self, old: Option<&Item>) -> Marked {
        let Some(old) = old else {
            return Marked::Gone;
        };
        let region = old.get(attr::HOME_REGION).and_then(|v| v.as_s().ok());
        if old.contains_key(attr::DEAD_LETTERED_AT)
            || !self.keys.publishes_region(region.map(String::as_str))
        {
            Marked::Gone
        } else if self.in_stack_index(old) {
            Marked::Claimed
        } else {
            Marked::Refused
        }
    }

    /// Why a bookkeeping write on a pending item (hold, failure record,
    /// hand-over, dead letter) found its condition false, from the item as
    /// it was (`ALL_OLD`): gone or dead-lettered ([`Marked::Gone`]); still
    /// in the pending index this stack reads, held by another run's live
    /// claim ([`Marked::Claimed`]); or still there in nobody's hands, out
    /// of that index ([`Marked::Refused`]).
    fn judge_refusal(&self, old: Option<&Item>, clock: i64) -> Marked {
        let Some(old) = old else {
            return Marked::Gone;
        };
        if old.contains_key(attr::DEAD_LETTERED_AT) {
            return Marked::Gone;
        }
        let pending = self.in_stack_index(old);
        let live = old
            .get(attr::CLAIMED_UNTIL)
            .and_then(|v| v.as_n().ok())
            .and_then(|v| v.parse::<i64>().ok())
            .is_some_and(|until| until >= clock);
        if pending && live {
            Marked::Claimed
        } else {
            Marked::Refused
        }
    }

    /// A strongly consistent `Query` of `pk`'s item collection from sort
    /// key `lo` to `hi` (both included), `#sk` named for the caller's
    /// projection: the range an event's older or newer outbox items are
    /// read from.
    fn collection_range(&self, pk: &str, lo: &str, hi: &str) -> QueryFluentBuilder {
        self.client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#pk = :pk AND #sk BETWEEN :lo AND :hi")
            .expression_attribute_names("#pk", self.keys.partition_key.as_str())
            .expression_attribute_names("#sk", self.keys.sort_key.as_str())
            .expression_attribute_values(":pk", s(pk))
            .expression_attribute_values(":lo", s(lo))
            .expression_attribute_values(":hi", s(hi))
            .consistent_read(true)
    }

    /// Every item `query` selects, page after page (the SDK's paginator),
    /// all of it within `deadline`.
    async fn query_all(
        &self,
        operation: &'static str,
        deadline: &Deadline,
        query: QueryFluentBuilder,
    ) -> Result<Vec<Item>, StoreError> {
        self.call(
            operation,
            deadline,
            query
                .into_paginator()
                .items()
                .send()
                .collect::<Result<Vec<_>, _>>(),
        )
        .await
        .map_err(|e| e.into_store(operation))
    }

    /// The outbox items of `key`'s item collection older than it, oldest
    /// first, each with whether it is pending (in the pending index; a dead
    /// letter is not): strongly consistent `Query`s of the collection's
    /// keys (`SK BETWEEN OUTBOX# AND <key>`), no index read.
    async fn older_outbox(
        &self,
        key: &ItemKey,
        deadline: &Deadline,
        operation: &'static str,
    ) -> Result<Vec<(String, bool)>, StoreError> {
        let items = self
            .query_all(
                operation,
                deadline,
                self.collection_range(&key.pk, &self.keys.outbox_prefix, &key.sk)
                    .projection_expression("#sk, #ppk")
                    .expression_attribute_names("#ppk", self.keys.pending_partition_key.as_str()),
            )
            .await?;
        Ok(items
            .iter()
            .filter_map(|item| {
                let sk = item
                    .get(self.keys.sort_key.as_str())
                    .and_then(|v| v.as_s().ok())?;
                (*sk != key.sk).then(|| {
                    (
                        sk.clone(),
                        item.contains_key(self.keys.pending_partition_key.as_str()),
                    )
                })
            })
            .collect())
    }

    /// Sets `fields` on a pending outbox item and hands it to the scheduled
    /// sweep: its pending sort key becomes `!<ulid>` (read by every scheduled
    /// sweep, whatever the event's age) and a sweeper's claim on it is
    /// cleared. Conditional on the item existing and still pending.
    async fn hand_to_schedule(
        &self,
        key: &ItemKey,
        fields: &[(&str, AttributeValue)],
        handover: Handover<'_>,
        operation: &'static str,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let Some(event_id) = self.keys.event_id_from_sk(&key.sk) else {
            return Err(StoreError::new(operation, "NotAnOutboxKey"));
        };
        let mut sets: Vec<String> = Vec::with_capacity(fields.len() + 2);
        let mut values = HashMap::with_capacity(fields.len() + 4);
        for (i, (name, value)) in fields.iter().enumerate() {
            sets.push(format!("{name} = :v{i}"));
            values.insert(format!(":v{i}"), value.clone());
        }
        if handover.held {
            // `:clock`: the time `unclaimed_but` adds.
            sets.push(format!(
                "{since} = if_not_exists({since}, :clock)",
                since = attr::HELD_SINCE
            ));
        }
        sets.push("#psk = :sk".to_owned());
        values.insert(":sk".to_owned(), s(keys::redriven_sk(event_id)));
        // A failure record ends a hold: the event was attempted (it passed
        // its guard), so it is no longer held behind anything.
        let unhold = if handover.unhold {
            format!(", {}, {}", attr::HELD_BEHIND, attr::HELD_SINCE)
        } else {
            String::new()
        };
        let update = format!(
            "SET {} REMOVE {}, {}{unhold}",
            sets.join(", "),
            attr::CLAIM_TOKEN,
            attr::CLAIMED_UNTIL
        );
        let condition = format!(
            "attribute_exists(#pk) AND attribute_exists(#ppk) AND {}",
            unclaimed_but(handover.claim, &mut values)
        );
        let names = [
            ("#pk", self.keys.partition_key.as_str()),
            ("#ppk", self.keys.pending_partition_key.as_str()),
            ("#psk", self.keys.pending_sort_key.as_str()),
        ];
        self.conditional_update(
            key,
            (&update, &condition),
            &names,
            values,
            OnFail::Judge,
            operation,
            deadline,
        )
        .await
    }

    /// Whether this region publishes the item (its `homeRegion` is this
    /// store's, or it has none) and it is not a dead letter.
    fn ours_to_publish(&self, item: &HashMap<String, AttributeValue>) -> bool {
        let region = item.get(attr::HOME_REGION).and_then(|v| v.as_s().ok());
        self.keys.publishes_region(region.map(String::as_str))
            && !item.contains_key(attr::DEAD_LETTERED_AT)
    }

    /// The settings item (strongly consistent), if there is one.
    async fn settings_item(
        &self,
        operation: &'static str,
        deadline: &Deadline,
    ) -> Result<Option<HashMap<String, AttributeValue>>, StoreError> {
        self.call(
            operation,
            deadline,
            self.client
                .get_item()
                .table_name(&self.table)
                .set_key(Some(self.keys.key(&keys::settings_key())))
                .consistent_read(true)
                .send(),
        )
        .await
        .map(|out| out.item)
        .map_err(|e| e.into_store(operation))
    }

    /// The first pending-index sort key of a shard (after `after`, when
    /// given), one item read; and the items read.
    async fn first_pending(
        &self,
        shard: u16,
        after: Option<&str>,
        deadline: &Deadline,
    ) -> Result<(Option<String>, usize), StoreError> {
        let mut request = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(self.keys.pending_index.as_str())
            .key_condition_expression(if after.is_some() {
                "#pk = :pk AND #sk > :after"
            } else {
                "#pk = :pk"
            })
            .expression_attribute_names("#pk", self.keys.pending_partition_key.as_str())
            .expression_attribute_names("#sk", self.keys.pending_sort_key.as_str())
            .expression_attribute_values(":pk", s(self.keys.pending_pk(shard)))
            .projection_expression("#sk")
            .scan_index_forward(true)
            .limit(1);
        if let Some(after) = after {
            request = request.expression_attribute_values(":after", s(after));
        }
        let out = self
            .call("oldest_pending", deadline, request.send())
            .await
            .map_err(|e| e.into_store("oldest_pending"))?;
        let first = out
            .items()
            .first()
            .and_then(|i| i.get(self.keys.pending_sort_key.as_str()))
            .and_then(|v| v.as_s().ok())
            .cloned();
        Ok((first, out.scanned_count().max(0) as usize))
    }

    async fn count(
        &self,
        index: &str,
        pk_name: &str,
        pk_value: String,
        limit: i32,
        deadline: &Deadline,
    ) -> Result<(usize, bool, usize), StoreError> {
        let out = self
            .call(
                "count",
                deadline,
                self.client
                    .query()
                    .table_name(&self.table)
                    .index_name(index)
                    .key_condition_expression("#pk = :pk")
                    .expression_attribute_names("#pk", pk_name)
                    .expression_attribute_values(":pk", AttributeValue::S(pk_value))
                    .select(Select::Count)
                    .limit(limit)
                    .send(),
            )
            .await
            .map_err(|e| e.into_store("count"))?;
        let count = out.count().max(0) as usize;
        let capped = out.last_evaluated_key().is_some() || count >= limit.max(0) as usize;
        Ok((count, capped, out.scanned_count().max(0) as usize))
    }

    /// Deletes one published item (unconditional: a delete that finds
    /// nothing is not an error); false when it failed or the deadline cut it.
    async fn delete_one(&self, key: &ItemKey, deadline: &Deadline) -> bool {
        let call = self
            .client
            .delete_item()
            .table_name(&self.table)
            .set_key(Some(self.keys.key(key)))
            .send();
        match deadline.bound(call).await {
            Some(Ok(_)) => true,
            Some(Err(e)) => {
                tracing::warn!(code = %error_code(&e), "DeleteItem failed");
                false
            }
            None => {
                tracing::warn!("DeleteItem cut by the deadline");
                false
            }
        }
    }
}

/// The outcome of a conditional write: [`Marked::Gone`] when its condition
/// failed.
fn conditional<T, E: ProvideErrorMetadata>(
    result: Result<T, Failed<E>>,
    operation: &'static str,
) -> Result<Marked, StoreError> {
    match result {
        Ok(_) => Ok(Marked::Updated),
        Err(Failed::Service(_, code)) if code == "ConditionalCheckFailedException" => {
            Ok(Marked::Gone)
        }
        Err(other) => Err(other.into_store(operation)),
    }
}

/// How [`DynamoStore::conditional_update`] reads a failed condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnFail {
    /// [`Marked::Gone`], whatever the item is (the operator's and
    /// adoption's writes, whose callers report a skip).
    Gone,
    /// From the item as it was ([`DynamoStore::judge_refusal`]): the
    /// bookkeeping writes on pending items, where an item still there but
    /// out of the stack's index must not pass for one gone.
    Judge,
    /// From the item as it is ([`DynamoStore::judge_repair`]): the key
    /// repair, whose condition also fails when the keys changed since the
    /// stream record or the item became another region's.
    Repair,
}

/// A failed call: the service's own error (to match on) or a store error.
enum Failed<E> {
    Service(E, String),
    Store(StoreError),
}

impl<E: ProvideErrorMetadata> Failed<E> {
    /// The store error, with the service's code and message.
    fn into_store(self, operation: &'static str) -> StoreError {
        match self {
            Self::Service(error, code) => {
                let mut e = StoreError::new(operation, code);
                e.message = error.message().map(str::to_owned);
                e
            }
            Self::Store(e) => e,
        }
    }
}

/// How an item is handed to the scheduled sweep.
struct Handover<'a> {
    /// The writer's own claim token, if it holds one.
    claim: Option<&'a str>,
    /// A hold: `heldSince` is recorded (kept when already there).
    held: bool,
    /// A failure record: `heldBehind` and `heldSince` are removed.
    unhold: bool,
}

/// The condition that no live claim holds the item, but `claim`'s (the
/// writer's own, when given): so a claim is cleared only by its owner, or
/// once it lapsed. Adds `:clock` (epoch seconds) and `:mine`.
fn unclaimed_but(claim: Option<&str>, values: &mut HashMap<String, AttributeValue>) -> String {
    values.insert(":clock".to_owned(), n(now_utc_millis().unix_timestamp()));
    let free = format!(
        "attribute_not_exists({until}) OR {until} < :clock",
        until = attr::CLAIMED_UNTIL
    );
    match claim {
        Some(token) => {
            values.insert(":mine".to_owned(), s(token));
            format!("({free} OR {} = :mine)", attr::CLAIM_TOKEN)
        }
        None => format!("({free})"),
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
    schema: &keys::KeySchema,
    shards: u16,
) -> Result<u16, StoreError> {
    let result = client
        .update_item()
        .table_name(table)
        .set_key(Some(schema.key(&keys::settings_key())))
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
        Err(e) => return Err(StoreError::new("record_shard_count", error_code(&e))),
    };
    // DynamoDB returns the item that failed the condition (ALL_OLD); without
    // it the mark is unknown, and guessing could hide shards.
    let recorded = recorded.ok_or_else(|| StoreError::new("record_shard_count", "NoOldItem"))?;
    let high_water = recorded
        .get(attr::SHARDS_HIGH_WATER)
        .and_then(|v| v.as_n().ok())
        .and_then(|v| v.parse::<u16>().ok())
        .unwrap_or(shards);
    Ok(high_water.max(shards))
}

/// A dead-letter index item as a [`DeadLetterRecord`].
fn dead_letter_record(schema: &keys::KeySchema, item: &Item, shard: u16) -> DeadLetterRecord {
    let text = |name: &str| {
        item.get(name)
            .and_then(|v| v.as_s().ok())
            .cloned()
            .unwrap_or_default()
    };
    DeadLetterRecord {
        event_id: text(schema.dead_letter_sort_key.as_str()),
        event_type: text(attr::EVENT_TYPE),
        aggregate_id: text(attr::AGGREGATE_ID),
        attempts: item
            .get(attr::ATTEMPTS)
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0),
        reason: text(attr::DEAD_LETTER_REASON),
        dead_lettered_at: text(attr::DEAD_LETTERED_AT),
        key: ItemKey::new(
            text(schema.partition_key.as_str()),
            text(schema.sort_key.as_str()),
        ),
        shard,
        envelope: item
            .get(attr::ENVELOPE)
            .and_then(|v| v.as_s().ok())
            .cloned(),
    }
}
