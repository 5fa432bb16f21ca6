//! What the API refuses and how it fails: bad input gets a clear error and
//! writes nothing, amounts stay JavaScript-safe, and an AWS failure leaks
//! no internals.

use lambda_http::http::StatusCode;
use lambda_http::Body;
use serde_json::{json, Value};
use testkit::contract::CheckedApi;
use testkit::{api_request, request, Stack};
use writer::{Api, OrderService};

use super::{body, create, order_json, service};

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
        let status = response.status();
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
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
    for sample in [
        "writer-create-order-invalid.json",
        "writer-create-order-malformed.json",
        "writer-create-order-unknown-field.json",
    ] {
        let response = service.handle(api_request(sample)).await;
        assert_eq!(response.status(), StatusCode::BAD_REQUEST, "{sample}");
    }

    assert!(stack.items().await.is_empty(), "nothing was written");
    let calls = stack.calls.calls();
    assert!(calls.is_empty(), "no AWS call for bad input: {calls:?}");
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
