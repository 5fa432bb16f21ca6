//! Handler CPU per record: decoding a DynamoDB stream batch (JSON, as Lambda
//! delivers it) into outbox items and building the EventBridge entries, for
//! batches of 1, 100 and 1,000 records. No I/O. `publisher_decode_split`
//! times its two halves apart: the runtime's decode of the event JSON into
//! `aws_lambda_events`' types, and ours (outbox items and entries).
//!
//! And the publisher's throughput per invocation when the sink and the
//! store answer at once (`publisher_invocation_instant_sink`): the whole
//! `Publisher::process` of a decoded batch (grouping, batching by count and
//! bytes, order per aggregate, deletes), so that the figure is ours and not
//! the network's. docs/performance.md §3 turns it into the scaling model.

// criterion_group! and criterion_main! define undocumented items.
#![allow(missing_docs)]

use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use outbox_core::publish::eventbridge::EventBridgeSink;
use outbox_core::publish::{EntryOutcome, EventSink, SinkError};
use outbox_core::retry::Deadline;
use outbox_core::store::MemoryStore;
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

/// The real EventBridge sink (its entries and size arithmetic); never called.
fn eventbridge_sink() -> EventBridgeSink {
    let sdk = aws_sdk_eventbridge::Config::builder()
        .behavior_version(aws_sdk_eventbridge::config::BehaviorVersion::latest())
        .region(aws_sdk_eventbridge::config::Region::new("us-east-1"))
        .build();
    EventBridgeSink::new(
        aws_sdk_eventbridge::Client::from_conf(sdk),
        "bus".into(),
        "outbox.orders".into(),
    )
}

/// Our half of the work: outbox items, their sizes and the entries.
fn items_and_entries(sink: &EventBridgeSink, event: Event) -> (Vec<PutEventsRequestEntry>, usize) {
    let mut bytes = 0;
    let mut entries = Vec::with_capacity(event.records.len());
    for record in event.records {
        let item = OutboxItem::from_item(record.change.new_image).unwrap();
        bytes += sink.entry_size(&item);
        entries.push(sink.entry(&item));
    }
    (entries, bytes)
}

fn bench(c: &mut Criterion) {
    let sink = eventbridge_sink();
    let mut group = c.benchmark_group("publisher_decode_and_build");
    for n in [1usize, 100, 1000] {
        let json = batch(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &json, |b, json| {
            b.iter(|| items_and_entries(&sink, serde_json::from_str(json).unwrap()))
        });
    }
    group.finish();
    // The two halves of the above: the runtime's decode of the event, and
    // ours (outbox items and entries from the decoded records).
    let json = batch(100);
    let mut group = c.benchmark_group("publisher_decode_split");
    group.throughput(Throughput::Elements(100));
    group.bench_function("event_json/100", |b| {
        b.iter(|| serde_json::from_str::<Event>(&json).unwrap())
    });
    group.bench_function("items_and_entries/100", |b| {
        b.iter_batched(
            || serde_json::from_str::<Event>(&json).unwrap(),
            |event| items_and_entries(&sink, event),
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

/// EventBridge's limits and entry sizes, answering every call at once.
struct InstantSink(EventBridgeSink);

impl EventSink for InstantSink {
    fn max_entries(&self) -> usize {
        self.0.max_entries()
    }
    fn max_bytes(&self) -> usize {
        self.0.max_bytes()
    }
    fn entry_size(&self, item: &OutboxItem) -> usize {
        self.0.entry_size(item)
    }
    async fn publish_batch(
        &self,
        items: &[&OutboxItem],
        _max_sends: u32,
        sends: &outbox_core::aws::SendCounter,
    ) -> Vec<EntryOutcome> {
        sends.record();
        // Build the real request entries (the CPU the real sink spends).
        let entries: Vec<_> = items.iter().map(|item| self.0.entry(item)).collect();
        criterion::black_box(entries);
        items.iter().map(|_| Ok(())).collect()
    }
    async fn verify(&self) -> Result<(), SinkError> {
        Ok(())
    }
}

fn invocation(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    let sink = eventbridge_sink();
    let publisher = publisher::Publisher::new(InstantSink(sink), MemoryStore::quiet(8));
    let mut group = c.benchmark_group("publisher_invocation_instant_sink");
    for n in [100usize, 1000] {
        let json = batch(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &json, |b, json| {
            b.iter(|| {
                // Decode as the runtime does, then the whole handler.
                let event: Event = serde_json::from_str(json).unwrap();
                let deadline = Deadline::after(std::time::Duration::from_secs(60));
                runtime
                    .block_on(publisher.process(event.records, &deadline))
                    .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, invocation);
criterion_main!(benches);
