//! Nothing stalls silently (#39 item 4): an aggregate held past the sweep
//! period is counted as parked, listed by `outboxctl status` and released
//! by `outboxctl release`.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use outbox_core::OutboxItem;
use outbox_engine::Deadline;
use outbox_engine::PublishStore;
use testkit::rig::{scheduled, stream_event, Rig};

use super::now;

/// Sets `attribute` of `item` to the number `value`, as time would have:
/// the test below stands for a hold older than the sweep period (5
/// minutes at the template's default) without waiting for it.
async fn set_number(rig: &Rig, item: &OutboxItem, attribute: &str, value: i64) {
    rig.stack
        .ddb
        .update_item()
        .table_name(&rig.stack.table)
        .set_key(Some(rig.stack.keys.key(&item.key())))
        .update_expression("SET #a = :v")
        .expression_attribute_names("#a", attribute)
        .expression_attribute_values(":v", AttributeValue::N(value.to_string()))
        .send()
        .await
        .expect("update item");
}

/// #39 item 4: nothing stalls silently. A1 backs off for an hour (a sweep
/// attempt failed); A2, held behind it by the publisher, has been held for
/// longer than the sweep period: the scheduled sweep counts its aggregate
/// as parked, `outboxctl status` lists it (held behind A1, since when),
/// and `outboxctl release` makes both due now: the next scheduled sweep
/// publishes A1 then A2. A release of an aggregate that is not parked is
/// refused.
#[tokio::test]
async fn an_aggregate_held_past_the_sweep_period_is_parked_listed_and_released() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "strict", &[]);
    let sweeper = rig.function("sweeper", "strict", &[]);
    let a1 = rig.event("a", 1, 8).await;
    // The write a sweeper attempt that failed makes (backoff of an hour).
    rig.stack
        .store()
        .record_failure(
            &a1.key(),
            1,
            now() + 3_600,
            "InternalError: the sink is down",
            None,
            &Deadline::after(Duration::from_secs(30)),
        )
        .await
        .expect("record a failed attempt");
    rig.event("a", 2, 8).await;
    let a2_record = rig.stack.outbox_inserts().await.remove(1);
    rig.invoke(&publisher, &stream_event(vec![a2_record])).await;
    let a2 = rig
        .stack
        .outbox_items()
        .await
        .into_iter()
        .find(|i| i.aggregate_version == Some(2))
        .expect("A2 pending");
    assert_eq!(a2.held_behind.as_deref(), Some(a1.sk.as_str()));
    let since = a2.held_since.expect("heldSince recorded");
    assert!((now() - since).abs() < 60, "held now: {since}");

    // Held for less than the sweep period: not parked yet.
    let answer = rig.invoke(&sweeper, &scheduled()).await;
    let report: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(report["parkedAggregates"], 0, "{report}");

    set_number(&rig, &a2, "heldSince", now() - 600).await;
    let answer = rig.invoke(&sweeper, &scheduled()).await;
    let report: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(report["parkedAggregates"], 1, "{report}");
    assert!(rig.received("a").await.is_empty(), "A1 backs off, A2 waits");

    let table = rig.stack.table.clone();
    let (ok, out, err) = testkit::Operator::new(&table).status(&["--json"]);
    assert!(ok, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    let parked = &status["parked"];
    assert_eq!(parked.as_array().map(Vec::len), Some(1), "{status}");
    assert_eq!(parked[0]["aggregateId"], "a");
    assert_eq!(parked[0]["held"], a2.event_id.to_string());
    assert_eq!(parked[0]["heldBehind"], a1.event_id.to_string());
    assert_eq!(parked[0]["deadLetter"], serde_json::Value::Null);
    assert!(parked[0]["heldSince"].is_string(), "{status}");
    let (ok, out, _) = testkit::Operator::new(&table).status(&[]);
    assert!(ok && out.contains("parked aggregate"), "{out}");

    let (ok, out, err) = testkit::Operator::new(&table).release(&["a", "--json"]);
    assert!(ok, "{err}");
    let released: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        released["released"]
            .as_array()
            .map(|r| r.iter().filter(|e| e["outcome"] == "released").count()),
        Some(2),
        "{out}"
    );
    assert!(err.contains("parked aggregate released"), "audit: {err}");

    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(rig.received("a").await, vec![1, 2]);
    assert!(rig.stack.outbox_items().await.is_empty());
    let (ok, _, err) = testkit::Operator::new(&table).release(&["a"]);
    assert!(!ok && err.contains("is not parked"), "{err}");
}
