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
