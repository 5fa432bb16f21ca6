//! Nothing stalls silently (#39 item 4): an aggregate held past the sweep
//! period is counted as parked, listed by `outboxctl status` and released
//! by `outboxctl release`.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use outbox_engine::Deadline;
use outbox_engine::PublishStore;
use testkit::rig::{scheduled, stream_event, Rig};

use super::now;

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
    let (publisher, sweeper) = rig.functions("strict");
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
    let report = rig.answer(&sweeper, &scheduled()).await;
    assert_eq!(report["parkedAggregates"], 0, "{report}");

    // Held longer than the sweep period (5 minutes at the template's
    // default), as time would have made it, without waiting.
    let ten_minutes_ago = AttributeValue::N((now() - 600).to_string());
    rig.stack
        .set(&a2.key(), &[("heldSince", ten_minutes_ago)])
        .await;
    let report = rig.answer(&sweeper, &scheduled()).await;
    assert_eq!(report["parkedAggregates"], 1, "{report}");
    assert!(rig.received("a").await.is_empty(), "A1 backs off, A2 waits");

    let operator = rig.stack.operator();
    let status = testkit::ok_json(operator.status(&["--json"]));
    let parked = &status["parked"];
    assert_eq!(parked.as_array().map(Vec::len), Some(1), "{status}");
    assert_eq!(parked[0]["aggregateId"], "a");
    assert_eq!(parked[0]["held"], a2.event_id.to_string());
    assert_eq!(parked[0]["heldBehind"], a1.event_id.to_string());
    assert_eq!(parked[0]["deadLetter"], serde_json::Value::Null);
    assert!(parked[0]["heldSince"].is_string(), "{status}");
    let (ok, out, _) = operator.status(&[]);
    assert!(ok && out.contains("parked aggregate"), "{out}");

    let (ok, out, err) = operator.release(&["a", "--json"]);
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
    rig.assert_all_out("a", &[1, 2], "released").await;
    let (ok, _, err) = operator.release(&["a"]);
    assert!(!ok && err.contains("is not parked"), "{err}");
}
