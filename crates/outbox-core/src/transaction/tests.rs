use super::*;
use crate::size::EventLimits;
use serde_json::json;

fn settings() -> OutboxSettings {
    OutboxSettings::new("t", EventLimits::eventbridge("outbox.orders"), 8)
}

fn put(pk: &str, sk: &str, extra: usize) -> Put {
    Put::builder()
        .table_name("t")
        .item("PK", AttributeValue::S(pk.into()))
        .item("SK", AttributeValue::S(sk.into()))
        .item("blob", AttributeValue::S("x".repeat(extra)))
        .build()
        .unwrap()
}

fn event(id: &str, payload: serde_json::Value) -> EventEnvelope {
    EventEnvelope::new("OrderCreated", "Order", id, 1, payload).unwrap()
}

#[test]
fn actions_and_events() {
    let tx = OutboxTransaction::new(&settings())
        .put("order", put("ORDER#1", "META", 0))
        .event("ORDER#1", &event("1", json!({})))
        .event("ORDER#1", &event("1", json!({})));
    let items = tx.build().unwrap();
    assert_eq!(items.len(), 3);
    for item in &items {
        let put = item.put.as_ref().unwrap();
        assert_eq!(
            put.return_values_on_condition_check_failure,
            Some(ReturnValuesOnConditionCheckFailure::AllOld)
        );
    }
    let outbox = items[1].put.as_ref().unwrap();
    assert!(outbox.item["SK"].as_s().unwrap().starts_with("OUTBOX#"));
    assert_eq!(
        outbox.condition_expression.as_deref(),
        Some("attribute_not_exists(#outboxSk)")
    );
}

#[test]
fn limits_are_enforced_before_any_call() {
    let empty = OutboxTransaction::new(&settings());
    assert!(matches!(empty.build(), Err(TransactionError::Empty)));

    // `n` puts of `extra` bytes each.
    let puts = |n: usize, extra: usize| {
        (0..n).fold(OutboxTransaction::new(&settings()), |tx, i| {
            tx.put(&format!("p{i}"), put(&format!("A#{i}"), "META", extra))
        })
    };
    let many = puts(101, 0).build();
    assert!(matches!(
        many,
        Err(TransactionError::TooManyActions {
            count: 101,
            limit: 100
        })
    ));
    let large = puts(11, 390 * 1024).build();
    assert!(matches!(large, Err(TransactionError::TooLarge { .. })));

    let twice = OutboxTransaction::new(&settings())
        .put("first", put("A#1", "META", 0))
        .update(
            "second",
            Update::builder()
                .table_name("t")
                .key("PK", AttributeValue::S("A#1".into()))
                .key("SK", AttributeValue::S("META".into()))
                .update_expression("SET x = :x")
                .build()
                .unwrap(),
        );
    match twice.build() {
        Err(TransactionError::DuplicateItem { first, second }) => {
            assert_eq!((first.as_str(), second.as_str()), ("first", "second"))
        }
        other => panic!("{other:?}"),
    }
    // Same key in another table is another item.
    let mut other_table = put("A#1", "META", 0);
    other_table.table_name = "u".into();
    assert!(OutboxTransaction::new(&settings())
        .put("a", put("A#1", "META", 0))
        .put("b", other_table)
        .build()
        .is_ok());
}

#[test]
fn oversized_events_and_bad_tokens_are_refused() {
    let big = event("1", json!({"x": "y".repeat(300 * 1024)}));
    // 300 KB: within EventBridge's 1 MB, over an SNS topic's 256 KiB.
    assert!(OutboxTransaction::new(&settings())
        .event("ORDER#1", &big)
        .build()
        .is_ok());
    let sns = settings().with_limits(EventLimits::Sns {
        fifo: false,
        max_bytes: crate::size::DEFAULT_SNS_BYTES,
    });
    let tx = OutboxTransaction::new(&sns).event("ORDER#1", &big);
    assert!(matches!(
        tx.build(),
        Err(TransactionError::Event(OutboxError::EventTooLarge { .. }))
    ));
    let tx = OutboxTransaction::new(&settings())
        .put("p", put("A#1", "META", 0))
        .idempotency_token("x".repeat(37));
    assert!(matches!(tx.build(), Err(TransactionError::InvalidToken)));
}

/// #66: the claim check in the transaction (the logic; moto's S3 and
/// DynamoDB Local are the test of the adapters, tests/claim_check.rs).
#[cfg(feature = "testing")]
mod claim_check {
    use super::*;
    use crate::claim::{ClaimCheck, MemoryPayloads, PayloadError};
    use crate::table::MemoryTable;
    use crate::KeySchema;

    fn claim_settings() -> OutboxSettings {
        settings().with_claim_check(ClaimCheck::new("payloads"))
    }

    fn big(id: &str, bytes: usize) -> EventEnvelope {
        event(id, json!({"blob": "x".repeat(bytes)}))
    }

    fn stored_item(table: &MemoryTable) -> OutboxItem {
        let items = table.items("t");
        let item = items
            .iter()
            .find(|i| i["SK"].as_s().is_ok_and(|s| s.starts_with("OUTBOX#")))
            .expect("an outbox item");
        OutboxItem::from_attributes(item.clone()).unwrap()
    }

    #[tokio::test]
    async fn a_small_event_is_stored_whole_and_nothing_goes_to_s3() {
        let (table, payloads) = (
            MemoryTable::new(KeySchema::default()),
            MemoryPayloads::new(),
        );
        let tx = OutboxTransaction::new(&claim_settings())
            .event("ORDER#1", &event("1", json!({"a": 1})));
        assert!(tx.offloads().is_empty());
        tx.send_with_payloads(&table, &payloads).await.unwrap();
        assert!(payloads.is_empty());
        assert_eq!(stored_item(&table).payload_ref, None);
    }

    #[tokio::test]
    async fn an_event_over_the_threshold_goes_to_s3_first_and_its_item_holds_the_stub() {
        let (table, payloads) = (
            MemoryTable::new(KeySchema::default()),
            MemoryPayloads::new(),
        );
        let env = big("1", 900 * 1024);
        let tx = OutboxTransaction::new(&claim_settings()).event("ORDER#1", &env);
        assert_eq!(tx.offloads().len(), 1);
        tx.send_with_payloads(&table, &payloads).await.unwrap();
        let item = stored_item(&table);
        let r = item.payload_ref.clone().expect("a payloadRef");
        assert_eq!(
            (r.bucket.as_str(), r.key.clone()),
            ("payloads", format!("outbox/{}/{}", env.event_id, r.sha256))
        );
        // The object is the whole envelope, byte for byte what `to_json` gives.
        let body = payloads.object("payloads", &r.key).unwrap();
        assert_eq!(body, env.to_json().unwrap().into_bytes());
        assert!(r.check(&body).is_ok());
        // The item's envelope is the stub: no payload, the same reference.
        let stub: EventEnvelope = serde_json::from_str(&item.envelope).unwrap();
        assert_eq!(stub.payload, serde_json::Value::Null);
        assert_eq!(stub.payload_ref.as_ref(), Some(&r));
        assert_eq!((stub.event_id, stub.aggregate_version), (env.event_id, 1));
        assert!(item.envelope.len() < 1024);
    }

    #[tokio::test]
    async fn an_event_the_sink_would_refuse_is_claim_checked_even_when_the_item_would_hold_it() {
        // SNS takes 256 KiB: a 300 KB envelope fits an item, not a message.
        let settings = OutboxSettings::new("t", EventLimits::sns(false), 8)
            .with_claim_check(ClaimCheck::new("payloads"));
        let tx = OutboxTransaction::new(&settings).event("ORDER#1", &big("1", 300 * 1000));
        assert_eq!(tx.offloads().len(), 1);
        // Without the claim check it is refused, as before.
        let plain = OutboxSettings::new("t", EventLimits::sns(false), 8);
        let refused = OutboxTransaction::new(&plain).event("ORDER#1", &big("1", 300 * 1000));
        assert!(matches!(
            refused.build(),
            Err(TransactionError::Event(OutboxError::EventTooLarge { .. }))
        ));
    }

    #[tokio::test]
    async fn send_without_a_payload_store_is_refused_before_any_call() {
        let table = MemoryTable::new(KeySchema::default());
        let tx = OutboxTransaction::new(&claim_settings()).event("ORDER#1", &big("1", 500 * 1024));
        let err = tx.send(&table).await.unwrap_err();
        assert_eq!(err.code(), "NoPayloadStore");
        assert_eq!(table.transactions(), 0);
    }

    #[tokio::test]
    async fn an_upload_that_fails_commits_nothing() {
        let (table, payloads) = (
            MemoryTable::new(KeySchema::default()),
            MemoryPayloads::new(),
        );
        payloads.fail_puts(PayloadError::Failed {
            code: "SlowDown".into(),
            message: "reduce your request rate".into(),
            transient: true,
        });
        let tx = OutboxTransaction::new(&claim_settings())
            .put("order", put("ORDER#1", "META", 0))
            .event("ORDER#1", &big("1", 500 * 1024));
        let err = tx.send_with_payloads(&table, &payloads).await.unwrap_err();
        assert_eq!(err.code(), "PayloadNotStored");
        assert!(err.is_retryable());
        assert_eq!(table.transactions(), 0);
        assert!(table.items("t").is_empty());
    }

    #[tokio::test]
    async fn a_cancelled_transaction_leaves_the_object_an_orphan_and_no_item() {
        let (table, payloads) = (
            MemoryTable::new(KeySchema::default()),
            MemoryPayloads::new(),
        );
        table.cancel_next("ConditionalCheckFailed");
        let tx = OutboxTransaction::new(&claim_settings())
            .put("order", put("ORDER#1", "META", 0))
            .event("ORDER#1", &big("1", 500 * 1024));
        assert!(tx.send_with_payloads(&table, &payloads).await.is_err());
        assert_eq!(
            payloads.len(),
            1,
            "the orphan, which the lifecycle rule expires"
        );
        assert!(table.items("t").is_empty());
    }

    #[test]
    fn an_event_larger_than_a_claim_check_takes_is_refused() {
        let tx = OutboxTransaction::new(&claim_settings())
            .event("ORDER#1", &big("1", crate::claim::MAX_PAYLOAD_BYTES));
        assert!(matches!(
            tx.build(),
            Err(TransactionError::Event(OutboxError::PayloadTooLarge { .. }))
        ));
    }

    #[test]
    fn a_stub_given_as_the_event_is_refused() {
        let env = big("1", 10);
        let r = crate::claim::PayloadRef::of("payloads", "k".into(), b"{}");
        for settings in [claim_settings(), settings()] {
            let tx = OutboxTransaction::new(&settings).event("ORDER#1", &env.stub(r.clone()));
            assert!(matches!(
                tx.build(),
                Err(TransactionError::Event(OutboxError::InvalidEvent(_)))
            ));
        }
    }
}
