//! The order commands: each writes the order and its event in one
//! transaction, with optional idempotency keys stored in that same
//! transaction. Every order belongs to the caller that created it: another
//! caller can neither read nor pay it, and is told it does not exist.

use std::collections::HashMap;
use std::time::Duration;

use aws_sdk_dynamodb::operation::get_item::GetItemError;
use aws_sdk_dynamodb::types::{AttributeValue, Put, Update};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use outbox_core::keys::{ItemKey, KeySchema};
use outbox_core::now_utc_millis;
use outbox_core::table::ItemTable;
use outbox_core::EventEnvelope;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use ulid::Ulid;

use crate::backend::BackendError;
use crate::caller::Caller;
use crate::idempotency::{self, IdempotencyKey, IdempotencyRecord, Prior, StoredResponse};
use crate::orders::{keys as order_keys, NewOrder, Order, OrderStatus};
use crate::transaction::{OutboxSettings, OutboxTransaction, TransactionError};

/// The aggregate type of orders' events.
pub(crate) const AGGREGATE_TYPE: &str = "Order";
/// The order item's attribute holding its owner's [`Caller::id`]. It is
/// neither returned by the API nor carried by the events.
const OWNER_ATTRIBUTE: &str = order_keys::attr::OWNER;
const ORDER_LABEL: &str = "order";
const IDEMPOTENCY_LABEL: &str = "idempotency";
/// How often a payment is retried when the order changed between its read
/// and its conditional write.
const PAY_ATTEMPTS: usize = 3;

/// The result of a command: done now, or done before and replayed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Done now: the order as it is after the command.
    Done(Order),
    /// Done before with the same idempotency key: the stored response.
    Replayed(StoredResponse),
}

/// Why a command (create, pay, get) failed. Nothing was written in any
/// case. The API maps each kind to one HTTP status (`api.rs`).
#[derive(Debug, thiserror::Error)]
pub enum OrderError {
    /// No such order, or it belongs to another caller.
    #[error("order not found")]
    NotFound,
    /// The order is not pending (it was paid already, say).
    #[error("order is {0}, not PENDING")]
    NotPending(&'static str),
    /// The idempotency key was used for a different request.
    #[error("the idempotency key was already used for a different request")]
    KeyReused,
    /// A request with this key, or a change of this order, is in progress.
    #[error("the order is being changed concurrently")]
    Conflict,
    /// DynamoDB throttled the request.
    #[error("throttled")]
    Throttled,
    /// Anything else: a 500, its cause logged.
    #[error("internal error")]
    Internal(#[source] BackendError),
}

impl From<TransactionError> for OrderError {
    fn from(e: TransactionError) -> Self {
        match e {
            TransactionError::Throttled => Self::Throttled,
            TransactionError::Conflict { .. } | TransactionError::InProgress => Self::Conflict,
            other => Self::Internal(BackendError::Transaction(other)),
        }
    }
}

impl From<SdkError<GetItemError, HttpResponse>> for OrderError {
    fn from(e: SdkError<GetItemError, HttpResponse>) -> Self {
        if outbox_core::codes::is_throttling(&outbox_runtime::error_code(&e)) {
            Self::Throttled
        } else {
            Self::Internal(BackendError::Read(Box::new(e)))
        }
    }
}

impl From<BackendError> for OrderError {
    fn from(e: BackendError) -> Self {
        Self::Internal(e)
    }
}

/// Creates, pays and reads orders, through the DynamoDB SDK client or any
/// other [`ItemTable`] (`MemoryTable` in unit tests).
#[derive(Debug, Clone)]
pub struct OrderService<T = aws_sdk_dynamodb::Client> {
    table: T,
    settings: OutboxSettings,
    idempotency_ttl: Duration,
}

impl<T: ItemTable> OrderService<T> {
    /// A service on `table` with the outbox `settings`.
    pub fn new(table: T, settings: OutboxSettings, idempotency_ttl: Duration) -> Self {
        Self {
            table,
            settings,
            idempotency_ttl,
        }
    }

    /// A service with the functions' configuration.
    pub fn from_config(table: T, config: &outbox_runtime::Config) -> Self {
        Self::new(table, OutboxSettings::from(config), config.idempotency_ttl)
    }

    /// Writes a new `PENDING` order owned by `caller` and its `OrderCreated`
    /// event in one transaction: one call, no read.
    pub async fn create(
        &self,
        caller: &Caller,
        new: NewOrder,
        key: Option<&IdempotencyKey>,
        traceparent: Option<&str>,
    ) -> Result<Reply, OrderError> {
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
        let request_hash = idempotency::request_hash("POST /orders", &canonical(&new));
        let envelope = event("OrderCreated", &order, traceparent)?;
        let mut item: HashMap<String, AttributeValue> =
            serde_dynamo::to_item(&order).map_err(BackendError::Encode)?;
        item.extend(self.settings.keys.key(&order_keys::order_key(&order_id)));
        item.insert(
            OWNER_ATTRIBUTE.to_owned(),
            AttributeValue::S(caller.id().to_owned()),
        );
        let put = Put::builder()
            .table_name(&self.settings.table)
            .set_item(Some(item))
            .condition_expression(self.settings.keys.absent())
            .expression_attribute_names(
                self.settings.keys.absent_name().0,
                self.settings.keys.absent_name().1,
            )
            .build()
            .map_err(BackendError::Request)?;
        let mut tx = OutboxTransaction::new(&self.settings)
            .put(ORDER_LABEL, put)
            .event(&order_keys::order_pk(&order_id), &envelope)
            .idempotency_token(envelope.event_id.to_string());
        if let Some(key) = key {
            let record = self.record(key, caller, &request_hash, 201, &order)?;
            tx = tx.put(IDEMPOTENCY_LABEL, record);
        }
        match tx.send(&self.table).await {
            Ok(_) => Ok(Reply::Done(order)),
            Err(e) => match replay(&self.settings.keys, &e, &request_hash) {
                Some(Prior::Replay(stored)) => Ok(Reply::Replayed(stored)),
                Some(Prior::KeyReused) => Err(OrderError::KeyReused),
                None => Err(e.into()),
            },
        }
    }

    /// Moves `caller`'s `PENDING` order to `PAID` and writes `OrderPaid` in
    /// the same transaction. One consistent read (the event carries the
    /// full order) and one transaction; a replay reads the idempotency
    /// record instead of writing.
    pub async fn pay(
        &self,
        caller: &Caller,
        order_id: &str,
        key: Option<&IdempotencyKey>,
        traceparent: Option<&str>,
    ) -> Result<Reply, OrderError> {
        let request_hash =
            idempotency::request_hash(&format!("POST /orders/{order_id}/payment"), "");
        for _ in 0..PAY_ATTEMPTS {
            let current = self.read_order(caller, order_id).await?;
            if current.status != OrderStatus::Pending {
                // Paid already: by this very request (a retry), or not.
                if let Some(key) = key {
                    match self.prior(key, caller, &request_hash).await? {
                        Some(Prior::Replay(stored)) => return Ok(Reply::Replayed(stored)),
                        Some(Prior::KeyReused) => return Err(OrderError::KeyReused),
                        None => {}
                    }
                }
                return Err(OrderError::NotPending(current.status.as_str()));
            }
            let paid = Order {
                status: OrderStatus::Paid,
                version: current.version + 1,
                updated_at: timestamp(now_utc_millis()),
                ..current.clone()
            };
            let envelope = event("OrderPaid", &paid, traceparent)?;
            let update = Update::builder()
                .table_name(&self.settings.table)
                .set_key(Some(
                    self.settings.keys.key(&order_keys::order_key(order_id)),
                ))
                .update_expression("SET #status = :paid, #version = :next, #updated = :now")
                .condition_expression(
                    "#status = :pending AND #version = :current AND #owner = :owner",
                )
                .expression_attribute_names("#status", order_keys::attr::STATUS)
                .expression_attribute_names("#version", order_keys::attr::VERSION)
                .expression_attribute_names("#updated", order_keys::attr::UPDATED_AT)
                .expression_attribute_names("#owner", OWNER_ATTRIBUTE)
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
                .expression_attribute_values(":owner", AttributeValue::S(caller.id().to_owned()))
                .build()
                .map_err(BackendError::Request)?;
            let mut tx = OutboxTransaction::new(&self.settings)
                .update(ORDER_LABEL, update)
                .event(&order_keys::order_pk(order_id), &envelope)
                .idempotency_token(envelope.event_id.to_string());
            if let Some(key) = key {
                let record = self.record(key, caller, &request_hash, 200, &paid)?;
                tx = tx.put(IDEMPOTENCY_LABEL, record);
            }
            match tx.send(&self.table).await {
                Ok(_) => return Ok(Reply::Done(paid)),
                Err(e) => {
                    match replay(&self.settings.keys, &e, &request_hash) {
                        Some(Prior::Replay(stored)) => return Ok(Reply::Replayed(stored)),
                        Some(Prior::KeyReused) => return Err(OrderError::KeyReused),
                        None => {}
                    }
                    match e.failed_condition(ORDER_LABEL) {
                        // Deleted meanwhile.
                        Some(failed) if failed.item.is_none() => return Err(OrderError::NotFound),
                        // Changed meanwhile: read again and decide again.
                        Some(_) => continue,
                        None => return Err(e.into()),
                    }
                }
            }
        }
        Err(OrderError::Conflict)
    }

    /// Reads `caller`'s order (strongly consistent). Another caller's order
    /// is `NotFound`, exactly like one that does not exist.
    pub async fn get(&self, caller: &Caller, order_id: &str) -> Result<Order, OrderError> {
        self.read_order(caller, order_id).await
    }

    async fn read_order(&self, caller: &Caller, order_id: &str) -> Result<Order, OrderError> {
        if Ulid::from_string(order_id).is_err() {
            return Err(OrderError::NotFound);
        }
        let item = self
            .get_item(order_keys::order_key(order_id))
            .await?
            .ok_or(OrderError::NotFound)?;
        // An order without an owner (written before owners were stored)
        // belongs to no caller.
        let owner = item.get(OWNER_ATTRIBUTE).and_then(|v| v.as_s().ok());
        if owner.map(String::as_str) != Some(caller.id()) {
            return Err(OrderError::NotFound);
        }
        serde_dynamo::from_item(item).map_err(|e| OrderError::Internal(BackendError::Decode(e)))
    }

    async fn get_item(
        &self,
        key: ItemKey,
    ) -> Result<Option<HashMap<String, AttributeValue>>, OrderError> {
        Ok(self
            .table
            .get_item(&self.settings.table, self.settings.keys.key(&key))
            .await?)
    }

    /// What a live record of `key` says about this request, if one exists.
    async fn prior(
        &self,
        key: &IdempotencyKey,
        caller: &Caller,
        request_hash: &str,
    ) -> Result<Option<Prior>, OrderError> {
        let item = self.get_item(key.record_key(caller)).await?;
        Ok(item.and_then(|item| {
            IdempotencyRecord::prior_of(
                &self.settings.keys,
                &item,
                request_hash,
                idempotency::now(),
            )
        }))
    }

    /// The idempotency record of a command that answers `status` + `order`.
    fn record(
        &self,
        key: &IdempotencyKey,
        caller: &Caller,
        request_hash: &str,
        status: u16,
        order: &Order,
    ) -> Result<Put, BackendError> {
        let now = idempotency::now();
        let body = serde_json::to_string(order).map_err(BackendError::Json)?;
        let response = StoredResponse { status, body };
        IdempotencyRecord::new(
            &key.record_key(caller),
            request_hash,
            response,
            self.idempotency_ttl,
            now,
        )
        .put(&self.settings.table, &self.settings.keys, now)
    }
}

/// When the idempotency condition is what failed: what the live record
/// says about this request.
fn replay(schema: &KeySchema, error: &TransactionError, request_hash: &str) -> Option<Prior> {
    let item = error.failed_condition(IDEMPOTENCY_LABEL)?.item.as_ref()?;
    IdempotencyRecord::prior_of(schema, item, request_hash, idempotency::now())
}

fn event(
    event_type: &str,
    order: &Order,
    traceparent: Option<&str>,
) -> Result<EventEnvelope, BackendError> {
    let payload = serde_json::to_value(order).map_err(BackendError::Json)?;
    let envelope = EventEnvelope::new(
        event_type,
        AGGREGATE_TYPE,
        &order.order_id,
        order.version,
        payload,
    )
    .map_err(BackendError::Event)?;
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

fn timestamp(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

#[cfg(test)]
mod tests;
