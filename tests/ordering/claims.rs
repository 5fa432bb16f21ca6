//! Who may clear or claim an event (#39 item 5): a hold leaves another
//! run's live claim alone, and on a global table only an event's home
//! region releases or claims it.

use std::time::Duration;

use aws_sdk_dynamodb::types::AttributeValue;
use outbox_core::keys;
use outbox_engine::Deadline;
use outbox_engine::{Claim, ClaimOutcome, OperatorStore, PublishStore};
use testkit::rig::{scheduled, stream_event, Rig};

use super::now;

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
    assert_eq!(claimed, ClaimOutcome::Claimed);
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
    let other = Claim::new(Duration::from_secs(300));
    for (by, expected) in [
        (&claim, ClaimOutcome::Claimed),
        (&other, ClaimOutcome::ClaimedElsewhere),
    ] {
        let outcome = store.claim_pending(&a2.key(), by, &deadline).await;
        assert_eq!(outcome.unwrap(), expected, "{expected:?}");
    }
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
    let home = AttributeValue::S("eu-west-1".into());
    let pending_pk = AttributeValue::S(elsewhere.pending_pk(keys::shard_of("a", 8)));
    let pending_key = rig.stack.keys.pending_partition_key.as_str();
    let values = [(keys::attr::HOME_REGION, home), (pending_key, pending_pk)];
    rig.stack.set(&a2.key(), &values).await;
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
        ClaimOutcome::Gone
    );
}
