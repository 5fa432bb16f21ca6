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
use testkit::{request, Stack};
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
