//! The publisher against the local AWS API: real stream records from the
//! table's stream, the real EventBridge and SNS adapters, a subscriber queue.

use std::collections::HashSet;

use aws_lambda_events::event::dynamodb::Event;
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_runtime::LambdaEvent;
use outbox_core::{EventEnvelope, OutboxItem};
use outbox_engine::EventSink;
use outbox_runtime::SnsSink;
use publisher::{handler, Publisher};
use serde_json::Value;
use testkit::proxy::{Fault, FaultProxy};
use testkit::{far_deadline, fast_retry, Stack};

fn publisher<S: EventSink>(sink: S, stack: &Stack) -> Publisher<S, outbox_runtime::DynamoStore> {
    let mut publisher = Publisher::new(sink, stack.store()).with_keys(stack.keys.clone());
    publisher.retry = fast_retry();
    publisher
}

fn publisher_with<S: EventSink, T: outbox_engine::PublishStore>(
    sink: S,
    store: T,
    stack: &Stack,
) -> Publisher<S, T> {
    let mut publisher = Publisher::new(sink, store).with_keys(stack.keys.clone());
    publisher.retry = fast_retry();
    publisher
}

fn sequence(record: &aws_lambda_events::event::dynamodb::EventRecord) -> String {
    record.change.sequence_number.clone().unwrap()
}

#[tokio::test]
async fn outbox_inserts_are_delivered_and_deleted() {
    let stack = Stack::with_bus().await;
    let orders = stack.create_orders(3).await;
    let records = stack.stream().read().await.unwrap();
    let (sink, calls) = stack.eventbridge_sink();
    sink.verify().await.expect("bus exists");

    let context = testkit::context();
    let mut event = Event::default();
    event.records = records;
    let response = handler(
        &publisher(sink, &stack),
        LambdaEvent::new(publisher::StreamEvent::from(event.records), context),
    )
    .await
    .unwrap();
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(calls.count("PutEvents"), 1);

    // What a subscriber receives: detail = the envelope, detail-type = type.
    let delivered = stack.drain_subscriber().await;
    assert_eq!(delivered.len(), 3);
    for message in &delivered {
        assert_eq!(message["source"], "outbox.orders");
        assert_eq!(message["detail-type"], "OrderCreated");
        let envelope: EventEnvelope =
            serde_json::from_value(message["detail"].clone()).expect("detail is the envelope");
        let order = orders
            .iter()
            .find(|o| o.order_id == envelope.aggregate_id)
            .expect("an order of ours");
        assert_eq!(envelope.payload, serde_json::to_value(order).unwrap());
    }
    // The outbox items are gone; the orders stay.
    assert!(stack.outbox_items().await.is_empty());
    for order in &orders {
        assert!(stack
            .get(&format!("ORDER#{}", order.order_id), "META")
            .await
            .is_some());
    }
}

#[tokio::test]
async fn meta_remove_and_modify_records_are_ignored() {
    let stack = Stack::with_bus().await;
    stack.create_orders(2).await;
    let mut stream = stack.stream();
    let first = stream.read().await.unwrap();
    let (sink, calls) = stack.eventbridge_sink();
    let publisher = publisher(sink, &stack);
    let report = publisher.process(first, &far_deadline()).await.unwrap();
    assert_eq!(report.relayed.published, 2);
    assert_eq!(
        report.skipped, 4,
        "the two META inserts and the stack's two settings records"
    );

    // Now the stream holds the publisher's own REMOVEs; add a MODIFY.
    let meta = stack.items().await.into_iter().next().unwrap();
    let mut modified = meta.clone();
    modified.insert("status".into(), AttributeValue::S("PAID".into()));
    stack.put_raw(modified).await;
    let second = stream.read().await.unwrap();
    let names: HashSet<&str> = second.iter().map(|r| r.event_name.as_str()).collect();
    assert_eq!(names, HashSet::from(["REMOVE", "MODIFY"]));
    calls.reset();
    let report = publisher.process(second, &far_deadline()).await.unwrap();
    assert_eq!(report.skipped, 3);
    assert_eq!(report.relayed.published, 0);
    assert!(calls.calls().is_empty(), "no sink call for ignored records");
    assert_eq!(stack.drain_subscriber().await.len(), 2);
}

#[tokio::test]
async fn a_batch_of_25_takes_3_put_events_and_1_batch_write() {
    let stack = Stack::with_bus().await;
    stack.create_orders(25).await;
    let mut stream = stack.stream();
    let records = stream.read().await.unwrap();
    let (sink, calls) = stack.eventbridge_sink();
    stack.calls.reset();
    let publisher = publisher(sink, &stack);
    let report = publisher.process(records, &far_deadline()).await.unwrap();
    assert_eq!(report.relayed.published, 25);
    assert_eq!(calls.count("PutEvents"), 3);
    assert_eq!(stack.calls.count("BatchWriteItem"), 1);
    // The process's first batch is checked against the table first (#40:
    // the process before it may have been killed after its deletes).
    assert!(report.rechecked);
    assert_eq!(stack.calls.count("BatchGetItem"), 1);
    assert_eq!(stack.calls.calls().len(), 2, "{:?}", stack.calls.calls());
    assert_eq!(stack.drain_subscriber().await.len(), 25);
    assert!(stack.outbox_items().await.is_empty());

    // A fresh batch on the warm process pays nothing more.
    stack.create_orders(25).await;
    let records = stream.read().await.unwrap();
    stack.calls.reset();
    let report = publisher.process(records, &far_deadline()).await.unwrap();
    assert_eq!(report.relayed.published, 25);
    assert!(!report.rechecked);
    assert_eq!(stack.calls.calls().len(), 1, "{:?}", stack.calls.calls());
    assert_eq!(stack.drain_subscriber().await.len(), 25);
}

#[tokio::test]
async fn a_sink_outage_from_record_k_reports_exactly_k_and_keeps_the_rest() {
    let stack = Stack::with_bus().await;
    stack.create_orders(12).await;
    let records = stack.stream().read().await.unwrap();
    let outbox: Vec<_> = records
        .iter()
        .filter(|r| OutboxItem::from_item(r.change.new_image.clone()).is_ok())
        .cloned()
        .collect();
    let k = 7;
    let failing: Vec<String> = outbox[k..]
        .iter()
        .map(|r| {
            OutboxItem::from_item(r.change.new_image.clone())
                .unwrap()
                .event_id
                .to_string()
        })
        .collect();
    // On the wire: PutEvents answers 200 with those entries throttled.
    let proxy = FaultProxy::start().await;
    let (sink, store) = stack.through(&proxy, 8).await;
    proxy.inject(
        "PutEvents",
        Fault::refuse(&failing, "ThrottlingException"),
        None,
    );
    let report = publisher_with(sink, store, &stack)
        .process(records, &far_deadline())
        .await
        .unwrap();

    assert_eq!(report.first_failure, Some(sequence(&outbox[k])));
    assert_eq!(report.response().batch_item_failures.len(), 1);
    assert_eq!(
        report.response().batch_item_failures[0].item_identifier,
        Some(sequence(&outbox[k]))
    );
    assert_eq!(report.relayed.published, k);
    assert_eq!(
        stack.drain_subscriber().await.len(),
        k,
        "nothing after k was published"
    );
    let left: Vec<String> = stack
        .outbox_items()
        .await
        .iter()
        .map(|i| i.sk.clone())
        .collect();
    let expected: Vec<String> = outbox[k..]
        .iter()
        .map(|r| {
            OutboxItem::from_item(r.change.new_image.clone())
                .unwrap()
                .sk
        })
        .collect();
    assert_eq!(left, expected, "items k… stay in the table");
}

#[tokio::test]
async fn a_lone_failed_entry_costs_at_most_its_call_mates_as_duplicates() {
    // Entry 3 of a 10-entry call fails for good; entries 4..9 went out in the
    // same call. They are deleted; the retry from 3 will send them again.
    let stack = Stack::with_bus().await;
    stack.create_orders(10).await;
    let records: Vec<_> = stack
        .stream()
        .read()
        .await
        .unwrap()
        .into_iter()
        .filter(|r| OutboxItem::from_item(r.change.new_image.clone()).is_ok())
        .collect();
    let bad = OutboxItem::from_item(records[3].change.new_image.clone())
        .unwrap()
        .event_id;
    let proxy = FaultProxy::start().await;
    let (sink, store) = stack.through(&proxy, 8).await;
    proxy.inject(
        "PutEvents",
        Fault::refuse(&[bad.to_string()], "ThrottlingException"),
        None,
    );
    let fourth = sequence(&records[3]);
    let report = publisher_with(sink, store, &stack)
        .process(records, &far_deadline())
        .await
        .unwrap();
    assert_eq!(report.first_failure, Some(fourth));
    assert_eq!(report.relayed.published, 9);
    assert_eq!(
        stack.outbox_items().await.len(),
        1,
        "only the failed event's item stays"
    );
}

#[tokio::test]
async fn transient_failures_are_retried_within_the_invocation() {
    let stack = Stack::with_bus().await;
    stack.create_orders(3).await;
    let records = stack.stream().read().await.unwrap();
    // Two 200 answers with every entry throttled (which the SDK does not
    // retry by itself), then the bus is back.
    let proxy = FaultProxy::start().await;
    let (sink, store) = stack.through(&proxy, 8).await;
    proxy.inject(
        "PutEvents",
        Fault::refuse_all("ThrottlingException"),
        Some(2),
    );
    let report = publisher_with(sink, store, &stack)
        .process(records, &far_deadline())
        .await
        .unwrap();
    assert_eq!(report.first_failure, None);
    assert_eq!(report.relayed.published, 3);
    assert_eq!(
        (proxy.faulted("PutEvents"), proxy.seen("PutEvents")),
        (2, 3),
        "two throttled calls, then the one that went through"
    );
    assert_eq!(stack.drain_subscriber().await.len(), 3);
}

fn poison_item(order: &str, mutate: impl FnOnce(&mut testkit::Item)) -> testkit::Item {
    let envelope = EventEnvelope::new(
        "OrderCreated",
        "Order",
        order,
        1,
        serde_json::json!({"orderId": order}),
    )
    .unwrap();
    let item = OutboxItem::new(
        &format!("ORDER#{order}"),
        &envelope,
        &outbox_core::size::EventLimits::eventbridge("outbox.orders"),
        8,
    )
    .unwrap();
    let mut attrs = item.to_attributes().unwrap();
    mutate(&mut attrs);
    attrs
}

#[tokio::test]
async fn poison_records_are_dead_lettered_and_do_not_block() {
    let stack = Stack::with_bus().await;
    stack.create_orders(1).await;
    // An image that does not decode (no envelope), and one EventBridge
    // rejects (empty DetailType: InvalidArgument).
    stack
        .put_raw(poison_item("p1", |a| {
            a.remove("envelope");
        }))
        .await;
    stack
        .put_raw(poison_item("p2", |a| {
            a.insert("eventType".into(), AttributeValue::S(String::new()));
        }))
        .await;
    stack.create_orders(1).await;
    let records = stack.stream().read().await.unwrap();
    let (sink, _) = stack.eventbridge_sink();
    let report = publisher(sink, &stack)
        .process(records, &far_deadline())
        .await
        .unwrap();
    assert_eq!(report.first_failure, None, "poison does not fail the batch");
    assert_eq!(report.relayed.dead_lettered, 2);
    assert_eq!(report.relayed.published, 2);
    assert_eq!(stack.drain_subscriber().await.len(), 2);

    let dead: Vec<testkit::Item> = stack
        .items()
        .await
        .into_iter()
        .filter(|i| i.contains_key("deadLetteredAt"))
        .collect();
    assert_eq!(dead.len(), 2);
    for item in dead {
        assert!(item["deadLetterReason"].as_s().unwrap().len() > 3);
        assert!(item["GSI2PK"].as_s().unwrap().starts_with("DEAD#"));
        assert!(!item.contains_key("GSI1PK"), "left the pending index");
    }
}

#[tokio::test]
async fn a_missing_bus_fails_verification_and_keeps_everything() {
    let stack = Stack::with_bus().await;
    stack.create_orders(2).await;
    let records = stack.stream().read().await.unwrap();
    let client = aws_sdk_eventbridge::Client::new(&stack.sdk);
    let sink =
        outbox_runtime::EventBridgeSink::new(client, "no-such-bus".into(), "outbox.orders".into());
    assert!(
        sink.verify().await.is_err(),
        "cold-start verification catches it"
    );
    let report = publisher(sink, &stack)
        .process(records, &far_deadline())
        .await
        .unwrap();
    assert!(report.first_failure.is_some());
    assert_eq!(report.relayed.published, 0);
    assert_eq!(
        report.relayed.dead_lettered, 0,
        "a missing bus is not the event's fault"
    );
    assert_eq!(stack.outbox_items().await.len(), 2);
}

#[tokio::test]
async fn sample_events_decode_and_are_classified() {
    let stack = Stack::with_bus().await;
    let (sink, calls) = stack.eventbridge_sink();
    let publisher = publisher(sink, &stack);
    for (sample, published, skipped, dead) in [
        ("publisher-single-insert.json", 1, 0, 0),
        ("publisher-mixed-batch.json", 2, 3, 0),
        ("publisher-malformed-outbox.json", 0, 0, 1),
    ] {
        let event: Event = serde_json::from_str(&testkit::sample(sample)).expect(sample);
        // The malformed sample's item must exist to be dead-lettered.
        for record in &event.records {
            if record.event_name == "INSERT" {
                let keys: std::collections::HashMap<String, AttributeValue> =
                    record.change.keys.clone().into();
                stack.put_raw(keys).await;
            }
        }
        let report = publisher
            .process(event.records, &far_deadline())
            .await
            .unwrap();
        assert_eq!(
            (
                report.relayed.published,
                report.skipped,
                report.relayed.dead_lettered
            ),
            (published, skipped, dead),
            "{sample}"
        );
        assert_eq!(report.first_failure, None, "{sample}");
    }
    // The mixed batch holds two events of one order: one call each, so a
    // failure of the first can never let the second overtake it.
    assert_eq!(calls.count("PutEvents"), 3);
}

#[tokio::test]
async fn sns_fifo_delivers_with_group_and_dedup_ids() {
    let stack = Stack::new().await;
    let (topic_arn, queue) = testkit::create_fifo_topic(&stack.sdk, &testkit::unique("events"))
        .await
        .unwrap();
    let orders = stack.create_orders(3).await;
    let records = stack.stream().read().await.unwrap();
    let sink = SnsSink::new(aws_sdk_sns::Client::new(&stack.sdk), topic_arn);
    sink.verify().await.unwrap();
    let report = publisher(sink, &stack)
        .process(records, &far_deadline())
        .await
        .unwrap();
    assert_eq!(report.relayed.published, 3);
    let delivered: Vec<Value> = testkit::drain_queue(&stack.sdk, &queue.queue_url).await;
    assert_eq!(delivered.len(), 3);
    for message in delivered {
        let envelope: EventEnvelope = serde_json::from_value({
            let mut m = message.clone();
            m.as_object_mut().unwrap().remove("__sqs");
            m
        })
        .unwrap();
        assert!(orders.iter().any(|o| o.order_id == envelope.aggregate_id));
        assert_eq!(message["__sqs"]["MessageGroupId"], envelope.aggregate_id);
        assert_eq!(
            message["__sqs"]["MessageDeduplicationId"],
            envelope.event_id.to_string()
        );
    }
    assert!(stack.outbox_items().await.is_empty());
}

#[tokio::test]
async fn permanent_sink_rejections_on_the_wire_dead_letter_the_entry() {
    // A sink-level poison verdict on one entry (what EventBridge says of a
    // malformed or oversized entry) dead-letters that item and goes on.
    let stack = Stack::with_bus().await;
    stack.create_orders(3).await;
    let records = stack.stream().read().await.unwrap();
    let outbox: Vec<OutboxItem> = records
        .iter()
        .filter_map(|r| OutboxItem::from_item(r.change.new_image.clone()).ok())
        .collect();
    let bad = outbox[1].event_id;
    let proxy = FaultProxy::start().await;
    let (sink, store) = stack.through(&proxy, 8).await;
    proxy.inject(
        "PutEvents",
        Fault::refuse(&[bad.to_string()], "MalformedDetail"),
        None,
    );
    let report = publisher_with(sink, store, &stack)
        .process(records, &far_deadline())
        .await
        .unwrap();
    assert_eq!(report.first_failure, None);
    assert_eq!(
        (report.relayed.published, report.relayed.dead_lettered),
        (2, 1)
    );
    let left = stack.outbox_items().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].event_id, bad);
    assert!(left[0].dead_lettered_at.is_some());
    assert_eq!(
        left[0].dead_letter_reason.as_deref(),
        Some("MalformedDetail: injected by the fault proxy")
    );
}

/// The local mapping's stream reader, met at 20,000 orders: an iterator
/// unused for 15 minutes expires (`ExpiredIteratorException`). Like a
/// mapping, the cursor takes a new one after the last record it read:
/// every record once, in order, nothing skipped and nothing repeated.
#[tokio::test]
async fn an_expired_stream_iterator_is_renewed_after_the_last_record_read() {
    let stack = Stack::new().await;
    let proxy = FaultProxy::start().await;
    let sdk = proxy.sdk().await;
    let mut cursor = devkit::StreamCursor::new(&sdk, &stack.stream_arn);
    let write_three = || async {
        let mut ids = Vec::new();
        for _ in 0..3 {
            let item = stack.put_event_aged(std::time::Duration::ZERO).await;
            ids.push(item.event_id.to_string());
        }
        ids
    };
    let mut written = write_three().await;
    let mut read = Vec::new();
    let ids = |records: Vec<aws_lambda_events::event::dynamodb::EventRecord>| {
        records
            .into_iter()
            .filter_map(|r| {
                r.change.new_image.get("eventId").and_then(|v| match v {
                    serde_dynamo::AttributeValue::S(s) => Some(s.clone()),
                    _ => None,
                })
            })
            .collect::<Vec<_>>()
    };
    read.extend(ids(cursor.read().await.expect("first read")));
    written.extend(write_three().await);
    proxy.inject(
        "GetRecords",
        Fault::Refuse("ExpiredIteratorException".into()),
        Some(1),
    );
    read.extend(ids(cursor.read().await.expect("read after the expiry")));
    assert_eq!(proxy.faulted("GetRecords"), 1, "the expiry was met");
    assert_eq!(read, written);
}

/// Issue #28 item 2: a replicated insert of another region's item reaches
/// this region's stream (global tables); the mapping's filter drops it, and
/// the publisher, should one get through, ignores it: not published, not
/// dead-lettered, left in the table for its home region. Its own region's
/// items and items without a region are published.
#[tokio::test]
async fn another_regions_items_are_ignored_never_dead_lettered() {
    let stack = Stack::with_bus().await;
    let region = |order: &str, home: Option<&str>| {
        poison_item(order, |a| match home {
            Some(home) => {
                a.insert("homeRegion".into(), AttributeValue::S(home.into()));
            }
            None => {
                a.remove("homeRegion");
            }
        })
    };
    stack.put_raw(region("theirs", Some("eu-west-1"))).await;
    stack.put_raw(region("ours", Some("us-east-1"))).await;
    stack.put_raw(region("unmarked", None)).await;
    let records = stack.stream().read().await.unwrap();
    // The template's filter, in this region, drops it before the publisher.
    let mapping =
        devkit::MappingSettings::from_template(&testkit::root().join(devkit::OUTBOX_TEMPLATE))
            .unwrap();
    let filters = mapping.filters().unwrap();
    let admitted: Vec<bool> = records
        .iter()
        .map(|r| filters.matches(&serde_json::to_value(r).unwrap()))
        .collect();
    assert_eq!(
        admitted,
        [false, false, false, true, true],
        "the stack's two settings records, theirs, ours, unmarked"
    );

    let (sink, _) = stack.eventbridge_sink();
    let mut publisher = publisher(sink, &stack);
    publisher.keys = outbox_core::KeySchema::default().with_home_region(Some("us-east-1".into()));
    let report = publisher.process(records, &far_deadline()).await.unwrap();
    assert_eq!(report.first_failure, None);
    assert_eq!(report.relayed.published, 2, "ours and the unmarked one");
    assert_eq!((report.foreign, report.relayed.dead_lettered), (1, 0));
    let left = stack.outbox_raw().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["homeRegion"].as_s().unwrap(), "eu-west-1");
    assert!(!left[0].contains_key("deadLetteredAt"));
}
