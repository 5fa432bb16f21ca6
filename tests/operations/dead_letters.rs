//! Dead letters made by the sweeper's code: listed, shown, redriven (once,
//! even when two operators race) and discarded through the operations
//! port; redriven with `outboxctl` (no `--now`), they go out with the next
//! scheduled sweep whatever their age.

use std::time::Duration;

use outbox_engine::Marked;
use outboxctl::{envelope_of, DeadLetterFilter as Filter, OpsError};
use testkit::proxy::FaultProxy;
use testkit::{far_deadline, Stack};
use time::OffsetDateTime;

use super::{failing_sweeper, DAY};

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
    let report = sweeper.sweep_scheduled().await;
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
    let status = testkit::ok_json(stack.operator().status(&["--json"]));
    assert_eq!(
        (status["deadLetters"].as_u64(), status["pending"].as_u64()),
        (Some(0), Some(1))
    );
}
