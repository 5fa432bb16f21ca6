//! Order per aggregate (#26), through the real publisher and sweeper
//! binaries under the local Lambda runtime, their AWS calls going through
//! the fault proxy to DynamoDB Local and moto (SNS FIFO topic, FIFO
//! subscriber queue, OnFailure queue), stream records delivered by the
//! local mapping emulator with the template's settings.
//!
//! Each case that strict ordering fixes is run in relaxed mode too, where
//! it shows the inversion that strict mode prevents.

use outbox_runtime::store::{OperatorStore, PublishStore};
use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use outbox_core::keys;
use outbox_core::OutboxItem;
use outbox_runtime::retry::Deadline;
use outbox_runtime::store::{Claim, Marked};
use testkit::proxy::Fault;
use testkit::rig::{scheduled, stream_event, Rig};

/// The mapping gives up the batch holding A1 (the sink is down past its
/// retries); A2 and A3 arrive after the sink is back. Strict: the
/// publisher holds them, the OnFailure redrive publishes A1 and releases
/// A2 and A3 in the same run. Relaxed: A2 and A3 overtake A1.
#[tokio::test]
async fn a_batch_the_mapping_gives_up_keeps_order_in_strict_mode() {
    for (ordering, expected) in [("strict", vec![1, 2, 3]), ("relaxed", vec![2, 3, 1])] {
        let rig = Rig::new().await;
        let publisher = rig.function("publisher", ordering, &[]);
        let sweeper = rig.function("sweeper", ordering, &[]);
        let mut pump = rig.stack.pump(&publisher, Some(&rig.failures));
        rig.event("a", 1, 8).await;
        rig.proxy
            .inject("PublishBatch", Fault::refuse_all("InternalError"), None);
        pump.run_until_idle().await.expect("pump");
        assert_eq!(
            pump.stats.on_failure_messages, 1,
            "{ordering}: the mapping gave up A1"
        );

        rig.proxy.heal();
        rig.event("a", 2, 8).await;
        rig.event("a", 3, 8).await;
        pump.run_until_idle().await.expect("pump");
        if ordering == "strict" {
            let held: Vec<OutboxItem> = rig.stack.outbox_items().await;
            assert_eq!(held.len(), 3, "A2 and A3 wait behind A1");
            assert_eq!(held.iter().filter(|i| i.held_behind.is_some()).count(), 2);
        }
        let sqs = aws_sdk_sqs::Client::new(&rig.stack.sdk);
        let drained = testkit::lambda::drain_queue_through(&sqs, &rig.failures, &sweeper).await;
        assert_eq!(drained.reported, 0, "{ordering}: the window settled");
        let received = rig.received_at("a").await;
        let versions: Vec<u64> = received.iter().map(|(v, _)| *v).collect();
        assert_eq!(versions, expected, "{ordering}");
        if ordering == "strict" {
            // A2 and A3 were released by the redrive that published A1.
            println!(
                "release latency (OnFailure redrive): A2 {} ms, A3 {} ms after A1",
                received[1].1.saturating_sub(received[0].1),
                received[2].1.saturating_sub(received[0].1)
            );
        }
        assert!(rig.stack.outbox_items().await.is_empty(), "{ordering}");
    }
}

/// Two publisher invocations at once (a `ParallelizationFactor` of 2: Lambda
/// keeps order per item only): A2's invocation starts first, while A1 is
/// still in the table. Strict: A2 is held (its invocation answers at once)
/// and the scheduled sweep releases it once the other invocation published
/// A1. Relaxed: A2 goes out first.
#[tokio::test]
async fn concurrent_invocations_keep_order_in_strict_mode() {
    for (ordering, expected) in [("strict", vec![1, 2]), ("relaxed", vec![2, 1])] {
        let rig = Rig::new().await;
        let first = rig.function("publisher", ordering, &[]);
        let second = rig.function("publisher", ordering, &[]);
        rig.event("a", 1, 8).await;
        rig.event("a", 2, 8).await;
        let records = rig.stack.outbox_inserts().await;
        assert_eq!(records.len(), 2);
        // Warm both sandboxes, so that start-up does not decide the race.
        for f in [&first, &second] {
            rig.invoke(f, &stream_event(Vec::new())).await;
        }
        let a2 = stream_event(vec![records[1].clone()]);
        let a1 = stream_event(vec![records[0].clone()]);
        let (answer2, answer1) = if ordering == "strict" {
            // A1's invocation starts while A2's runs (it reads A1 first).
            tokio::join!(rig.invoke(&first, &a2), async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                rig.invoke(&second, &a1).await
            })
        } else {
            // The worst interleaving, for certain: A2's batch ends first.
            let answer2 = rig.invoke(&first, &a2).await;
            (answer2, rig.invoke(&second, &a1).await)
        };
        for answer in [answer1, answer2] {
            let response: serde_json::Value = serde_json::from_slice(&answer).unwrap();
            assert_eq!(
                response["batchItemFailures"],
                serde_json::json!([]),
                "{ordering}: nothing reported"
            );
        }
        if ordering == "strict" {
            // The scheduled sweep releases A2, after A1.
            let sweeper = rig.function("sweeper", ordering, &[]);
            rig.invoke(&sweeper, &scheduled()).await;
        }
        let received = rig.received_at("a").await;
        let versions: Vec<u64> = received.iter().map(|(v, _)| *v).collect();
        assert_eq!(versions, expected, "{ordering}");
        if ordering == "strict" {
            // A2 was held, then released by the sweep.
            println!(
                "release latency (concurrent invocation, then a sweep): A2 {} ms after A1",
                received[1].1.saturating_sub(received[0].1)
            );
        }
        assert!(rig.stack.outbox_items().await.is_empty(), "{ordering}");
    }
}

/// `OUTBOX_SHARDS` is lowered between A1 and A2 while A1 backs off: A1 is
/// in shard `h % 8`, A2 in shard 0, and the sweeper sweeps shards at once.
/// Strict: A2 waits for A1 whatever the shards. Relaxed: A2 goes out while
/// A1 backs off.
#[tokio::test]
async fn lowering_the_shard_count_keeps_order_in_strict_mode() {
    // An aggregate whose shard is not 0 with 8 shards.
    let aggregate = (0..)
        .map(|i| format!("agg-{i}"))
        .find(|a| keys::shard_of(a, 8) != 0)
        .unwrap();
    for (ordering, expected) in [("strict", vec![1, 2]), ("relaxed", vec![2, 1])] {
        let rig = Rig::new().await;
        // A1's backoff: 5 to 10 s, ample for the first sweep to see it not due.
        let sweep = [("STRANDED_AFTER_SECONDS", "0"), ("RETRY_BASE_SECONDS", "5")];
        let sweeper_8 = rig.function(
            "sweeper",
            ordering,
            &[&sweep[..], &[("OUTBOX_SHARDS", "8")]].concat(),
        );
        let sweeper_1 = rig.function(
            "sweeper",
            ordering,
            &[&sweep[..], &[("OUTBOX_SHARDS", "1")]].concat(),
        );
        rig.event(&aggregate, 1, 8).await;
        rig.proxy
            .inject("PublishBatch", Fault::refuse_all("InternalError"), None);
        rig.invoke(&sweeper_8, &scheduled()).await;
        let a1 = rig.stack.outbox_items().await.remove(0);
        assert_eq!(a1.attempts, 1, "{ordering}: A1 backs off");

        rig.proxy.heal();
        rig.event(&aggregate, 2, 1).await;
        // A1 is not due yet.
        rig.invoke(&sweeper_1, &scheduled()).await;
        // A1 is due.
        tokio::time::sleep(Duration::from_millis(10_500)).await;
        rig.invoke(&sweeper_1, &scheduled()).await;
        assert_eq!(rig.received(&aggregate).await, expected, "{ordering}");
        assert!(rig.stack.outbox_items().await.is_empty(), "{ordering}");
    }
}

/// A1 is poison (the sink refuses it as a bad entry): dead-lettered, and in
/// strict mode its aggregate is parked: A2 and A3 wait, `status` lists the
/// aggregate. Redriving A1 publishes A1, A2, A3 in order; discarding it
/// releases A2 and A3.
#[tokio::test]
async fn a_dead_letter_parks_its_aggregate_until_redriven_or_discarded() {
    for redrive in [true, false] {
        let rig = Rig::new().await;
        let publisher = rig.function("publisher", "strict", &[]);
        let sweeper = rig.function("sweeper", "strict", &[]);
        let a1 = rig.event("a", 1, 8).await;
        rig.event("a", 2, 8).await;
        rig.event("a", 3, 8).await;
        rig.proxy.inject(
            "PublishBatch",
            Fault::refuse(&[a1.event_id.to_string()], "InvalidParameter"),
            None,
        );
        let mut pump = rig.stack.pump(&publisher, Some(&rig.failures));
        pump.run_until_idle().await.expect("pump");
        rig.proxy.heal();
        assert!(rig.received("a").await.is_empty(), "A2 and A3 wait");

        let operations = rig.stack.operations();
        let status = operations
            .status(time::OffsetDateTime::now_utc())
            .await
            .unwrap();
        assert_eq!((status.dead_letters, status.held), (1, 2));
        assert_eq!(status.parked.len(), 1);
        assert_eq!(
            (
                status.parked[0].aggregate_id.as_str(),
                status.parked[0].waiting
            ),
            ("a", 2)
        );

        // Releasing it would publish A2 and A3 before A1: refused.
        let (ok, _, err) = rig.stack.operator().release(&["a"]);
        assert!(!ok && err.contains("waits behind its dead letter"), "{err}");

        // A scheduled sweep publishes nothing while A1 is a dead letter,
        // and counts the parked aggregate (ParkedAggregates).
        let answer = rig.invoke(&sweeper, &scheduled()).await;
        let report: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(report["parkedAggregates"], 1, "{report}");
        assert_eq!(report["held"], 2, "{report}");
        assert!(rig.received("a").await.is_empty());

        let letter = operations
            .dead_letters(&Default::default())
            .await
            .unwrap()
            .remove(0);
        if redrive {
            operations.redrive(&letter).await.unwrap();
        } else {
            operations.discard(&letter).await.unwrap();
        }
        let answer = rig.invoke(&sweeper, &scheduled()).await;
        let report: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(report["parkedAggregates"], 0, "{report}");
        let expected = if redrive { vec![1, 2, 3] } else { vec![2, 3] };
        assert_eq!(rig.received("a").await, expected, "redrive {redrive}");
        assert!(rig.stack.outbox_items().await.is_empty());
        let status = operations
            .status(time::OffsetDateTime::now_utc())
            .await
            .unwrap();
        assert!(status.parked.is_empty());
    }
}

/// Two lanes of one stream shard at a `ParallelizationFactor` of 2 (order
/// per item only): lane Y gets [A2], lane X gets [A1, A3], Y's batch first.
/// Y holds A2 behind A1. X publishes A1, and must not publish A3 on the
/// strength of A1 having gone out in its run: A2 sits between them. The
/// scheduled sweep then publishes A2, A3.
#[tokio::test]
async fn two_lanes_of_one_shard_keep_order_in_strict_mode() {
    let rig = Rig::new().await;
    let lane_y = rig.function("publisher", "strict", &[]);
    let lane_x = rig.function("publisher", "strict", &[]);
    let sweeper = rig.function("sweeper", "strict", &[]);
    let a1 = rig.event("a", 1, 8).await;
    let a2 = rig.event("a", 2, 8).await;
    let a3 = rig.event("a", 3, 8).await;
    let records = rig.stack.outbox_inserts().await;
    assert_eq!(records.len(), 3);
    for (lane, batch) in [
        (&lane_y, vec![records[1].clone()]),
        (&lane_x, vec![records[0].clone(), records[2].clone()]),
    ] {
        let answer = rig.invoke(lane, &stream_event(batch)).await;
        let response: serde_json::Value = serde_json::from_slice(&answer).unwrap();
        assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    }
    let left = rig.stack.outbox_items().await;
    let behind = |item: &OutboxItem| {
        left.iter()
            .find(|i| i.event_id == item.event_id)
            .and_then(|i| i.held_behind.clone())
    };
    assert_eq!(left.len(), 2, "A1 published, A2 and A3 held");
    assert_eq!(behind(&a2), Some(a1.sk.clone()));
    assert_eq!(behind(&a3), Some(a2.sk.clone()), "A3 waits for A2");

    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(rig.received("a").await, vec![1, 2, 3]);
    assert!(rig.stack.outbox_items().await.is_empty());
}

/// Two events at `aggregateVersion` 1 of one aggregate (the schema
/// migration of docs/events.md, or a reused aggregate id): the newer one,
/// in a batch that runs first, is read like any other and held; the
/// consumer receives them in creation order.
#[tokio::test]
async fn two_first_events_of_one_aggregate_keep_order_in_strict_mode() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "strict", &[]);
    let sweeper = rig.function("sweeper", "strict", &[]);
    let first = rig.event("a", 1, 8).await;
    let second = rig.event("a", 1, 8).await;
    let records = rig.stack.outbox_inserts().await;
    assert_eq!(records.len(), 2);
    for batch in [vec![records[1].clone()], vec![records[0].clone()]] {
        rig.invoke(&publisher, &stream_event(batch)).await;
    }
    rig.invoke(&sweeper, &scheduled()).await;
    let ids: Vec<String> = testkit::drain_queue(&rig.stack.sdk, &rig.subscriber)
        .await
        .into_iter()
        .filter_map(|m| m["eventId"].as_str().map(str::to_owned))
        .collect();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(
        unique,
        vec![first.event_id.to_string(), second.event_id.to_string()],
        "creation order"
    );
    assert!(rig.stack.outbox_items().await.is_empty());
}

/// A publisher invocation that holds an event answers at once: the held
/// event is the scheduled sweep's, and the invocation neither waits nor
/// reads the collection again (one guard read, one hold: counted at the
/// proxy, not timed). Its time is printed.
#[tokio::test]
async fn a_publisher_run_that_holds_an_event_does_not_wait() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "strict", &[]);
    rig.event("a", 1, 8).await;
    rig.event("a", 2, 8).await;
    let records = rig.stack.outbox_inserts().await;
    // Warm the sandbox: its start-up calls are not counted below.
    rig.invoke(&publisher, &stream_event(Vec::new())).await;
    let (queries, updates) = (rig.proxy.seen("Query"), rig.proxy.seen("UpdateItem"));
    let started = std::time::Instant::now();
    let answer = rig
        .invoke(&publisher, &stream_event(vec![records[1].clone()]))
        .await;
    let took = started.elapsed();
    let response: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    assert_eq!(
        (
            rig.proxy.seen("Query") - queries,
            rig.proxy.seen("UpdateItem") - updates
        ),
        (1, 1),
        "one guard read and the hold; no read again"
    );
    let held = rig.stack.outbox_items().await;
    assert!(held[1].held_behind.is_some(), "A2 held, the sweep's");
    println!("publisher invocation holding A2: {} ms", took.as_millis());
}

/// One batch [A1, A2, A3] where the sink refuses A2 as malformed: A1 goes
/// out, A2 is dead-lettered, and A3 is held behind it (not published on
/// the strength of A1 having gone out in the run). Redriving A2 then
/// publishes A2, A3: the consumer never sees A3 before A2.
#[tokio::test]
async fn a_dead_letter_made_mid_batch_parks_its_aggregate() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "strict", &[]);
    let sweeper = rig.function("sweeper", "strict", &[]);
    rig.event("a", 1, 8).await;
    let a2 = rig.event("a", 2, 8).await;
    let a3 = rig.event("a", 3, 8).await;
    let records = rig.stack.outbox_inserts().await;
    rig.proxy.inject(
        "PublishBatch",
        Fault::refuse(&[a2.event_id.to_string()], "InvalidParameter"),
        None,
    );
    let answer = rig.invoke(&publisher, &stream_event(records)).await;
    let response: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    rig.proxy.heal();
    assert_eq!(rig.received("a").await, vec![1], "A3 waits behind A2");
    let left = rig.stack.outbox_items().await;
    assert_eq!(left.len(), 2);
    assert!(left[0].dead_lettered_at.is_some(), "A2 dead-lettered");
    assert_eq!(left[1].event_id, a3.event_id);
    assert_eq!(left[1].held_behind.as_deref(), Some(a2.sk.as_str()));

    let operations = rig.stack.operations();
    let letter = operations
        .dead_letters(&Default::default())
        .await
        .unwrap()
        .remove(0);
    operations.redrive(&letter).await.unwrap();
    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(rig.received("a").await, vec![2, 3]);
    assert!(rig.stack.outbox_items().await.is_empty());
}

/// The sink refuses A1 as malformed and the dead-letter write for it fails
/// too: A1 stays pending, and A2, in the same batch, is held behind it (not
/// published without a read). A sweep publishes both, in order.
#[tokio::test]
async fn a_failed_dead_letter_write_still_parks_its_aggregate() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "strict", &[]);
    let sweeper = rig.function("sweeper", "strict", &[("STRANDED_AFTER_SECONDS", "0")]);
    let a1 = rig.event("a", 1, 8).await;
    let a2 = rig.event("a", 2, 8).await;
    let records = rig.stack.outbox_inserts().await;
    // Warm the sandbox: its start-up writes are not the ones refused.
    rig.invoke(&publisher, &stream_event(Vec::new())).await;
    rig.proxy.inject(
        "PublishBatch",
        Fault::refuse(&[a1.event_id.to_string()], "InvalidParameter"),
        None,
    );
    // The dead-letter write (an UpdateItem, not retried on this code).
    rig.proxy.inject(
        "UpdateItem",
        Fault::Refuse("AccessDeniedException".into()),
        Some(1),
    );
    rig.invoke(&publisher, &stream_event(records)).await;
    rig.proxy.heal();
    assert!(rig.received("a").await.is_empty(), "A2 waits behind A1");
    let left = rig.stack.outbox_items().await;
    assert_eq!(left.len(), 2);
    assert!(
        left[0].dead_lettered_at.is_none(),
        "A1's dead letter failed"
    );
    assert_eq!(left[1].held_behind.as_deref(), Some(a1.sk.as_str()));
    assert_eq!(left[1].event_id, a2.event_id);

    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(rig.received("a").await, vec![1, 2]);
    assert!(rig.stack.outbox_items().await.is_empty());
}

/// A1 is published but its delete fails: it is handed to the scheduled
/// sweep at once. A2, arriving later, is held behind it; the next scheduled
/// sweep at the default settings (not after `STRANDED_AFTER_SECONDS`)
/// publishes A1 again (same event id) and releases A2.
#[tokio::test]
async fn a_failed_delete_does_not_stall_its_aggregate() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "strict", &[]);
    let sweeper = rig.function("sweeper", "strict", &[]);
    rig.event("a", 1, 8).await;
    let records = rig.stack.outbox_inserts().await;
    rig.invoke(&publisher, &stream_event(Vec::new())).await;
    rig.proxy.inject("DeleteItem", Fault::ServerError, None);
    rig.invoke(&publisher, &stream_event(records)).await;
    rig.proxy.heal();
    let a1 = rig.stack.outbox_items().await.remove(0);
    assert!(
        a1.pending_sk.as_deref().is_some_and(keys::is_redriven_sk),
        "A1 is the scheduled sweep's"
    );

    rig.event("a", 2, 8).await;
    let a2 = rig.stack.outbox_inserts().await.remove(1);
    rig.invoke(&publisher, &stream_event(vec![a2])).await;
    assert_eq!(rig.stack.outbox_items().await.len(), 2, "A2 held behind A1");

    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(rig.received("a").await, vec![1, 2]);
    assert!(rig.stack.outbox_items().await.is_empty());
}

/// Sets `attribute` of `item` to the number `value`, as time would have:
/// the tests below stand for a hold older than the sweep period (5
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

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
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

/// #39 item 5: a claim is cleared only by its owner. A sweeper run has
/// claimed A2 and is publishing it; the publisher, which gets A2's stream
/// record while A1 is pending, would hold it: the hold leaves the live
/// claim alone (so no second sweeper run can claim A2 while the first one
/// publishes it).
#[tokio::test]
async fn a_hold_leaves_another_runs_live_claim_alone() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "strict", &[]);
    rig.event("a", 1, 8).await;
    let a2 = rig.event("a", 2, 8).await;
    let claim = Claim::new(Duration::from_secs(300));
    let claimed = rig
        .stack
        .store()
        .claim_pending(&a2.key(), &claim, &Deadline::after(Duration::from_secs(30)))
        .await
        .expect("claim");
    assert_eq!(claimed, Marked::Updated);
    let a2_record = rig.stack.outbox_inserts().await.remove(1);
    rig.invoke(&publisher, &stream_event(vec![a2_record])).await;
    let after = rig
        .stack
        .outbox_items()
        .await
        .into_iter()
        .find(|i| i.event_id == a2.event_id)
        .expect("A2 pending");
    assert_eq!(after.claim_token.as_deref(), Some(claim.token.as_str()));
    assert_eq!(
        after.held_behind, None,
        "not held under another run's claim"
    );
    assert!(rig.received("a").await.is_empty());

    // The claim's owner: an SDK retry of its applied claim finds it its
    // own; another run's claim is refused.
    let store = rig.stack.store();
    let deadline = Deadline::after(Duration::from_secs(30));
    assert_eq!(
        store
            .claim_pending(&a2.key(), &claim, &deadline)
            .await
            .unwrap(),
        Marked::Updated
    );
    let other = Claim::new(Duration::from_secs(300));
    assert_eq!(
        store
            .claim_pending(&a2.key(), &other, &deadline)
            .await
            .unwrap(),
        Marked::Gone
    );
    // The owner holds it, then records a failed attempt of it: the
    // failure ends the hold (no stale heldBehind to report as parked).
    let token = Some(claim.token.as_str());
    store
        .hold(&a2.key(), "OUTBOX#older", token, &deadline)
        .await
        .unwrap();
    let held = rig.stack.outbox_items().await.remove(1);
    assert!(held.held_behind.is_some() && held.held_since.is_some());
    store
        .record_failure(&a2.key(), 1, now() + 60, "sink down", token, &deadline)
        .await
        .unwrap();
    let failed = rig.stack.outbox_items().await.remove(1);
    assert_eq!((failed.held_behind, failed.held_since), (None, None));
    assert_eq!(failed.attempts, 1);
}

/// #39 item 5: on a global table only an event's home region releases or
/// claims it. A1 (this region's) is due; A2 of the same aggregate was
/// written in another region (its home region and pending keys are that
/// region's, replicated here). This region's sweeper publishes A1 and
/// leaves A2 to its region, and a claim on A2 from here is refused.
#[tokio::test]
async fn another_regions_event_is_neither_released_nor_claimed_here() {
    let rig = Rig::new().await;
    let sweeper = rig.function("sweeper", "strict", &[]);
    let deadline = Deadline::after(Duration::from_secs(30));
    let a1 = rig.event("a", 1, 8).await;
    let a2 = rig.event("a", 2, 8).await;
    assert_eq!(a2.home_region.as_deref(), Some("us-east-1"));
    // As eu-west-1's writer wrote it.
    let elsewhere = rig
        .stack
        .keys
        .clone()
        .with_home_region(Some("eu-west-1".into()));
    rig.stack
        .ddb
        .update_item()
        .table_name(&rig.stack.table)
        .set_key(Some(rig.stack.keys.key(&a2.key())))
        .update_expression("SET #home = :home, #ppk = :ppk")
        .expression_attribute_names("#home", keys::attr::HOME_REGION)
        .expression_attribute_names("#ppk", rig.stack.keys.pending_partition_key.as_str())
        .expression_attribute_values(":home", AttributeValue::S("eu-west-1".into()))
        .expression_attribute_values(
            ":ppk",
            AttributeValue::S(elsewhere.pending_pk(keys::shard_of("a", 8))),
        )
        .send()
        .await
        .expect("make A2 another region's");
    // A1 due now, in the scheduled sweep's hands (as `outboxctl release`
    // leaves it).
    rig.stack
        .store()
        .make_due(&a1.key(), &deadline)
        .await
        .expect("A1 due");

    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(rig.received("a").await, vec![1], "A2 is eu-west-1's");
    let left = rig.stack.outbox_items().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].event_id, a2.event_id);
    assert_eq!(left[0].claim_token, None, "not claimed here");
    let claim = Claim::new(Duration::from_secs(300));
    assert_eq!(
        rig.stack
            .store()
            .claim_pending(&a2.key(), &claim, &deadline)
            .await
            .expect("claim"),
        Marked::Gone
    );
}
