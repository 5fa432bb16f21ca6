//! The service's logic on the in-memory table: what each command writes,
//! how many calls it makes, and each branch of idempotency and ownership.
//! (`tests/writer_api.rs` runs the same commands on DynamoDB Local.)

use std::time::Duration;

use outbox_core::keys::{ItemKey, KeySchema};
use outbox_core::size::EventLimits;
use outbox_core::table::MemoryTable;

use super::*;
use crate::orders::{CreateOrderRequest, OrderLineRequest};

const TABLE: &str = "orders";

fn service() -> OrderService<MemoryTable> {
    let settings = OutboxSettings::new(TABLE, EventLimits::eventbridge("orders.service"), 1);
    OrderService::new(
        MemoryTable::new(KeySchema::default()),
        settings,
        Duration::from_secs(3600),
    )
}

fn caller(name: &str) -> Caller {
    Caller::local(name).expect("a name")
}

fn new_order(sku: &str) -> NewOrder {
    NewOrder::try_from(CreateOrderRequest {
        customer_id: "c-1".into(),
        currency: "EUR".into(),
        items: vec![OrderLineRequest {
            sku: sku.into(),
            quantity: 2,
            unit_price_cents: 150,
        }],
    })
    .expect("a valid order")
}

fn key(raw: &str) -> IdempotencyKey {
    IdempotencyKey::parse(raw).expect("a valid key")
}

fn done(reply: Reply) -> Order {
    match reply {
        Reply::Done(order) => order,
        Reply::Replayed(stored) => panic!("replayed {stored:?}"),
    }
}

async fn created(
    service: &OrderService<MemoryTable>,
    who: &str,
    sku: &str,
    key: Option<&IdempotencyKey>,
) -> Order {
    let reply = service
        .create(&caller(who), new_order(sku), key, None)
        .await;
    done(reply.unwrap_or_else(|e| panic!("{who}'s order of {sku}: {e:?}")))
}

/// The event types of the outbox items of `order_id`'s collection, as
/// stored.
fn outbox(service: &OrderService<MemoryTable>, order_id: &str) -> Vec<String> {
    let pk = order_keys::order_pk(order_id);
    service
        .table
        .items(TABLE)
        .into_iter()
        .filter(|item| item.get("PK").and_then(|v| v.as_s().ok()) == Some(&pk))
        .filter_map(|item| {
            let sk = item.get("SK")?.as_s().ok()?.clone();
            let event_type = item.get("eventType")?.as_s().ok()?.clone();
            sk.starts_with("OUTBOX#").then_some(event_type)
        })
        .collect()
}

#[tokio::test]
async fn create_writes_the_order_and_its_event_in_one_call_without_a_read() {
    let service = service();
    let order = created(&service, "ana", "sku-1", None).await;
    assert_eq!(
        (order.status, order.version, order.total_cents),
        (OrderStatus::Pending, 1, 300)
    );
    let calls = (service.table.transactions(), service.table.reads());
    assert_eq!(calls, (1, 0), "one write, no read");
    let key = ItemKey::new(order_keys::order_pk(&order.order_id), "META");
    let stored = service.table.item(TABLE, &key).expect("the order item");
    let owner = stored.get(OWNER_ATTRIBUTE).and_then(|v| v.as_s().ok());
    assert_eq!(owner.map(String::as_str), Some(caller("ana").id()));
    assert_eq!(outbox(&service, &order.order_id), ["OrderCreated"]);
}

#[tokio::test]
async fn a_repeated_key_replays_and_a_reused_key_is_refused_writing_nothing() {
    let service = service();
    let (ana, k) = (caller("ana"), key("create-1"));
    let first = created(&service, "ana", "sku-1", Some(&k)).await;
    let again = |sku| service.create(&ana, new_order(sku), Some(&k), None);
    match again("sku-1").await {
        Ok(Reply::Replayed(stored)) => {
            assert_eq!(stored.status, 201);
            assert!(stored.body.contains(&first.order_id));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(again("sku-2").await, Err(OrderError::KeyReused)));
    // The same key from another caller is another key.
    created(&service, "bea", "sku-2", Some(&k)).await;
    let events: usize = service
        .table
        .items(TABLE)
        .iter()
        .filter(|item| item.get("eventType").is_some())
        .count();
    assert_eq!(
        events, 2,
        "one event per order, none for the replay or the refusal"
    );
}

#[tokio::test]
async fn pay_moves_a_pending_order_once_and_only_for_its_owner() {
    let service = service();
    let (ana, eve) = (caller("ana"), caller("eve"));
    let order = created(&service, "ana", "sku-1", None).await;
    let id = order.order_id.as_str();
    for stranger in [
        service.pay(&eve, id, None, None).await.map(|_| ()),
        service.get(&eve, id).await.map(|_| ()),
    ] {
        assert!(
            matches!(stranger, Err(OrderError::NotFound)),
            "{stranger:?}"
        );
    }
    let k = key("pay-1");
    let paid = done(service.pay(&ana, id, Some(&k), None).await.expect("paid"));
    assert_eq!((paid.status, paid.version), (OrderStatus::Paid, 2));
    // The retry with the key replays; without it, the order is not pending.
    assert!(matches!(
        service.pay(&ana, id, Some(&k), None).await,
        Ok(Reply::Replayed(stored)) if stored.status == 200
    ));
    assert!(matches!(
        service.pay(&ana, id, None, None).await,
        Err(OrderError::NotPending("PAID"))
    ));
    assert_eq!(outbox(&service, id), ["OrderCreated", "OrderPaid"]);
    // Not an order id: not found without a call.
    let reads = service.table.reads();
    assert!(matches!(
        service.get(&ana, "not-a-ulid").await,
        Err(OrderError::NotFound)
    ));
    assert_eq!(service.table.reads(), reads);
}

#[tokio::test]
async fn cancellations_map_to_conflict_and_throttled_writing_nothing() {
    let service = service();
    for (code, expected) in [
        ("TransactionConflict", "Conflict"),
        ("ThrottlingError", "Throttled"),
    ] {
        service.table.cancel_next(code);
        let error = service
            .create(&caller("ana"), new_order("sku-1"), None, None)
            .await
            .expect_err("cancelled");
        assert!(
            format!("{error:?}").starts_with(expected),
            "{code}: {error:?}"
        );
    }
    assert!(service.table.items(TABLE).is_empty());
}
