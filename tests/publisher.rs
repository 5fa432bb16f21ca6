//! The publisher against the local AWS API: real stream records from the
//! table's stream, the real EventBridge and SNS adapters, a subscriber queue.

use std::collections::HashSet;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use aws_sdk_dynamodb::types::AttributeValue;
use lambda_runtime::LambdaEvent;
use outbox_core::{EventEnvelope, OutboxItem};
use outbox_engine::EventSink;
use outbox_runtime::SnsSink;
use publisher::handler;
use testkit::proxy::{Fault, FaultProxy};
use testkit::scenario::{envelopes, process, publisher, Wire};
use testkit::Stack;

/// The outbox inserts among `records`: each one's sequence number and item.
fn outbox(records: &[EventRecord]) -> Vec<(String, OutboxItem)> {
    let item = |r: &EventRecord| OutboxItem::from_item(r.change.new_image.clone()).ok();
    let sequence = |r: &EventRecord| r.change.sequence_number.clone().expect("a sequence number");
    records
        .iter()
        .filter_map(|r| Some((sequence(r), item(r)?)))
        .collect()
}

#[tokio::test]
async fn outbox_inserts_are_delivered_and_deleted() {
    let stack = Stack::with_bus().await;
    let orders = stack.create_orders(3).await;
    let records = stack.stream().read().await.unwrap();
    let (sink, calls) = stack.eventbridge_sink();
    sink.verify().await.expect("bus exists");
    let publisher = publisher(sink, stack.store(), &stack);
    let event = LambdaEvent::new(publisher::StreamEvent::from(records), testkit::context());
    let response = handler(&publisher, event).await.unwrap();
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(calls.count("PutEvents"), 1);

    // What a subscriber receives: detail = the envelope, detail-type = type.
    let delivered = stack.drain_subscriber().await;
    assert_eq!(delivered.len(), 3);
    for (message, envelope) in delivered.iter().zip(envelopes(&delivered)) {
        assert_eq!(message["source"], "outbox.orders");
        assert_eq!(message["detail-type"], "OrderCreated");
        let order = orders
            .iter()
            .find(|o| o.order_id == envelope.aggregate_id)
            .expect("an order of ours");
        assert_eq!(envelope.payload, serde_json::to_value(order).unwrap());
    }
    // The outbox items are gone; the orders stay.
    assert!(stack.outbox_items().await.is_empty());
    for order in &orders {
        let meta = stack
            .get(&format!("ORDER#{}", order.order_id), "META")
            .await;
        assert!(meta.is_some(), "{}", order.order_id);
    }
}

#[tokio::test]
async fn meta_remove_and_modify_records_are_ignored() {
    let stack = Stack::with_bus().await;
    stack.create_orders(2).await;
    let mut stream = stack.stream();
    let first = stream.read().await.unwrap();
    let (sink, calls) = stack.eventbridge_sink();
    let publisher = publisher(sink, stack.store(), &stack);
    let report = process(&publisher, first).await;
    assert_eq!(report.relayed.published, 2);
    let skipped = "the two META inserts and the stack's two settings records";
    assert_eq!(report.skipped, 4, "{skipped}");

    // Now the stream holds the publisher's own REMOVEs; add a MODIFY.
    let meta = stack.items().await.into_iter().next().unwrap();
    let mut modified = meta.clone();
    modified.insert("status".into(), AttributeValue::S("PAID".into()));
    stack.put_raw(modified).await;
    let second = stream.read().await.unwrap();
    let names: HashSet<&str> = second.iter().map(|r| r.event_name.as_str()).collect();
    assert_eq!(names, HashSet::from(["REMOVE", "MODIFY"]));
    calls.reset();
    let report = process(&publisher, second).await;
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
    let publisher = publisher(sink, stack.store(), &stack);
    let report = process(&publisher, records).await;
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
    let report = process(&publisher, records).await;
    assert_eq!(report.relayed.published, 25);
    assert!(!report.rechecked);
    assert_eq!(stack.calls.calls().len(), 1, "{:?}", stack.calls.calls());
    assert_eq!(stack.drain_subscriber().await.len(), 25);
}

#[tokio::test]
async fn a_sink_outage_from_record_k_reports_exactly_k_and_keeps_the_rest() {
    let w = Wire::orders(12).await;
    let records = w.stream().read().await.unwrap();
    let outbox = outbox(&records);
    let k = 7;
    let failing: Vec<String> = outbox[k..]
        .iter()
        .map(|(_, i)| i.event_id.to_string())
        .collect();
    // On the wire: PutEvents answers 200 with those entries throttled.
    let fault = Fault::refuse(&failing, "ThrottlingException");
    w.proxy.inject("PutEvents", fault, None);
    let report = process(&w.publisher().await, records).await;

    let first = Some(outbox[k].0.clone());
    assert_eq!(report.first_failure, first);
    assert_eq!(report.response().batch_item_failures.len(), 1);
    assert_eq!(
        report.response().batch_item_failures[0].item_identifier,
        first
    );
    assert_eq!(report.relayed.published, k);
    let delivered = w.drain_subscriber().await;
    assert_eq!(delivered.len(), k, "nothing after k was published");
    let left: Vec<String> = w
        .stack
        .outbox_items()
        .await
        .into_iter()
        .map(|i| i.sk)
        .collect();
    let expected: Vec<String> = outbox[k..].iter().map(|(_, i)| i.sk.clone()).collect();
    assert_eq!(left, expected, "items k… stay in the table");
}

#[tokio::test]
async fn a_lone_failed_entry_costs_at_most_its_call_mates_as_duplicates() {
    // Entry 3 of a 10-entry call fails for good; entries 4..9 went out in the
    // same call. They are deleted; the retry from 3 will send them again.
    let w = Wire::orders(10).await;
    let records = w.outbox_inserts().await;
    let (fourth, bad) = outbox(&records).swap_remove(3);
    let fault = Fault::refuse(&[bad.event_id.to_string()], "ThrottlingException");
    w.proxy.inject("PutEvents", fault, None);
    let report = process(&w.publisher().await, records).await;
    assert_eq!(report.first_failure, Some(fourth));
    assert_eq!(report.relayed.published, 9);
    let left = w.outbox_items().await;
    assert_eq!(left.len(), 1, "only the failed event's item stays");
}

#[tokio::test]
async fn transient_failures_are_retried_within_the_invocation() {
    let w = Wire::orders(3).await;
    let records = w.stream().read().await.unwrap();
    // Two 200 answers with every entry throttled (which the SDK does not
    // retry by itself), then the bus is back.
    let outage = Fault::refuse_all("ThrottlingException");
    w.proxy.inject("PutEvents", outage, Some(2));
    let report = process(&w.publisher().await, records).await;
    assert_eq!(report.first_failure, None);
    assert_eq!(report.relayed.published, 3);
    assert_eq!(
        (w.proxy.faulted("PutEvents"), w.proxy.seen("PutEvents")),
        (2, 3),
        "two throttled calls, then the one that went through"
    );
    assert_eq!(w.drain_subscriber().await.len(), 3);
}

/// An outbox item of `order`, as `mutate` leaves it.
fn poison_item<R>(order: &str, mutate: impl FnOnce(&mut testkit::Item) -> R) -> testkit::Item {
    let payload = serde_json::json!({"orderId": order});
    let envelope = EventEnvelope::new("OrderCreated", "Order", order, 1, payload).unwrap();
    let limits = outbox_core::size::EventLimits::eventbridge("outbox.orders");
    let item = OutboxItem::new(&format!("ORDER#{order}"), &envelope, &limits, 8).unwrap();
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
        .put_raw(poison_item("p1", |a| a.remove("envelope")))
        .await;
    let no_type =
        |a: &mut testkit::Item| a.insert("eventType".into(), AttributeValue::S("".into()));
    stack.put_raw(poison_item("p2", no_type)).await;
    stack.create_orders(1).await;
    let records = stack.stream().read().await.unwrap();
    let (sink, _) = stack.eventbridge_sink();
    let report = process(&publisher(sink, stack.store(), &stack), records).await;
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
    let verified = sink.verify().await;
    assert!(verified.is_err(), "cold-start verification catches it");
    let report = process(&publisher(sink, stack.store(), &stack), records).await;
    assert!(report.first_failure.is_some());
    assert_eq!(report.relayed.published, 0);
    let dead = report.relayed.dead_lettered;
    assert_eq!(dead, 0, "a missing bus is not the event's fault");
    assert_eq!(stack.outbox_items().await.len(), 2);
}

#[tokio::test]
async fn sample_events_decode_and_are_classified() {
    let stack = Stack::with_bus().await;
    let (sink, calls) = stack.eventbridge_sink();
    let publisher = publisher(sink, stack.store(), &stack);
    for (sample, published, skipped, dead) in [
        ("publisher-single-insert.json", 1, 0, 0),
        ("publisher-mixed-batch.json", 2, 3, 0),
        ("publisher-malformed-outbox.json", 0, 0, 1),
    ] {
        let event: Event = serde_json::from_str(&testkit::sample(sample)).expect(sample);
        // The malformed sample's item must exist to be dead-lettered.
        for record in &event.records {
            if record.event_name == "INSERT" {
                stack.put_raw(record.change.keys.clone().into()).await;
            }
        }
        let report = process(&publisher, event.records).await;
        let relayed = &report.relayed;
        let counts = (relayed.published, report.skipped, relayed.dead_lettered);
        assert_eq!(counts, (published, skipped, dead), "{sample}");
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
    let report = process(&publisher(sink, stack.store(), &stack), records).await;
    assert_eq!(report.relayed.published, 3);
    let delivered = testkit::drain_queue(&stack.sdk, &queue.queue_url).await;
    assert_eq!(delivered.len(), 3);
    for (message, envelope) in delivered.iter().zip(envelopes(&delivered)) {
        assert!(orders.iter().any(|o| o.order_id == envelope.aggregate_id));
        assert_eq!(message["__sqs"]["MessageGroupId"], envelope.aggregate_id);
        let dedup = &message["__sqs"]["MessageDeduplicationId"];
        assert_eq!(dedup, &envelope.event_id.to_string());
    }
    assert!(stack.outbox_items().await.is_empty());
}

#[tokio::test]
async fn permanent_sink_rejections_on_the_wire_dead_letter_the_entry() {
    // A sink-level poison verdict on one entry (what EventBridge says of a
    // malformed or oversized entry) dead-letters that item and goes on.
    let w = Wire::orders(3).await;
    let records = w.stream().read().await.unwrap();
    let bad = outbox(&records)[1].1.event_id;
    let fault = Fault::refuse(&[bad.to_string()], "MalformedDetail");
    w.proxy.inject("PutEvents", fault, None);
    let report = process(&w.publisher().await, records).await;
    assert_eq!(report.first_failure, None);
    let relayed = (report.relayed.published, report.relayed.dead_lettered);
    assert_eq!(relayed, (2, 1));
    let left = w.outbox_items().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].event_id, bad);
    assert!(left[0].dead_lettered_at.is_some());
    let reason = left[0].dead_letter_reason.as_deref();
    assert_eq!(reason, Some("MalformedDetail: injected by the fault proxy"));
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
    let ids = |records: Vec<EventRecord>| -> Vec<String> {
        let id = |r: EventRecord| match r.change.new_image.get("eventId") {
            Some(serde_dynamo::AttributeValue::S(s)) => Some(s.clone()),
            _ => None,
        };
        records.into_iter().filter_map(id).collect()
    };
    read.extend(ids(cursor.read().await.expect("first read")));
    written.extend(write_three().await);
    let expired = Fault::Refuse("ExpiredIteratorException".into());
    proxy.inject("GetRecords", expired, Some(1));
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
            Some(home) => a.insert("homeRegion".into(), AttributeValue::S(home.into())),
            None => a.remove("homeRegion"),
        })
    };
    stack.put_raw(region("theirs", Some("eu-west-1"))).await;
    stack.put_raw(region("ours", Some("us-east-1"))).await;
    stack.put_raw(region("unmarked", None)).await;
    let records = stack.stream().read().await.unwrap();
    // The template's filter, in this region, drops it before the publisher.
    let template = testkit::root().join(devkit::OUTBOX_TEMPLATE);
    let mapping = devkit::MappingSettings::from_template(&template).unwrap();
    let filters = mapping.filters().unwrap();
    let admitted: Vec<bool> = records
        .iter()
        .map(|r| filters.matches(&serde_json::to_value(r).unwrap()))
        .collect();
    let which = "the stack's two settings records, theirs, ours, unmarked";
    assert_eq!(admitted, [false, false, false, true, true], "{which}");

    let (sink, _) = stack.eventbridge_sink();
    let mut publisher = publisher(sink, stack.store(), &stack);
    publisher.keys = outbox_core::KeySchema::default().with_home_region(Some("us-east-1".into()));
    let report = process(&publisher, records).await;
    assert_eq!(report.first_failure, None);
    assert_eq!(report.relayed.published, 2, "ours and the unmarked one");
    assert_eq!((report.foreign, report.relayed.dead_lettered), (1, 0));
    let left = stack.outbox_raw().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0]["homeRegion"].as_s().unwrap(), "eu-west-1");
    assert!(!left[0].contains_key("deadLetteredAt"));
}
