//! `outboxctl dead-letters redrive --now` through the binary: it publishes
//! with the original `eventId`, to the sink settings the stack recorded,
//! exactly the selected dead letters, each under a claim.

use std::time::Duration;

use outbox_engine::{Marked, OperatorStore, PublishStore};
use testkit::proxy::{Fault, FaultProxy};
use testkit::{far_deadline, ok_json, Stack};

use super::dead_letters;

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

    let now = [
        id.as_str(),
        "--now",
        "--bus",
        bus.as_str(),
        "--source",
        "outbox.orders",
    ];
    let json = ok_json(stack.operator().redrive(&[&now[..], &["--json"]].concat()));
    assert_eq!(json["deadLetters"][0]["outcome"], "published");
    assert_eq!(json["published"], 1);
    let delivered = stack.drain_subscriber().await;
    assert_eq!(delivered.len(), 1);
    assert_eq!(delivered[0]["detail"]["eventId"], id);
    assert!(stack.outbox_items().await.is_empty());

    // Again: no longer a dead letter, a clear error, nothing published.
    let (ok, _, err) = stack.operator().redrive(&now);
    assert!(!ok);
    assert!(err.contains("no dead letter with event id"), "{err}");
    assert!(stack.drain_subscriber().await.is_empty());
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
    function.sweep_scheduled().await;

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
    let json = ok_json(redrive_now(&["--json"]));
    assert_eq!(json["published"], 1, "{json}");
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

    let picked_id = picked.event_id.to_string();
    let json = ok_json(stack.operator().redrive(&[&picked_id, "--now", "--json"]));
    assert_eq!(json["published"], 1, "{json}");
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
    let claim = outbox_engine::Claim::new(Duration::from_secs(300));
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
