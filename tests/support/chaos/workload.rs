//! The workload of a chaos run: orders created and paid through the
//! writer, concurrently, retried as API clients with an `Idempotency-Key`
//! would.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{json, Value};

use super::faults::Tagged;
use super::ChaosConfig;

fn api_event(template: &str, path: &str, key: &str, body: Option<String>) -> Vec<u8> {
    let mut event: Value = serde_json::from_str(&crate::sample(template)).unwrap_or_default();
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["path"] = json!(path);
    event["requestContext"]["requestId"] = json!(ulid::Ulid::new().to_string());
    event["headers"]["idempotency-key"] = json!(key);
    if let Some(id) = path.split('/').nth(2) {
        if path.ends_with("/payment") {
            event["pathParameters"] = json!({ "id": id });
        }
    }
    if let Some(body) = body {
        event["body"] = json!(body);
    }
    serde_json::to_vec(&event).unwrap_or_default()
}

/// Calls the writer until it answers with a final status (not 5xx, not a
/// function error), as an API client with an Idempotency-Key would.
pub(super) async fn until_final(
    writer: &Tagged,
    payload: &[u8],
    retries: &AtomicU64,
) -> Option<(u16, Value)> {
    for attempt in 0..12u32 {
        if attempt > 0 {
            retries.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt))).await;
        }
        let Ok(body) = writer.call(payload).await else {
            continue;
        };
        let response: Value = serde_json::from_slice(&body).unwrap_or_default();
        let status = response["statusCode"].as_u64().unwrap_or(0) as u16;
        if status >= 500 || status == 429 || status == 0 {
            continue;
        }
        let body: Value = response["body"]
            .as_str()
            .and_then(|b| serde_json::from_str(b).ok())
            .unwrap_or_default();
        return Some((status, body));
    }
    None
}

/// What the workload asked for and what it was told.
#[derive(Debug, Default)]
pub(super) struct Outcome {
    /// Requests sent (a create, then a payment for each created order).
    pub(super) requests: usize,
    /// Calls repeated after a 5xx, a 429 or a function error.
    pub(super) retries: usize,
    /// (order, version) the API acknowledged: 1 for a create (201), 2 for
    /// a payment (200).
    pub(super) acknowledged: Vec<(String, u64)>,
    /// Requests that got a final refusal (another 4xx), with its status.
    pub(super) refused: Vec<u16>,
    /// Requests that never got a final answer in 12 attempts.
    pub(super) unanswered: usize,
}

impl Outcome {
    /// Both outcomes together.
    pub(super) fn merge(mut self, other: Outcome) -> Outcome {
        self.requests += other.requests;
        self.retries += other.retries;
        self.acknowledged.extend(other.acknowledged);
        self.refused.extend(other.refused);
        self.unanswered += other.unanswered;
        self
    }
}

/// Creates and pays the orders numbered `orders` through `writers`,
/// concurrently.
pub(super) async fn workload(
    config: &ChaosConfig,
    writers: &[Tagged],
    orders: std::ops::Range<usize>,
) -> Outcome {
    let next = AtomicU64::new(orders.start as u64);
    let acknowledged: Mutex<Vec<(String, u64)>> = Mutex::default();
    let refused: Mutex<Vec<u16>> = Mutex::default();
    let unanswered = AtomicU64::new(0);
    let retries = AtomicU64::new(0);
    let requests = AtomicU64::new(0);
    let settle = |answer: &Option<(u16, Value)>, ok: u16| match answer {
        None => {
            unanswered.fetch_add(1, Ordering::SeqCst);
        }
        Some((status, _)) if *status != ok => refused.lock().unwrap().push(*status),
        Some(_) => {}
    };
    let work = writers.iter().map(|writer| async {
        loop {
            let i = next.fetch_add(1, Ordering::SeqCst) as usize;
            if i >= orders.end {
                break;
            }
            let mut rng = fastrand::Rng::with_seed(config.seed ^ (i as u64).wrapping_mul(0x9e37));
            let body = json!({
                "customerId": format!("cust-{}", rng.u32(0..50)),
                "currency": "EUR",
                "items": (0..rng.usize(1..4)).map(|n| json!({
                    "sku": format!("SKU-{n}"),
                    "quantity": rng.u32(1..5),
                    "unitPriceCents": rng.u32(100..10_000),
                })).collect::<Vec<_>>(),
            })
            .to_string();
            let create = api_event(
                "writer-create-order.json",
                "/orders",
                &format!("chaos-{}-{i}-create", config.seed),
                Some(body),
            );
            requests.fetch_add(1, Ordering::SeqCst);
            let answer = until_final(writer, &create, &retries).await;
            settle(&answer, 201);
            let Some((201, order)) = answer else {
                continue;
            };
            let Some(id) = order["orderId"].as_str() else {
                refused.lock().unwrap().push(201);
                continue;
            };
            acknowledged.lock().unwrap().push((id.to_owned(), 1));
            let pay = api_event(
                "writer-pay-order.json",
                &format!("/orders/{id}/payment"),
                &format!("chaos-{}-{i}-pay", config.seed),
                None,
            );
            requests.fetch_add(1, Ordering::SeqCst);
            let answer = until_final(writer, &pay, &retries).await;
            settle(&answer, 200);
            if let Some((200, _)) = answer {
                acknowledged.lock().unwrap().push((id.to_owned(), 2));
            }
        }
    });
    futures::future::join_all(work).await;
    Outcome {
        requests: requests.load(Ordering::SeqCst) as usize,
        retries: retries.load(Ordering::SeqCst) as usize,
        acknowledged: acknowledged.into_inner().unwrap_or_default(),
        refused: refused.into_inner().unwrap_or_default(),
        unanswered: unanswered.load(Ordering::SeqCst) as usize,
    }
}

/// The run's large events ([`ChaosConfig::large`]): each a new order
/// `large-<seed>-<i>` (its item at version 1) and its one event of
/// [`super::LARGE_EVENT_BYTES`], written as a service writes them through
/// the claim check: the object in S3, then one transaction. Acknowledged
/// as the API's creates are.
pub(super) async fn large_events(
    config: &ChaosConfig,
    stack: &crate::Stack,
    s3: &aws_sdk_s3::Client,
) -> Result<Outcome, String> {
    if config.large == 0 {
        return Ok(Outcome::default());
    }
    let settings = outbox_core::transaction::OutboxSettings::from_stack(&stack.ddb, &stack.table)
        .load()
        .await
        .map_err(|e| e.to_string())?;
    let mut outcome = Outcome::default();
    for i in 0..config.large {
        let id = format!("large-{}-{i}", config.seed);
        let document = "x".repeat(super::LARGE_EVENT_BYTES);
        let event = outbox_core::EventEnvelope::new(
            "OrderCreated",
            "Order",
            &id,
            1,
            json!({"orderId": id, "document": document}),
        )
        .map_err(|e| e.to_string())?;
        let meta = aws_sdk_dynamodb::types::Put::builder()
            .table_name(&stack.table)
            .item(
                "PK",
                aws_sdk_dynamodb::types::AttributeValue::S(format!("ORDER#{id}")),
            )
            .item(
                "SK",
                aws_sdk_dynamodb::types::AttributeValue::S("META".into()),
            )
            .item(
                "version",
                aws_sdk_dynamodb::types::AttributeValue::N("1".into()),
            )
            .build()
            .map_err(|e| e.to_string())?;
        let tx = outbox_core::transaction::OutboxTransaction::new(&settings)
            .put("order", meta)
            .event(&format!("ORDER#{id}"), &event);
        if tx.offloads().len() != 1 {
            return Err(format!("{id}: not claim-checked"));
        }
        outcome.requests += 1;
        tx.send_with_payloads(&stack.ddb, s3)
            .await
            .map_err(|e| format!("{id}: {e}"))?;
        outcome.acknowledged.push((id, 1));
    }
    Ok(outcome)
}
