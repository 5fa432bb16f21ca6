//! Strict mode's holds: batches of one aggregate run out of order (two
//! lanes of one shard, two first events) are held and released in order,
//! and a publisher run that holds an event does not wait for it.

use outbox_core::OutboxItem;
use testkit::rig::{scheduled, stream_event, Rig};

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
        rig.publish_all(lane, batch).await;
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
    rig.assert_all_out("a", &[1, 2, 3], "the sweep after both lanes")
        .await;
}

/// Two events at `aggregateVersion` 1 of one aggregate (the schema
/// migration of docs/events.md, or a reused aggregate id): the newer one,
/// in a batch that runs first, is read like any other and held; the
/// consumer receives them in creation order.
#[tokio::test]
async fn two_first_events_of_one_aggregate_keep_order_in_strict_mode() {
    let rig = Rig::new().await;
    let (publisher, sweeper) = rig.functions("strict");
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
    rig.publish_all(&publisher, vec![records[1].clone()]).await;
    let took = started.elapsed();
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
