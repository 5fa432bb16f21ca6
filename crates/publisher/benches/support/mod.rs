//! What both publisher benches use: a stream batch as Lambda sends it, the
//! runtime's decode, and a publisher whose sink and store answer at once.

// Each bench uses its own part of this module.
#![allow(dead_code)]

use aws_sdk_eventbridge::config::{BehaviorVersion, Region};
use outbox_core::{EventEnvelope, OutboxItem};
use outbox_engine::Deadline;
use outbox_engine::FakeSink;
use outbox_engine::MemoryStore;
use outbox_runtime::EventBridgeSink;
use publisher::{Publisher, StreamEvent};

/// A stream batch of `n` outbox inserts of `n` aggregates, as JSON, with
/// every field Lambda sends.
pub(crate) fn batch(n: usize) -> String {
    let records: Vec<serde_json::Value> = (0..n)
        .map(|i| {
            let order = serde_json::json!({
                "orderId": format!("01JDQ3V7X8KZ4M2N5P6R7S{i:04}"), "customerId": "cust-42", "currency": "EUR",
                "items": [{"sku": "BOOK-1", "quantity": 2, "unitPriceCents": 1500}, {"sku": "PEN-7", "quantity": 1, "unitPriceCents": 250}],
                "totalCents": 3250, "status": "PENDING", "version": 1,
                "createdAt": "2026-11-29T14:00:00.000Z", "updatedAt": "2026-11-29T14:00:00.000Z"
            });
            let envelope = EventEnvelope::new("OrderCreated", "Order", &format!("o-{i}"), 1, order).unwrap();
            let item = OutboxItem::new(&format!("ORDER#o-{i}"), &envelope, &outbox_core::size::EventLimits::eventbridge("outbox.orders"), 8).unwrap();
            let image = serde_json::to_value(serde_dynamo::Item::from(item.to_attributes().unwrap())).unwrap();
            serde_json::json!({
                "eventID": format!("{i}"), "eventName": "INSERT", "eventVersion": "1.1", "eventSource": "aws:dynamodb",
                "awsRegion": "us-east-1",
                "dynamodb": {
                    "ApproximateCreationDateTime": 1796047200, "Keys": {"PK": image["PK"], "SK": image["SK"]},
                    "NewImage": image, "SequenceNumber": format!("{}", 4_000_000_000_000u64 + i as u64),
                    "SizeBytes": 900, "StreamViewType": "NEW_IMAGE"
                },
                "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/2026"
            })
        })
        .collect();
    serde_json::json!({ "Records": records }).to_string()
}

/// Decodes a payload as `lambda_runtime` does (its `deserializer.rs`).
pub(crate) fn runtime_decode<T: serde::de::DeserializeOwned>(json: &str) -> T {
    let de = &mut serde_json::Deserializer::from_slice(json.as_bytes());
    serde_path_to_error::deserialize(de).unwrap()
}

/// The real EventBridge sink (its entries and size arithmetic); never called.
pub(crate) fn eventbridge_sink() -> EventBridgeSink {
    let sdk = aws_sdk_eventbridge::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .region(Region::new("us-east-1"))
        .build();
    EventBridgeSink::new(
        aws_sdk_eventbridge::Client::from_conf(sdk),
        "bus".into(),
        "outbox.orders".into(),
    )
}

/// EventBridge's limits and entry sizes, answering every call at once
/// after building the real request entries (the CPU the real sink spends).
pub(crate) fn instant_sink() -> FakeSink {
    let real = eventbridge_sink();
    FakeSink::like(real.clone())
        .quiet()
        .before_answer(move |items| {
            std::hint::black_box(
                items
                    .iter()
                    .map(|item| real.entry(item))
                    .collect::<Vec<_>>(),
            );
            Box::pin(std::future::ready(()))
        })
}

/// A publisher at the template's defaults whose sink and store answer at
/// once, and the single-threaded runtime it runs on.
pub(crate) fn instant_publisher() -> (tokio::runtime::Runtime, Publisher<FakeSink, MemoryStore>) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let publisher = Publisher::new(instant_sink(), MemoryStore::quiet(8));
    (runtime, publisher)
}

/// One whole invocation: the runtime's decode of `json`, then the handler's
/// work. Returns the events published.
pub(crate) fn invoke(
    runtime: &tokio::runtime::Runtime,
    publisher: &Publisher<FakeSink, MemoryStore>,
    json: &str,
) -> usize {
    let event: StreamEvent = runtime_decode(json);
    let deadline = Deadline::after(std::time::Duration::from_secs(60));
    runtime
        .block_on(publisher.process(event, &deadline))
        .unwrap()
        .relayed
        .published
}
