//! The outbox store: what the publisher and the sweeper do to outbox items
//! after publishing. A port ([`OutboxStore`]) and its DynamoDB adapter.
//!
//! Every write here is either a delete (harmless when the item is already
//! gone) or an update conditioned on the item still existing, so nothing in
//! this module can resurrect an item another process deleted.

use std::collections::HashMap;
use std::future::Future;

use aws_sdk_dynamodb::operation::update_item::UpdateItemError;
use aws_sdk_dynamodb::types::{AttributeValue, DeleteRequest, WriteRequest};
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

use crate::envelope::now_utc_millis;
use crate::keys::{self, ItemKey};
use crate::retry::{Deadline, RetryPolicy};

/// Most requests in one `BatchWriteItem`.
pub const MAX_BATCH_WRITE: usize = 25;

/// A store call failed.
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

/// The port the publisher and the sweeper write outbox items through.
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
        key: &ItemKey,
        reason: &str,
        attempts: Option<u32>,
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
    ) -> impl Future<Output = Result<Marked, StoreError>> + Send;
}

/// The DynamoDB adapter.
#[derive(Debug, Clone)]
pub struct DynamoStore {
    pub(crate) client: aws_sdk_dynamodb::Client,
    pub(crate) table: String,
    pub(crate) shards: u16,
    pub(crate) retry: RetryPolicy,
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

    pub fn client(&self) -> &aws_sdk_dynamodb::Client {
        &self.client
    }

    pub fn table(&self) -> &str {
        &self.table
    }

    pub fn shards(&self) -> u16 {
        self.shards
    }

    async fn conditional_update(
        &self,
        key: &ItemKey,
        update: &str,
        condition: &str,
        values: HashMap<String, AttributeValue>,
        operation: &'static str,
    ) -> Result<Marked, StoreError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(key.to_attributes()))
            .update_expression(update)
            .condition_expression(condition)
            .set_expression_attribute_values(Some(values))
            .send()
            .await;
        match result {
            Ok(_) => Ok(Marked::Updated),
            Err(SdkError::ServiceError(e))
                if matches!(e.err(), UpdateItemError::ConditionalCheckFailedException(_)) =>
            {
                Ok(Marked::Gone)
            }
            Err(e) => Err(StoreError {
                operation,
                code: e.code().unwrap_or("Unknown").to_owned(),
            }),
        }
    }
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn n(value: impl ToString) -> AttributeValue {
    AttributeValue::N(value.to_string())
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
                let result = self
                    .client
                    .batch_write_item()
                    .request_items(&self.table, requests.clone())
                    .send()
                    .await;
                // What is left to do: the unprocessed items, or all of them.
                requests = match result {
                    Ok(out) => out
                        .unprocessed_items()
                        .and_then(|u| u.get(&self.table))
                        .cloned()
                        .unwrap_or_default(),
                    Err(e) => {
                        tracing::warn!(
                            code = e.code().unwrap_or("Unknown"),
                            "BatchWriteItem failed"
                        );
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
        key: &ItemKey,
        reason: &str,
        attempts: Option<u32>,
    ) -> Result<Marked, StoreError> {
        let event_id = keys::event_id_from_sk(&key.sk);
        let shard = event_id
            .map(|id| keys::shard_of(id, self.shards))
            .unwrap_or(0);
        let sort = event_id
            .map(|id| id.to_string())
            .unwrap_or_else(|| key.sk.clone());
        let now = now_utc_millis()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default();
        let mut update =
            "SET deadLetteredAt = :now, deadLetterReason = :reason, GSI2PK = :dpk, GSI2SK = :dsk"
                .to_owned();
        let mut values = HashMap::from([
            (":now".to_owned(), s(now)),
            (":reason".to_owned(), s(sanitize(reason))),
            (":dpk".to_owned(), s(keys::dead_pk(shard))),
            (":dsk".to_owned(), s(sort)),
        ]);
        if let Some(attempts) = attempts {
            update.push_str(", attempts = :attempts");
            values.insert(":attempts".to_owned(), n(attempts));
        }
        update.push_str(" REMOVE GSI1PK, GSI1SK, nextAttemptAt");
        self.conditional_update(
            key,
            &update,
            "attribute_exists(PK) AND attribute_not_exists(deadLetteredAt)",
            values,
            "dead_letter",
        )
        .await
    }

    async fn record_failure(
        &self,
        key: &ItemKey,
        attempts: u32,
        next_attempt_at: i64,
        error: &str,
    ) -> Result<Marked, StoreError> {
        self.conditional_update(
            key,
            "SET attempts = :attempts, lastError = :error, nextAttemptAt = :next",
            "attribute_exists(PK) AND attribute_exists(GSI1PK)",
            HashMap::from([
                (":attempts".to_owned(), n(attempts)),
                (":error".to_owned(), s(sanitize(error))),
                (":next".to_owned(), n(next_attempt_at)),
            ]),
            "record_failure",
        )
        .await
    }
}

/// Keeps stored error text short and printable.
pub fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(512)
        .collect()
}
