//! Strict mode when an event fails: a dead letter (made alone, mid-batch,
//! or whose own write failed) parks its aggregate until it is redriven or
//! discarded, and a failed delete does not stall the aggregate.

use outbox_core::keys;
use testkit::proxy::Fault;
use testkit::rig::{scheduled, stream_event, Rig};

/// A1 is poison (the sink refuses it as a bad entry): dead-lettered, and in
/// strict mode its aggregate is parked: A2 and A3 wait, `status` lists the
/// aggregate. Redriving A1 publishes A1, A2, A3 in order; discarding it
/// releases A2 and A3.
#[tokio::test]
async fn a_dead_letter_parks_its_aggregate_until_redriven_or_discarded() {
    for redrive in [true, false] {
        let rig = Rig::new().await;
        let (publisher, sweeper) = rig.functions("strict");
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
        let report = rig.answer(&sweeper, &scheduled()).await;
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
        let report = rig.answer(&sweeper, &scheduled()).await;
        assert_eq!(report["parkedAggregates"], 0, "{report}");
        let expected = if redrive { vec![1, 2, 3] } else { vec![2, 3] };
        rig.assert_all_out("a", &expected, &format!("redrive {redrive}"))
            .await;
        let status = operations
            .status(time::OffsetDateTime::now_utc())
            .await
            .unwrap();
        assert!(status.parked.is_empty());
    }
}

/// One batch [A1, A2, A3] where the sink refuses A2 as malformed: A1 goes
/// out, A2 is dead-lettered, and A3 is held behind it (not published on
/// the strength of A1 having gone out in the run). Redriving A2 then
/// publishes A2, A3: the consumer never sees A3 before A2.
#[tokio::test]
async fn a_dead_letter_made_mid_batch_parks_its_aggregate() {
    let rig = Rig::new().await;
    let (publisher, sweeper) = rig.functions("strict");
    rig.event("a", 1, 8).await;
    let a2 = rig.event("a", 2, 8).await;
    let a3 = rig.event("a", 3, 8).await;
    let records = rig.stack.outbox_inserts().await;
    rig.proxy.inject(
        "PublishBatch",
        Fault::refuse(&[a2.event_id.to_string()], "InvalidParameter"),
        None,
    );
    rig.publish_all(&publisher, records).await;
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
    rig.assert_all_out("a", &[2, 3], "A2 redriven").await;
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
    rig.assert_all_out("a", &[1, 2], "the sweep").await;
}

/// A1 is published but its delete fails: it is handed to the scheduled
/// sweep at once. A2, arriving later, is held behind it; the next scheduled
/// sweep at the default settings (not after `STRANDED_AFTER_SECONDS`)
/// publishes A1 again (same event id) and releases A2.
#[tokio::test]
async fn a_failed_delete_does_not_stall_its_aggregate() {
    let rig = Rig::new().await;
    let (publisher, sweeper) = rig.functions("strict");
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
    rig.assert_all_out("a", &[1, 2], "A1 again, then A2").await;
}
