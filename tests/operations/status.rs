//! `outboxctl status` of a table, and the tools on a stack as the
//! templates deploy it: they find its own keys and recorded settings, and
//! do not guess when nothing is recorded.

use std::time::Duration;

use testkit::proxy::FaultProxy;
use testkit::{failed_json, far_deadline, ok_json, Stack};
use time::OffsetDateTime;

use super::{failing_sweeper, on_failure_queue, redrive_on_failure, DAY};

#[tokio::test]
async fn status_counts_pending_backing_off_and_dead_letters_per_shard() {
    let stack = Stack::with_bus().await;
    let mut events = Vec::new();
    for _ in 0..6 {
        events.push(stack.put_event_aged(DAY * 2).await);
    }
    stack.put_event_aged(Duration::from_secs(30)).await; // fresh
    let proxy = FaultProxy::start().await;
    // MAX_ATTEMPTS 2: one failed sweep leaves the six backing off.
    let sweeper = failing_sweeper(&stack, &proxy, 2).await;
    let now = OffsetDateTime::now_utc();
    let report = sweeper.sweep(now, &far_deadline()).await;
    assert_eq!(report.failed, 6);
    stack.put_poison("poisoned", Some("not json")).await;
    // The poison is older than the cutoff only if aged; dead-letter it by a
    // sweep that takes everything.
    let mut everything = sweeper;
    everything.settings.stranded_after = Duration::ZERO;
    everything
        .sweep(OffsetDateTime::now_utc(), &far_deadline())
        .await;

    let status = stack
        .operations()
        .status(OffsetDateTime::now_utc())
        .await
        .unwrap();
    assert_eq!(status.dead_letters, 1);
    assert_eq!(status.pending, 7, "six backing off and the fresh one");
    assert!(status.backing_off >= 6, "{status:?}");
    assert!(status.next_attempt_due.is_some());
    let age = status.oldest_pending_age_seconds.unwrap();
    assert!((2 * 86_400..2 * 86_400 + 600).contains(&age), "{age}");
    assert_eq!(status.shards.len(), 8);
    assert!(
        status.shards.iter().filter(|s| s.pending > 0).count() >= 2,
        "several shards hold pending items"
    );
    assert_eq!(
        status.shards.iter().map(|s| s.pending).sum::<usize>(),
        status.pending
    );

    // The same through the binary, as JSON.
    let json = ok_json(stack.operator().status(&["--json"]));
    for key in [
        "pending",
        "oldestPendingAgeSeconds",
        "deadLetters",
        "shards",
    ] {
        assert!(json.get(key).is_some(), "{key} in {json}");
    }
    assert_eq!(json["deadLetters"], 1);
}

/// Issue #38 item 2, through the real binaries on a stack as the templates
/// deploy it (the region's keys), with no variable exported to `outboxctl`:
/// the publisher dead-letters a poison event and records the stack's
/// settings; `status` and `dead-letters list` find the dead letter,
/// `redrive` puts it back, and `redrive-on-failure` republishes a window
/// to the recorded sink. On the default table and on one with other key
/// names.
async fn operator_tools_find_the_stacks_own_keys(mut stack: Stack) {
    stack.add_bus().await;
    assert!(
        stack.keys.home_region.is_some(),
        "the templates' default writes the region's keys"
    );
    let exported: Vec<&str> = outbox_runtime::VARIABLES
        .iter()
        .copied()
        .filter(|v| std::env::var(v).is_ok())
        .collect();
    assert!(exported.is_empty(), "exported to outboxctl: {exported:?}");
    stack.put_poison("poison", Some("not json")).await;
    let failures = testkit::queue_with(&stack.sdk, "publisher-failures", &[]).await;
    let publisher = stack.function(devkit::Function::Publisher, &[], &[]);
    stack
        .pump(&publisher, Some(&failures))
        .run_until_idle()
        .await
        .expect("pump");

    let status = ok_json(stack.operator().status(&["--json"]));
    assert_eq!(status["deadLetters"], 1, "{status}");
    assert_eq!(status["settings"]["from"], "recorded", "{status}");
    assert_eq!(status["otherKeys"], serde_json::json!([]), "{status}");
    let listed = ok_json(stack.operator().list(&["--json"]));
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    // A window the mapping gave up on: republished to the recorded sink.
    let event = stack.put_event_aged(Duration::from_secs(30)).await;
    let queue = on_failure_queue(&stack).await;
    let json = ok_json(
        stack
            .operator()
            .redrive_on_failure(&["--queue", &queue, "--json"]),
    );
    assert_eq!(json["handled"], 1, "{json}");
    let delivered = stack.drain_subscriber().await;
    let ids: Vec<&str> = delivered
        .iter()
        .filter_map(|m| m["detail"]["eventId"].as_str())
        .collect();
    assert_eq!(ids, vec![event.event_id.to_string()]);
    assert_eq!(stack.outbox_raw().await.len(), 1, "the dead letter only");

    // The dead letter back to the pending index.
    let (ok, out, err) = stack.operator().redrive(&["--all"]);
    assert!(ok && out.contains("redriven"), "{out} {err}");
    let items = stack.outbox_raw().await;
    assert!(
        items.len() == 1 && !items[0].contains_key(outbox_core::keys::attr::DEAD_LETTERED_AT),
        "pending again: {items:?}"
    );

    // An undecodable pending item two days old, of the redriven poison's
    // aggregate (so in its shard, where the redriven item sorts first in
    // the index whatever its age): `status` reads its age from its sort key
    // with the table's own `OUTBOX_PREFIX` (a free key function once read
    // the default prefix only, and on a table with another prefix the age
    // was lost), and the oldest is the oldest by creation, not the index's
    // first (it once was, and said 13 s).
    let old = stack.put_aggregate_event("poison", 1, DAY * 2, 0, 8).await;
    let mut attributes = old.to_attributes().unwrap();
    attributes.remove("envelope");
    stack.put_raw(stack.keys.to_table(attributes)).await;
    let status = ok_json(stack.operator().status(&["--json"]));
    let age = status["oldestPendingAgeSeconds"].as_i64().unwrap_or(0);
    assert!((2 * 86_400..2 * 86_400 + 600).contains(&age), "{status}");
}

#[tokio::test]
async fn operator_tools_find_the_stacks_own_keys_on_the_default_table() {
    operator_tools_find_the_stacks_own_keys(Stack::new().await).await;
}

#[tokio::test]
async fn operator_tools_find_the_stacks_own_keys_on_a_table_with_other_names() {
    let schema = testkit::schema_named(&[
        ("PARTITION_KEY", "pk"),
        ("SORT_KEY", "sk"),
        ("OUTBOX_PREFIX", "evt#"),
        ("PENDING_INDEX", "OutboxPending"),
        ("PENDING_INDEX_PARTITION_KEY", "opk"),
        ("PENDING_INDEX_SORT_KEY", "osk"),
        ("DEAD_LETTER_INDEX", "OutboxDead"),
        ("DEAD_LETTER_INDEX_PARTITION_KEY", "dpk"),
        ("DEAD_LETTER_INDEX_SORT_KEY", "dsk"),
        ("TTL_ATTRIBUTE", "ttl"),
    ]);
    operator_tools_find_the_stacks_own_keys(Stack::with_schema(&schema, &[]).await).await;
}

/// Issue #38 item 2: with nothing recorded in the table (no function of
/// the stack has run), `status` says the settings are this environment's
/// and counts the outbox items under the region's keys apart, instead of
/// printing 0; `redrive-on-failure` keeps a message whose window it finds
/// empty, says why, and exits non-zero.
#[tokio::test]
async fn with_nothing_recorded_status_and_redrive_on_failure_do_not_guess() {
    let stack = Stack::with_bus().await;
    stack.forget_settings().await;
    stack.put_event_aged(Duration::from_secs(30)).await;
    let (ok, out, err) = stack.operator().status(&["--json"]);
    assert!(ok, "{err}");
    assert!(err.contains("no settings are recorded"), "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["settings"]["from"], "environment", "{out}");
    assert_eq!(status["pending"], 0, "{out}");
    assert_eq!(
        status["otherKeys"],
        serde_json::json!([{"homeRegion": devkit::REGION, "pending": 1, "deadLetters": 0}]),
        "{out}"
    );

    let queue = on_failure_queue(&stack).await;
    let (json, err) = failed_json(redrive_on_failure(&stack, &queue), "a kept message");
    assert!(err.contains("keys may not be the stack's"), "{err}");
    assert_eq!(
        (json["handled"].as_u64(), json["kept"].as_u64()),
        (Some(0), Some(1)),
        "{json}"
    );
    assert_eq!(
        stack.outbox_items().await.len(),
        1,
        "the event is still there"
    );
}

/// #61 finding 1: outbox items under keys no stack's sweeper reads (here:
/// no pending-index keys at all, and another region's keys with no stack
/// there) are invisible to the per-shard counts; `status --scan` counts
/// them, names them and fails. A dead letter and a normal pending event
/// are not counted; `doctor --scan` reports them as a problem. `--scan`
/// does not exist at `b82c310`.
#[tokio::test]
async fn status_scan_counts_items_no_sweeper_reads() {
    let stack = Stack::with_bus().await;
    let normal = stack.put_event_aged(Duration::from_secs(30)).await;
    let raw = stack
        .get(&normal.pk, &normal.sk)
        .await
        .expect("the normal item");
    let keys = &stack.keys;
    let s = aws_sdk_dynamodb::types::AttributeValue::S;
    let copy = || {
        let mut item = raw.clone();
        let sk = format!("{}{}", keys.outbox_prefix, ulid::Ulid::new());
        item.insert(keys.sort_key.clone(), s(sk));
        item
    };
    let mut no_keys = copy();
    no_keys.remove(&keys.pending_partition_key);
    no_keys.remove(&keys.pending_sort_key);
    stack.put_raw(no_keys).await;
    let mut elsewhere = copy();
    let nowhere = format!("{}xx-nowhere-1#0", keys.outbox_prefix);
    elsewhere.insert(keys.pending_partition_key.clone(), s(nowhere));
    let home = outbox_core::keys::attr::HOME_REGION.to_owned();
    elsewhere.insert(home, s("xx-nowhere-1".into()));
    stack.put_raw(elsewhere).await;

    let (json, err) = failed_json(
        stack.operator().status(&["--json", "--scan"]),
        "unsweepable items fail the command",
    );
    assert!(
        err.contains("2 outbox items are pending under keys no stack"),
        "{err}"
    );
    assert_eq!(json["unsweepable"]["count"], 2, "{json}");
    assert_eq!(json["unsweepable"]["scanned"], 3, "{json}");
    assert_eq!(
        json["pending"], 1,
        "the per-shard counts see only the normal one"
    );
    // doctor --scan counts them too, as a problem of its own check.
    let bus = stack.bus.as_ref().expect("bus").0.clone();
    let (ok, out, err) = stack
        .operator()
        .doctor(&["--bus", &bus, "--scan", "--json"]);
    assert!(!ok, "a problem: {out}{err}");
    let findings: Vec<serde_json::Value> = serde_json::from_str(&out).expect("JSON");
    let scan = findings
        .iter()
        .find(|f| f["check"] == "unsweepable")
        .expect("the scan's finding");
    assert_eq!(scan["severity"], "problem", "{out}");
    assert!(
        scan["detail"]
            .as_str()
            .is_some_and(|d| d.starts_with("2 of 3")),
        "{out}"
    );

    // Without them, the scan passes.
    let clean = Stack::with_bus().await;
    clean.put_event_aged(Duration::from_secs(30)).await;
    let json = ok_json(clean.operator().status(&["--json", "--scan"]));
    assert_eq!(json["unsweepable"]["count"], 0, "{json}");
}

/// #61 point 5: an operator makes any pending event due now. The fault: a
/// sink outage left two events backing off (the scheduled sweep skips them
/// until their next attempt) and a fresh one it would not take for a day
/// (`STRANDED_AFTER_SECONDS`); the sink is back. `outboxctl make-due` by age and by
/// event id (the real binary) makes them due, an audit line each, and the
/// next scheduled sweep (the real binary, the templates' environment)
/// publishes all three. At `b82c310` only `release` existed, and only for
/// an aggregate parked behind an older event.
#[tokio::test]
async fn make_due_hands_backing_off_and_fresh_events_to_the_next_sweep() {
    let stack = Stack::with_bus().await;
    let old = [
        stack.put_event_aged(DAY * 2).await,
        stack.put_event_aged(DAY * 2).await,
    ];
    let fresh = stack.put_event_aged(Duration::from_secs(30)).await;
    let proxy = FaultProxy::start().await;
    let sweeper = failing_sweeper(&stack, &proxy, 12).await;
    let report = sweeper
        .sweep(OffsetDateTime::now_utc(), &far_deadline())
        .await;
    assert_eq!(report.failed, 2, "the outage: both old events back off");

    let operator = stack.operator();
    let (ok, _, err) = operator.make_due(&[]);
    assert!(
        !ok && err.contains("--event-id"),
        "a selector is required: {err}"
    );
    let (ok, out, err) = operator.make_due(&["--older-than", "3600"]);
    assert!(ok, "{out}{err}");
    for event in &old {
        assert!(
            out.contains(&format!("{}  due now", event.event_id)),
            "{out}"
        );
    }
    assert!(
        !out.contains(&fresh.event_id.to_string()),
        "younger than an hour: {out}"
    );
    let audits: Vec<serde_json::Value> = err
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| v["audit"] == "pending event made due")
        .collect();
    assert_eq!(audits.len(), 2, "{err}");
    let (ok, out, err) = operator.make_due(&["--event-id", &fresh.event_id.to_string()]);
    assert!(
        ok && out.contains(&format!("{}  due now", fresh.event_id)),
        "{out}{err}"
    );

    stack
        .function(devkit::Function::Sweeper, &[], &[])
        .sweep_scheduled()
        .await;
    assert!(stack.outbox_items().await.is_empty(), "all three published");
    let (_, subscriber) = stack.bus.clone().expect("a bus");
    assert_eq!(
        testkit::drain_queue(&stack.sdk, &subscriber.queue_url)
            .await
            .len(),
        3
    );
}
