//! The sweeper against the local AWS API: the sparse sharded pending index,
//! republishing through the real EventBridge adapter, persisted backoff,
//! dead letters, lag metrics and read cost.

use outbox_engine::{PublishStore, SweepStore};
use outbox_runtime::SweepMetrics;
use std::time::Duration;

use lambda_runtime::LambdaEvent;
use outbox_core::OutboxItem;
use outbox_engine::{FakeSink, Sweeper, Window};
use outbox_runtime::{DynamoStore, EventBridgeSink};
use sweeper::{handler, Response};
use testkit::proxy::Fault;
use testkit::scenario::{envelopes, sweep_now, sweeper, Wire};
use testkit::{far_deadline, throttled, Stack};
use time::OffsetDateTime;

const DAY: Duration = Duration::from_secs(86_400);

/// The sweeper on `stack`'s bus and store, with the variables `extra`.
fn on_bus(stack: &Stack, extra: &[(&str, &str)]) -> Sweeper<EventBridgeSink, DynamoStore> {
    let (sink, _) = stack.eventbridge_sink();
    sweeper(sink, stack.store(), stack, extra)
}

/// The OnFailure window from `before` seconds before `now` to `after`
/// seconds after it.
fn window(now: OffsetDateTime, before: u64, after: u64) -> Window {
    let (from, to) = (Duration::from_secs(before), Duration::from_secs(after));
    Window {
        from: now - from,
        to: now + to,
    }
}

/// The ids of the events the subscriber received, in order.
async fn delivered(stack: &Stack) -> Vec<ulid::Ulid> {
    let messages = stack.drain_subscriber().await;
    envelopes(&messages).iter().map(|e| e.event_id).collect()
}

#[tokio::test]
async fn stranded_items_are_republished_and_fresh_ones_left_alone() {
    let stack = Stack::with_bus().await;
    let old = stack.put_event_aged(DAY + Duration::from_secs(3600)).await;
    let fresh = stack.put_event_aged(Duration::from_secs(60)).await;
    let (sink, calls) = stack.eventbridge_sink();
    let sweeper = sweeper(sink, stack.store(), &stack, &[]);
    let report = sweep_now(&sweeper).await;
    assert_eq!((report.stranded, report.republished), (1, 1));
    assert_eq!(calls.count("PutEvents"), 1);

    assert_eq!(delivered(&stack).await, [old.event_id]);
    let left = stack.outbox_items().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].event_id, fresh.event_id);
    assert_eq!(report.pending, 1, "the fresh item is still pending");
}

#[tokio::test]
async fn failures_are_counted_and_backed_off_then_dead_lettered() {
    let w = Wire::orders(0).await;
    let item = w.put_event_aged(DAY * 2).await;
    // Every PutEvents entry throttled, on the wire.
    let outage = Fault::refuse_all("ThrottlingException");
    w.proxy.inject("PutEvents", outage, None);
    let sweeper = w.sweeper(8, &[("MAX_ATTEMPTS", "3")]).await;
    let t0 = OffsetDateTime::now_utc();

    let report = sweeper.sweep(t0, &far_deadline()).await;
    let counts = (report.stranded, report.failed, report.dead_lettered);
    assert_eq!(counts, (1, 1, 0));
    let stored = &w.outbox_items().await[0];
    assert_eq!(stored.attempts, 1);
    let error = stored.last_error.as_deref().unwrap();
    assert!(error.contains("ThrottlingException"), "{error}");
    let next = stored.next_attempt_at.unwrap();
    let backoff = t0.unix_timestamp() + 30..=t0.unix_timestamp() + 60;
    assert!(backoff.contains(&next), "{next}");

    // Not due yet: the same moment finds it and leaves it alone (it holds
    // its aggregate's later events).
    let report = sweeper.sweep(t0, &far_deadline()).await;
    let counts = (
        report.stranded,
        report.deferred,
        report.republished,
        report.failed,
    );
    assert_eq!(counts, (1, 1, 0, 0));
    assert_eq!(report.pending, 1);

    let report = sweeper
        .sweep(t0 + Duration::from_secs(3600), &far_deadline())
        .await;
    assert_eq!(report.failed, 1);
    assert_eq!(w.outbox_items().await[0].attempts, 2);

    // Third failure reaches MAX_ATTEMPTS=3: dead-lettered, kept, visible.
    let report = sweeper.sweep(t0 + DAY, &far_deadline()).await;
    assert_eq!((report.failed, report.dead_lettered), (0, 1));
    assert_eq!(report.dead_letter_count, 1);
    assert_eq!(report.pending, 0);
    let dead = &w.outbox_items().await[0];
    assert_eq!(dead.event_id, item.event_id);
    assert_eq!(dead.attempts, 3);
    assert!(dead.dead_lettered_at.is_some());
    let reason = dead.dead_letter_reason.as_deref().unwrap();
    assert!(reason.contains("gave up after 3 attempts"), "{reason}");
    assert!(dead.pending_pk.is_none() && dead.dead_pk.is_some());

    // And it is never retried again.
    let report = sweeper.sweep(t0 + DAY * 30, &far_deadline()).await;
    assert_eq!(report.stranded, 0);
    assert_eq!(report.dead_letter_count, 1);
}

/// A sink that lets the publisher "win the race": it deletes the items (as
/// the publisher would after publishing them) before failing the sweeper's
/// attempt, every entry throttled.
fn publisher_wins_race(stack: &Stack) -> FakeSink {
    let (ddb, table) = (stack.ddb.clone(), stack.table.clone());
    FakeSink::new()
        .fail_all(throttled())
        .before_answer(move |items| {
            let (ddb, table) = (ddb.clone(), table.clone());
            Box::pin(async move {
                for item in items {
                    ddb.delete_item()
                        .table_name(&table)
                        .set_key(Some(item.key().to_attributes()))
                        .send()
                        .await
                        .unwrap();
                }
            })
        })
}

#[tokio::test]
async fn a_concurrent_publisher_delete_is_never_undone() {
    let stack = Stack::new().await;
    stack.put_event_aged(DAY * 2).await;
    stack.put_event_aged(DAY * 3).await;
    // With max attempts 1 the sweeper would dead-letter; with 12 it records
    // a failure. Neither may bring the deleted items back.
    for max in ["12", "1"] {
        let sink = publisher_wins_race(&stack);
        let sweeper = sweeper(sink, stack.store(), &stack, &[("MAX_ATTEMPTS", max)]);
        let report = sweep_now(&sweeper).await;
        assert!(report.stranded <= 2);
        let left = stack.outbox_items().await;
        assert!(left.is_empty(), "nothing resurrected (max attempts {max})");
        stack.put_event_aged(DAY * 2).await;
    }
}

#[tokio::test]
async fn emf_reports_the_oldest_pending_age() {
    let stack = Stack::with_bus().await;
    stack.put_event_aged(Duration::from_secs(7200)).await;
    stack.put_event_aged(Duration::from_secs(60)).await;
    let report = sweep_now(&on_bus(&stack, &[])).await;
    assert_eq!(report.stranded, 0, "neither is past 24 hours");
    assert_eq!(report.pending, 2);
    let emf: serde_json::Value = serde_json::from_str(&report.emf()).expect("EMF is JSON");
    let definitions = &emf["_aws"]["CloudWatchMetrics"][0];
    assert_eq!(definitions["Namespace"], "DynamoDbOutbox");
    let metrics = definitions["Metrics"].as_array().unwrap();
    let names: Vec<&str> = metrics
        .iter()
        .map(|m| m["Name"].as_str().unwrap())
        .collect();
    // DETAILED_METRICS is unset here, as at the templates' default: the
    // alarms' metrics are declared, every count is a field.
    assert_eq!(names, ["OldestPendingAgeSeconds", "DeadLetterCount"]);
    for name in [
        "PendingCount",
        "OldestPendingAgeSeconds",
        "Republished",
        "Failed",
        "DeadLettered",
        "DeadLetterCount",
    ] {
        assert!(emf[name].is_number(), "{name} has a value");
    }
    let age = emf["OldestPendingAgeSeconds"].as_f64().unwrap();
    assert!((7195.0..7210.0).contains(&age), "oldest age {age}");
    assert_eq!(emf["PendingCount"], 2.0);
}

#[tokio::test]
async fn read_cost_does_not_grow_with_the_table() {
    // Two tables with the same backlog (3 stranded, 1 fresh); one also holds
    // 3,000 unrelated items.
    let mut reports = Vec::new();
    for unrelated in [0, 3000] {
        let stack = Stack::with_bus().await;
        stack.fill_unrelated("ORDER", unrelated).await;
        for _ in 0..3 {
            stack.put_event_aged(DAY * 2).await;
        }
        stack.put_event_aged(Duration::from_secs(10)).await;
        let report = sweep_now(&on_bus(&stack, &[])).await;
        assert_eq!((report.republished, report.pending), (3, 1));
        reports.push(report);
    }
    let (small, large) = (&reports[0], &reports[1]);
    let same = "reads are the same with 3,000 more items";
    assert_eq!(large.items_read, small.items_read, "{same}");
    assert_eq!(large.queries, small.queries);
    // 3 stranded read by the range query; the statistics read the oldest
    // pending item and count the 1 left pending (and 0 dead letters): the
    // backlog and nothing else.
    assert_eq!(small.items_read, 5);
}

#[tokio::test]
async fn the_scheduled_sample_runs_the_handler() {
    let stack = Stack::with_bus().await;
    stack.put_event_aged(DAY * 2).await;
    let event = LambdaEvent::new(testkit::rig::scheduled(), testkit::context());
    let response = handler(&on_bus(&stack, &[]), None, event).await.unwrap();
    let Response::Sweep(report) = response else {
        panic!("a scheduled event is a sweep: {response:?}")
    };
    assert_eq!(report.republished, 1);
    assert_eq!(stack.drain_subscriber().await.len(), 1);
}

#[tokio::test]
async fn a_sweep_past_its_deadline_starts_nothing() {
    let stack = Stack::with_bus().await;
    stack.put_event_aged(DAY * 2).await;
    let (sink, calls) = stack.eventbridge_sink();
    let past = outbox_engine::Deadline::after(Duration::ZERO);
    let sweeper = sweeper(sink, stack.store(), &stack, &[]);
    let report = sweeper.sweep(OffsetDateTime::now_utc(), &past).await;
    assert!(report.stopped_early);
    assert_eq!(calls.count("PutEvents"), 0);
    let left = stack.outbox_items().await;
    assert_eq!(left.len(), 1, "left consistent for the next run");
}

/// A redriven event sorts first in the pending index whatever its age; it
/// still waits behind an older pending event of its aggregate: the sweep
/// publishes the older one first, the redriven one with the next sweep.
#[tokio::test]
async fn a_redriven_event_waits_behind_an_older_pending_event_of_its_aggregate() {
    use outbox_engine::DeadLetter;
    let stack = Stack::with_bus().await;
    let aggregate = ulid::Ulid::new().to_string();
    let first = stack
        .put_aggregate_event(&aggregate, 1, 2 * DAY, 0, 8)
        .await;
    let hour = Duration::from_secs(3600);
    let second = stack.put_aggregate_event(&aggregate, 2, hour, 0, 8).await;
    let other = stack.put_event_aged(Duration::from_secs(600)).await;
    let store = stack.store();
    let operations = stack.operations();
    for item in [&second, &other] {
        let letter = DeadLetter {
            key: &item.key(),
            aggregate_id: Some(&item.aggregate_id),
            reason: "test",
            attempts: None,
            claim: None,
        };
        store.dead_letter(letter, &far_deadline()).await.unwrap();
    }
    for item in [&second, &other] {
        let row = operations.find(&item.event_id.to_string()).await.unwrap();
        operations.redrive(&row).await.unwrap();
    }
    // The redriven event sorts first in its shard; the oldest pending age
    // still comes from the oldest event.
    let shard = outbox_core::keys::shard_of(&aggregate, 8);
    let stats = store.shard_stats(shard, 100, &far_deadline()).await;
    assert_eq!(stats.unwrap().oldest, Some(first.event_id));

    let sweeper = on_bus(&stack, &[]);
    let report = sweep_now(&sweeper).await;
    assert_eq!((report.republished, report.deferred), (2, 1), "{report:?}");
    let report = sweep_now(&sweeper).await;
    assert_eq!(report.republished, 1, "{report:?}");
    let ids = delivered(&stack).await;
    let position = |id| ids.iter().position(|i| *i == id).unwrap();
    assert_eq!(ids.len(), 3);
    assert!(
        position(first.event_id) < position(second.event_id),
        "{ids:?}"
    );
    assert!(stack.outbox_items().await.is_empty());
}

/// #26 item 9: an OnFailure window settles on its own items. B1 fails (the
/// sink refuses aggregate B) and B2 waits behind it: both are handed to the
/// scheduled sweep (attempt recorded, `!<ulid>` keys), A1 is published, and
/// the window is settled: its message is not retried for B's backoff.
/// (Before, a failed or deferred item kept the message coming back until
/// its dead-letter queue and alarm.)
#[tokio::test]
async fn an_on_failure_window_settles_when_its_items_are_published_or_handed_over() {
    let w = Wire::orders(0).await;
    let a1 = w.put_aggregate_event("a", 1, Duration::ZERO, 0, 8).await;
    let b1 = w.put_aggregate_event("b", 1, Duration::ZERO, 1, 8).await;
    let b2 = w.put_aggregate_event("b", 2, Duration::ZERO, 2, 8).await;
    let refused = Fault::refuse(&["\"aggregateId\":\"b\"".to_owned()], "InternalFailure");
    w.proxy.inject("PutEvents", refused, None);
    let mut sweeper = w.sweeper(8, &[]).await;
    sweeper.settings.backoff = testkit::instant_backoff();
    let now = OffsetDateTime::now_utc();
    let report = sweeper
        .redrive(window(now, 60, 60), now, &far_deadline())
        .await;
    assert_eq!((report.republished, report.failed), (1, 1));
    assert!(report.settled(), "{report:?}");
    let left = w.outbox_items().await;
    let find = |id| left.iter().find(|i| i.event_id == id).unwrap();
    assert!(left.iter().all(|i| i.event_id != a1.event_id));
    let redriven = |i: &OutboxItem| {
        let sk = i.pending_sk.as_deref();
        sk.is_some_and(outbox_core::keys::is_redriven_sk)
    };
    assert!(redriven(find(b1.event_id)) && find(b1.event_id).attempts == 1);
    assert!(redriven(find(b2.event_id)));
    let held = find(b2.event_id).held_behind.as_deref();
    assert_eq!(held, Some(b1.sk.as_str()));

    // The scheduled sweep publishes B1 then B2 once B1 is due.
    w.proxy.heal();
    let report = sweeper
        .sweep(now + Duration::from_secs(1), &far_deadline())
        .await;
    assert_eq!(report.republished, 2);
    let order = [a1.event_id, b1.event_id, b2.event_id];
    assert_eq!(delivered(&w).await, order);
}

/// #26 item 10: two OnFailure windows that overlap, redriven at the same
/// moment by two sweeper invocations: each event is published once (each
/// run claims an event before publishing it; the loser leaves it). A window
/// that met the other run's claims is not settled (#43: that run may die
/// with them), so its message comes back, and the redrive then finds the
/// events gone and settles.
#[tokio::test]
async fn overlapping_windows_redriven_at_once_publish_each_event_once() {
    let stack = Stack::with_bus().await;
    for i in 0..30 {
        let aggregate = format!("agg-{i}");
        stack
            .put_aggregate_event(&aggregate, 1, Duration::ZERO, i, 8)
            .await;
    }
    let (first, second) = (on_bus(&stack, &[]), on_bus(&stack, &[]));
    let now = OffsetDateTime::now_utc();
    let deadline = far_deadline();
    let (a, b) = tokio::join!(
        first.redrive(window(now, 120, 60), now, &deadline),
        second.redrive(window(now, 60, 120), now, &deadline)
    );
    assert_eq!(a.republished + b.republished, 30, "{a:?} {b:?}");
    // Each settled only if it met none of the other's claims.
    assert_eq!(a.settled(), a.claimed_elsewhere == 0, "{a:?}");
    assert_eq!(b.settled(), b.claimed_elsewhere == 0, "{b:?}");
    let again = first.redrive(window(now, 120, 120), now, &deadline).await;
    assert!(again.settled() && again.republished == 0, "{again:?}");
    let delivered = delivered(&stack).await;
    let ids: std::collections::HashSet<_> = delivered.iter().collect();
    assert_eq!((delivered.len(), ids.len()), (30, 30));
    assert!(stack.outbox_items().await.is_empty());
}

/// #43: a sweeper invocation that claimed a window's event and died leaves
/// it pending and claimed. A redrive meanwhile leaves it to the claim and
/// is not settled (its OnFailure message stays in the queue, where only
/// the 24-hour sweep would find the event); once the claim lapses, the
/// message's next delivery publishes it.
#[tokio::test]
async fn a_window_whose_event_a_dead_run_claimed_is_redriven_once_the_claim_lapses() {
    let stack = Stack::with_bus().await;
    let event = stack
        .put_aggregate_event("a", 1, Duration::ZERO, 0, 8)
        .await;
    let dead = outbox_engine::Claim::new(Duration::from_secs(1));
    let claimed = stack
        .store()
        .claim_pending(&event.key(), &dead, &far_deadline())
        .await;
    claimed.unwrap();
    let sweeper = on_bus(&stack, &[("MAX_ATTEMPTS", "8")]);
    let now = OffsetDateTime::now_utc();
    let window = window(now, 60, 60);
    let report = sweeper.redrive(window, now, &far_deadline()).await;
    assert_eq!((report.republished, report.claimed_elsewhere), (0, 1));
    assert!(!report.settled(), "{report:?}");
    // Past the claim (epoch seconds), as the message's next delivery is.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let later = OffsetDateTime::now_utc();
    let report = sweeper.redrive(window, later, &far_deadline()).await;
    assert_eq!(report.republished, 1, "{report:?}");
    assert!(report.settled(), "{report:?}");
    assert!(stack.outbox_items().await.is_empty());
}

/// Issue #28: a stack with a home region reads only its region's keys;
/// items written before the rule (the keys without a region) are moved to
/// its keys at the start of a scheduled sweep and swept in the same run, a
/// stranded one published, a fresh one left pending with its due time.
#[tokio::test]
async fn items_written_before_the_home_region_rule_keep_working() {
    let mut stack = Stack::with_bus().await;
    // Written before the rule: under the keys without a region.
    let deployed = stack.keys.clone();
    stack.keys = outbox_core::KeySchema::default();
    let old = stack.put_event_aged(DAY + Duration::from_secs(3600)).await;
    let fresh = stack.put_event_aged(Duration::from_secs(60)).await;
    stack.keys = deployed;
    let hashes = old.pending_pk.as_deref().map(|k| k.matches('#').count());
    assert_eq!(hashes, Some(1));
    let regional = outbox_core::KeySchema::default().with_home_region(Some("us-east-1".into()));
    let home = [("HOME_REGION", "us-east-1")];
    assert_eq!(stack.config(&home).keys, regional);
    let (sink, _) = stack.eventbridge_sink();
    let sweeper = sweeper(
        sink,
        stack.store().with_keys(regional.clone()),
        &stack,
        &home,
    );
    let report = sweep_now(&sweeper).await;
    assert_eq!(report.adopted, 2, "{report:?}");
    assert_eq!((report.stranded, report.republished), (1, 1));
    assert_eq!(report.shard_errors, 0);
    assert_eq!(delivered(&stack).await, [old.event_id]);
    let left = stack.outbox_raw().await;
    assert_eq!(left.len(), 1);
    let shard = outbox_core::keys::shard_of(&fresh.aggregate_id, 8);
    let text = |name: &str| left[0][name].as_s().unwrap().clone();
    assert_eq!(text("GSI1PK"), regional.pending_pk(shard));
    assert_eq!(text("GSI1PK"), format!("OUTBOX#us-east-1#{shard}"));
    assert_eq!(text("GSI1SK"), fresh.event_id.to_string(), "due time kept");
    assert_eq!(text("homeRegion"), "us-east-1");
    // A second run moves nothing; the statistics see the fresh one.
    let report = sweep_now(&sweeper).await;
    let counts = (report.adopted, report.republished, report.pending);
    assert_eq!(counts, (0, 0, 1));
}

/// A page of events handed to the schedule (`!<ulid>` keys, due), each
/// checked against its aggregate before it goes out (relaxed ordering: is
/// an older event pending?), while every read is slow (200 ms at the
/// wire, a loaded table or machine). The checks are made together, at
/// most one per aggregate, so one sweep within its deadline publishes the
/// whole page. Before, one check after the other took longer than the
/// deadline (100 × 200 ms) and every sweep of a 20,000-order chaos run
/// ended with the page still due, nothing published.
#[tokio::test]
async fn a_page_of_handed_over_events_is_checked_at_once_and_published() {
    let w = Wire::orders(0).await;
    let (store, far) = (w.store(), far_deadline());
    let now = OffsetDateTime::now_utc();
    for i in 0..100 {
        let item = w
            .put_aggregate_event(&format!("slow-{i}"), 1, 2 * DAY, 0, 1)
            .await;
        let due = now.unix_timestamp() - 1;
        let key = item.key();
        let failed = store.record_failure(&key, 0, due, "test", None, &far);
        failed.await.unwrap();
    }
    let sweeper = w.sweeper(1, &[("OUTBOX_SHARDS", "1")]).await;
    w.proxy
        .inject("Query", Fault::Late(Duration::from_millis(200)), None);
    // 15 s: one check after the other would take 20 s of reads alone (and
    // publish at most about 70 of the 100 in this deadline); together they
    // take about a second, which leaves room for a loaded machine (a 10 s
    // deadline failed once under the full suite).
    let deadline = outbox_engine::Deadline::after(Duration::from_secs(15));
    let report = sweeper.sweep(now, &deadline).await;
    assert_eq!(report.republished, 100, "{report:?}");
    assert!(w.outbox_items().await.is_empty());
}
