//! The writer library against the local AWS API, through the real SDK.

use aws_sdk_dynamodb::types::{AttributeValue, ConditionCheck, Put, Update};
use outbox_core::size::EventLimits;
use outbox_core::{EventEnvelope, OutboxItem};
use serde_json::json;
use testkit::scenario::envelopes;
use testkit::Stack;
use writer::{OutboxSettings, OutboxTransaction, TransactionError};

fn put(table: &str, pk: &str, condition: Option<&str>) -> Put {
    Put::builder()
        .table_name(table)
        .item("PK", AttributeValue::S(pk.into()))
        .item("SK", AttributeValue::S("META".into()))
        .item("status", AttributeValue::S("NEW".into()))
        .set_condition_expression(condition.map(str::to_owned))
        .build()
        .unwrap()
}

fn event(id: &str) -> EventEnvelope {
    EventEnvelope::new("InvoiceIssued", "Invoice", id, 1, json!({"invoiceId": id})).unwrap()
}

/// A fresh table and the writer's settings on it (EventBridge's limits,
/// `shards` shards).
async fn table(shards: u16) -> (Stack, OutboxSettings) {
    let stack = Stack::new().await;
    let limits = EventLimits::eventbridge("outbox.orders");
    let settings = OutboxSettings::new(&stack.table, limits, shards);
    (stack, settings)
}

#[tokio::test]
async fn business_item_and_event_are_written_together() {
    let (stack, settings) = table(8).await;
    let envelope = event("1");
    let committed = OutboxTransaction::new(&settings)
        .put(
            "invoice",
            put(&stack.table, "INVOICE#1", Some("attribute_not_exists(PK)")),
        )
        .event("INVOICE#1", &envelope)
        .idempotency_token("invoice-1")
        .send(&stack.counted_ddb)
        .await
        .unwrap();
    assert_eq!(committed.event_ids, vec![envelope.event_id]);
    assert_eq!(stack.calls.calls(), vec!["TransactWriteItems"]);

    assert!(stack.get("INVOICE#1", "META").await.is_some());
    let outbox = stack.outbox_items().await;
    assert_eq!(outbox.len(), 1);
    assert_eq!(outbox[0].pk, "INVOICE#1");
    assert_eq!(outbox[0].sk, format!("OUTBOX#{}", envelope.event_id));
    let published: EventEnvelope = serde_json::from_str(&outbox[0].envelope).unwrap();
    assert_eq!(published, envelope);
}

#[tokio::test]
async fn a_failed_condition_writes_nothing_and_says_which() {
    let (stack, settings) = table(8).await;
    // An existing item with status NEW.
    OutboxTransaction::new(&settings)
        .put("seed", put(&stack.table, "INVOICE#2", None))
        .send(&stack.ddb)
        .await
        .unwrap();

    let update = Update::builder()
        .table_name(&stack.table)
        .key("PK", AttributeValue::S("INVOICE#2".into()))
        .key("SK", AttributeValue::S("META".into()))
        .update_expression("SET #s = :paid")
        .condition_expression("#s = :pending")
        .expression_attribute_names("#s", "status")
        .expression_attribute_values(":paid", AttributeValue::S("PAID".into()))
        .expression_attribute_values(":pending", AttributeValue::S("PENDING".into()))
        .build()
        .unwrap();
    let check = ConditionCheck::builder()
        .table_name(&stack.table)
        .key("PK", AttributeValue::S("CUSTOMER#9".into()))
        .key("SK", AttributeValue::S("META".into()))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .unwrap();
    let err = OutboxTransaction::new(&settings)
        .condition_check("customer-free", check)
        .update("pay", update)
        .event("INVOICE#2", &event("2"))
        .send(&stack.ddb)
        .await
        .unwrap_err();
    let failed = err
        .failed_condition("pay")
        .expect("the update's condition failed");
    assert_eq!(failed.index, 1);
    // ALL_OLD: the item as it was, without another read.
    let old = failed.item.as_ref().expect("old item returned");
    assert_eq!(old["status"], AttributeValue::S("NEW".into()));
    assert!(err.failed_condition("customer-free").is_none());
    assert!(matches!(err, TransactionError::ConditionFailed(ref f) if f.len() == 1));

    // Nothing was written: no outbox item, status unchanged.
    assert!(stack.outbox_items().await.is_empty());
    let item = stack.get("INVOICE#2", "META").await.unwrap();
    assert_eq!(item["status"], AttributeValue::S("NEW".into()));
}

#[tokio::test]
async fn a_missing_item_fails_with_no_old_image() {
    let (stack, settings) = table(8).await;
    let check = ConditionCheck::builder()
        .table_name(&stack.table)
        .key("PK", AttributeValue::S("INVOICE#404".into()))
        .key("SK", AttributeValue::S("META".into()))
        .condition_expression("attribute_exists(PK)")
        .build()
        .unwrap();
    let err = OutboxTransaction::new(&settings)
        .condition_check("exists", check)
        .event("INVOICE#404", &event("404"))
        .send(&stack.ddb)
        .await
        .unwrap_err();
    let failed = err.failed_condition("exists").unwrap();
    assert!(failed.item.is_none());
    assert!(stack.items().await.is_empty());
}

#[tokio::test]
async fn limits_fail_before_any_call() {
    let (stack, settings) = table(8).await;

    let mut tx = OutboxTransaction::new(&settings);
    for i in 0..100 {
        tx = tx.put(&format!("p{i}"), put(&stack.table, &format!("A#{i}"), None));
    }
    let err = tx
        .event("A#0", &event("0"))
        .send(&stack.counted_ddb)
        .await
        .unwrap_err();
    let too_many = matches!(err, TransactionError::TooManyActions { count: 101, .. });
    assert!(too_many, "{err}");

    let big = EventEnvelope::new(
        "Big",
        "Invoice",
        "1",
        1,
        // Over EventBridge's 1 MB (the entry is checked before the item).
        json!({"x": "y".repeat(1100 * 1024)}),
    )
    .unwrap();
    let err = OutboxTransaction::new(&settings)
        .put("p", put(&stack.table, "A#1", None))
        .event("A#1", &big)
        .send(&stack.counted_ddb)
        .await
        .unwrap_err();
    use outbox_core::OutboxError::EventTooLarge;
    let too_large = matches!(err, TransactionError::Event(EventTooLarge { .. }));
    assert!(too_large, "{err}");

    let err = OutboxTransaction::new(&settings)
        .put("a", put(&stack.table, "A#1", None))
        .put("b", put(&stack.table, "A#1", None))
        .send(&stack.counted_ddb)
        .await
        .unwrap_err();
    let duplicate = matches!(err, TransactionError::DuplicateItem { .. });
    assert!(duplicate, "{err}");

    let calls = stack.calls.calls();
    assert!(calls.is_empty(), "no call was made: {calls:?}");
    assert!(stack.items().await.is_empty());
}

#[tokio::test]
async fn many_events_in_one_transaction_decode_and_shard() {
    let (stack, settings) = table(4).await;
    let mut tx = OutboxTransaction::new(&settings).put("p", put(&stack.table, "INVOICE#5", None));
    for _ in 0..20 {
        tx = tx.event("INVOICE#5", &event("5"));
    }
    tx.send(&stack.ddb).await.unwrap();
    let items: Vec<OutboxItem> = stack.outbox_items().await;
    assert_eq!(items.len(), 20);
    for item in items {
        let shard = outbox_core::keys::shard_of(&item.aggregate_id, 4);
        assert_eq!(item.pending_pk, Some(format!("OUTBOX#{shard}")));
        assert_eq!(item.pending_sk, Some(item.event_id.to_string()));
        assert_eq!(item.attempts, 0);
    }
}

/// Payload limits are a setting: with EventBridge's 1 MB (the default since
/// 2026-01-29), a 300 KB event is written, published and delivered.
#[tokio::test]
async fn a_300_kb_event_is_written_published_and_delivered() {
    let stack = Stack::with_bus().await;
    let settings = OutboxSettings::from(&stack.config(&[]));
    let envelope = EventEnvelope::new(
        "DocumentAttached",
        "Invoice",
        "big-1",
        1,
        json!({"document": "x".repeat(300 * 1024)}),
    )
    .unwrap();
    OutboxTransaction::new(&settings)
        .event("INVOICE#big-1", &envelope)
        .send(&stack.ddb)
        .await
        .unwrap();
    let records = stack.stream().read().await.unwrap();
    let (sink, _) = stack.eventbridge_sink();
    let publisher = publisher::Publisher::new(sink, stack.store()).with_keys(stack.keys.clone());
    let report = publisher.process(records, &testkit::far_deadline()).await;
    let report = report.unwrap();
    assert_eq!((report.relayed.published, report.first_failure), (1, None));
    let delivered = envelopes(&stack.drain_subscriber().await);
    assert_eq!(delivered, std::slice::from_ref(&envelope));

    // The same event against an SNS topic's 256 KiB: refused before any call.
    let sns = stack.config(&[
        ("SINK", "sns"),
        ("SNS_TOPIC_ARN", "arn:aws:sns:us-east-1:123456789012:t.fifo"),
    ]);
    let settings = OutboxSettings::from(&sns);
    stack.calls.reset();
    let error = OutboxTransaction::new(&settings)
        .event("INVOICE#big-1", &envelope)
        .send(&stack.counted_ddb)
        .await
        .unwrap_err();
    assert!(error.to_string().contains("262144"), "{error}");
    assert!(stack.calls.calls().is_empty(), "nothing was sent");
}
