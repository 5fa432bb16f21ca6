//! The order commands: each writes the order and its event in one
//! transaction, with optional idempotency keys stored in that same
//! transaction.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Put, Update};
use outbox_core::envelope::now_utc_millis;
use outbox_core::keys::{self, ItemKey};
use outbox_core::EventEnvelope;
use sha2::{Digest, Sha256};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use ulid::Ulid;

use crate::orders::{NewOrder, Order, OrderStatus};
use crate::transaction::{OutboxSettings, OutboxTransaction, TransactionError};

/// The aggregate type of orders' events.
pub const AGGREGATE_TYPE: &str = "Order";
const ORDER_LABEL: &str = "order";
const IDEMPOTENCY_LABEL: &str = "idempotency";
/// How often a payment is retried when the order changed between its read
/// and its conditional write.
const PAY_ATTEMPTS: usize = 3;

/// A validated `Idempotency-Key`: 1 to 255 printable ASCII characters. Only
/// its SHA-256 is stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(raw: &str) -> Result<Self, &'static str> {
        if raw.is_empty() || raw.len() > 255 || !raw.bytes().all(|b| (0x20..0x7f).contains(&b)) {
            return Err("Idempotency-Key must be 1 to 255 printable ASCII characters");
        }
        Ok(Self(hex::encode(Sha256::digest(raw.as_bytes()))))
    }

    fn key(&self) -> ItemKey {
        ItemKey::new(keys::idempotency_pk(&self.0), keys::META)
    }
}

/// A response stored with an idempotency key and replayed for a retry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    pub status: u16,
    pub body: String,
}

/// The result of a command: done now, or done before and replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Done(Order),
    Replayed(StoredResponse),
}

/// Why an order could not be created. Nothing was written in any case.
#[derive(Debug, thiserror::Error)]
pub enum CreateOrderError {
    #[error("the idempotency key was already used for a different request")]
    KeyReused,
    #[error("a request with this idempotency key is in progress")]
    Conflict,
    #[error("throttled")]
    Throttled,
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why an order could not be paid. Nothing was written in any case.
#[derive(Debug, thiserror::Error)]
pub enum PayOrderError {
    #[error("order not found")]
    NotFound,
    #[error("order is {0}, not PENDING")]
    NotPending(&'static str),
    #[error("the idempotency key was already used for a different request")]
    KeyReused,
    #[error("the order is being changed concurrently")]
    Conflict,
    #[error("throttled")]
    Throttled,
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why an order could not be read.
#[derive(Debug, thiserror::Error)]
pub enum GetOrderError {
    #[error("order not found")]
    NotFound,
    #[error("throttled")]
    Throttled,
    #[error("internal error: {0}")]
    Internal(String),
}

/// Creates, pays and reads orders.
#[derive(Debug, Clone)]
pub struct OrderService {
    client: aws_sdk_dynamodb::Client,
    settings: OutboxSettings,
    idempotency_ttl: Duration,
}

impl OrderService {
    pub fn new(
        client: aws_sdk_dynamodb::Client,
        settings: OutboxSettings,
        idempotency_ttl: Duration,
    ) -> Self {
        Self {
            client,
            settings,
            idempotency_ttl,
        }
    }

    pub fn from_config(client: aws_sdk_dynamodb::Client, config: &outbox_core::Config) -> Self {
        Self::new(client, OutboxSettings::from(config), config.idempotency_ttl)
    }

    /// Writes a new `PENDING` order and its `OrderCreated` event in one
    /// transaction: one call, no read.
    pub async fn create(
        &self,
        new: NewOrder,
        key: Option<&IdempotencyKey>,
        traceparent: Option<&str>,
    ) -> Result<Outcome, CreateOrderError> {
        let order_id = Ulid::new().to_string();
        let now = timestamp(now_utc_millis());
        let order = Order {
            order_id: order_id.clone(),
            customer_id: new.customer_id.clone(),
            currency: new.currency.clone(),
            items: new.items.clone(),
            total_cents: new.total_cents,
            status: OrderStatus::Pending,
            version: 1,
            created_at: now.clone(),
            updated_at: now,
        };
        let request_hash = request_hash("POST /orders", &canonical(&new));
        let envelope = event("OrderCreated", &order, traceparent).map_err(internal)?;
        let mut item: HashMap<String, AttributeValue> =
            serde_dynamo::to_item(&order).map_err(internal)?;
        item.extend(ItemKey::order(&order_id).to_attributes());
        let put = Put::builder()
            .table_name(&self.settings.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(PK)")
            .build()
            .map_err(internal)?;
        let mut tx = OutboxTransaction::new(&self.settings)
            .put(ORDER_LABEL, put)
            .event(&keys::order_pk(&order_id), &envelope)
            .idempotency_token(envelope.event_id.to_string());
        if let Some(key) = key {
            tx = tx.put(
                IDEMPOTENCY_LABEL,
                self.idempotency_put::<CreateOrderError>(key, &request_hash, 201, &order)?,
            );
        }
        match tx.send(&self.client).await {
            Ok(_) => Ok(Outcome::Done(order)),
            Err(e) => match replay(&e, &request_hash) {
                Some(Ok(stored)) => Ok(Outcome::Replayed(stored)),
                Some(Err(())) => Err(CreateOrderError::KeyReused),
                None => Err(match e {
                    TransactionError::Throttled => CreateOrderError::Throttled,
                    TransactionError::Conflict { .. } | TransactionError::InProgress => {
                        CreateOrderError::Conflict
                    }
                    other => CreateOrderError::Internal(other.to_string()),
                }),
            },
        }
    }

    /// Moves a `PENDING` order to `PAID` and writes `OrderPaid` in the same
    /// transaction. One consistent read (the event carries the full order)
    /// and one transaction; a replay reads the idempotency record instead of
    /// writing.
    pub async fn pay(
        &self,
        order_id: &str,
        key: Option<&IdempotencyKey>,
        traceparent: Option<&str>,
    ) -> Result<Outcome, PayOrderError> {
        let request_hash = request_hash(&format!("POST /orders/{order_id}/payment"), "");
        for _ in 0..PAY_ATTEMPTS {
            let current = match self.read_order(order_id).await {
                Ok(order) => order,
                Err(GetOrderError::NotFound) => return Err(PayOrderError::NotFound),
                Err(GetOrderError::Throttled) => return Err(PayOrderError::Throttled),
                Err(GetOrderError::Internal(e)) => return Err(PayOrderError::Internal(e)),
            };
            if current.status != OrderStatus::Pending {
                // Paid already: by this very request (a retry), or not.
                if let Some(key) = key {
                    match self.stored_response(key, &request_hash).await? {
                        Some(Ok(stored)) => return Ok(Outcome::Replayed(stored)),
                        Some(Err(())) => return Err(PayOrderError::KeyReused),
                        None => {}
                    }
                }
                return Err(PayOrderError::NotPending(current.status.as_str()));
            }
            let paid = Order {
                status: OrderStatus::Paid,
                version: current.version + 1,
                updated_at: timestamp(now_utc_millis()),
                ..current.clone()
            };
            let envelope = event("OrderPaid", &paid, traceparent).map_err(internal)?;
            let update = Update::builder()
                .table_name(&self.settings.table)
                .set_key(Some(ItemKey::order(order_id).to_attributes()))
                .update_expression("SET #status = :paid, version = :next, updatedAt = :now")
                .condition_expression("#status = :pending AND version = :current")
                .expression_attribute_names("#status", "status")
                .expression_attribute_values(
                    ":paid",
                    AttributeValue::S(OrderStatus::Paid.as_str().into()),
                )
                .expression_attribute_values(
                    ":pending",
                    AttributeValue::S(OrderStatus::Pending.as_str().into()),
                )
                .expression_attribute_values(":next", AttributeValue::N(paid.version.to_string()))
                .expression_attribute_values(
                    ":current",
                    AttributeValue::N(current.version.to_string()),
                )
                .expression_attribute_values(":now", AttributeValue::S(paid.updated_at.clone()))
                .build()
                .map_err(internal)?;
            let mut tx = OutboxTransaction::new(&self.settings)
                .update(ORDER_LABEL, update)
                .event(&keys::order_pk(order_id), &envelope)
                .idempotency_token(envelope.event_id.to_string());
            if let Some(key) = key {
                tx = tx.put(
                    IDEMPOTENCY_LABEL,
                    self.idempotency_put::<PayOrderError>(key, &request_hash, 200, &paid)?,
                );
            }
            match tx.send(&self.client).await {
                Ok(_) => return Ok(Outcome::Done(paid)),
                Err(e) => {
                    match replay(&e, &request_hash) {
                        Some(Ok(stored)) => return Ok(Outcome::Replayed(stored)),
                        Some(Err(())) => return Err(PayOrderError::KeyReused),
                        None => {}
                    }
                    match e.failed_condition(ORDER_LABEL) {
                        // Deleted meanwhile.
                        Some(failed) if failed.item.is_none() => {
                            return Err(PayOrderError::NotFound)
                        }
                        // Changed meanwhile: read again and decide again.
                        Some(_) => continue,
                        None => {}
                    }
                    return Err(match e {
                        TransactionError::Throttled => PayOrderError::Throttled,
                        TransactionError::Conflict { .. } | TransactionError::InProgress => {
                            PayOrderError::Conflict
                        }
                        other => PayOrderError::Internal(other.to_string()),
                    });
                }
            }
        }
        Err(PayOrderError::Conflict)
    }

    /// Reads an order (strongly consistent).
    pub async fn get(&self, order_id: &str) -> Result<Order, GetOrderError> {
        self.read_order(order_id).await
    }

    async fn read_order(&self, order_id: &str) -> Result<Order, GetOrderError> {
        if Ulid::from_string(order_id).is_err() {
            return Err(GetOrderError::NotFound);
        }
        let item = self
            .get_item(ItemKey::order(order_id))
            .await?
            .ok_or(GetOrderError::NotFound)?;
        serde_dynamo::from_item(item).map_err(|e| GetOrderError::Internal(e.to_string()))
    }

    async fn get_item(
        &self,
        key: ItemKey,
    ) -> Result<Option<HashMap<String, AttributeValue>>, GetOrderError> {
        use aws_smithy_types::error::metadata::ProvideErrorMetadata;
        match self
            .client
            .get_item()
            .table_name(&self.settings.table)
            .set_key(Some(key.to_attributes()))
            .consistent_read(true)
            .send()
            .await
        {
            Ok(out) => Ok(out.item),
            Err(e) if is_throttling(e.code()) => Err(GetOrderError::Throttled),
            Err(e) => Err(GetOrderError::Internal(
                e.code().unwrap_or("Unknown").to_owned(),
            )),
        }
    }

    /// The stored response for `key`, if a live record exists: `Ok` when it
    /// was stored for the same request, `Err` when for another.
    async fn stored_response(
        &self,
        key: &IdempotencyKey,
        request_hash: &str,
    ) -> Result<Option<Result<StoredResponse, ()>>, PayOrderError> {
        let item = self.get_item(key.key()).await.map_err(|e| match e {
            GetOrderError::Throttled => PayOrderError::Throttled,
            other => PayOrderError::Internal(other.to_string()),
        })?;
        Ok(item.and_then(|item| decide(&item, request_hash)))
    }

    fn idempotency_put<E: From<String>>(
        &self,
        key: &IdempotencyKey,
        request_hash: &str,
        status: u16,
        order: &Order,
    ) -> Result<Put, E> {
        let now = OffsetDateTime::now_utc().unix_timestamp();
        let expires = now + self.idempotency_ttl.as_secs() as i64;
        let body = serde_json::to_string(order).map_err(|e| E::from(e.to_string()))?;
        let mut item = key.key().to_attributes();
        item.extend([
            (
                "requestHash".to_owned(),
                AttributeValue::S(request_hash.to_owned()),
            ),
            (
                "responseStatus".to_owned(),
                AttributeValue::N(status.to_string()),
            ),
            ("responseBody".to_owned(), AttributeValue::S(body)),
            (
                keys::TTL_ATTRIBUTE.to_owned(),
                AttributeValue::N(expires.to_string()),
            ),
        ]);
        Put::builder()
            .table_name(&self.settings.table)
            .set_item(Some(item))
            // A record past its TTL may not be deleted yet: it no longer counts.
            .condition_expression("attribute_not_exists(PK) OR #expires < :now")
            .expression_attribute_names("#expires", keys::TTL_ATTRIBUTE)
            .expression_attribute_values(":now", AttributeValue::N(now.to_string()))
            .build()
            .map_err(|e| E::from(e.to_string()))
    }
}

/// When the idempotency condition is what failed: `Ok` with the stored
/// response for the same request, `Err` for a different one.
fn replay(error: &TransactionError, request_hash: &str) -> Option<Result<StoredResponse, ()>> {
    let failed = error.failed_condition(IDEMPOTENCY_LABEL)?;
    failed
        .item
        .as_ref()
        .and_then(|item| decide(item, request_hash))
}

fn decide(
    item: &HashMap<String, AttributeValue>,
    request_hash: &str,
) -> Option<Result<StoredResponse, ()>> {
    let now = OffsetDateTime::now_utc().unix_timestamp();
    let expires: i64 = item.get(keys::TTL_ATTRIBUTE)?.as_n().ok()?.parse().ok()?;
    if expires < now {
        return None;
    }
    let stored_hash = item.get("requestHash")?.as_s().ok()?;
    if stored_hash != request_hash {
        return Some(Err(()));
    }
    let status = item.get("responseStatus")?.as_n().ok()?.parse().ok()?;
    let body = item.get("responseBody")?.as_s().ok()?.clone();
    Some(Ok(StoredResponse { status, body }))
}

fn event(
    event_type: &str,
    order: &Order,
    traceparent: Option<&str>,
) -> Result<EventEnvelope, String> {
    let payload = serde_json::to_value(order).map_err(|e| e.to_string())?;
    let envelope = EventEnvelope::new(
        event_type,
        AGGREGATE_TYPE,
        &order.order_id,
        order.version,
        payload,
    )
    .map_err(|e| e.to_string())?;
    match traceparent {
        // An invalid trace header is dropped, not an error: tracing must not
        // fail a business write.
        Some(tp) => Ok(envelope.clone().with_traceparent(tp).unwrap_or(envelope)),
        None => Ok(envelope),
    }
}

fn canonical(order: &NewOrder) -> String {
    serde_json::json!({
        "customerId": order.customer_id,
        "currency": order.currency,
        "items": order.items,
    })
    .to_string()
}

fn request_hash(route: &str, body: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(route.as_bytes());
    hasher.update(b"\n");
    hasher.update(body.as_bytes());
    hex::encode(hasher.finalize())
}

fn timestamp(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

fn is_throttling(code: Option<&str>) -> bool {
    code.is_some_and(outbox_core::retry::is_throttling)
}

fn internal(e: impl ToString) -> String {
    e.to_string()
}

impl From<String> for CreateOrderError {
    fn from(e: String) -> Self {
        Self::Internal(e)
    }
}

impl From<String> for PayOrderError {
    fn from(e: String) -> Self {
        Self::Internal(e)
    }
}

impl From<String> for GetOrderError {
    fn from(e: String) -> Self {
        Self::Internal(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_keys_are_validated_and_hashed() {
        assert!(IdempotencyKey::parse("").is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(256)).is_err());
        assert!(IdempotencyKey::parse("tab\there").is_err());
        assert!(IdempotencyKey::parse("ключ").is_err());
        let key = IdempotencyKey::parse("order-123 retry").unwrap();
        assert_eq!(key.0.len(), 64);
        assert!(!key.key().pk.contains("order-123"));
    }

    #[test]
    fn stored_responses_replay_only_for_the_same_request() {
        let future = (OffsetDateTime::now_utc().unix_timestamp() + 60).to_string();
        let item = HashMap::from([
            ("requestHash".to_owned(), AttributeValue::S("h1".into())),
            ("responseStatus".to_owned(), AttributeValue::N("201".into())),
            ("responseBody".to_owned(), AttributeValue::S("{}".into())),
            (keys::TTL_ATTRIBUTE.to_owned(), AttributeValue::N(future)),
        ]);
        assert_eq!(
            decide(&item, "h1"),
            Some(Ok(StoredResponse {
                status: 201,
                body: "{}".into()
            }))
        );
        assert_eq!(decide(&item, "h2"), Some(Err(())));
        let mut expired = item.clone();
        expired.insert(
            keys::TTL_ATTRIBUTE.to_owned(),
            AttributeValue::N("1".into()),
        );
        assert_eq!(decide(&expired, "h1"), None);
    }
}
