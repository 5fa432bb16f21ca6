//! `outboxctl`'s operator commands against the local API: dead letters made
//! by the real sweeper and publisher code, listed, shown, redriven (once,
//! even when two operators race) and delivered with their original
//! `eventId`; discarded; the status of a table; bad arguments.

use outbox_runtime::store::{OperatorStore, PublishStore};
use std::process::Command;
use std::time::Duration;

use outbox_runtime::store::DynamoStore;
use outbox_runtime::store::Marked;
use outboxctl::{envelope_of, DeadLetterFilter as Filter, OpsError};
use sweeper::{SweepSettings, Sweeper};
use testkit::proxy::{Fault, FaultProxy};
use testkit::{far_deadline, fast_retry, outboxctl, Stack};
use time::OffsetDateTime;

const DAY: Duration = Duration::from_secs(86_400);

/// A sweeper whose sink refuses every entry (a throttle), so that an item
/// is dead-lettered after `max_attempts` failed sweeps.
async fn failing_sweeper(
    stack: &Stack,
    proxy: &FaultProxy,
    max_attempts: u32,
) -> Sweeper<outbox_runtime::publish::eventbridge::EventBridgeSink, DynamoStore> {
    let (sink, store) = stack.through(proxy, 8).await;
    proxy.inject("PutEvents", Fault::refuse_all("ThrottlingException"), None);
    let mut sweeper = Sweeper::new(
        sink,
        store,
        SweepSettings::from(&stack.config(&[("MAX_ATTEMPTS", &max_attempts.to_string())])),
    );
    sweeper.retry = fast_retry();
    sweeper
}

/// `n` events, dead-lettered by the sweeper's code (one failed attempt
/// each against a refusing sink).
async fn dead_letters(stack: &Stack, n: usize) -> Vec<outbox_core::OutboxItem> {
    let mut items = Vec::new();
    for _ in 0..n {
        items.push(stack.put_event_aged(Duration::from_secs(120)).await);
    }
    let proxy = FaultProxy::start().await;
    let mut sweeper = failing_sweeper(stack, &proxy, 1).await;
    sweeper.settings.stranded_after = Duration::ZERO;
    sweeper
        .sweep(OffsetDateTime::now_utc(), &far_deadline())
        .await;
    items
}

#[tokio::test]
async fn dead_letters_are_listed_shown_redriven_once_and_delivered_with_their_id() {
    let stack = Stack::with_bus().await;
    let first = stack.put_event_aged(DAY * 2).await;
    let second = stack.put_event_aged(DAY * 2).await;
    let proxy = FaultProxy::start().await;
    let sweeper = failing_sweeper(&stack, &proxy, 1).await;
    let report = sweeper
        .sweep(OffsetDateTime::now_utc(), &far_deadline())
        .await;
    assert_eq!(report.dead_lettered, 2);

    let table = stack.operations();
    let rows = table.dead_letters(&Filter::default()).await.unwrap();
    assert_eq!(rows.len(), 2);
    let row = rows
        .iter()
        .find(|r| r.event_id == first.event_id.to_string())
        .unwrap()
        .clone();
    assert_eq!(row.event_type, "OrderCreated");
    assert_eq!(row.aggregate_id, first.aggregate_id);
    assert!(row.reason.contains("ThrottlingException"), "{}", row.reason);
    assert!(!row.dead_lettered_at.is_empty());
    let only = Filter {
        aggregate_id: Some(second.aggregate_id.clone()),
        ..Filter::default()
    };
    assert_eq!(table.dead_letters(&only).await.unwrap().len(), 1);

    let shown = table.find(&row.event_id).await.unwrap();
    assert_eq!(shown, row);
    let envelope = envelope_of(&shown).unwrap();
    assert_eq!(envelope["eventId"], row.event_id);

    // Two operators redrive the same event at once. DynamoDB evaluates the
    // condition atomically, so one of them is told it was no longer a dead
    // letter; the redrive only moves the item back to the pending index,
    // and the event goes out once.
    let (a, b) = tokio::join!(table.redrive(&row), table.redrive(&row));
    let mut both = [a.unwrap(), b.unwrap()];
    both.sort_by_key(|m| *m == Marked::Gone);
    assert_eq!(both, [Marked::Updated, Marked::Gone]);
    assert_eq!(table.redrive(&row).await.unwrap(), Marked::Gone);
    assert_eq!(
        table.dead_letters(&Filter::default()).await.unwrap().len(),
        1
    );

    // The next sweep (the sink is back) publishes it once, same eventId.
    proxy.heal();
    let report = sweeper
        .sweep(OffsetDateTime::now_utc(), &far_deadline())
        .await;
    assert_eq!(report.republished, 1);
    let delivered = stack.drain_subscriber().await;
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0]["detail"]["eventId"], row.event_id);

    // Discard the other: gone; a second discard changes nothing.
    let other = table.find(&second.event_id.to_string()).await.unwrap();
    assert_eq!(table.discard(&other).await.unwrap(), Marked::Updated);
    assert_eq!(table.discard(&other).await.unwrap(), Marked::Gone);
    assert!(stack.outbox_items().await.is_empty());

    // Unknown and malformed ids.
    assert!(matches!(
        table.find(&ulid::Ulid::new().to_string()).await,
        Err(OpsError::NotFound(_))
    ));
    assert!(matches!(
        table.find("not-an-id").await,
        Err(OpsError::BadEventId(_))
    ));
}

#[tokio::test]
async fn status_counts_pending_backing_off_and_dead_letters_per_shard() {
    let stack = Stack::with_bus().await;
    let mut events = Vec::new();
    for _ in 0..6 {
        events.push(stack.put_event_aged(DAY * 2).await);
    }
    let fresh = stack.put_event_aged(Duration::from_secs(30)).await;
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
    let _ = fresh;

    // The same through the binary, as JSON.
    let (ok, out, err) = stack.operator().status(&["--json"]);
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    for key in [
        "pending",
        "oldestPendingAgeSeconds",
        "deadLetters",
        "shards",
    ] {
        assert!(json.get(key).is_some(), "{key} in {out}");
    }
    assert_eq!(json["deadLetters"], 1);
}

#[tokio::test]
async fn redrive_now_publishes_with_the_original_id_through_the_binary() {
    let stack = Stack::with_bus().await;
    let event = &dead_letters(&stack, 1).await[0];
    let id = event.event_id.to_string();
    let (bus, _) = stack.bus.clone().unwrap();

    let (ok, out, err) = stack.operator().list(&[]);
    assert!(ok, "{err}");
    assert!(out.contains(&id), "{out}");
    let (ok, out, err) = stack.operator().show(&[&id]);
    assert!(ok, "{err}");
    assert!(out.contains("\"eventId\""), "{out}");

    // Dry run: nothing changes.
    let (ok, out, _) = stack.operator().redrive(&[&id, "--dry-run"]);
    assert!(ok && out.contains("would redrive"), "{out}");
    assert!(stack.outbox_items().await[0].dead_lettered_at.is_some());

    let (ok, out, err) = stack.operator().redrive(&[
        &id,
        "--now",
        "--bus",
        &bus,
        "--source",
        "outbox.orders",
        "--json",
    ]);
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["deadLetters"][0]["outcome"], "published");
    assert_eq!(json["published"], 1);
    let delivered = stack.drain_subscriber().await;
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0]["detail"]["eventId"], id);
    assert!(stack.outbox_items().await.is_empty());

    // Again: no longer a dead letter, a clear error, nothing published.
    let (ok, _, err) =
        stack
            .operator()
            .redrive(&[&id, "--now", "--bus", &bus, "--source", "outbox.orders"]);
    assert!(!ok);
    assert!(err.contains("no dead letter with event id"), "{err}");
    assert!(stack.drain_subscriber().await.is_empty());
}

#[tokio::test]
async fn bad_arguments_fail_clearly_and_change_nothing() {
    let stack = Stack::new().await;
    // Its functions never ran: nothing recorded (a republish needs a sink).
    stack.forget_settings().await;
    stack.put_event_aged(DAY).await;
    let before = stack.items().await.len();
    let t = stack.table.as_str();
    for (args, expected) in [
        (vec!["status"], "--table <TABLE>"),
        (
            vec!["status", "--table", t, "--bogus"],
            "unexpected argument '--bogus'",
        ),
        (
            vec!["dead-letters", "show", "--table", t, "nope"],
            "not an event id",
        ),
        (
            vec!["dead-letters", "redrive", "--table", t],
            "name the dead letters",
        ),
        (
            vec![
                "dead-letters",
                "discard",
                "--table",
                t,
                "01ARZ3NDEKTSV4RRFFQ69G5FAV",
            ],
            "--yes",
        ),
        (
            vec![
                "dead-letters",
                "discard",
                "--table",
                t,
                "01ARZ3NDEKTSV4RRFFQ69G5FAV",
                "--yes",
            ],
            "no dead letter with event id",
        ),
        (
            vec!["dead-letters", "redrive", "--table", t, "--all", "--now"],
            "no sink settings are recorded in the table",
        ),
        (
            vec!["status", "--table", "no-such-table"],
            "ResourceNotFoundException",
        ),
        (
            vec!["dead-letters", "frobnicate"],
            "unrecognized subcommand",
        ),
        // A command that cannot honour a switch refuses it: discard has no
        // dry run, so `--dry-run` deletes nothing (it did, once).
        (
            vec![
                "dead-letters",
                "discard",
                "--table",
                t,
                "01ARZ3NDEKTSV4RRFFQ69G5FAV",
                "--yes",
                "--dry-run",
            ],
            "unexpected argument '--dry-run'",
        ),
        (
            vec!["status", "--table", t, "--table", t],
            "cannot be used multiple times",
        ),
    ] {
        let (ok, _, err) = outboxctl(&args);
        assert!(!ok, "{args:?} should fail");
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    assert_eq!(stack.items().await.len(), before, "nothing changed");
}

#[tokio::test]
async fn redrive_on_failure_republishes_the_window_and_deletes_the_message() {
    let stack = Stack::with_bus().await;
    for _ in 0..3 {
        stack.put_event_aged(Duration::from_secs(30)).await;
    }
    assert_eq!(stack.outbox_inserts().await.len(), 3);
    let queue = on_failure_queue(&stack).await;
    let (ok, out, err) = redrive_on_failure(&stack, &queue);
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["handled"], 1, "{out}");
    assert_eq!(json["republished"], 3, "{out}");
    assert_eq!(stack.drain_subscriber().await.len(), 3);
    assert!(stack.outbox_items().await.is_empty());
    assert!(
        testkit::drain_queue(&stack.sdk, &queue).await.is_empty(),
        "deleted"
    );
}

/// A message that cannot be settled is kept (it comes back after the
/// visibility timeout) and the command says so with a non-zero exit, after
/// handling everything else in the queue.
#[tokio::test]
async fn redrive_on_failure_exits_non_zero_when_a_message_is_kept() {
    let stack = Stack::with_bus().await;
    stack.put_event_aged(Duration::from_secs(30)).await;
    let message = gave_up(&stack, &stack.outbox_inserts().await);
    let queue = devkit::create_queue(&stack.sdk, &testkit::unique("on-failure"), false)
        .await
        .unwrap()
        .queue_url;
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    for body in ["not an OnFailure message".to_owned(), message.to_string()] {
        sqs.send_message()
            .queue_url(&queue)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let (ok, out, err) = redrive_on_failure(&stack, &queue);
    assert!(!ok, "a kept message fails the command: {out}");
    assert!(err.contains("1 OnFailure messages were kept"), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (json["handled"].as_u64(), json["kept"].as_u64()),
        (Some(1), Some(1)),
        "{out}"
    );
    assert_eq!(json["republished"], 1, "{out}");
}

#[tokio::test]
async fn a_replay_from_the_archive_is_started_and_followed_to_its_end() {
    let stack = Stack::with_bus().await;
    let (bus, _) = stack.bus.clone().unwrap();
    let events = aws_sdk_eventbridge::Client::new(&stack.sdk);
    let archive = stack.archive_of_bus().await;
    let from = OffsetDateTime::now_utc() - time::Duration::minutes(1);
    let detail = serde_json::json!({"eventId": ulid::Ulid::new().to_string()}).to_string();
    events
        .put_events()
        .entries(
            aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
                .event_bus_name(&bus)
                .source("outbox.orders")
                .detail_type("OrderCreated")
                .detail(&detail)
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(stack.drain_subscriber().await.len(), 1);
    let to = OffsetDateTime::now_utc() + time::Duration::minutes(1);
    let rfc = |t: OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };

    let (ok, out, err) = outboxctl(&[
        "replay",
        "--bus",
        &bus,
        "--archive",
        &archive,
        "--from",
        &rfc(from),
        "--to",
        &rfc(to),
        "--rule",
        &format!("{bus}-to-subscriber"),
    ]);
    assert!(ok, "{err}");
    assert!(out.contains("completed"), "{out}");
    let replayed = stack.drain_subscriber().await;
    assert_eq!(replayed.len(), 1, "the archived event again");
    assert_eq!(replayed[0]["detail"]["eventId"].as_str().unwrap(), {
        let v: serde_json::Value = serde_json::from_str(&detail).unwrap();
        v["eventId"].as_str().unwrap().to_owned()
    });

    let (ok, _, err) = outboxctl(&[
        "replay",
        "--bus",
        &bus,
        "--archive",
        "no-such-archive",
        "--from",
        &rfc(from),
        "--to",
        &rfc(to),
    ]);
    assert!(!ok);
    assert!(err.contains("DescribeArchive"), "{err}");
}

/// A redriven dead letter is due at once: dead letters a few minutes old,
/// redriven with `outboxctl` (no `--now`), go out with the next scheduled
/// run of the real `sweeper` binary with its default settings
/// (`STRANDED_AFTER_SECONDS` a day), each once with its own id, while a
/// fresh pending event stays for the stream; `status` then shows no dead
/// letters.
#[tokio::test]
async fn redriven_dead_letters_go_out_with_the_next_scheduled_sweep_whatever_their_age() {
    let stack = Stack::with_bus().await;
    let mut dead = Vec::new();
    for _ in 0..3 {
        dead.push(stack.put_event_aged(Duration::from_secs(300)).await);
    }
    let proxy = FaultProxy::start().await;
    let mut failing = failing_sweeper(&stack, &proxy, 1).await;
    failing.settings.stranded_after = Duration::ZERO;
    let report = failing
        .sweep(OffsetDateTime::now_utc(), &far_deadline())
        .await;
    assert_eq!(report.dead_lettered, 3);
    let fresh = stack.put_event_aged(Duration::from_secs(60)).await;

    let (ok, out, err) = stack.operator().redrive(&["--all"]);
    assert!(ok, "{err}");
    assert_eq!(out.matches("redriven").count(), 3, "{out}");
    assert!(out.contains("next scheduled sweep"), "{out}");

    let sweeper = stack.function(devkit::Function::Sweeper, &[], &[]);
    let scheduled = std::fs::read(testkit::root().join("events/sweeper-scheduled.json")).unwrap();
    let answer = sweeper.invoke(&scheduled).await.expect("scheduled sweep");
    let report: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(report["republished"], 3, "{report}");

    let delivered = stack.drain_subscriber().await;
    let mut ids: Vec<String> = delivered
        .iter()
        .map(|m| m["detail"]["eventId"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    let mut expected: Vec<String> = dead.iter().map(|d| d.event_id.to_string()).collect();
    expected.sort();
    assert_eq!(ids, expected, "each redriven event once, with its own id");

    let left = stack.outbox_items().await;
    assert_eq!(left.len(), 1);
    assert_eq!(
        left[0].event_id, fresh.event_id,
        "the fresh event stays pending"
    );
    let (ok, out, err) = stack.operator().status(&["--json"]);
    assert!(ok, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (status["deadLetters"].as_u64(), status["pending"].as_u64()),
        (Some(0), Some(1))
    );
}

/// Errors carry AWS's reason from the SDK's error metadata, in one line: a
/// missing table names the service's code and message; missing credentials
/// read as such (the instance-metadata provider is disabled, as in every
/// local run, so nothing leaves this machine).
#[tokio::test]
async fn errors_carry_the_reason_in_one_readable_line() {
    let (ok, _, err) = testkit::Operator::new("no-such-table").status(&[]);
    assert!(!ok);
    let line = err.trim();
    assert!(!line.contains('\n'), "{line}");
    assert!(line.contains("ResourceNotFoundException: "), "{line}");

    let binary = testkit::lambda::binary("outboxctl").expect("outboxctl binary");
    let out = Command::new(binary)
        .args(["status", "--table", "t"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env_remove("AWS_SESSION_TOKEN")
        .env_remove("AWS_PROFILE")
        .env("AWS_CONFIG_FILE", "/dev/null")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("run outboxctl");
    assert!(!out.status.success());
    let line = String::from_utf8_lossy(&out.stderr).trim().to_owned();
    assert!(!line.contains('\n'), "{line}");
    assert!(line.contains("no credentials found"), "{line}");
}

/// Issue #25 item 1, through the real binaries: a republish uses the sink
/// settings the stack's own functions recorded. Nothing recorded and
/// nothing given: refused. A flag that disagrees with the record (another
/// source, which no rule matches): refused, nothing changed. No flag: the
/// recorded settings, and the subscriber gets the event.
#[tokio::test]
async fn a_republish_uses_the_settings_the_stack_recorded() {
    let stack = Stack::with_bus().await;
    // Its functions have not run yet.
    stack.forget_settings().await;
    let event = &dead_letters(&stack, 1).await[0];
    let id = event.event_id.to_string();
    let operator = stack.operator();
    let redrive_now = |extra: &[&str]| {
        let mut args = vec![id.as_str(), "--now"];
        args.extend_from_slice(extra);
        operator.redrive(&args)
    };
    let still_dead = || async {
        let items = stack.outbox_items().await;
        items.len() == 1 && items[0].dead_lettered_at.is_some()
    };

    // Nothing recorded, nothing given.
    let (ok, _, err) = redrive_now(&[]);
    assert!(!ok);
    assert!(err.contains("no sink settings are recorded"), "{err}");
    assert!(still_dead().await);

    // The stack's sweeper starts once (a scheduled run) and records its
    // settings (its function name named as Lambda names it).
    let function = stack.function(
        devkit::Function::Sweeper,
        &[],
        &[("AWS_LAMBDA_FUNCTION_NAME", "stack-sweeper")],
    );
    let scheduled = std::fs::read(testkit::root().join("events/sweeper-scheduled.json")).unwrap();
    function.invoke(&scheduled).await.expect("a scheduled run");

    // Another source than the stack's: no rule would match. Refused.
    let (ok, _, err) = redrive_now(&["--source", "shop.orders"]);
    assert!(!ok);
    assert!(err.contains("--source shop.orders disagrees"), "{err}");
    assert!(
        err.contains("recorded by sweeper at"),
        "names who recorded it: {err}"
    );
    let (ok, _, err) = redrive_now(&["--bus", "another-bus"]);
    assert!(!ok && err.contains("--bus another-bus disagrees"), "{err}");
    assert!(still_dead().await, "a refused sink changes nothing");
    assert!(stack.drain_subscriber().await.is_empty());

    // The recorded settings: delivered where the stack's rules listen.
    let (ok, out, err) = redrive_now(&["--json"]);
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["published"], 1, "{out}");
    let delivered = stack.drain_subscriber().await;
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0]["detail"]["eventId"], id);
    assert_eq!(delivered[0]["source"], "outbox.orders");
    assert!(stack.outbox_items().await.is_empty());
}

/// Issue #25 items 5 and 4, through the binary: `--now` publishes exactly
/// the selected dead letters, each once, under a claim: not another dead
/// letter, not a redriven event waiting for the sweep, not a fresh event
/// the stream publisher is handling. A dead letter another operator has
/// claimed is left alone by `--now`, `redrive` and `discard`. A publish that
/// fails exits non-zero and keeps the dead letter, with the reason.
#[tokio::test]
async fn redrive_now_publishes_exactly_the_selection_each_claimed_once() {
    let stack = Stack::with_bus().await;
    let _ = stack.bus.clone().unwrap();
    let letters = dead_letters(&stack, 3).await;
    let (picked, other, waiting) = (&letters[0], &letters[1], &letters[2]);
    // One dead letter redriven without --now (due, for the scheduled sweep),
    // and one fresh event the stream publisher has not handled yet.
    let ops = stack.operations();
    let letter = |id: ulid::Ulid| {
        let ops = &ops;
        async move { ops.find(&id.to_string()).await.unwrap() }
    };
    assert_eq!(
        ops.redrive(&letter(waiting.event_id).await).await.unwrap(),
        Marked::Updated
    );
    let fresh = stack.put_event_aged(Duration::ZERO).await;
    let store = stack.store();
    // The stack's recorded settings give `--now` its bus and source.

    let (ok, out, err) =
        stack
            .operator()
            .redrive(&[&picked.event_id.to_string(), "--now", "--json"]);
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["published"], 1, "{out}");
    let delivered = stack.drain_subscriber().await;
    let ids: Vec<&str> = delivered
        .iter()
        .map(|m| m["detail"]["eventId"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        vec![picked.event_id.to_string()],
        "exactly the selection"
    );
    let left: Vec<ulid::Ulid> = stack
        .outbox_items()
        .await
        .iter()
        .map(|i| i.event_id)
        .collect();
    for untouched in [other.event_id, waiting.event_id, fresh.event_id] {
        assert!(left.contains(&untouched), "{untouched} is untouched");
    }
    assert!(
        !left.contains(&picked.event_id),
        "the published one is deleted"
    );

    // Another operator holds `other` (a live claim): every path leaves it.
    let claim = outbox_runtime::store::Claim::new(Duration::from_secs(300));
    let held = store
        .claim_dead_letter(&letter(other.event_id).await, &claim, &far_deadline())
        .await
        .unwrap();
    assert!(held.is_some(), "claimed");
    let id = other.event_id.to_string();
    let (ok, out, _) = stack.operator().redrive(&[&id, "--now"]);
    assert!(ok && out.contains("skipped"), "{out}");
    let (ok, out, _) = stack.operator().redrive(&[&id]);
    assert!(ok && out.contains("skipped"), "{out}");
    let (ok, out, _) = stack.operator().discard(&[&id, "--yes"]);
    assert!(ok && out.contains("skipped"), "{out}");
    assert!(stack.drain_subscriber().await.is_empty());
    // Its holder gives it up; a publish that fails then exits non-zero and
    // keeps it, with the reason.
    store
        .release_claim(
            &letter(other.event_id).await.key,
            &claim,
            None,
            &far_deadline(),
        )
        .await
        .unwrap();
    let refusing = FaultProxy::start().await;
    refusing.inject("PutEvents", Fault::refuse_all("ThrottlingException"), None);
    let binary = testkit::lambda::binary("outboxctl").unwrap();
    // Awaited, not blocking: the proxy answers on this test's runtime.
    let out = tokio::process::Command::new(binary)
        .args([
            "dead-letters",
            "redrive",
            "--table",
            &stack.table,
            &id,
            "--now",
        ])
        .env("AWS_ENDPOINT_URL", &refusing.endpoint)
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a failed publish fails the command");
    assert!(err.contains("were not published"), "{err}");
    let kept = letter(other.event_id).await;
    assert!(kept.reason.contains("redrive --now"), "{}", kept.reason);
    assert!(stack.drain_subscriber().await.is_empty());

    // Issue #25 item 7: the audit line of a discard names the AWS caller
    // (sts:GetCallerIdentity's ARN) beside the OS user.
    let (ok, _, err) = stack.operator().discard(&[&id, "--yes"]);
    assert!(ok, "{err}");
    let audit: serde_json::Value = err
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .expect("an audit line");
    assert_eq!(audit["outcome"], "discarded");
    let caller = audit["caller"].as_str().unwrap_or_default();
    assert!(caller.starts_with("arn:aws:"), "the AWS caller: {audit}");
    assert!(audit.get("by").is_some());
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

    let (ok, out, err) = stack.operator().status(&["--json"]);
    assert!(ok, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(status["deadLetters"], 1, "{out}");
    assert_eq!(status["settings"]["from"], "recorded", "{out}");
    assert_eq!(status["otherKeys"], serde_json::json!([]), "{out}");
    let (ok, out, err) = stack.operator().list(&["--json"]);
    assert!(ok, "{err}");
    let listed: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(listed.len(), 1, "{out}");
    // A window the mapping gave up on: republished to the recorded sink.
    let event = stack.put_event_aged(Duration::from_secs(30)).await;
    let queue = on_failure_queue(&stack).await;
    let (ok, out, err) = stack
        .operator()
        .redrive_on_failure(&["--queue", &queue, "--json"]);
    assert!(ok, "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(json["handled"], 1, "{out}");
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
    let (ok, out, err) = stack.operator().status(&["--json"]);
    assert!(ok, "{err}");
    let status: serde_json::Value = serde_json::from_str(&out).unwrap();
    let age = status["oldestPendingAgeSeconds"].as_i64().unwrap_or(0);
    assert!((2 * 86_400..2 * 86_400 + 600).contains(&age), "{out}");
}

#[tokio::test]
async fn operator_tools_find_the_stacks_own_keys_on_the_default_table() {
    operator_tools_find_the_stacks_own_keys(Stack::new().await).await;
}

#[tokio::test]
async fn operator_tools_find_the_stacks_own_keys_on_a_table_with_other_names() {
    let schema = outbox_core::KeySchema::from_lookup(|k| {
        Some(
            match k {
                "PARTITION_KEY" => "pk",
                "SORT_KEY" => "sk",
                "OUTBOX_PREFIX" => "evt#",
                "PENDING_INDEX" => "OutboxPending",
                "PENDING_INDEX_PARTITION_KEY" => "opk",
                "PENDING_INDEX_SORT_KEY" => "osk",
                "DEAD_LETTER_INDEX" => "OutboxDead",
                "DEAD_LETTER_INDEX_PARTITION_KEY" => "dpk",
                "DEAD_LETTER_INDEX_SORT_KEY" => "dsk",
                "TTL_ATTRIBUTE" => "ttl",
                _ => return None,
            }
            .to_owned(),
        )
    })
    .unwrap();
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
    let (ok, out, err) = redrive_on_failure(&stack, &queue);
    assert!(!ok, "{out}");
    assert!(err.contains("keys may not be the stack's"), "{err}");
    let json: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (json["handled"].as_u64(), json["kept"].as_u64()),
        (Some(0), Some(1)),
        "{out}"
    );
    assert_eq!(
        stack.outbox_items().await.len(),
        1,
        "the event is still there"
    );
}

/// The message Lambda sends to the OnFailure destination when it gives up
/// a batch of `records` of the stack's stream.
fn gave_up(
    stack: &Stack,
    records: &[aws_lambda_events::event::dynamodb::EventRecord],
) -> serde_json::Value {
    devkit::on_failure_message(
        "arn:aws:lambda:us-east-1:123456789012:function:publisher",
        &stack.stream_arn,
        "shardId-1",
        records,
        "RetryAttemptsExhausted",
        11,
    )
}

/// A queue holding that message for every outbox insert of the stack's
/// stream so far.
async fn on_failure_queue(stack: &Stack) -> String {
    let message = gave_up(stack, &stack.outbox_inserts().await);
    testkit::queue_with(&stack.sdk, "on-failure", &[message.to_string()]).await
}

/// #39 item 5: `redrive-on-failure` honours the stack's ordering, read
/// from the recorded settings. A stack on EventBridge (relaxed by
/// default) deployed with `Ordering=strict`: the window covers A2 only,
/// while A1, older (outside the window's lead), is still pending. Strict
/// holds A2 behind A1 and publishes nothing; relaxed, the control,
/// publishes A2 ahead of A1.
#[tokio::test]
async fn redrive_on_failure_honours_the_stacks_ordering() {
    for ordering in ["strict", "relaxed"] {
        let mut stack = Stack::with_bus().await;
        // The parameter under test.
        stack.deployment = stack
            .deployment
            .clone()
            .with_parameter("Ordering", ordering);
        stack.record_settings().await;
        let a1 = stack
            .put_aggregate_event("a", 1, Duration::from_secs(3_600), 0, 8)
            .await;
        let a2 = stack
            .put_aggregate_event("a", 2, Duration::from_secs(30), 0, 8)
            .await;
        let a2_record: Vec<_> = stack
            .outbox_inserts()
            .await
            .into_iter()
            .filter(|r| {
                serde_json::to_value(&r.change.keys).unwrap_or_default()[outbox_core::keys::SK]["S"]
                    == a2.sk.as_str()
            })
            .collect();
        assert_eq!(a2_record.len(), 1);
        let queue = testkit::queue_with(
            &stack.sdk,
            "on-failure",
            &[gave_up(&stack, &a2_record).to_string()],
        )
        .await;
        let (ok, out, err) = redrive_on_failure(&stack, &queue);
        assert!(ok, "{ordering}: {err}");
        let json: serde_json::Value = serde_json::from_str(&out).unwrap();
        let received = stack.drain_subscriber().await;
        let left = stack.outbox_items().await;
        if ordering == "strict" {
            assert_eq!(json["republished"], 0, "{out}");
            assert!(received.is_empty(), "A2 waits for A1");
            let held = left.iter().find(|i| i.event_id == a2.event_id).unwrap();
            assert_eq!(held.held_behind.as_deref(), Some(a1.sk.as_str()));
        } else {
            assert_eq!(json["republished"], 1, "{out}");
            assert_eq!(received.len(), 1, "relaxed: A2 goes out before A1");
            assert_eq!(left.len(), 1);
        }
    }
}

/// `outboxctl redrive-on-failure` of `queue` on the stack's table and bus,
/// `--json`.
fn redrive_on_failure(stack: &Stack, queue: &str) -> (bool, String, String) {
    let (bus, _) = stack.bus.clone().expect("a stack with a bus");
    stack.operator().redrive_on_failure(&[
        "--queue",
        queue,
        "--bus",
        &bus,
        "--source",
        "outbox.orders",
        "--json",
    ])
}
