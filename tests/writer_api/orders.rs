//! Orders through the API: create, pay and read, each one transaction, and
//! the idempotent replay of a create or a payment.

use lambda_http::http::StatusCode;
use outbox_core::EventEnvelope;
use serde_json::json;
use testkit::{api_request, request, Stack};

use super::{body, create, service};

#[tokio::test]
async fn create_writes_order_and_event_in_one_call() {
    let stack = Stack::new().await;
    let service = service(&stack);
    let response = create(&service, None).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let order = body(&response);
    assert_eq!(order["status"], "PENDING");
    assert_eq!(order["version"], 1);
    assert_eq!(order["totalCents"], 750);
    let id = order["orderId"].as_str().unwrap();
    assert!(ulid::Ulid::from_string(id).is_ok());
    // One call, no read.
    assert_eq!(stack.calls.calls(), vec!["TransactWriteItems"]);

    let meta = stack
        .get(&format!("ORDER#{id}"), "META")
        .await
        .expect("META written");
    assert_eq!(meta["status"].as_s().unwrap(), "PENDING");
    let outbox = stack.outbox_items().await;
    assert_eq!(outbox.len(), 1);
    assert_eq!(outbox[0].pk, format!("ORDER#{id}"));
    assert_eq!(outbox[0].event_type, "OrderCreated");
    let envelope: EventEnvelope = serde_json::from_str(&outbox[0].envelope).unwrap();
    assert_eq!(envelope.aggregate_type, "Order");
    assert_eq!(envelope.aggregate_id, id);
    assert_eq!(envelope.aggregate_version, 1);
    assert_eq!(envelope.payload, order, "the event carries the full order");
}

#[tokio::test]
async fn sample_event_creates_an_order_and_carries_the_trace() {
    let stack = Stack::new().await;
    let response = service(&stack)
        .handle(api_request("writer-create-order.json"))
        .await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let outbox = stack.outbox_items().await;
    let trace = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    assert_eq!(outbox[0].traceparent.as_deref(), Some(trace));
}

#[tokio::test]
async fn pay_moves_pending_to_paid_with_its_event() {
    let stack = Stack::new().await;
    let service = service(&stack);
    let created = body(&create(&service, None).await);
    let id = created["orderId"].as_str().unwrap();
    stack.calls.reset();

    let path = format!("/orders/{id}/payment");
    let response = service.handle(request("POST", &path, &[], None)).await;
    assert_eq!(response.status(), StatusCode::OK);
    let paid = body(&response);
    assert_eq!(paid["status"], "PAID");
    assert_eq!(paid["version"], 2);
    assert_eq!(stack.calls.calls(), vec!["GetItem", "TransactWriteItems"]);

    let events = stack.outbox_items().await;
    assert_eq!(events.len(), 2);
    let paid_event = events.iter().find(|e| e.event_type == "OrderPaid").unwrap();
    let envelope: EventEnvelope = serde_json::from_str(&paid_event.envelope).unwrap();
    assert_eq!(envelope.aggregate_version, 2);
    assert_eq!(envelope.payload, paid);

    // Paying again: 409, nothing written.
    let again = service.handle(request("POST", &path, &[], None)).await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert_eq!(body(&again)["error"]["code"], "order_not_pending");
    assert_eq!(stack.outbox_items().await.len(), 2);

    // GET shows it.
    let got = service
        .handle(request("GET", &format!("/orders/{id}"), &[], None))
        .await;
    assert_eq!(got.status(), StatusCode::OK);
    assert_eq!(body(&got), paid);
}

#[tokio::test]
async fn unknown_orders_are_404() {
    let stack = Stack::new().await;
    let service = service(&stack);
    for (method, path) in [
        ("GET", "/orders/01JDQ3V7X8KZ4M2N5P6R7S8T9V"),
        ("POST", "/orders/01JDQ3V7X8KZ4M2N5P6R7S8T9V/payment"),
        ("GET", "/orders/not-an-id"),
    ] {
        let response = service.handle(request(method, path, &[], None)).await;
        assert_eq!(response.status(), StatusCode::NOT_FOUND, "{method} {path}");
        assert_eq!(body(&response)["error"]["code"], "order_not_found");
    }
    assert!(stack.items().await.is_empty());
}

#[tokio::test]
async fn idempotent_create_replays_without_a_second_order_or_event() {
    let stack = Stack::new().await;
    let service = service(&stack);
    let first = create(&service, Some("key-1")).await;
    assert_eq!(first.status(), StatusCode::CREATED);
    stack.calls.reset();
    let second = create(&service, Some("key-1")).await;
    assert_eq!(second.status(), StatusCode::CREATED);
    assert_eq!(body(&second), body(&first));
    assert_eq!(second.headers()["idempotent-replayed"], "true");
    // The replay is the same one call, answered from ALL_OLD: no extra read.
    assert_eq!(stack.calls.calls(), vec!["TransactWriteItems"]);

    let items = stack.items().await;
    let order = |i: &&testkit::Item| {
        i["PK"].as_s().unwrap().starts_with("ORDER#") && i["SK"].as_s().unwrap() == "META"
    };
    assert_eq!(items.iter().filter(order).count(), 1);
    assert_eq!(stack.outbox_items().await.len(), 1);

    // Same key, different request: 422, nothing written.
    let other = json!({"customerId": "c-2", "currency": "EUR", "items": [{"sku": "A-1", "quantity": 1, "unitPriceCents": 1}]});
    let headers = [
        ("content-type", "application/json"),
        ("idempotency-key", "key-1"),
    ];
    let reused = request("POST", "/orders", &headers, Some(&other.to_string()));
    let reused = service.handle(reused).await;
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body(&reused)["error"]["code"], "idempotency_key_reused");
    assert_eq!(stack.outbox_items().await.len(), 1);
}

#[tokio::test]
async fn idempotent_pay_replays_and_rejects_another_use() {
    let stack = Stack::new().await;
    let service = service(&stack);
    let created = body(&create(&service, None).await);
    let id = created["orderId"].as_str().unwrap();
    let path = format!("/orders/{id}/payment");
    let pay = |key: &'static str| {
        service.handle(request("POST", &path, &[("idempotency-key", key)], None))
    };
    let first = pay("pay-1").await;
    assert_eq!(first.status(), StatusCode::OK);
    let second = pay("pay-1").await;
    assert_eq!(second.status(), StatusCode::OK);
    assert_eq!(body(&second), body(&first));
    assert_eq!(second.headers()["idempotent-replayed"], "true");
    let events = stack.outbox_items().await;
    assert_eq!(events.len(), 2, "OrderCreated and one OrderPaid");

    // The key of a payment used to create an order: 422.
    let reused = create(&service, Some("pay-1")).await;
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // A new key on a paid order: 409.
    assert_eq!(pay("pay-2").await.status(), StatusCode::CONFLICT);
    assert_eq!(stack.outbox_items().await.len(), 2);
}
