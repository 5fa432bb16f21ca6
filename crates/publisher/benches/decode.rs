//! Handler CPU per record: decoding a DynamoDB stream batch (JSON, as Lambda
//! delivers it) into outbox items and building the EventBridge entries, for
//! batches of 1, 100 and 1,000 records. No I/O.

use aws_lambda_events::event::dynamodb::Event;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use outbox_core::publish::eventbridge::EventBridgeSink;
use outbox_core::publish::EventSink;
use outbox_core::{EventEnvelope, OutboxItem};

/// A stream batch of `n` outbox inserts, as JSON.
fn batch(n: usize) -> String {
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

fn bench(c: &mut Criterion) {
    let sdk = aws_sdk_eventbridge::Config::builder()
        .behavior_version(aws_sdk_eventbridge::config::BehaviorVersion::latest())
        .region(aws_sdk_eventbridge::config::Region::new("us-east-1"))
        .build();
    let sink = EventBridgeSink::new(
        aws_sdk_eventbridge::Client::from_conf(sdk),
        "bus".into(),
        "outbox.orders".into(),
    );
    let mut group = c.benchmark_group("publisher_decode_and_build");
    for n in [1usize, 100, 1000] {
        let json = batch(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &json, |b, json| {
            b.iter(|| {
                let event: Event = serde_json::from_str(json).unwrap();
                let mut bytes = 0;
                let mut entries = Vec::with_capacity(n);
                for record in event.records {
                    let item = OutboxItem::from_item(record.change.new_image).unwrap();
                    bytes += sink.entry_size(&item);
                    entries.push(sink.entry(&item));
                }
                (entries, bytes)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
