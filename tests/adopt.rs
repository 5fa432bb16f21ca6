//! The outbox item contract of `docs/adopt.md`, written by another language:
//! `docs/adopt/write_order.py` (boto3, following only that document) writes
//! orders and their events into DynamoDB Local, and the real publisher and
//! sweeper binaries publish them exactly as they publish the Rust writer's:
//! in order and once from the stream, swept when stranded, dead-lettered
//! when poison.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use std::collections::BTreeMap;

use outbox_core::{keys, EventEnvelope};
use testkit::rig::{scheduled, Rig};

/// The project's Python (`make venv` installs boto3 into it).
fn python() -> PathBuf {
    let python = testkit::root().join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `make venv` (make test does)",
        python.display()
    );
    python
}

/// Runs `docs/adopt/write_order.py` with `args`, on the rig's table; the
/// local endpoints, region and dummy credentials come from the
/// environment `infra/local/with-local.sh` sets.
fn write_order(rig: &Rig, args: &[&str]) -> String {
    script(
        &[
            &["docs/adopt/write_order.py", "--table", &rig.stack.table],
            args,
        ]
        .concat(),
    )
}

/// Runs the project's Python with `args`; its standard output.
fn script(args: &[&str]) -> String {
    let out = Command::new(python())
        .args(args)
        .current_dir(testkit::root())
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// What the subscriber received: each aggregate's versions in order (each
/// event once, as a consumer deduplicating by event id sees them). Every
/// message must parse as the Rust `EventEnvelope`.
async fn received(rig: &Rig) -> BTreeMap<String, Vec<u64>> {
    let mut seen = std::collections::HashSet::new();
    let mut versions: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for mut message in testkit::drain_queue(&rig.stack.sdk, &rig.subscriber).await {
        if let Some(o) = message.as_object_mut() {
            o.remove("__sqs");
        }
        let e: EventEnvelope = serde_json::from_value(message).expect("an envelope");
        if seen.insert(e.event_id) {
            versions
                .entry(e.aggregate_id)
                .or_default()
                .push(e.aggregate_version);
        }
    }
    versions
}

/// From the stream: each event once, each order's events in order, the
/// envelope as the document specifies it (it parses as the Rust
/// `EventEnvelope`), nothing left in the table.
#[tokio::test]
async fn events_written_by_python_are_published_in_order_once() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "strict", &[]);
    let mut pump = rig.stack.pump(&publisher, Some(&rig.failures));
    write_order(&rig, &["create", "py-a", "--total", "12.50"]);
    write_order(&rig, &["pay", "py-a"]);
    write_order(&rig, &["create", "py-b"]);
    pump.run_until_idle().await.expect("pump");
    assert_eq!(pump.stats.on_failure_messages, 0);
    let received = received(&rig).await;
    assert_eq!(received.get("py-a"), Some(&vec![1, 2]), "{received:?}");
    assert_eq!(received.get("py-b"), Some(&vec![1]), "{received:?}");
    assert!(rig.stack.outbox_items().await.is_empty(), "all deleted");
}

/// Stranded (the stream never delivered it): the scheduled sweeper finds it
/// through the pending index the document tells writers to fill.
#[tokio::test]
async fn a_stranded_python_event_is_swept() {
    let rig = Rig::new().await;
    let sweeper = rig.function("sweeper", "strict", &[("STRANDED_AFTER_SECONDS", "0")]);
    write_order(&rig, &["create", "py-c"]);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(received(&rig).await.get("py-c"), Some(&vec![1]));
    assert!(rig.stack.outbox_items().await.is_empty(), "all deleted");
}

/// Poison (an envelope that is not JSON, which a buggy writer could
/// commit): the publisher dead-letters it with its reason, `outboxctl`
/// lists it, and the next event of the aggregate is not blocked
/// (relaxed) or waits behind it (strict; not asserted here).
#[tokio::test]
async fn a_poison_python_event_is_dead_lettered() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "relaxed", &[]);
    let mut pump = rig.stack.pump(&publisher, Some(&rig.failures));
    let poison = r#"
import sys, boto3
sys.path.insert(0, "docs/adopt")
import write_order as w
table = sys.argv[1]
env = w.envelope("OrderCreated", "Order", "py-p", 1, {})
action = w.put_event(table, "ORDER#py-p", env, 8)
action["Put"]["Item"]["envelope"] = {"S": "not json"}
boto3.client("dynamodb").transact_write_items(TransactItems=[action])
print(env["eventId"])
"#;
    let id = script(&["-c", poison, &rig.stack.table]);
    pump.run_until_idle().await.expect("pump");
    let items = rig.stack.outbox_raw().await;
    assert_eq!(items.len(), 1, "{items:?}");
    let text = |name: &str| items[0].get(name).and_then(|v| v.as_s().ok()).cloned();
    assert_eq!(text(keys::attr::EVENT_ID), Some(id));
    assert!(text(keys::attr::DEAD_LETTERED_AT).is_some(), "{items:?}");
    assert!(text(keys::attr::DEAD_LETTER_REASON).is_some(), "{items:?}");
    let listed = rig
        .stack
        .operations()
        .dead_letters(&outboxctl::DeadLetterFilter::default())
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert!(received(&rig).await.is_empty());
}
