//! The writer's round trips per command, and the cost inputs
//! (`.local/bench/cost-inputs.json`: its calls and the sizes of the items
//! it writes) that `infra/bench/cost.py` prices.

use crate::common::write_bench_json;
use testkit::{request, Stack};

pub(super) async fn writer_round_trips() {
    let stack = Stack::new().await;
    let service = writer::Api::new(writer::OrderService::from_config(
        stack.counted_ddb.clone(),
        &stack.config(&[]),
    ));
    let body = r#"{"customerId":"c","currency":"EUR","items":[{"sku":"A","quantity":1,"unitPriceCents":1}]}"#;
    let create = |key: &'static str| {
        request(
            "POST",
            "/orders",
            &[
                ("content-type", "application/json"),
                ("idempotency-key", key),
            ],
            Some(body),
        )
    };
    let mut rows = Vec::new();
    stack.calls.reset();
    let created = service.handle(create("k1")).await;
    rows.push(("create", stack.calls.calls()));
    let id = match created.body() {
        lambda_http::Body::Text(t) => serde_json::from_str::<serde_json::Value>(t).unwrap()
            ["orderId"]
            .as_str()
            .unwrap()
            .to_owned(),
        _ => unreachable!(),
    };
    stack.calls.reset();
    service.handle(create("k1")).await;
    rows.push(("create, replayed", stack.calls.calls()));
    let pay = || {
        request(
            "POST",
            &format!("/orders/{id}/payment"),
            &[("idempotency-key", "p1")],
            None,
        )
    };
    stack.calls.reset();
    service.handle(pay()).await;
    rows.push(("pay", stack.calls.calls()));
    stack.calls.reset();
    service.handle(pay()).await;
    rows.push(("pay, replayed", stack.calls.calls()));
    stack.calls.reset();
    service
        .handle(request("GET", &format!("/orders/{id}"), &[], None))
        .await;
    rows.push(("get", stack.calls.calls()));
    cost_inputs(&stack, &rows, &id).await;
    println!("## Writer round trips per command\n");
    println!("| command | calls | reads | which |");
    println!("|---|---|---|---|");
    for (name, calls) in rows {
        let reads = calls
            .iter()
            .filter(|c| c.starts_with("Get") || c.starts_with("BatchGet") || c.starts_with("Query"))
            .count();
        println!(
            "| {name} | {} | {reads} | {} |",
            calls.len(),
            calls.join(", ")
        );
    }
    println!();
}

/// What `infra/bench/cost.py` prices: the writer's calls per command and
/// the sizes of the items they write, as DynamoDB counts them, read back
/// from the table after one create and one payment, each with an
/// `Idempotency-Key`. Written to `.local/bench/cost-inputs.json`.
async fn cost_inputs(stack: &Stack, rows: &[(&str, Vec<String>)], id: &str) {
    use outbox_core::size::item_size;
    let items = stack.items().await;
    let size_of = |pred: &dyn Fn(&str, &str) -> bool| -> Vec<usize> {
        items
            .iter()
            .filter(|i| {
                let s = |k: &str| {
                    i.get(k)
                        .and_then(|v| v.as_s().ok())
                        .cloned()
                        .unwrap_or_default()
                };
                pred(&s("PK"), &s("SK"))
            })
            .map(item_size)
            .collect()
    };
    let order = size_of(&|pk, sk| pk == format!("ORDER#{id}") && sk == "META");
    let outbox = size_of(&|pk, sk| pk == format!("ORDER#{id}") && sk.starts_with("OUTBOX#"));
    let idempotency = size_of(&|pk, _| pk.starts_with("IDEMPOTENCY#"));
    let envelopes: Vec<usize> = items
        .iter()
        .filter_map(|i| {
            i.get("envelope")
                .and_then(|v| v.as_s().ok())
                .map(String::len)
        })
        .collect();
    let calls: serde_json::Map<String, serde_json::Value> = rows
        .iter()
        .map(|(name, calls)| (name.to_string(), serde_json::json!(calls)))
        .collect();
    let inputs = serde_json::json!({
        "source": "cargo bench --bench aws_calls (writer round trips), sizes as DynamoDB counts them (outbox_core::size::item_size)",
        "writer_calls": calls,
        "item_bytes": {
            "order_meta": order.iter().max(),
            "outbox_item": outbox.iter().max(),
            "outbox_items_seen": outbox.len(),
            "idempotency_record": idempotency.iter().max(),
            "envelope": envelopes.iter().max(),
        },
    });
    write_bench_json("cost-inputs.json", inputs);
}
