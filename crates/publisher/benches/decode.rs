//! Handler CPU per record: decoding a DynamoDB stream batch (JSON, as Lambda
//! delivers it) into outbox items and building the EventBridge entries, for
//! batches of 1, 100 and 1,000 records. No I/O. `publisher_decode_split`
//! times the decode alone: the general `aws_lambda_events` model (what the
//! publisher used before the lean decode) beside ours (`StreamEvent`), each
//! as the runtime runs it (`serde_path_to_error` over `from_slice`).
//!
//! And the publisher's throughput per invocation when the sink and the
//! store answer at once (`publisher_invocation_instant_sink`): the runtime's
//! decode, then the whole `Publisher::process` (grouping, batching by count
//! and bytes, order per aggregate, deletes), so that the figure is ours and
//! not the network's. docs/performance.md §3 turns it into the scaling
//! model. `benches/instructions.rs` counts the same invocation's
//! instructions under callgrind.

// criterion_group! and criterion_main! define undocumented items.
#![allow(missing_docs)]

use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_eventbridge::types::PutEventsRequestEntry;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use outbox_core::{KeySchema, OutboxItem};
use outbox_engine::EventSink;
use outbox_runtime::EventBridgeSink;
use publisher::StreamEvent;

mod support;
use support::{batch, eventbridge_sink, runtime_decode};

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
            b.iter(|| items_and_entries(&sink, runtime_decode(json)))
        });
    }
    group.finish();
    // The two halves of the above: the runtime's decode of the event, and
    // ours (outbox items and entries from the decoded records).
    let json = batch(100);
    let mut group = c.benchmark_group("publisher_decode_split");
    group.throughput(Throughput::Elements(100));
    group.bench_function("event_json/100", |b| {
        b.iter(|| runtime_decode::<Event>(&json))
    });
    let schema = KeySchema::default();
    group.bench_function("lean/100", |b| {
        b.iter(|| {
            let event = runtime_decode::<StreamEvent>(&json);
            criterion::black_box(event.records(&schema).unwrap().len())
        })
    });
    group.bench_function("items_and_entries/100", |b| {
        b.iter_batched(
            || runtime_decode::<Event>(&json),
            |event| items_and_entries(&sink, event),
            criterion::BatchSize::SmallInput,
        )
    });
    group.finish();
}

fn invocation(c: &mut Criterion) {
    let (runtime, publisher) = support::instant_publisher();
    let mut group = c.benchmark_group("publisher_invocation_instant_sink");
    for n in [100usize, 1000] {
        let json = batch(n);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::from_parameter(n), &json, |b, json| {
            b.iter(|| support::invoke(&runtime, &publisher, json))
        });
    }
    group.finish();
}

criterion_group!(benches, bench, invocation);
criterion_main!(benches);
