//! CPU of building the writer's transaction for `POST /orders`: the
//! envelope, the outbox item (codec and size checks) and the limit checks.
//! No I/O.

// criterion_group! and criterion_main! define undocumented items.
#![allow(missing_docs)]

use aws_sdk_dynamodb::types::{AttributeValue, Put};
use criterion::{criterion_group, criterion_main, Criterion};
use outbox_core::size::EventLimits;
use outbox_core::EventEnvelope;
use writer::{OutboxSettings, OutboxTransaction};

fn bench(c: &mut Criterion) {
    let settings = OutboxSettings::new("orders", EventLimits::eventbridge("outbox.orders"), 8);
    let order = serde_json::json!({
        "orderId": "01JDQ3V7X8KZ4M2N5P6R7S8T9V", "customerId": "cust-42", "currency": "EUR",
        "items": [{"sku": "BOOK-1", "quantity": 2, "unitPriceCents": 1500}, {"sku": "PEN-7", "quantity": 1, "unitPriceCents": 250}],
        "totalCents": 3250, "status": "PENDING", "version": 1,
        "createdAt": "2026-11-29T14:00:00.000Z", "updatedAt": "2026-11-29T14:00:00.000Z"
    });
    c.bench_function("writer_build_create_order_transaction", |b| {
        b.iter(|| {
            let item: std::collections::HashMap<String, AttributeValue> =
                serde_dynamo::to_item(&order).unwrap();
            let put = Put::builder()
                .table_name("orders")
                .set_item(Some(item))
                .item(
                    "PK",
                    AttributeValue::S("ORDER#01JDQ3V7X8KZ4M2N5P6R7S8T9V".into()),
                )
                .item("SK", AttributeValue::S("META".into()))
                .condition_expression("attribute_not_exists(PK)")
                .build()
                .unwrap();
            let envelope = EventEnvelope::new(
                "OrderCreated",
                "Order",
                "01JDQ3V7X8KZ4M2N5P6R7S8T9V",
                1,
                order.clone(),
            )
            .unwrap();
            OutboxTransaction::new(&settings)
                .put("order", put)
                .event("ORDER#01JDQ3V7X8KZ4M2N5P6R7S8T9V", &envelope)
                .build()
                .unwrap()
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
