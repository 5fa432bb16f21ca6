//! The orders API (the `writer` Lambda's handler) against the local AWS API.
//!
//! This file holds the helpers the tests share; the tests are grouped by
//! concern in the modules below.

mod callers;
mod errors;
mod orders;

use lambda_http::{Body, Response};
use serde_json::{json, Value};
use testkit::contract::CheckedApi;
use testkit::{request_from, Principal, Stack};
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

/// `POST /orders` of [`order_json`] by the tests' caller, with the
/// idempotency key `key`.
async fn create(api: &CheckedApi, key: Option<&str>) -> Response<Body> {
    create_as(api, Principal::Iam(testkit::TEST_CALLER_ARN), key).await
}

/// The same by `who`.
async fn create_as(api: &CheckedApi, who: Principal<'_>, key: Option<&str>) -> Response<Body> {
    let mut headers = vec![("content-type", "application/json")];
    headers.extend(key.map(|key| ("idempotency-key", key)));
    let body = order_json();
    api.handle(request_from(who, "POST", "/orders", &headers, Some(&body)))
        .await
}
