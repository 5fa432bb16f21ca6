//! Operations on a deployed stack's table: status, dead letters (list,
//! show, redrive, discard). Read only through the two sparse indexes, each
//! read bounded per shard; every write is conditional, so two operators (or
//! an operator and the sweeper) never double an effect.

use std::collections::HashMap;

use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_dynamodb::types::AttributeValue;
use aws_sdk_dynamodb::Client;
use outbox_core::keys::{self, attr};
use outbox_core::OutboxItem;
use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use ulid::Ulid;

/// An operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error("{operation} failed: {message}")]
    Aws {
        operation: &'static str,
        message: String,
    },
    #[error("no dead letter with event id {0}")]
    NotFound(String),
    #[error("{0} is not an event id (a ULID)")]
    BadEventId(String),
}

/// An AWS error as one line: the operation and the service's code.
pub fn aws_error(operation: &'static str, e: impl std::fmt::Debug) -> String {
    aws(operation)(e).to_string()
}

fn aws<E: std::fmt::Debug>(operation: &'static str) -> impl Fn(E) -> OpsError {
    move |e| {
        let text = format!("{e:?}");
        // The service's code when there is one, not the SDK's whole debug dump.
        let code = text
            .split("code: Some(\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .map(str::to_owned);
        OpsError::Aws {
            operation,
            message: code.unwrap_or_else(|| text.chars().take(300).collect()),
        }
    }
}

/// AWS options as the AWS CLI takes them; `AWS_ENDPOINT_URL`, the default
/// credential chain and region are honoured like the CLI does.
#[derive(Debug, Clone, Default)]
pub struct AwsOptions {
    pub region: Option<String>,
    pub profile: Option<String>,
    pub endpoint_url: Option<String>,
}

/// The SDK configuration for a deployed stack.
pub async fn sdk_config(options: &AwsOptions) -> SdkConfig {
    let mut loader =
        outbox_core::telemetry::sdk_settings(aws_config::defaults(BehaviorVersion::latest()));
    if let Some(region) = &options.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(profile) = &options.profile {
        loader = loader.profile_name(profile);
    }
    if let Some(endpoint) = &options.endpoint_url {
        loader = loader.endpoint_url(endpoint);
    }
    loader.load().await
}

/// Items read per shard and index, at most (a status is a bounded read).
pub const READ_LIMIT: i32 = 1_000;

/// The table an operation works on.
#[derive(Debug, Clone)]
pub struct Table {
    pub client: Client,
    pub name: String,
}

/// One shard's figures.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ShardStatus {
    pub shard: u16,
    pub pending: usize,
    /// `pending` stopped at [`READ_LIMIT`]: it is a lower bound.
    pub pending_capped: bool,
    pub backing_off: usize,
    pub dead_letters: usize,
    pub dead_letters_capped: bool,
    pub oldest_pending_age_seconds: Option<i64>,
}

/// `outboxctl status`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Status {
    pub pending: usize,
    pub oldest_pending_age_seconds: Option<i64>,
    /// Pending items a sweeper attempt failed for, waiting for their backoff.
    pub backing_off: usize,
    /// When the earliest of them is due (RFC 3339).
    pub next_attempt_due: Option<String>,
    pub dead_letters: usize,
    /// A count stopped at the read limit somewhere: totals are lower bounds.
    pub capped: bool,
    pub shards: Vec<ShardStatus>,
}

fn s(value: impl Into<String>) -> AttributeValue {
    AttributeValue::S(value.into())
}

fn rfc3339(t: OffsetDateTime) -> String {
    t.format(&Rfc3339).unwrap_or_default()
}

impl Table {
    pub fn new(sdk: &SdkConfig, name: &str) -> Self {
        Self {
            client: Client::new(sdk),
            name: name.to_owned(),
        }
    }

    /// Shards to read: the highest count the writers and sweepers recorded
    /// (`OUTBOX_SHARDS`'s default, 8, when none is).
    pub async fn shards(&self) -> Result<u16, OpsError> {
        let settings = keys::settings_key();
        let out = self
            .client
            .get_item()
            .table_name(&self.name)
            .key(keys::PK, s(settings.pk))
            .key(keys::SK, s(settings.sk))
            .consistent_read(true)
            .send()
            .await
            .map_err(aws("GetItem (settings)"))?;
        Ok(out
            .item
            .as_ref()
            .and_then(|i| i.get(attr::SHARDS_HIGH_WATER))
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok())
            .unwrap_or(8)
            .max(1))
    }

    /// Items of one index partition, oldest first, at most `limit`.
    async fn partition(
        &self,
        index: &str,
        pk_name: &str,
        pk: String,
        limit: i32,
    ) -> Result<(Vec<HashMap<String, AttributeValue>>, bool), OpsError> {
        let mut items = Vec::new();
        let mut start = None;
        loop {
            let out = self
                .client
                .query()
                .table_name(&self.name)
                .index_name(index)
                .key_condition_expression("#pk = :pk")
                .expression_attribute_names("#pk", pk_name)
                .expression_attribute_values(":pk", s(pk.clone()))
                .scan_index_forward(true)
                .limit(limit - items.len() as i32)
                .set_exclusive_start_key(start)
                .send()
                .await
                .map_err(aws("Query"))?;
            items.extend(out.items.unwrap_or_default());
            start = out.last_evaluated_key;
            if start.is_none() {
                return Ok((items, false));
            }
            if items.len() as i32 >= limit {
                return Ok((items, true));
            }
        }
    }

    /// Pending, backing-off and dead-lettered events, per shard.
    pub async fn status(&self, now: OffsetDateTime) -> Result<Status, OpsError> {
        let shards = self.shards().await?;
        let mut status = Status::default();
        let mut next_due: Option<i64> = None;
        for shard in 0..shards {
            let (pending, pending_capped) = self
                .partition(
                    keys::PENDING_INDEX,
                    keys::PENDING_PK,
                    keys::pending_pk(shard),
                    READ_LIMIT,
                )
                .await?;
            let (dead, dead_capped) = self
                .partition(
                    keys::DEAD_LETTER_INDEX,
                    keys::DEAD_PK,
                    keys::dead_pk(shard),
                    READ_LIMIT,
                )
                .await?;
            let oldest = pending
                .first()
                .and_then(|i| i.get(keys::PENDING_SK))
                .and_then(|v| v.as_s().ok())
                .and_then(|v| Ulid::from_string(v).ok());
            let age = oldest.map(|id| {
                let created = (id.timestamp_ms() / 1000) as i64;
                (now.unix_timestamp() - created).max(0)
            });
            let waiting: Vec<i64> = pending
                .iter()
                .filter_map(|i| i.get(attr::NEXT_ATTEMPT_AT))
                .filter_map(|v| v.as_n().ok())
                .filter_map(|n| n.parse::<i64>().ok())
                .filter(|at| *at > now.unix_timestamp())
                .collect();
            if let Some(min) = waiting.iter().min() {
                next_due = Some(next_due.map_or(*min, |d| d.min(*min)));
            }
            let row = ShardStatus {
                shard,
                pending: pending.len(),
                pending_capped,
                backing_off: waiting.len(),
                dead_letters: dead.len(),
                dead_letters_capped: dead_capped,
                oldest_pending_age_seconds: age,
            };
            status.pending += row.pending;
            status.backing_off += row.backing_off;
            status.dead_letters += row.dead_letters;
            status.capped |= pending_capped || dead_capped;
            status.oldest_pending_age_seconds = match (status.oldest_pending_age_seconds, age) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            };
            status.shards.push(row);
        }
        status.next_attempt_due = next_due
            .and_then(|t| OffsetDateTime::from_unix_timestamp(t).ok())
            .map(rfc3339);
        Ok(status)
    }

    /// Every dead letter that `filter` keeps, oldest first (at most
    /// [`READ_LIMIT`] per shard).
    pub async fn dead_letters(&self, filter: &Filter) -> Result<Vec<DeadLetterRow>, OpsError> {
        let mut rows = Vec::new();
        for shard in 0..self.shards().await? {
            let (items, _) = self
                .partition(
                    keys::DEAD_LETTER_INDEX,
                    keys::DEAD_PK,
                    keys::dead_pk(shard),
                    READ_LIMIT,
                )
                .await?;
            rows.extend(
                items
                    .iter()
                    .map(|i| DeadLetterRow::from_item(i, shard))
                    .filter(|row| filter.keeps(row)),
            );
        }
        rows.sort_by(|a, b| a.event_id.cmp(&b.event_id));
        Ok(rows)
    }

    /// The dead letter of `event_id` (its item, every attribute).
    pub async fn find(
        &self,
        event_id: &str,
    ) -> Result<(DeadLetterRow, HashMap<String, AttributeValue>), OpsError> {
        let id = Ulid::from_string(event_id)
            .map_err(|_| OpsError::BadEventId(event_id.to_owned()))?
            .to_string();
        for shard in 0..self.shards().await? {
            let out = self
                .client
                .query()
                .table_name(&self.name)
                .index_name(keys::DEAD_LETTER_INDEX)
                .key_condition_expression("#pk = :pk AND #sk = :sk")
                .expression_attribute_names("#pk", keys::DEAD_PK)
                .expression_attribute_names("#sk", keys::DEAD_SK)
                .expression_attribute_values(":pk", s(keys::dead_pk(shard)))
                .expression_attribute_values(":sk", s(id.clone()))
                .send()
                .await
                .map_err(aws("Query"))?;
            if let Some(item) = out.items.unwrap_or_default().into_iter().next() {
                return Ok((DeadLetterRow::from_item(&item, shard), item));
            }
        }
        Err(OpsError::NotFound(id))
    }

    /// Puts a dead letter back into the pending index, attempts reset and
    /// due now, with its `eventId` unchanged. Conditional on it still being
    /// dead-lettered: of two concurrent redrives, one wins.
    pub async fn redrive(&self, row: &DeadLetterRow) -> Result<Redrive, OpsError> {
        let result = self
            .client
            .update_item()
            .table_name(&self.name)
            .key(keys::PK, s(row.pk.clone()))
            .key(keys::SK, s(row.sk.clone()))
            .update_expression(
                "SET #ppk = :ppk, #psk = :psk, #attempts = :zero REMOVE #dpk, #dsk, #dla, #reason, #next",
            )
            .condition_expression("attribute_exists(#dla) AND #dsk = :psk")
            .expression_attribute_names("#ppk", keys::PENDING_PK)
            .expression_attribute_names("#psk", keys::PENDING_SK)
            .expression_attribute_names("#attempts", attr::ATTEMPTS)
            .expression_attribute_names("#dpk", keys::DEAD_PK)
            .expression_attribute_names("#dsk", keys::DEAD_SK)
            .expression_attribute_names("#dla", attr::DEAD_LETTERED_AT)
            .expression_attribute_names("#reason", attr::DEAD_LETTER_REASON)
            .expression_attribute_names("#next", attr::NEXT_ATTEMPT_AT)
            .expression_attribute_values(":ppk", s(keys::pending_pk(row.shard)))
            .expression_attribute_values(":psk", s(row.event_id.clone()))
            .expression_attribute_values(":zero", AttributeValue::N("0".into()))
            .send()
            .await;
        conditional(result, Redrive::Redriven, "UpdateItem")
    }

    /// Deletes a dead letter; conditional on it still being one.
    pub async fn discard(&self, row: &DeadLetterRow) -> Result<Redrive, OpsError> {
        let result = self
            .client
            .delete_item()
            .table_name(&self.name)
            .key(keys::PK, s(row.pk.clone()))
            .key(keys::SK, s(row.sk.clone()))
            .condition_expression("attribute_exists(#dla)")
            .expression_attribute_names("#dla", attr::DEAD_LETTERED_AT)
            .send()
            .await;
        conditional(result, Redrive::Discarded, "DeleteItem")
    }
}

/// The outcome of a write conditional on the item still being a dead
/// letter: `done`, or [`Redrive::NotDeadLettered`] when the condition failed.
fn conditional<T, E>(
    result: Result<T, aws_sdk_dynamodb::error::SdkError<E>>,
    done: Redrive,
    operation: &'static str,
) -> Result<Redrive, OpsError>
where
    E: aws_sdk_dynamodb::error::ProvideErrorMetadata + std::fmt::Debug,
    aws_sdk_dynamodb::error::SdkError<E>: std::fmt::Debug,
{
    match result {
        Ok(_) => Ok(done),
        Err(e)
            if e.as_service_error().and_then(|e| e.code())
                == Some("ConditionalCheckFailedException") =>
        {
            Ok(Redrive::NotDeadLettered)
        }
        Err(e) => Err(aws(operation)(e)),
    }
}

/// What a redrive or a discard did to one dead letter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Redrive {
    Redriven,
    Discarded,
    /// Someone else redrove or discarded it first: nothing changed.
    NotDeadLettered,
}

/// A dead letter, as listed.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetterRow {
    pub event_id: String,
    pub event_type: String,
    pub aggregate_id: String,
    pub attempts: u32,
    pub reason: String,
    pub dead_lettered_at: String,
    #[serde(skip)]
    pub pk: String,
    #[serde(skip)]
    pub sk: String,
    #[serde(skip)]
    pub shard: u16,
}

impl DeadLetterRow {
    fn from_item(item: &HashMap<String, AttributeValue>, shard: u16) -> Self {
        let text = |name: &str| {
            item.get(name)
                .and_then(|v| v.as_s().ok())
                .cloned()
                .unwrap_or_default()
        };
        Self {
            event_id: text(keys::DEAD_SK),
            event_type: text(attr::EVENT_TYPE),
            aggregate_id: text(attr::AGGREGATE_ID),
            attempts: item
                .get(attr::ATTEMPTS)
                .and_then(|v| v.as_n().ok())
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            reason: text(attr::DEAD_LETTER_REASON),
            dead_lettered_at: text(attr::DEAD_LETTERED_AT),
            pk: text(keys::PK),
            sk: text(keys::SK),
            shard,
        }
    }

    /// The envelope of a dead letter's item, when it decodes.
    pub fn envelope(item: &HashMap<String, AttributeValue>) -> Option<serde_json::Value> {
        let text = item.get(attr::ENVELOPE)?.as_s().ok()?;
        serde_json::from_str(text).ok()
    }
}

/// Which dead letters a list or a redrive takes.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    pub event_type: Option<String>,
    pub aggregate_id: Option<String>,
    /// Dead-lettered at or after.
    pub since: Option<OffsetDateTime>,
}

impl Filter {
    fn keeps(&self, row: &DeadLetterRow) -> bool {
        self.event_type
            .as_ref()
            .is_none_or(|t| *t == row.event_type)
            && self
                .aggregate_id
                .as_ref()
                .is_none_or(|a| *a == row.aggregate_id)
            && self.since.is_none_or(|since| {
                OffsetDateTime::parse(&row.dead_lettered_at, &Rfc3339).is_ok_and(|at| at >= since)
            })
    }
}

/// Decodes an item as an outbox item (for `show`).
pub fn decode(item: HashMap<String, AttributeValue>) -> Option<OutboxItem> {
    OutboxItem::from_attributes(item).ok()
}
