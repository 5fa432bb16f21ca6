//! The DynamoDB adapter of the store port.

use std::collections::{HashMap, HashSet};
use std::future::Future;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{
    AttributeValue, DeleteRequest, KeysAndAttributes, ReturnValuesOnConditionCheckFailure, Select,
    WriteRequest,
};
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use ulid::Ulid;

use super::{
    sanitize, AdoptOutcome, AdoptedFrom, Adoption, Claim, CollectionRead, Created, Cursor,
    DeadLetter, DeadLetterPage, DeadLetterRecord, Marked, OutboxStore, Page, PendingItem,
    PendingQuery, ShardStats, StoreError, MAX_BATCH_GET, MAX_BATCH_WRITE,
};
use crate::aws::{error_code, error_message};
use crate::config::RecordedSettings;
use crate::retry::{Deadline, RetryPolicy};
use outbox_core::keys::{self, attr, ItemKey};
use outbox_core::now_utc_millis;
use outbox_core::OutboxItem;

type Item = HashMap<String, AttributeValue>;

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

    /// Hands the items of `shard` under `from`'s keys (another region's,
    /// or with `None` the keys without a region) over to this store's home
    /// region: each pending item's pending-index partition key becomes
    /// this region's, and with `due_now` its sort key the redriven `!<ulid>`
    /// (the next scheduled sweep publishes it whatever its age); each dead
    /// letter's dead-letter-index partition key becomes this region's (it
    /// stays dead-lettered). `homeRegion` becomes this region. Each write is
    /// conditional on the item still holding `from`'s key, so that an item
    /// published and deleted meanwhile is never resurrected and a second
    /// run finds nothing to do. `dry_run` reads and writes nothing.
    ///
    /// An error when this store has no home region.
    pub async fn adopt(
        &self,
        from: Option<&str>,
        shard: u16,
        due_now: bool,
        dry_run: bool,
        deadline: &Deadline,
    ) -> Result<Vec<Adoption>, StoreError> {
        let Some(home) = self.keys.home_region.clone() else {
            return Err(StoreError::new("adopt", "NoHomeRegion"));
        };
        let source = self.keys.clone().with_home_region(from.map(str::to_owned));
        let mut adoptions = Vec::new();
        for index in [AdoptedFrom::Pending, AdoptedFrom::DeadLetter] {
            let (index_name, pk_name, old, new) = match index {
                AdoptedFrom::Pending => (
                    self.keys.pending_index.as_str(),
                    self.keys.pending_partition_key.as_str(),
                    source.pending_pk(shard),
                    self.keys.pending_pk(shard),
                ),
                AdoptedFrom::DeadLetter => (
                    self.keys.dead_letter_index.as_str(),
                    self.keys.dead_letter_partition_key.as_str(),
                    source.dead_pk(shard),
                    self.keys.dead_pk(shard),
                ),
            };
            let mut cursor = None;
            loop {
                let out = self
                    .call(
                        "adopt",
                        deadline,
                        self.client
                            .query()
                            .table_name(&self.table)
                            .index_name(index_name)
                            .key_condition_expression("#pk = :pk")
                            .expression_attribute_names("#pk", pk_name)
                            .expression_attribute_values(":pk", s(old.clone()))
                            .set_exclusive_start_key(cursor.take())
                            .send(),
                    )
                    .await
                    .map_err(|e| e.into_store("adopt"))?;
                for item in out.items() {
                    let text = |name: &str| match item.get(name) {
                        Some(AttributeValue::S(v)) => Some(v.clone()),
                        _ => None,
                    };
                    let (Some(pk), Some(sk)) =
                        (text(&self.keys.partition_key), text(&self.keys.sort_key))
                    else {
                        continue;
                    };
                    let key = ItemKey::new(pk, sk);
                    let event_id = text(attr::EVENT_ID);
                    let outcome = if dry_run {
                        AdoptOutcome::WouldAdopt
                    } else {
                        let mut update = "SET #pk = :new, #home = :home".to_owned();
                        let mut values = HashMap::from([
                            (":new".to_owned(), s(new.clone())),
                            (":old".to_owned(), s(old.clone())),
                            (":home".to_owned(), s(home.clone())),
                        ]);
                        let mut names = vec![("#pk", pk_name), ("#home", attr::HOME_REGION)];
                        let redriven = event_id
                            .as_deref()
                            .and_then(|id| Ulid::from_string(id).ok())
                            .map(keys::redriven_sk);
                        if let (AdoptedFrom::Pending, true, Some(redriven)) =
                            (index, due_now, redriven)
                        {
                            update.push_str(", #psk = :psk");
                            names.push(("#psk", self.keys.pending_sort_key.as_str()));
                            values.insert(":psk".to_owned(), s(redriven));
                        }
                        match self
                            .conditional_update(
                                &key,
                                (&update, "#pk = :old"),
                                &names,
                                values,
                                "adopt",
                                deadline,
                            )
                            .await?
                        {
                            Marked::Updated => AdoptOutcome::Adopted,
                            Marked::Gone => AdoptOutcome::Gone,
                        }
                    };
                    adoptions.push(Adoption {
                        key,
                        event_id,
                        index,
                        outcome,
                    });
                }
                match out.last_evaluated_key() {
                    Some(next) => cursor = Some(next.clone()),
                    None => break,
                }
            }
        }
        Ok(adoptions)
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

    /// An `UpdateItem` of `key`: (update, condition) expressions, their
    /// attribute names and values.
    async fn conditional_update(
        &self,
        key: &ItemKey,
        (update, condition): (&str, &str),
        names: &[(&str, &str)],
        values: HashMap<String, AttributeValue>,
        operation: &'static str,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let names: HashMap<String, String> = names
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
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
                    .send(),
            )
            .await;
        conditional(result, operation)
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
        let mut older = Vec::new();
        let mut cursor = None;
        loop {
            let out = self
                .call(
                    operation,
                    deadline,
                    self.client
                        .query()
                        .table_name(&self.table)
                        .key_condition_expression("#pk = :pk AND #sk BETWEEN :lo AND :hi")
                        .expression_attribute_names("#pk", self.keys.partition_key.as_str())
                        .expression_attribute_names("#sk", self.keys.sort_key.as_str())
                        .expression_attribute_names(
                            "#ppk",
                            self.keys.pending_partition_key.as_str(),
                        )
                        .expression_attribute_values(":pk", s(key.pk.clone()))
                        .expression_attribute_values(":lo", s(self.keys.outbox_prefix.as_str()))
                        .expression_attribute_values(":hi", s(key.sk.clone()))
                        .projection_expression("#sk, #ppk")
                        .consistent_read(true)
                        .set_exclusive_start_key(cursor)
                        .send(),
                )
                .await
                .map_err(|e| e.into_store(operation))?;
            older.extend(out.items().iter().filter_map(|item| {
                let sk = item
                    .get(self.keys.sort_key.as_str())
                    .and_then(|v| v.as_s().ok())?;
                (*sk != key.sk).then(|| {
                    (
                        sk.clone(),
                        item.contains_key(self.keys.pending_partition_key.as_str()),
                    )
                })
            }));
            match out.last_evaluated_key() {
                Some(next) => cursor = Some(next.clone()),
                None => return Ok(older),
            }
        }
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
        sets.push(format!("{} = :sk", self.keys.pending_sort_key.as_str()));
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
            "attribute_exists({}) AND attribute_exists({}) AND {}",
            self.keys.partition_key.as_str(),
            self.keys.pending_partition_key.as_str(),
            unclaimed_but(handover.claim, &mut values)
        );
        self.conditional_update(key, (&update, &condition), &[], values, operation, deadline)
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

impl OutboxStore for DynamoStore {
    async fn adopt_unregioned(&self, shard: u16, deadline: &Deadline) -> Result<usize, StoreError> {
        if self.keys.home_region.is_none() {
            return Ok(0);
        }
        let moved = self.adopt(None, shard, false, false, deadline).await?;
        Ok(moved
            .iter()
            .filter(|a| a.outcome == AdoptOutcome::Adopted)
            .count())
    }

    async fn delete_published(&self, keys: &[ItemKey], deadline: &Deadline) -> Vec<ItemKey> {
        let mut failed = Vec::new();
        for chunk in keys.chunks(MAX_BATCH_WRITE) {
            // A lone key: `DeleteItem`, the single-item call (a batch of one
            // costs the same write unit and answers slower). At a trickle,
            // one record an invocation, every delete is one of these.
            if let [key] = chunk {
                if !self.delete_one(key, deadline).await {
                    failed.push(key.clone());
                }
                continue;
            }
            let mut requests: Vec<WriteRequest> = chunk
                .iter()
                .filter_map(|key| {
                    DeleteRequest::builder()
                        .set_key(Some(self.keys.key(key)))
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
                    // The SDK retried the whole call already: give up on it.
                    Some(Err(e)) => {
                        tracing::warn!(code = %error_code(&e), "BatchWriteItem failed");
                        break;
                    }
                    None => {
                        tracing::warn!("BatchWriteItem cut by the deadline");
                        break;
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
                    .filter_map(|d| self.keys.item_key(d.key())),
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
        let sort = self
            .keys
            .event_id_from_sk(&key.sk)
            .map(|id| id.to_string())
            .unwrap_or_else(|| key.sk.clone());
        let now = now_utc_millis()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let mut update = format!(
            "SET {} = :now, {} = :reason, {} = :dpk, {} = :dsk",
            attr::DEAD_LETTERED_AT,
            attr::DEAD_LETTER_REASON,
            self.keys.dead_letter_partition_key.as_str(),
            self.keys.dead_letter_sort_key.as_str()
        );
        let mut values = HashMap::from([
            (":now".to_owned(), s(now)),
            (":reason".to_owned(), s(sanitize(letter.reason))),
            (":dpk".to_owned(), s(self.keys.dead_pk(shard))),
            (":dsk".to_owned(), s(sort)),
        ]);
        if let Some(attempts) = letter.attempts {
            update.push_str(&format!(", {} = :attempts", attr::ATTEMPTS));
            values.insert(":attempts".to_owned(), n(attempts));
        }
        update.push_str(&format!(
            " REMOVE {}, {}, {}, {}, {}",
            self.keys.pending_partition_key.as_str(),
            self.keys.pending_sort_key.as_str(),
            attr::NEXT_ATTEMPT_AT,
            attr::CLAIM_TOKEN,
            attr::CLAIMED_UNTIL
        ));
        let condition = format!(
            "attribute_exists({}) AND attribute_not_exists({}) AND {}",
            self.keys.partition_key.as_str(),
            attr::DEAD_LETTERED_AT,
            unclaimed_but(letter.claim, &mut values)
        );
        self.conditional_update(
            key,
            (&update, &condition),
            &[],
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
        claim: Option<&str>,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        self.hand_to_schedule(
            key,
            &[
                (attr::ATTEMPTS, n(attempts)),
                (attr::LAST_ERROR, s(sanitize(error))),
                (attr::NEXT_ATTEMPT_AT, n(next_attempt_at)),
            ],
            Handover {
                claim,
                held: false,
                unhold: true,
            },
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
            .bound(record_shard_count(
                &self.client,
                &self.table,
                &self.keys,
                self.shards,
            ))
            .await
            .unwrap_or_else(|| Err(StoreError::new("record_shard_count", "DeadlineReached")))
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
            Created::Redriven => {
                let (from, to) = keys::redriven_range();
                (
                    "#pk = :pk AND #sk BETWEEN :from AND :to",
                    vec![(":from", from), (":to", to)],
                )
            }
            Created::Any => ("#pk = :pk", vec![]),
        };
        let mut request = self
            .client
            .query()
            .table_name(&self.table)
            .index_name(self.keys.pending_index.as_str())
            .key_condition_expression(condition)
            .expression_attribute_names("#pk", self.keys.pending_partition_key.as_str())
            .expression_attribute_values(":pk", s(self.keys.pending_pk(query.shard)))
            .scan_index_forward(true)
            .limit(query.limit)
            .set_exclusive_start_key(cursor);
        if !bounds.is_empty() {
            request =
                request.expression_attribute_names("#sk", self.keys.pending_sort_key.as_str());
        }
        for (name, value) in bounds {
            request = request.expression_attribute_values(name, s(value));
        }
        let out = self
            .call("pending_page", deadline, request.send())
            .await
            .map_err(|e| e.into_store("pending_page"))?;
        let mut page = Page {
            scanned: out.scanned_count().max(0) as usize,
            next: out.last_evaluated_key().cloned(),
            ..Page::default()
        };
        for item in out.items.unwrap_or_default() {
            let key = self.keys.item_key(&item);
            match OutboxItem::from_attributes(self.keys.from_table(item)) {
                Ok(decoded) => page.items.push(PendingItem::Item(decoded)),
                Err(e) => match key {
                    Some(key) => page.items.push(PendingItem::Undecodable {
                        event_id: self.keys.event_id_from_sk(&key.sk),
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
        // The index's first item is the oldest, unless it is a redriven one
        // (`!<ulid>` sorts first whatever its age): then the oldest is the
        // older of it and the first item after the redriven range.
        let (first, mut scanned) = self.first_pending(shard, None, deadline).await?;
        let mut queries = 3;
        let mut oldest = first.as_deref().and_then(keys::event_id_from_pending_sk);
        if first.as_deref().is_some_and(keys::is_redriven_sk) {
            let after = keys::redriven_range().1;
            let (next, more) = self.first_pending(shard, Some(&after), deadline).await?;
            scanned += more;
            queries += 1;
            let stranded = next.as_deref().and_then(keys::event_id_from_pending_sk);
            oldest = match (oldest, stranded) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        let (pending, pending_capped, pending_scanned) = self
            .count(
                self.keys.pending_index.as_str(),
                self.keys.pending_partition_key.as_str(),
                self.keys.pending_pk(shard),
                count_limit,
                deadline,
            )
            .await?;
        let (dead_letters, dead_letters_capped, dead_scanned) = self
            .count(
                self.keys.dead_letter_index.as_str(),
                self.keys.dead_letter_partition_key.as_str(),
                self.keys.dead_pk(shard),
                count_limit,
                deadline,
            )
            .await?;
        Ok(ShardStats {
            oldest,
            pending,
            pending_capped,
            dead_letters,
            dead_letters_capped,
            scanned: scanned + pending_scanned + dead_scanned,
            queries,
        })
    }

    async fn recorded_shards(&self, deadline: &Deadline) -> Result<u16, StoreError> {
        Ok(self
            .settings_item("recorded_shards", deadline)
            .await?
            .as_ref()
            .and_then(|i| i.get(attr::SHARDS_HIGH_WATER))
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok())
            .unwrap_or(self.shards)
            .max(1))
    }

    async fn record_settings(
        &self,
        settings: &RecordedSettings,
        deadline: &Deadline,
    ) -> Result<(), StoreError> {
        // An UpdateItem, the write the functions' roles already grant for
        // their bookkeeping: the record's whole content is replaced.
        let variables = AttributeValue::M(
            settings
                .variables
                .iter()
                .map(|(k, v)| (k.clone(), s(v.clone())))
                .collect(),
        );
        self.call(
            "record_settings",
            deadline,
            self.client
                .update_item()
                .table_name(&self.table)
                .set_key(Some(self.keys.key(&keys::stack_settings_key(
                    &settings.region,
                    &settings.function,
                ))))
                .update_expression("SET #variables = :variables, #by = :by")
                .expression_attribute_names("#variables", attr::VARIABLES)
                .expression_attribute_names("#by", attr::RECORDED_BY)
                .expression_attribute_values(":variables", variables)
                .expression_attribute_values(":by", s(settings.by.clone()))
                .send(),
        )
        .await
        .map(|_| ())
        .map_err(|e| e.into_store("record_settings"))
    }

    async fn recorded_settings(
        &self,
        deadline: &Deadline,
    ) -> Result<Vec<RecordedSettings>, StoreError> {
        let out = self
            .call(
                "recorded_settings",
                deadline,
                self.client
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
                    .expression_attribute_names("#pk", self.keys.partition_key.as_str())
                    .expression_attribute_names("#sk", self.keys.sort_key.as_str())
                    .expression_attribute_values(":pk", s(keys::SETTINGS_PK))
                    .expression_attribute_values(":prefix", s(keys::STACK_SETTINGS_PREFIX))
                    .consistent_read(true)
                    .send(),
            )
            .await
            .map_err(|e| e.into_store("recorded_settings"))?;
        let sort_key = self.keys.sort_key.as_str();
        Ok(out
            .items()
            .iter()
            .filter_map(|item| {
                let sk = item.get(sort_key)?.as_s().ok()?;
                let (region, function) = sk
                    .strip_prefix(keys::STACK_SETTINGS_PREFIX)?
                    .rsplit_once('#')?;
                let variables = item
                    .get(attr::VARIABLES)?
                    .as_m()
                    .ok()?
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_s().ok()?.clone())))
                    .collect();
                Some(RecordedSettings {
                    region: region.to_owned(),
                    function: function.to_owned(),
                    by: item
                        .get(attr::RECORDED_BY)
                        .and_then(|v| v.as_s().ok())
                        .cloned()
                        .unwrap_or_default(),
                    variables,
                })
            })
            .collect())
    }

    async fn older_pending(&self, key: &ItemKey, deadline: &Deadline) -> Result<bool, StoreError> {
        let older = self.older_outbox(key, deadline, "older_pending").await?;
        Ok(older.iter().any(|(_, pending)| *pending))
    }

    async fn claim_pending(
        &self,
        key: &ItemKey,
        claim: &Claim,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let update = format!(
            "SET {} = :token, {} = :until",
            attr::CLAIM_TOKEN,
            attr::CLAIMED_UNTIL
        );
        // Its own claim counts as free: an SDK retry of a claim that was
        // applied (its answer lost) must not find the run's own claim and
        // leave the event to nobody.
        let mut condition = format!(
            "attribute_exists({}) AND (attribute_not_exists({until}) OR {until} < :now OR {token} = :token)",
            self.keys.pending_partition_key.as_str(),
            until = attr::CLAIMED_UNTIL,
            token = attr::CLAIM_TOKEN
        );
        let mut values = HashMap::from([
            (":token".to_owned(), s(claim.token.clone())),
            (":until".to_owned(), n(claim.until)),
            (":now".to_owned(), n(now_utc_millis().unix_timestamp())),
        ]);
        // Global tables: only the event's home region publishes it.
        if let Some(home) = &self.keys.home_region {
            condition.push_str(&format!(
                " AND (attribute_not_exists({home_attr}) OR {home_attr} = :home)",
                home_attr = attr::HOME_REGION
            ));
            values.insert(":home".to_owned(), s(home.clone()));
        }
        self.conditional_update(
            key,
            (&update, &condition),
            &[],
            values,
            "claim_pending",
            deadline,
        )
        .await
    }

    async fn collection_below(
        &self,
        key: &ItemKey,
        limit: i32,
        deadline: &Deadline,
    ) -> Result<CollectionRead, StoreError> {
        let out = self
            .call(
                "collection_below",
                deadline,
                self.client
                    .query()
                    .table_name(&self.table)
                    .key_condition_expression("#pk = :pk AND #sk BETWEEN :lo AND :hi")
                    .expression_attribute_names("#pk", self.keys.partition_key.as_str())
                    .expression_attribute_names("#sk", self.keys.sort_key.as_str())
                    .expression_attribute_values(":pk", s(key.pk.clone()))
                    .expression_attribute_values(":lo", s(self.keys.outbox_prefix.as_str()))
                    .expression_attribute_values(":hi", s(key.sk.clone()))
                    .projection_expression("#sk, #home, #dead")
                    .expression_attribute_names("#home", attr::HOME_REGION)
                    .expression_attribute_names("#dead", attr::DEAD_LETTERED_AT)
                    .scan_index_forward(false)
                    .limit(limit.max(1))
                    .consistent_read(true)
                    .send(),
            )
            .await
            .map_err(|e| e.into_store("collection_below"))?;
        let mut read = CollectionRead {
            top: key.sk.clone(),
            complete: out.last_evaluated_key().is_none(),
            ..CollectionRead::default()
        };
        for item in out.items() {
            let Some(sk) = item
                .get(self.keys.sort_key.as_str())
                .and_then(|v| v.as_s().ok())
            else {
                continue;
            };
            if !self.ours_to_publish(item) {
                read.not_ours.push(sk.clone());
            }
            read.keys.push(sk.clone());
        }
        Ok(read)
    }

    async fn publishable(
        &self,
        keys: &[ItemKey],
        deadline: &Deadline,
    ) -> Result<HashSet<ItemKey>, StoreError> {
        let mut publishable = HashSet::with_capacity(keys.len());
        for chunk in keys.chunks(MAX_BATCH_GET) {
            let mut wanted: Vec<HashMap<String, AttributeValue>> =
                chunk.iter().map(|key| self.keys.key(key)).collect();
            let mut attempt = 1;
            while !wanted.is_empty() {
                let request = KeysAndAttributes::builder()
                    .set_keys(Some(wanted.clone()))
                    .consistent_read(true)
                    .projection_expression("#pk, #sk, #home, #dead")
                    .expression_attribute_names("#pk", self.keys.partition_key.as_str())
                    .expression_attribute_names("#sk", self.keys.sort_key.as_str())
                    .expression_attribute_names("#home", attr::HOME_REGION)
                    .expression_attribute_names("#dead", attr::DEAD_LETTERED_AT)
                    .build()
                    .map_err(|e| StoreError::new("publishable", e.to_string()))?;
                let out = self
                    .call(
                        "publishable",
                        deadline,
                        self.client
                            .batch_get_item()
                            .request_items(&self.table, request)
                            .send(),
                    )
                    .await
                    .map_err(|e| e.into_store("publishable"))?;
                for item in out
                    .responses()
                    .and_then(|r| r.get(&self.table))
                    .into_iter()
                    .flatten()
                {
                    if let Some(key) = self.keys.item_key(item) {
                        if self.ours_to_publish(item) {
                            publishable.insert(key);
                        }
                    }
                }
                wanted = out
                    .unprocessed_keys()
                    .and_then(|u| u.get(&self.table))
                    .map(|k| k.keys().to_vec())
                    .unwrap_or_default();
                if !wanted.is_empty() && !self.retry.wait(attempt, deadline).await {
                    // Not read in time: publishable (a duplicate, never a loss).
                    publishable.extend(wanted.iter().filter_map(|k| self.keys.item_key(k)));
                    break;
                }
                attempt += 1;
            }
        }
        Ok(publishable)
    }

    async fn hold(
        &self,
        key: &ItemKey,
        behind: &str,
        claim: Option<&str>,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        self.hand_to_schedule(
            key,
            &[(attr::HELD_BEHIND, s(behind))],
            Handover {
                claim,
                held: true,
                unhold: false,
            },
            "hold",
            deadline,
        )
        .await
    }

    async fn make_due(&self, key: &ItemKey, deadline: &Deadline) -> Result<Marked, StoreError> {
        self.hand_to_schedule(
            key,
            &[(attr::NEXT_ATTEMPT_AT, n(now_utc_millis().unix_timestamp()))],
            Handover {
                claim: None,
                held: false,
                unhold: false,
            },
            "make_due",
            deadline,
        )
        .await
    }

    async fn newer_pending(
        &self,
        key: &ItemKey,
        deadline: &Deadline,
    ) -> Result<Vec<PendingItem>, StoreError> {
        let mut newer = Vec::new();
        let mut cursor = None;
        loop {
            let out = self
                .call(
                    "newer_pending",
                    deadline,
                    self.client
                        .query()
                        .table_name(&self.table)
                        .key_condition_expression("#pk = :pk AND #sk BETWEEN :lo AND :hi")
                        .filter_expression("attribute_exists(#ppk)")
                        .expression_attribute_names("#pk", self.keys.partition_key.as_str())
                        .expression_attribute_names("#sk", self.keys.sort_key.as_str())
                        .expression_attribute_names(
                            "#ppk",
                            self.keys.pending_partition_key.as_str(),
                        )
                        .expression_attribute_values(":pk", s(key.pk.clone()))
                        .expression_attribute_values(":lo", s(key.sk.clone()))
                        .expression_attribute_values(":hi", s(self.keys.outbox_sk_end()))
                        .consistent_read(true)
                        .set_exclusive_start_key(cursor)
                        .send(),
                )
                .await
                .map_err(|e| e.into_store("newer_pending"))?;
            let next = out.last_evaluated_key().cloned();
            for item in out.items.unwrap_or_default() {
                let Some(item_key) = self.keys.item_key(&item) else {
                    continue;
                };
                if item_key.sk == key.sk {
                    continue;
                }
                // Global tables: another region's events are its own to
                // release.
                let region = item.get(attr::HOME_REGION).and_then(|v| v.as_s().ok());
                if !self.keys.publishes_region(region.map(String::as_str)) {
                    continue;
                }
                newer.push(
                    match OutboxItem::from_attributes(self.keys.from_table(item)) {
                        Ok(decoded) => PendingItem::Item(decoded),
                        Err(e) => PendingItem::Undecodable {
                            event_id: self.keys.event_id_from_sk(&item_key.sk),
                            key: item_key,
                            reason: e.to_string(),
                        },
                    },
                );
            }
            match next {
                Some(next) => cursor = Some(next),
                None => return Ok(newer),
            }
        }
    }

    async fn dead_letter_page(
        &self,
        shard: u16,
        limit: i32,
        cursor: Option<Cursor>,
        deadline: &Deadline,
    ) -> Result<DeadLetterPage, StoreError> {
        let out = self
            .call(
                "dead_letter_page",
                deadline,
                self.client
                    .query()
                    .table_name(&self.table)
                    .index_name(self.keys.dead_letter_index.as_str())
                    .key_condition_expression("#pk = :pk")
                    .expression_attribute_names("#pk", self.keys.dead_letter_partition_key.as_str())
                    .expression_attribute_values(":pk", s(self.keys.dead_pk(shard)))
                    .scan_index_forward(true)
                    .limit(limit)
                    .set_exclusive_start_key(cursor)
                    .send(),
            )
            .await
            .map_err(|e| e.into_store("dead_letter_page"))?;
        Ok(DeadLetterPage {
            next: out.last_evaluated_key().cloned(),
            items: out
                .items()
                .iter()
                .map(|item| dead_letter_record(&self.keys, item, shard))
                .collect(),
        })
    }

    async fn find_dead_letter(
        &self,
        shard: u16,
        event_id: Ulid,
        deadline: &Deadline,
    ) -> Result<Option<DeadLetterRecord>, StoreError> {
        let out = self
            .call(
                "find_dead_letter",
                deadline,
                self.client
                    .query()
                    .table_name(&self.table)
                    .index_name(self.keys.dead_letter_index.as_str())
                    .key_condition_expression("#pk = :pk AND #sk = :sk")
                    .expression_attribute_names("#pk", self.keys.dead_letter_partition_key.as_str())
                    .expression_attribute_names("#sk", self.keys.dead_letter_sort_key.as_str())
                    .expression_attribute_values(":pk", s(self.keys.dead_pk(shard)))
                    .expression_attribute_values(":sk", s(event_id.to_string()))
                    .send(),
            )
            .await
            .map_err(|e| e.into_store("find_dead_letter"))?;
        Ok(out
            .items()
            .first()
            .map(|item| dead_letter_record(&self.keys, item, shard)))
    }

    async fn redrive(
        &self,
        letter: &DeadLetterRecord,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let redriven_sk = Ulid::from_string(&letter.event_id)
            .map(keys::redriven_sk)
            .map_err(|_| StoreError::new("redrive", "NotAnEventId"))?;
        self.conditional_update(
            &letter.key,
            (
                "SET #ppk = :ppk, #psk = :psk, #attempts = :zero REMOVE #dpk, #dsk, #dla, #reason, #next, #token, #until",
                "attribute_exists(#dla) AND #dsk = :id AND (attribute_not_exists(#until) OR #until < :now)",
            ),
            &[
                ("#ppk", self.keys.pending_partition_key.as_str()),
                ("#psk", self.keys.pending_sort_key.as_str()),
                ("#attempts", attr::ATTEMPTS),
                ("#dpk", self.keys.dead_letter_partition_key.as_str()),
                ("#dsk", self.keys.dead_letter_sort_key.as_str()),
                ("#dla", attr::DEAD_LETTERED_AT),
                ("#reason", attr::DEAD_LETTER_REASON),
                ("#next", attr::NEXT_ATTEMPT_AT),
                ("#token", attr::CLAIM_TOKEN),
                ("#until", attr::CLAIMED_UNTIL),
            ],
            HashMap::from([
                (":ppk".to_owned(), s(self.keys.pending_pk(letter.shard))),
                (":psk".to_owned(), s(redriven_sk)),
                (":id".to_owned(), s(letter.event_id.clone())),
                (":zero".to_owned(), n(0)),
                (":now".to_owned(), n(now_utc_millis().unix_timestamp())),
            ]),
            "redrive",
            deadline,
        )
        .await
    }

    async fn claim_dead_letter(
        &self,
        letter: &DeadLetterRecord,
        claim: &Claim,
        deadline: &Deadline,
    ) -> Result<Option<OutboxItem>, StoreError> {
        let result = self
            .call(
                "claim_dead_letter",
                deadline,
                self.client
                    .update_item()
                    .table_name(&self.table)
                    .set_key(Some(self.keys.key(&letter.key)))
                    .update_expression("SET #token = :token, #until = :until")
                    .condition_expression(
                        "attribute_exists(#dla) AND #dsk = :id AND (attribute_not_exists(#until) OR #until < :now)",
                    )
                    .expression_attribute_names("#token", attr::CLAIM_TOKEN)
                    .expression_attribute_names("#until", attr::CLAIMED_UNTIL)
                    .expression_attribute_names("#dla", attr::DEAD_LETTERED_AT)
                    .expression_attribute_names("#dsk", self.keys.dead_letter_sort_key.as_str())
                    .expression_attribute_values(":token", s(claim.token.clone()))
                    .expression_attribute_values(":until", n(claim.until))
                    .expression_attribute_values(":id", s(letter.event_id.clone()))
                    .expression_attribute_values(":now", n(now_utc_millis().unix_timestamp()))
                    .return_values(aws_sdk_dynamodb::types::ReturnValue::AllNew)
                    .send(),
            )
            .await;
        match result {
            Ok(out) => {
                let item = out
                    .attributes
                    .ok_or_else(|| StoreError::new("claim_dead_letter", "NoItemReturned"))?;
                serde_dynamo::from_item(self.keys.from_table(item))
                    .map(Some)
                    .map_err(|_| StoreError::new("claim_dead_letter", "ItemDoesNotDecode"))
            }
            Err(Failed::Service(_, code)) if code == "ConditionalCheckFailedException" => Ok(None),
            Err(other) => Err(other.into_store("claim_dead_letter")),
        }
    }

    async fn release_claim(
        &self,
        key: &ItemKey,
        claim: &Claim,
        error: Option<&str>,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let mut names = vec![
            ("#token", attr::CLAIM_TOKEN),
            ("#until", attr::CLAIMED_UNTIL),
        ];
        let mut values = HashMap::from([(":token".to_owned(), s(claim.token.clone()))]);
        let update = match error {
            Some(error) => {
                names.push(("#reason", attr::DEAD_LETTER_REASON));
                values.insert(":reason".to_owned(), s(sanitize(error)));
                "SET #reason = :reason REMOVE #token, #until"
            }
            None => "REMOVE #token, #until",
        };
        self.conditional_update(
            key,
            (update, "#token = :token"),
            &names,
            values,
            "release_claim",
            deadline,
        )
        .await
    }

    async fn delete_claimed(
        &self,
        key: &ItemKey,
        claim: &Claim,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let result = self
            .call(
                "delete_claimed",
                deadline,
                self.client
                    .delete_item()
                    .table_name(&self.table)
                    .set_key(Some(self.keys.key(key)))
                    .condition_expression("#token = :token")
                    .expression_attribute_names("#token", attr::CLAIM_TOKEN)
                    .expression_attribute_values(":token", s(claim.token.clone()))
                    .send(),
            )
            .await;
        conditional(result, "delete_claimed")
    }

    async fn discard(
        &self,
        letter: &DeadLetterRecord,
        deadline: &Deadline,
    ) -> Result<Marked, StoreError> {
        let result = self
            .call(
                "discard",
                deadline,
                self.client
                    .delete_item()
                    .table_name(&self.table)
                    .set_key(Some(self.keys.key(&letter.key)))
                    .condition_expression(
                        "attribute_exists(#dla) AND (attribute_not_exists(#until) OR #until < :now)",
                    )
                    .expression_attribute_names("#dla", attr::DEAD_LETTERED_AT)
                    .expression_attribute_names("#until", attr::CLAIMED_UNTIL)
                    .expression_attribute_values(":now", n(now_utc_millis().unix_timestamp()))
                    .send(),
            )
            .await;
        conditional(result, "discard")
    }
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
