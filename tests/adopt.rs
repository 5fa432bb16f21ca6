//! The outbox item contract of `docs/adopt.md`, written by another language:
//! `docs/adopt/write_order.py` (the Python writer package, `clients/python`) writes
//! orders and their events into DynamoDB Local, and the real publisher and
//! sweeper binaries publish them exactly as they publish the Rust writer's:
//! in order and once from the stream, swept when stranded, dead-lettered
//! when poison.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use std::collections::BTreeMap;

use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Put};
use outbox_core::size::EventLimits;
use outbox_core::transaction::{OutboxSettings, OutboxTransaction};
use outbox_core::{keys, EventEnvelope, KeySchema};
use outbox_runtime::DynamoStore;
use testkit::rig::{scheduled, stream_event, Rig};
use testkit::Stack;

/// The Python of the writer package's tests (`make clients-test` installs
/// boto3 and the package into it; make test does).
fn python() -> PathBuf {
    let python = testkit::root().join(".venv-clients/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `make clients-test` (make test does)",
        python.display()
    );
    python
}

/// Runs `docs/adopt/write_order.py` with `args`, on the rig's table; the
/// local endpoints, region and dummy credentials come from the
/// environment `infra/local/with-local.sh` sets.
fn write_order(rig: &Rig, args: &[&str]) -> String {
    write_order_with(rig, &[], args)
}

/// The same with the variables `env` (a key schema).
fn write_order_with(rig: &Rig, env: &[(&str, &str)], args: &[&str]) -> String {
    let script = ["docs/adopt/write_order.py", "--table", &rig.stack.table];
    script_with(env, &[&script[..], args].concat())
}

/// Runs the project's Python with `args`; its standard output.
fn script(args: &[&str]) -> String {
    script_with(&[], args)
}

/// The same with the variables `env`.
fn script_with(env: &[(&str, &str)], args: &[&str]) -> String {
    let out = Command::new(python())
        .args(args)
        .envs(env.iter().copied())
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
    received_counted(rig).await.0
}

/// The same, and how many messages there were (duplicates included).
async fn received_counted(rig: &Rig) -> (BTreeMap<String, Vec<u64>>, usize) {
    let mut seen = std::collections::HashSet::new();
    let mut versions: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let messages = testkit::drain_queue(&rig.stack.sdk, &rig.subscriber).await;
    let count = messages.len();
    for mut message in messages {
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
    (versions, count)
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
from dynamodb_outbox import OutboxTransaction
tx = OutboxTransaction(w.settings(sys.argv[1])).event("ORDER#py-p", "OrderCreated", "Order", "py-p", 1, {})
actions = tx.build()
actions[0]["Put"]["Item"]["envelope"] = {"S": "not json"}
boto3.client("dynamodb").transact_write_items(TransactItems=actions)
print(tx.event_ids[0])
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

/// Runs the TypeScript writer package's example
/// (`clients/typescript/examples/write-order.mjs`) with `args` on the
/// rig's table; its standard output (the event id).
fn write_order_ts(rig: &Rig, args: &[&str]) -> String {
    let dist = testkit::root().join("clients/typescript/dist/src/index.js");
    assert!(
        dist.exists(),
        "{} is missing: run `make clients-test` (make test does)",
        dist.display()
    );
    let example = "clients/typescript/examples/write-order.mjs";
    let out = Command::new("node")
        .args([example, "--table", &rig.stack.table])
        .args(args)
        .current_dir(testkit::root())
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .expect("node runs");
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The TypeScript package, end to end through the real binaries: each event
/// once and in order from the stream under strict ordering, a stranded one
/// swept late by the sweeper, and a poison one dead-lettered with its reason.
#[tokio::test]
async fn events_written_by_typescript_are_published_swept_and_dead_lettered() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "strict", &[]);
    let mut pump = rig.stack.pump(&publisher, Some(&rig.failures));
    write_order_ts(&rig, &["create", "ts-a"]);
    write_order_ts(&rig, &["pay", "ts-a"]);
    write_order_ts(&rig, &["create", "ts-b"]);
    let poison = write_order_ts(&rig, &["poison", "ts-p"]);
    pump.run_until_idle().await.expect("pump");
    assert_eq!(pump.stats.on_failure_messages, 0);
    let got = received(&rig).await;
    assert_eq!(got.get("ts-a"), Some(&vec![1, 2]), "{got:?}");
    assert_eq!(got.get("ts-b"), Some(&vec![1]), "{got:?}");
    assert!(!got.contains_key("ts-p"), "{got:?}");
    let items = rig.stack.outbox_raw().await;
    assert_eq!(items.len(), 1, "only the dead letter is left: {items:?}");
    let text = |name: &str| items[0].get(name).and_then(|v| v.as_s().ok()).cloned();
    assert_eq!(text(keys::attr::EVENT_ID), Some(poison));
    assert!(
        text(keys::attr::DEAD_LETTER_REASON).is_some_and(|r| !r.is_empty()),
        "{items:?}"
    );

    // Stranded: written after the stream was read; swept late. The one
    // override: STRANDED_AFTER_SECONDS=0 instead of the template's day, so
    // that this sweep takes an item written a second ago.
    write_order_ts(&rig, &["create", "ts-c"]);
    let sweeper = rig.function("sweeper", "strict", &[("STRANDED_AFTER_SECONDS", "0")]);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(received(&rig).await.get("ts-c"), Some(&vec![1]));
    assert_eq!(
        rig.stack.outbox_raw().await.len(),
        1,
        "the dead letter only"
    );
}

/// A table unlike ours (#27 item 7): lowercase `pk`/`sk`, an index named
/// `GSI1` that the application uses for something else (keyed `GSI1PK` /
/// `GSI1SK`, the names our default pending index uses), so the outbox's
/// indexes have other names, and the prefix `evt#`.
fn their_schema() -> KeySchema {
    KeySchema {
        partition_key: "pk".into(),
        sort_key: "sk".into(),
        outbox_prefix: "evt#".into(),
        pending_index: "outbox-pending".into(),
        pending_partition_key: "outboxPendingPk".into(),
        pending_sort_key: "outboxPendingSk".into(),
        dead_letter_index: "outbox-dead".into(),
        dead_letter_partition_key: "outboxDeadPk".into(),
        dead_letter_sort_key: "outboxDeadSk".into(),
        ttl_attribute: "ttl".into(),
        home_region: None,
    }
}

/// The variables that give the functions (and the Python example) that
/// schema.
fn their_env() -> Vec<(&'static str, String)> {
    let schema = their_schema();
    vec![
        ("PARTITION_KEY", schema.partition_key),
        ("SORT_KEY", schema.sort_key),
        ("OUTBOX_PREFIX", schema.outbox_prefix),
        ("PENDING_INDEX", schema.pending_index),
        ("PENDING_INDEX_PARTITION_KEY", schema.pending_partition_key),
        ("PENDING_INDEX_SORT_KEY", schema.pending_sort_key),
        ("DEAD_LETTER_INDEX", schema.dead_letter_index),
        (
            "DEAD_LETTER_INDEX_PARTITION_KEY",
            schema.dead_letter_partition_key,
        ),
        ("DEAD_LETTER_INDEX_SORT_KEY", schema.dead_letter_sort_key),
        ("TTL_ATTRIBUTE", schema.ttl_attribute),
    ]
}

/// Events of one aggregate from the Rust writer library, `versions` in
/// order, each in its own transaction with the order's item.
async fn rust_events(rig: &Rig, order: &str, versions: std::ops::RangeInclusive<u64>) {
    rust_events_as(rig, &their_schema(), order, versions).await;
}

/// The same from a writer configured with `schema` (which may differ from
/// the stack's).
async fn rust_events_as(
    rig: &Rig,
    schema: &KeySchema,
    order: &str,
    versions: std::ops::RangeInclusive<u64>,
) {
    let schema = schema.clone();
    let settings = OutboxSettings::new(
        &rig.stack.table,
        EventLimits::eventbridge("outbox.orders"),
        8,
    )
    .with_limits(outbox_core::size::EventLimits::Sns {
        fifo: true,
        max_bytes: outbox_core::size::DEFAULT_SNS_BYTES,
    })
    .with_keys(schema.clone());
    for version in versions {
        let envelope = EventEnvelope::new(
            if version == 1 {
                "OrderCreated"
            } else {
                "OrderPaid"
            },
            "Order",
            order,
            version,
            serde_json::json!({"orderId": order, "version": version}),
        )
        .expect("envelope");
        let pk = format!("ORDER#{order}");
        let item = HashMap::from([
            (schema.partition_key.clone(), AttributeValue::S(pk.clone())),
            (schema.sort_key.clone(), AttributeValue::S("META".into())),
            ("version".to_owned(), AttributeValue::N(version.to_string())),
        ]);
        let put = Put::builder()
            .table_name(&rig.stack.table)
            .set_item(Some(item))
            .build()
            .expect("put");
        OutboxTransaction::new(&settings)
            .put("order", put)
            .event(&pk, &envelope)
            .send(&rig.stack.ddb)
            .await
            .expect("committed");
    }
}

/// Everything published once, in order, nothing left but the poison
/// event's dead letter (listed by the operator's tool with the same
/// schema), from a table with its own key schema: events written by the
/// Python example and by the Rust writer library, published from the
/// stream by the publisher binary (the mapping's filter built from the
/// schema), stranded ones swept by the sweeper binary through the outbox's
/// own pending index; the application's `GSI1` holds its own item only.
#[tokio::test]
async fn a_table_unlike_ours_publishes_everything_once_in_order() {
    let schema = their_schema();
    let stack = Stack::with_schema(&schema, &[("GSI1", "GSI1PK", "GSI1SK")]).await;
    let rig = Rig::on(stack).await;
    let env = their_env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // The application's own item, in its own GSI1.
    rig.stack
        .ddb
        .put_item()
        .table_name(&rig.stack.table)
        .item("pk", AttributeValue::S("CUSTOMER#1".into()))
        .item("sk", AttributeValue::S("PROFILE".into()))
        .item("GSI1PK", AttributeValue::S("EMAIL#a@example.com".into()))
        .item("GSI1SK", AttributeValue::S("CUSTOMER#1".into()))
        .send()
        .await
        .expect("application item");

    let python_env: Vec<(&str, &str)> = env.clone();
    write_order_with(&rig, &python_env, &["create", "py-1"]);
    rust_events(&rig, "rs-1", 1..=2).await;
    write_order_with(&rig, &python_env, &["pay", "py-1"]);
    let poison = r#"
import sys, boto3
sys.path.insert(0, "docs/adopt")
import write_order as w
from dynamodb_outbox import OutboxTransaction
tx = OutboxTransaction(w.settings(sys.argv[1])).event("ORDER#py-poison", "OrderCreated", "Order", "py-poison", 1, {})
actions = tx.build()
actions[0]["Put"]["Item"]["envelope"] = {"S": "not json"}
boto3.client("dynamodb").transact_write_items(TransactItems=actions)
"#;
    script_with(&python_env, &["-c", poison, &rig.stack.table]);

    let publisher = rig.function("publisher", "strict", &env);
    let mut pump = rig.stack.pump_filtered(
        &publisher,
        Some(&rig.failures),
        Some(schema.stream_filter_pattern()),
    );
    pump.run_until_idle().await.expect("pump");
    assert_eq!(pump.stats.on_failure_messages, 0);
    // From the stream, by the publisher.
    let (received, messages) = received_counted(&rig).await;
    assert_eq!(received.get("py-1"), Some(&vec![1, 2]), "{received:?}");
    assert_eq!(received.get("rs-1"), Some(&vec![1, 2]), "{received:?}");
    assert_eq!(received.len(), 2, "the poison event is not published");
    assert_eq!(messages, 4, "each event once");

    // Stranded: written after the stream was read, swept from the outbox's
    // own pending index.
    write_order_with(&rig, &python_env, &["create", "py-2"]);
    rust_events(&rig, "rs-2", 1..=1).await;
    let mut sweeper_env = env.clone();
    sweeper_env.push(("STRANDED_AFTER_SECONDS", "0"));
    let sweeper = rig.function("sweeper", "strict", &sweeper_env);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    rig.invoke(&sweeper, &scheduled()).await;

    let (received, messages) = received_counted(&rig).await;
    assert_eq!(received.get("py-2"), Some(&vec![1]), "{received:?}");
    assert_eq!(received.get("rs-2"), Some(&vec![1]), "{received:?}");
    assert_eq!(received.len(), 2, "{received:?}");
    assert_eq!(messages, 2, "each event once");

    // Left: the poison event's dead letter only, in the outbox's own
    // dead-letter index, which the operator's tool reads.
    let items = rig.stack.items().await;
    let outbox: Vec<_> = items
        .iter()
        .filter(|i| {
            i.get("sk")
                .and_then(|v| v.as_s().ok())
                .is_some_and(|sk| sk.starts_with("evt#"))
        })
        .collect();
    assert_eq!(outbox.len(), 1, "{outbox:?}");
    assert!(outbox[0].contains_key("outboxDeadPk"), "{outbox:?}");
    assert!(outbox[0].contains_key(keys::attr::DEAD_LETTER_REASON));
    // The stack's keys: the schema's names, the region's keys.
    let store = DynamoStore::new(rig.stack.ddb.clone(), &rig.stack.table, 8)
        .with_keys(rig.stack.keys.clone());
    let listed = outboxctl::Operations::new(store)
        .dead_letters(&outboxctl::DeadLetterFilter::default())
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);

    // The application's GSI1 holds its item and nothing of the outbox.
    let gsi1 = rig
        .stack
        .ddb
        .scan()
        .table_name(&rig.stack.table)
        .index_name("GSI1")
        .send()
        .await
        .expect("scan GSI1");
    assert_eq!(gsi1.count(), 1);
}

/// A writer left on the default pending-index names (`GSI1PK`, `GSI1SK`)
/// beside a stack that names them otherwise (#61 finding 1): its items
/// are in no index the stack's sweeper reads.
fn writer_on_defaults() -> KeySchema {
    KeySchema {
        pending_partition_key: keys::PENDING_PK.into(),
        pending_sort_key: keys::PENDING_SK.into(),
        ..their_schema()
    }
}

/// The variables of `schema`, for the functions.
fn env_of(schema: &KeySchema) -> Vec<(&'static str, String)> {
    schema.variables()
}

fn borrowed<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// Strict ordering, two invocations of one shard at once (a
/// `ParallelizationFactor` of 2), a writer on the default index names: A2's
/// invocation comes while A1 is in the table and holds it. At `b82c310` the
/// hold's condition failed on the missing stack keys, read as "gone", and
/// A2's record was consumed: A2 was never published. Now the publisher
/// gives A2 the stack's keys before it holds it, and the sweep releases it.
#[tokio::test]
async fn a_writer_on_other_index_names_loses_nothing_held_behind_an_older_event() {
    let schema = their_schema();
    let stack = Stack::with_schema(&schema, &[("GSI1", "GSI1PK", "GSI1SK")]).await;
    let rig = Rig::on(stack).await;
    let env = env_of(&schema);
    let env = borrowed(&env);
    rust_events_as(&rig, &writer_on_defaults(), "a", 1..=2).await;
    let records = rig.stack.outbox_inserts().await;
    assert_eq!(records.len(), 2);
    // The adopter's table: the functions take its names (the template's
    // key parameters), the writer does not.
    let publisher = rig.function("publisher", "strict", &env);
    for batch in [vec![records[1].clone()], vec![records[0].clone()]] {
        let answer = rig.invoke(&publisher, &stream_event(batch)).await;
        let response: serde_json::Value = serde_json::from_slice(&answer).expect("json");
        assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    }
    let held = rig.stack.outbox_items().await;
    assert_eq!(held.len(), 1, "A2 waits behind A1: {held:?}");
    assert!(
        rig.stack.keys.sweepable(&held[0], 8),
        "A2 carries the stack's pending-index keys: {held:?}"
    );
    let sweeper = rig.function("sweeper", "strict", &env);
    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(rig.received("a").await, vec![1, 2]);
    assert!(rig.stack.outbox_items().await.is_empty());
}

/// Create-and-pay bursts (#61 point 7) from a writer on the default index
/// names, strict ordering at a `ParallelizationFactor` of 2: twelve orders
/// each created and paid at once, the two lanes of the shard invoked at
/// the same time, the pays' lane first. At `b82c310` every pay's hold
/// failed its condition on the missing stack keys, read as "gone", and its
/// record was consumed: no pay was ever published and `status` counted
/// none. Now each pay is given the stack's keys and held, the creates go
/// out, the scheduled sweep releases the pays, every order's events arrive
/// in order, and nothing is left.
#[tokio::test]
async fn create_and_pay_bursts_from_a_writer_on_other_index_names_all_arrive_in_order() {
    let schema = their_schema();
    let stack = Stack::with_schema(&schema, &[("GSI1", "GSI1PK", "GSI1SK")]).await;
    let rig = Rig::on(stack).await;
    let env = env_of(&schema);
    let env = borrowed(&env);
    let orders: Vec<String> = (0..12).map(|i| format!("burst-{i}")).collect();
    for order in &orders {
        rust_events_as(&rig, &writer_on_defaults(), order, 1..=2).await;
    }
    let records = rig.stack.outbox_inserts().await;
    assert_eq!(records.len(), 24);
    let version = |r: &aws_lambda_events::event::dynamodb::EventRecord| {
        r.change
            .new_image
            .get("aggregateVersion")
            .map(|v| format!("{v:?}"))
    };
    let (pays, creates): (Vec<_>, Vec<_>) = records
        .into_iter()
        .partition(|r| version(r).is_some_and(|v| v.contains('2')));
    assert_eq!((pays.len(), creates.len()), (12, 12));
    // Two lanes, two sandboxes, both warm so start-up does not decide it.
    let first = rig.function("publisher", "strict", &env);
    let second = rig.function("publisher", "strict", &env);
    for f in [&first, &second] {
        rig.invoke(f, &stream_event(Vec::new())).await;
    }
    let (pays, creates) = (stream_event(pays), stream_event(creates));
    let (paid, created) = tokio::join!(rig.invoke(&first, &pays), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        rig.invoke(&second, &creates).await
    });
    for answer in [paid, created] {
        let response: serde_json::Value = serde_json::from_slice(&answer).expect("json");
        assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    }
    let sweeper = rig.function("sweeper", "strict", &env);
    rig.invoke(&sweeper, &scheduled()).await;
    // The FIFO subscriber, drained once: each order's versions in the
    // order received, each event once.
    let mut received: HashMap<String, Vec<u64>> = HashMap::new();
    let mut seen = std::collections::HashSet::new();
    for mut message in testkit::drain_queue(&rig.stack.sdk, &rig.subscriber).await {
        if let Some(o) = message.as_object_mut() {
            o.remove("__sqs");
        }
        let e: EventEnvelope = serde_json::from_value(message).expect("an envelope");
        if seen.insert(e.event_id) {
            received
                .entry(e.aggregate_id)
                .or_default()
                .push(e.aggregate_version);
        }
    }
    for order in &orders {
        assert_eq!(received.get(order), Some(&vec![1, 2]), "{order}");
    }
    assert!(rig.stack.outbox_items().await.is_empty(), "nothing left");
}

/// Relaxed ordering, a writer on the default index names, the sink down
/// past the mapping's retries: the batch goes to the OnFailure queue. At
/// `b82c310` the sweeper's OnFailure window read the stack's index, found
/// nothing and settled: the event waited for nobody. Now it was given the
/// stack's keys before its first send, and the window publishes it.
#[tokio::test]
async fn a_writer_on_other_index_names_loses_nothing_to_a_sink_outage() {
    let schema = their_schema();
    let stack = Stack::with_schema(&schema, &[("GSI1", "GSI1PK", "GSI1SK")]).await;
    let rig = Rig::on(stack).await;
    let env = env_of(&schema);
    let env = borrowed(&env);
    let publisher = rig.function("publisher", "relaxed", &env);
    let sweeper = rig.function("sweeper", "relaxed", &env);
    let mut pump = rig.stack.pump_filtered(
        &publisher,
        Some(&rig.failures),
        Some(schema.stream_filter_pattern()),
    );
    rust_events_as(&rig, &writer_on_defaults(), "a", 1..=1).await;
    rig.proxy.inject(
        "PublishBatch",
        testkit::proxy::Fault::refuse_all("InternalError"),
        None,
    );
    pump.run_until_idle().await.expect("pump");
    assert_eq!(pump.stats.on_failure_messages, 1, "the mapping gave up A1");
    rig.proxy.heal();
    let sqs = aws_sdk_sqs::Client::new(&rig.stack.sdk);
    let drained = testkit::lambda::drain_queue_through(&sqs, &rig.failures, &sweeper).await;
    assert_eq!(drained.reported, 0, "the window settled");
    assert_eq!(rig.received("a").await, vec![1]);
    assert!(rig.stack.outbox_items().await.is_empty());
}

/// Key and index attributes named by DynamoDB reserved words (`type`,
/// `date`, `data`, `status`) and by names with `-`, `.` and `#` (#61
/// finding 3): every expression names them through
/// `ExpressionAttributeNames`. The whole pipeline on such a table: the
/// writer's condition, a strict hold, a release by the sweeper's claim, a
/// poison event's dead letter, the operator's list and redrive, and the
/// redriven event dead-lettered again by the sweep. At `b82c310` the hold
/// and the dead letter failed with `ValidationException`.
#[tokio::test]
async fn reserved_words_and_odd_names_run_the_whole_pipeline() {
    let schema = KeySchema {
        partition_key: "type".into(),
        sort_key: "date".into(),
        outbox_prefix: "OUTBOX#".into(),
        pending_index: "pending-index.v1".into(),
        pending_partition_key: "data".into(),
        pending_sort_key: "status".into(),
        dead_letter_index: "dead_letters".into(),
        dead_letter_partition_key: "dead-letter.pk".into(),
        dead_letter_sort_key: "dead#sk".into(),
        ttl_attribute: "expires.at".into(),
        home_region: None,
    };
    schema.validate().expect("a valid schema");
    let stack = Stack::with_schema(&schema, &[]).await;
    let rig = Rig::on(stack).await;
    let env = env_of(&schema);
    let env = borrowed(&env);
    rust_events_as(&rig, &schema, "a", 1..=2).await;
    rust_events_as(&rig, &schema, "p", 1..=1).await;
    // A poison copy of p's event: same aggregate, a new id, an envelope
    // that is not JSON.
    let valid = rig.stack.outbox_raw().await;
    let p1 = valid
        .iter()
        .find(|i| {
            i.get(keys::attr::AGGREGATE_ID)
                .and_then(|v| v.as_s().ok())
                .is_some_and(|a| a == "p")
        })
        .expect("p's event")
        .clone();
    let p1_id = p1
        .get(keys::attr::EVENT_ID)
        .and_then(|v| v.as_s().ok())
        .cloned();
    let id = ulid::Ulid::new().to_string();
    let mut poison = p1.clone();
    poison.insert("date".into(), AttributeValue::S(format!("OUTBOX#{id}")));
    poison.insert("status".into(), AttributeValue::S(id.clone()));
    poison.insert(keys::attr::EVENT_ID.into(), AttributeValue::S(id));
    poison.insert(
        keys::attr::ENVELOPE.into(),
        AttributeValue::S("not json".into()),
    );
    rig.stack
        .ddb
        .delete_item()
        .table_name(&rig.stack.table)
        .key("type", p1["type"].clone())
        .key("date", p1["date"].clone())
        .send()
        .await
        .expect("p1 out of the way");
    rig.stack
        .ddb
        .put_item()
        .table_name(&rig.stack.table)
        .set_item(Some(poison))
        .send()
        .await
        .expect("poison");
    let records: Vec<_> = rig
        .stack
        .outbox_inserts()
        .await
        .into_iter()
        .filter(|r| {
            !matches!(
                r.change.new_image.get(keys::attr::EVENT_ID),
                Some(serde_dynamo::AttributeValue::S(id)) if Some(id) == p1_id.as_ref()
            )
        })
        .collect();
    assert_eq!(records.len(), 3, "A1, A2 and the poison event");

    let publisher = rig.function("publisher", "strict", &env);
    // A2's invocation while A1 is in the table: held.
    for batch in [
        vec![records[1].clone()],
        vec![records[0].clone(), records[2].clone()],
    ] {
        let answer = rig.invoke(&publisher, &stream_event(batch)).await;
        let response: serde_json::Value = serde_json::from_slice(&answer).expect("json");
        assert_eq!(response["batchItemFailures"], serde_json::json!([]));
    }
    let sweeper = rig.function("sweeper", "strict", &env);
    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(rig.received("a").await, vec![1, 2]);

    // The stack's schema: these names, the functions' home region.
    let store = DynamoStore::new(rig.stack.ddb.clone(), &rig.stack.table, 8)
        .with_keys(rig.stack.keys.clone());
    let ops = outboxctl::Operations::new(store);
    let listed = ops
        .dead_letters(&outboxctl::DeadLetterFilter::default())
        .await
        .expect("list");
    assert_eq!(listed.len(), 1, "the poison event: {listed:?}");
    assert_eq!(
        ops.redrive(&listed[0]).await.expect("redrive"),
        outbox_engine::Marked::Updated
    );
    rig.invoke(&sweeper, &scheduled()).await;
    let listed = ops
        .dead_letters(&outboxctl::DeadLetterFilter::default())
        .await
        .expect("list");
    assert_eq!(
        listed.len(),
        1,
        "dead-lettered again by the sweep: {listed:?}"
    );
    let left = rig.stack.outbox_raw().await;
    assert_eq!(left.len(), 1, "the dead letter only: {left:?}");
    assert!(left[0].contains_key("dead-letter.pk"));
    assert!(!left[0].contains_key("data"));
}
