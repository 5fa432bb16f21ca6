//! The orders API (the `writer` Lambda's handler) against the local AWS API.

use lambda_http::http::StatusCode;
use lambda_http::{Body, Response};
use outbox_core::EventEnvelope;
use serde_json::{json, Value};
use testkit::contract::CheckedApi;
use testkit::{api_request, request, request_from, Principal, Stack};
use writer::{Api, OrderService};

/// The API, each response checked against docs/openapi.yaml.
fn service(stack: &Stack) -> CheckedApi {
    CheckedApi(Api::new(OrderService::from_config(
        stack.counted_ddb.clone(),
        &stack.config(&[]),
    )))
}

fn body(response: &Response<Body>) -> Value {
    match response.body() {
        Body::Text(text) => serde_json::from_str(text).expect("JSON body"),
        other => panic!("unexpected body {other:?}"),
    }
}

fn order_json() -> String {
    json!({"customerId": "c-1", "currency": "EUR", "items": [{"sku": "A-1", "quantity": 3, "unitPriceCents": 250}]}).to_string()
}

async fn create(service: &CheckedApi, key: Option<&str>) -> Response<Body> {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(key) = key {
        headers.push(("idempotency-key", key));
    }
    service
        .handle(request("POST", "/orders", &headers, Some(&order_json())))
        .await
}

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
    assert_eq!(
        outbox[0].traceparent.as_deref(),
        Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    );
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
        ("GET", "/orders/01JDQ3V7X8KZ4M2N5P6R7S8T9V".to_owned()),
        (
            "POST",
            "/orders/01JDQ3V7X8KZ4M2N5P6R7S8T9V/payment".to_owned(),
        ),
        ("GET", "/orders/not-an-id".to_owned()),
    ] {
        let response = service.handle(request(method, &path, &[], None)).await;
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

    let orders = stack
        .items()
        .await
        .into_iter()
        .filter(|i| {
            i["PK"].as_s().unwrap().starts_with("ORDER#") && i["SK"].as_s().unwrap() == "META"
        })
        .count();
    assert_eq!(orders, 1);
    assert_eq!(stack.outbox_items().await.len(), 1);

    // Same key, different request: 422, nothing written.
    let other = json!({"customerId": "c-2", "currency": "EUR", "items": [{"sku": "A-1", "quantity": 1, "unitPriceCents": 1}]});
    let reused = service
        .handle(request(
            "POST",
            "/orders",
            &[
                ("content-type", "application/json"),
                ("idempotency-key", "key-1"),
            ],
            Some(&other.to_string()),
        ))
        .await;
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body(&reused)["error"]["code"], "idempotency_key_reused");
    assert_eq!(stack.outbox_items().await.len(), 1);
}

#[tokio::test]
async fn idempotent_pay_replays_and_rejects_another_use() {
    let stack = Stack::new().await;
    let service = service(&stack);
    let id = body(&create(&service, None).await)["orderId"]
        .as_str()
        .unwrap()
        .to_owned();
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
    assert_eq!(
        stack.outbox_items().await.len(),
        2,
        "OrderCreated and one OrderPaid"
    );

    // The key of a payment used to create an order: 422.
    let reused = create(&service, Some("pay-1")).await;
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    // A new key on a paid order: 409.
    assert_eq!(pay("pay-2").await.status(), StatusCode::CONFLICT);
    assert_eq!(stack.outbox_items().await.len(), 2);
}

/// Headers, body, expected status, error code and field.
type BadInput<'a> = (
    Vec<(&'a str, &'a str)>,
    String,
    StatusCode,
    &'a str,
    Option<&'a str>,
);

#[tokio::test]
async fn bad_input_gets_a_clear_error_and_writes_nothing() {
    let stack = Stack::new().await;
    let service = service(&stack);
    let json_ct = [("content-type", "application/json")];
    let big = format!("{{\"customerId\":\"{}\"}}", "x".repeat(70 * 1024));
    let cases: Vec<BadInput> = vec![
        (json_ct.to_vec(), "{\"customerId\": ".into(), StatusCode::BAD_REQUEST, "invalid_json", None),
        (json_ct.to_vec(), "".into(), StatusCode::BAD_REQUEST, "invalid_json", None),
        (json_ct.to_vec(), "[]".into(), StatusCode::BAD_REQUEST, "invalid_field", Some(".")),
        (json_ct.to_vec(), format!("{} trailing", order_json()), StatusCode::BAD_REQUEST, "invalid_json", None),
        (json_ct.to_vec(), json!({"currency": "EUR", "items": []}).to_string(), StatusCode::BAD_REQUEST, "invalid_field", Some("customerId")),
        (json_ct.to_vec(), json!({"customerId": 5, "currency": "EUR", "items": []}).to_string(), StatusCode::BAD_REQUEST, "invalid_field", Some("customerId")),
        (json_ct.to_vec(), json!({"customerId": "c", "currency": "EUR", "items": [], "extra": 1}).to_string(), StatusCode::BAD_REQUEST, "invalid_field", Some("extra")),
        // Requests stay strict where the event schemas are open (#25 item 13).
        (json_ct.to_vec(), json!({"customerId": "c", "currency": "EUR", "items": [{"sku": "A", "quantity": 1, "unitPriceCents": 1, "giftWrap": true}]}).to_string(), StatusCode::BAD_REQUEST, "invalid_field", Some("items[0].giftWrap")),
        (json_ct.to_vec(), json!({"customerId": "c", "currency": "EUR", "items": [{"sku": "A", "quantity": -1, "unitPriceCents": 1}]}).to_string(), StatusCode::BAD_REQUEST, "invalid_field", Some("items[0].quantity")),
        (json_ct.to_vec(), json!({"customerId": "c", "currency": "EUR", "items": [{"sku": "A", "quantity": 1}]}).to_string(), StatusCode::BAD_REQUEST, "invalid_field", Some("items[0].unitPriceCents")),
        (json_ct.to_vec(), json!({"customerId": "c", "currency": "EUR", "items": [{"sku": "A", "quantity": 0, "unitPriceCents": 1}]}).to_string(), StatusCode::BAD_REQUEST, "invalid_field", Some("items[0].quantity")),
        (json_ct.to_vec(), json!({"customerId": "c", "currency": "euro", "items": [{"sku": "A", "quantity": 1, "unitPriceCents": 1}]}).to_string(), StatusCode::BAD_REQUEST, "invalid_field", Some("currency")),
        (json_ct.to_vec(), json!({"customerId": "", "currency": "EUR", "items": [{"sku": "A", "quantity": 1, "unitPriceCents": 1}]}).to_string(), StatusCode::BAD_REQUEST, "invalid_field", Some("customerId")),
        (json_ct.to_vec(), json!({"customerId": "c", "currency": "EUR", "items": []}).to_string(), StatusCode::BAD_REQUEST, "invalid_field", Some("items")),
        (json_ct.to_vec(), big, StatusCode::PAYLOAD_TOO_LARGE, "body_too_large", None),
        (vec![("content-type", "text/plain")], order_json(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", None),
        (vec![], order_json(), StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type", None),
        (vec![("content-type", "application/json"), ("idempotency-key", "")], order_json(), StatusCode::BAD_REQUEST, "invalid_idempotency_key", Some("Idempotency-Key")),
    ];
    for (headers, payload, status, code, field) in cases {
        let response = service
            .handle(request("POST", "/orders", &headers, Some(&payload)))
            .await;
        let error = body(&response);
        assert_eq!(response.status(), status, "{payload:.80}: {error}");
        assert_eq!(error["error"]["code"], code, "{payload:.80}");
        assert!(error["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
        if let Some(field) = field {
            assert_eq!(error["error"]["field"], field, "{payload:.80}: {error}");
        }
    }
    let long_key = "k".repeat(256);
    let response = create(&service, Some(&long_key)).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);

    // What the local emulator cannot carry (schemathesis meets it first;
    // infra/contract/hooks.py): a header value that is not ASCII, and a
    // JSON body that is not UTF-8 (API Gateway passes it base64-encoded).
    let mut odd_key = request("POST", "/orders", &json_ct, Some(&order_json()));
    odd_key.headers_mut().insert(
        "idempotency-key",
        lambda_http::http::HeaderValue::from_bytes(&[0xd7, 0xf8, 0x9b]).unwrap(),
    );
    let response = service.handle(odd_key).await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body(&response)["error"]["code"], "invalid_idempotency_key");
    for path in ["/orders", "/orders/01J00000000000000000000000/payment"] {
        let mut not_utf8 = request("POST", path, &json_ct, None);
        *not_utf8.body_mut() = Body::Binary(vec![b';', 0xff]);
        let response = service.handle(not_utf8).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{path}");
        assert_eq!(body(&response)["error"]["code"], "invalid_json", "{path}");
    }

    // Wrong method and route (#25 item 14): 405 with `Allow`, 404
    // route_not_found, both documented.
    for (method, path, allow) in [
        ("DELETE", "/orders", "POST"),
        ("GET", "/orders/01J00000000000000000000000/payment", "POST"),
        ("PUT", "/orders/01J00000000000000000000000", "GET"),
    ] {
        let response = service.handle(request(method, path, &[], None)).await;
        assert_eq!(
            response.status(),
            StatusCode::METHOD_NOT_ALLOWED,
            "{method} {path}"
        );
        assert_eq!(response.headers()["allow"], allow, "{method} {path}");
        assert_eq!(body(&response)["error"]["code"], "method_not_allowed");
    }
    let response = service.handle(request("GET", "/nowhere", &[], None)).await;
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    assert_eq!(body(&response)["error"]["code"], "route_not_found");

    // The payment's body, when sent, is `{}`: a field is refused, as the
    // document's `maxProperties: 0` says, before the order is read.
    let pay = "/orders/01J00000000000000000000000/payment";
    let response = service
        .handle(request("POST", pay, &json_ct, Some(r#"{"amount": 5}"#)))
        .await;
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);
    assert_eq!(body(&response)["error"]["code"], "invalid_field");
    assert_eq!(body(&response)["error"]["field"], "amount");

    // Samples of bad input behave the same.
    for (sample, status) in [
        ("writer-create-order-invalid.json", StatusCode::BAD_REQUEST),
        (
            "writer-create-order-malformed.json",
            StatusCode::BAD_REQUEST,
        ),
        (
            "writer-create-order-unknown-field.json",
            StatusCode::BAD_REQUEST,
        ),
    ] {
        assert_eq!(
            service.handle(api_request(sample)).await.status(),
            status,
            "{sample}"
        );
    }

    assert!(stack.items().await.is_empty(), "nothing was written");
    assert!(
        stack.calls.calls().is_empty(),
        "no AWS call was made for bad input"
    );
}

#[tokio::test]
async fn aws_failures_do_not_leak_internals() {
    // A table that does not exist: a 500 with a generic message.
    let stack = Stack::new().await;
    let mut config = stack.config(&[]);
    config.table_name = "no-such-table".into();
    let service = CheckedApi(Api::new(OrderService::from_config(
        stack.ddb.clone(),
        &config,
    )));
    let response = create(&service, None).await;
    assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
    let error = body(&response);
    assert_eq!(error["error"]["code"], "internal");
    assert!(!error.to_string().contains("no-such-table"));
}

const ALICE: Principal<'static> = Principal::Iam("arn:aws:iam::123456789012:user/alice");
const BOB: Principal<'static> = Principal::Jwt("bob-subject");

async fn create_as(api: &CheckedApi, who: Principal<'_>, key: Option<&str>) -> Response<Body> {
    let mut headers = vec![("content-type", "application/json")];
    if let Some(key) = key {
        headers.push(("idempotency-key", key));
    }
    api.handle(request_from(
        who,
        "POST",
        "/orders",
        &headers,
        Some(&order_json()),
    ))
    .await
}

#[tokio::test]
async fn orders_belong_to_their_caller() {
    let stack = Stack::new().await;
    let api = service(&stack);
    let created = create_as(&api, ALICE, None).await;
    assert_eq!(created.status(), StatusCode::CREATED);
    let id = body(&created)["orderId"].as_str().unwrap().to_owned();
    // The owner is stored, and neither returned nor published.
    let meta = stack.get(&format!("ORDER#{id}"), "META").await.unwrap();
    assert_eq!(
        meta["ownerId"].as_s().unwrap(),
        "iam:arn:aws:iam::123456789012:user/alice"
    );
    assert!(body(&created).get("ownerId").is_none());
    assert!(!stack.outbox_items().await[0].envelope.contains("alice"));

    // Bob gets exactly what an unknown order gets, and cannot pay it.
    let unknown = format!("/orders/{}", ulid::Ulid::new());
    let missing = api
        .handle(request_from(BOB, "GET", &unknown, &[], None))
        .await;
    let path = format!("/orders/{id}");
    let theirs = api.handle(request_from(BOB, "GET", &path, &[], None)).await;
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND);
    assert_eq!(body(&theirs), body(&missing));
    let paid = api
        .handle(request_from(
            BOB,
            "POST",
            &format!("{path}/payment"),
            &[],
            None,
        ))
        .await;
    assert_eq!(paid.status(), StatusCode::NOT_FOUND);
    assert_eq!(body(&paid)["error"]["code"], "order_not_found");
    assert_eq!(stack.outbox_items().await.len(), 1, "no OrderPaid");

    // Alice reads and pays it.
    let mine = api
        .handle(request_from(ALICE, "GET", &path, &[], None))
        .await;
    assert_eq!(mine.status(), StatusCode::OK);
    let paid = api
        .handle(request_from(
            ALICE,
            "POST",
            &format!("{path}/payment"),
            &[],
            None,
        ))
        .await;
    assert_eq!(paid.status(), StatusCode::OK);
}

#[tokio::test]
async fn idempotency_keys_are_scoped_to_the_caller() {
    let stack = Stack::new().await;
    let api = service(&stack);
    let alice = create_as(&api, ALICE, Some("shared-key")).await;
    assert_eq!(alice.status(), StatusCode::CREATED);
    // The same key from Bob is Bob's own: a new order, not Alice's replay,
    // and never a 422 for "another request".
    let bob = create_as(&api, BOB, Some("shared-key")).await;
    assert_eq!(bob.status(), StatusCode::CREATED);
    assert!(bob.headers().get("idempotent-replayed").is_none());
    assert_ne!(body(&alice)["orderId"], body(&bob)["orderId"]);
    // Each caller's retry replays their own response.
    let again = create_as(&api, BOB, Some("shared-key")).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(body(&again)["orderId"], body(&bob)["orderId"]);
    let mut headers = vec![
        ("content-type", "application/json"),
        ("idempotency-key", "shared-key"),
    ];
    let other_body = json!({"customerId": "c-2", "currency": "EUR", "items": [{"sku": "B", "quantity": 1, "unitPriceCents": 1}]}).to_string();
    let reused = api
        .handle(request_from(
            ALICE,
            "POST",
            "/orders",
            &headers,
            Some(&other_body),
        ))
        .await;
    assert_eq!(reused.status(), StatusCode::UNPROCESSABLE_ENTITY);
    headers.pop();
    assert_eq!(stack.outbox_items().await.len(), 2);
}

#[tokio::test]
async fn requests_without_a_principal_are_401_unless_run_locally() {
    let stack = Stack::new().await;
    let api = service(&stack);
    for (method, path) in [
        ("POST", "/orders"),
        ("GET", "/orders/01J00000000000000000000000"),
        ("POST", "/orders/01J00000000000000000000000/payment"),
    ] {
        let headers = [("content-type", "application/json")];
        let response = api
            .handle(request_from(
                Principal::Anonymous,
                method,
                path,
                &headers,
                Some(&order_json()),
            ))
            .await;
        assert_eq!(
            response.status(),
            StatusCode::UNAUTHORIZED,
            "{method} {path}"
        );
        let error = body(&response);
        assert_eq!(error["error"]["code"], "unauthenticated");
        assert!(error["error"]["message"].is_string());
    }
    assert!(stack.items().await.is_empty(), "nothing was written");
    assert!(stack.calls.calls().is_empty(), "no AWS call was made");

    // With the local setting, the same request acts as the local caller.
    let local = service(&stack).with_local_caller(writer::Caller::local("demo").unwrap());
    let response = create_as(&local, Principal::Anonymous, None).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    let id = body(&response)["orderId"].as_str().unwrap().to_owned();
    let meta = stack.get(&format!("ORDER#{id}"), "META").await.unwrap();
    assert_eq!(meta["ownerId"].as_s().unwrap(), "local:demo");
}

#[tokio::test]
async fn amounts_stay_javascript_safe() {
    let stack = Stack::new().await;
    let api = service(&stack);
    let max = writer::MAX_SAFE_CENTS;
    let post = |items: Value| {
        let order = json!({"customerId": "c", "currency": "EUR", "items": items}).to_string();
        let headers = [("content-type", "application/json")];
        api.handle(request("POST", "/orders", &headers, Some(&order)))
    };
    for (items, field) in [
        (
            json!([{"sku": "A", "quantity": 1, "unitPriceCents": max + 1}]),
            "items[0].unitPriceCents",
        ),
        (
            json!([{"sku": "A", "quantity": 3, "unitPriceCents": max / 2}]),
            "items[0]",
        ),
        (
            json!([{"sku": "A", "quantity": 1, "unitPriceCents": max}, {"sku": "B", "quantity": 1, "unitPriceCents": 1}]),
            "totalCents",
        ),
    ] {
        let response = post(items).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{field}");
        assert_eq!(body(&response)["error"]["field"], field);
    }
    assert!(stack.items().await.is_empty());
    let response = post(json!([{"sku": "A", "quantity": 1, "unitPriceCents": max}])).await;
    assert_eq!(response.status(), StatusCode::CREATED);
    assert_eq!(body(&response)["totalCents"], json!(max));
}

/// Issue #25 item 12, through the real writer binary under the local Lambda
/// runtime: an owner is a principal, never a role session. Cognito users of
/// one identity pool (one shared role session) are each their own caller;
/// an assumed role is the same caller whatever its session name (a
/// redeployed task keeps its orders), and a session name cannot be chosen
/// to reach another caller's orders; the shared Cognito session without an
/// identity is 401.
#[tokio::test]
async fn owners_are_principals_not_sessions_through_the_writer_binary() {
    use testkit::api_event;

    let stack = Stack::new().await;
    let writer = stack.function(devkit::Function::Writer, &[], &[]);
    let call = |who: Principal<'static>, method: &'static str, path: String| {
        let writer = &writer;
        async move {
            let body = (method == "POST" && path == "/orders").then(order_json);
            let headers: &[(&str, &str)] = if body.is_some() {
                &[("content-type", "application/json")]
            } else {
                &[]
            };
            let event = api_event(who, method, &path, headers, body.as_deref());
            let answer = writer
                .invoke(event.to_string().as_bytes())
                .await
                .expect("the writer answers");
            let response: Value = serde_json::from_slice(&answer).expect("an API response");
            let status = response["statusCode"].as_u64().expect("a status");
            let body: Value = response["body"]
                .as_str()
                .and_then(|b| serde_json::from_str(b).ok())
                .unwrap_or(Value::Null);
            (status, body)
        }
    };
    let session = |name: &str| {
        Principal::Iam(Box::leak(
            format!("arn:aws:sts::123456789012:assumed-role/OrdersService/{name}").into_boxed_str(),
        ))
    };
    let owner = |id: String| {
        let stack = &stack;
        async move {
            let meta = stack.get(&format!("ORDER#{id}"), "META").await.unwrap();
            meta["ownerId"].as_s().unwrap().clone()
        }
    };

    // Two users of one identity pool: two callers.
    let (status, ada) = call(
        Principal::Cognito("us-east-1:ada"),
        "POST",
        "/orders".into(),
    )
    .await;
    assert_eq!(status, 201);
    let ada = ada["orderId"].as_str().unwrap().to_owned();
    assert_eq!(owner(ada.clone()).await, "cognito:us-east-1:ada");
    let (status, _) = call(
        Principal::Cognito("us-east-1:bea"),
        "GET",
        format!("/orders/{ada}"),
    )
    .await;
    assert_eq!(status, 404, "another pool user does not see it");
    let (status, _) = call(
        Principal::Cognito("us-east-1:bea"),
        "POST",
        format!("/orders/{ada}/payment"),
    )
    .await;
    assert_eq!(status, 404, "nor pay it");
    let (status, _) = call(
        Principal::Cognito("us-east-1:ada"),
        "GET",
        format!("/orders/{ada}"),
    )
    .await;
    assert_eq!(status, 200);
    // The pool's shared session without its identity: nobody.
    let (status, body) = call(
        Principal::Iam(testkit::COGNITO_SESSION_ARN),
        "GET",
        format!("/orders/{ada}"),
    )
    .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthenticated"))
    );

    // A service's role: one caller across sessions (a redeployed task).
    let (status, svc) = call(session("task-1"), "POST", "/orders".into()).await;
    assert_eq!(status, 201);
    let svc = svc["orderId"].as_str().unwrap().to_owned();
    assert_eq!(
        owner(svc.clone()).await,
        "iam:arn:aws:sts::123456789012:assumed-role/OrdersService"
    );
    let (status, _) = call(session("task-2"), "POST", format!("/orders/{svc}/payment")).await;
    assert_eq!(
        status, 200,
        "the next task of the same service pays its order"
    );
    // A session named after another principal reaches nothing of theirs.
    let (status, _) = call(session("us-east-1:ada"), "GET", format!("/orders/{ada}")).await;
    assert_eq!(status, 404);
    let alice = "arn:aws:iam::123456789012:user/alice";
    let (status, mine) = call(Principal::Iam(alice), "POST", "/orders".into()).await;
    assert_eq!(status, 201);
    let mine = mine["orderId"].as_str().unwrap().to_owned();
    let (status, _) = call(session("alice"), "GET", format!("/orders/{mine}")).await;
    assert_eq!(status, 404);
}
