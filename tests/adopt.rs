//! The outbox item contract of `docs/adopt.md`, written by another language:
//! `docs/adopt/write_order.py` (the Python writer package, `clients/python`) writes
//! orders and their events into DynamoDB Local, and the real publisher and
//! sweeper binaries publish them exactly as they publish the Rust writer's:
//! in order and once from the stream, swept when stranded, dead-lettered
//! when poison.

use std::collections::{BTreeMap, HashMap};
use std::ops::{Deref, RangeInclusive};
use std::time::Duration;

use aws_sdk_dynamodb::types::{AttributeValue, Put};
use outbox_core::keys::attr::{
    AGGREGATE_ID, DEAD_LETTERED_AT, DEAD_LETTER_REASON, ENVELOPE, EVENT_ID,
};
use outbox_core::size::EventLimits;
use outbox_core::transaction::{OutboxSettings, OutboxTransaction};
use outbox_core::{keys, EventEnvelope, KeySchema};
use testkit::lambda::LambdaFunction;
use testkit::rig::{scheduled, stream_event, Rig};
use testkit::scenario::{assert_no_failures, envelopes, node, python, versions};
use testkit::Stack;

/// Runs `docs/adopt/write_order.py` with `args` on the rig's table, with
/// the variables `env` (a key schema).
fn write_order(rig: &Rig, env: &[(&str, &str)], args: &[&str]) -> String {
    let script = ["docs/adopt/write_order.py", "--table", &rig.stack.table];
    python(&[&script[..], args].concat(), env)
}

/// A Python writer's poison event of `order` (an envelope that is not JSON,
/// which a buggy writer could commit); its event id.
fn write_python_poison(rig: &Rig, env: &[(&str, &str)], order: &str) -> String {
    const POISON: &str = r#"
import sys, boto3
sys.path.insert(0, "docs/adopt")
import write_order as w
from dynamodb_outbox import OutboxTransaction
order = sys.argv[2]
tx = OutboxTransaction(w.settings(sys.argv[1])).event("ORDER#" + order, "OrderCreated", "Order", order, 1, {})
actions = tx.build()
actions[0]["Put"]["Item"]["envelope"] = {"S": "not json"}
boto3.client("dynamodb").transact_write_items(TransactItems=actions)
print(tx.event_ids[0])
"#;
    python(&["-c", POISON, &rig.stack.table, order], env)
}

/// Runs the TypeScript writer package's example
/// (`clients/typescript/examples/write-order.mjs`) with `args` on the
/// rig's table; its standard output (the event id).
fn write_order_ts(rig: &Rig, args: &[&str]) -> String {
    let example = ["clients/typescript/examples/write-order.mjs", "--table"];
    node(&[&example[..], &[&rig.stack.table], args].concat(), &[], "")
}

/// What the subscriber received: each aggregate's versions in order (each
/// event once), and how many messages there were (duplicates included).
/// Every message must parse as the Rust `EventEnvelope`.
async fn drained(rig: &Rig) -> (BTreeMap<String, Vec<u64>>, usize) {
    let all = envelopes(&testkit::drain_queue(&rig.stack.sdk, &rig.subscriber).await);
    (versions(&all, true), all.len())
}

/// A raw item's string attribute `name`.
fn text(item: &testkit::Item, name: &str) -> Option<String> {
    item.get(name).and_then(|v| v.as_s().ok()).cloned()
}

/// From the stream: each event once, each order's events in order, the
/// envelope as the document specifies it (it parses as the Rust
/// `EventEnvelope`), nothing left in the table.
#[tokio::test]
async fn events_written_by_python_are_published_in_order_once() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "strict", &[]);
    let mut pump = rig.stack.pump(&publisher, Some(&rig.failures));
    write_order(&rig, &[], &["create", "py-a", "--total", "12.50"]);
    write_order(&rig, &[], &["pay", "py-a"]);
    write_order(&rig, &[], &["create", "py-b"]);
    pump.run_until_idle().await.expect("pump");
    assert_eq!(pump.stats.on_failure_messages, 0);
    let (received, _) = drained(&rig).await;
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
    write_order(&rig, &[], &["create", "py-c"]);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(drained(&rig).await.0.get("py-c"), Some(&vec![1]));
    assert!(rig.stack.outbox_items().await.is_empty(), "all deleted");
}

/// Poison: the publisher dead-letters it with its reason, `outboxctl`
/// lists it, and the next event of the aggregate is not blocked
/// (relaxed) or waits behind it (strict; not asserted here).
#[tokio::test]
async fn a_poison_python_event_is_dead_lettered() {
    let rig = Rig::new().await;
    let publisher = rig.function("publisher", "relaxed", &[]);
    let mut pump = rig.stack.pump(&publisher, Some(&rig.failures));
    let id = write_python_poison(&rig, &[], "py-p");
    pump.run_until_idle().await.expect("pump");
    let items = rig.stack.outbox_raw().await;
    assert_eq!(items.len(), 1, "{items:?}");
    let item = &items[0];
    assert_eq!(text(item, EVENT_ID), Some(id));
    assert!(text(item, DEAD_LETTERED_AT).is_some(), "{items:?}");
    assert!(text(item, DEAD_LETTER_REASON).is_some(), "{items:?}");
    let filter = outboxctl::DeadLetterFilter::default();
    let listed = rig
        .stack
        .operations()
        .dead_letters(&filter)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
    assert!(drained(&rig).await.0.is_empty());
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
    let (got, _) = drained(&rig).await;
    assert_eq!(got.get("ts-a"), Some(&vec![1, 2]), "{got:?}");
    assert_eq!(got.get("ts-b"), Some(&vec![1]), "{got:?}");
    assert!(!got.contains_key("ts-p"), "{got:?}");
    let items = rig.stack.outbox_raw().await;
    assert_eq!(items.len(), 1, "only the dead letter is left: {items:?}");
    assert_eq!(text(&items[0], EVENT_ID), Some(poison));
    let reason = text(&items[0], DEAD_LETTER_REASON);
    assert!(reason.is_some_and(|r| !r.is_empty()), "{items:?}");

    // Stranded: written after the stream was read; swept late. The one
    // override: STRANDED_AFTER_SECONDS=0 instead of the template's day, so
    // that this sweep takes an item written a second ago.
    write_order_ts(&rig, &["create", "ts-c"]);
    let sweeper = rig.function("sweeper", "strict", &[("STRANDED_AFTER_SECONDS", "0")]);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(rig.received("ts-c").await, vec![1]);
    let left = rig.stack.outbox_raw().await;
    assert_eq!(left.len(), 1, "the dead letter only");
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

/// A rig on an adopter's table keyed as `schema` names it, whose functions
/// are given the schema's names as their variables (the template's key
/// parameters).
struct Adopter {
    rig: Rig,
    schema: KeySchema,
    variables: Vec<(&'static str, String)>,
}

impl Deref for Adopter {
    type Target = Rig;
    fn deref(&self) -> &Rig {
        &self.rig
    }
}

impl Adopter {
    /// `schema`'s table, with the application's own `indexes`.
    async fn new(schema: KeySchema, indexes: &[(&str, &str, &str)]) -> Self {
        let rig = Rig::on(Stack::with_schema(&schema, indexes).await).await;
        let variables = schema.variables();
        Self {
            rig,
            schema,
            variables,
        }
    }

    /// [`their_schema`]'s table, with the application's `GSI1`.
    async fn theirs() -> Self {
        Self::new(their_schema(), &[("GSI1", "GSI1PK", "GSI1SK")]).await
    }

    /// The schema's variables (for the Python example too).
    fn env(&self) -> Vec<(&str, &str)> {
        self.variables
            .iter()
            .map(|(k, v)| (*k, v.as_str()))
            .collect()
    }

    /// [`Rig::function`] with the schema's variables, and `extra`.
    fn function(&self, name: &str, ordering: &str, extra: &[(&str, &str)]) -> LambdaFunction {
        self.rig
            .function(name, ordering, &[self.env(), extra.to_vec()].concat())
    }

    /// The publisher mapping of the table, its filter built from the schema.
    fn pump<'a>(&self, publisher: &'a LambdaFunction) -> devkit::Pump<&'a LambdaFunction> {
        let pattern = Some(self.schema.stream_filter_pattern());
        self.stack
            .pump_filtered(publisher, Some(&self.failures), pattern)
    }
}

/// Events of one aggregate from the Rust writer library configured with
/// `schema` (which may differ from the stack's), `versions` in order, each
/// in its own transaction with the order's item.
async fn rust_events(rig: &Rig, schema: &KeySchema, order: &str, versions: RangeInclusive<u64>) {
    let limits = EventLimits::Sns {
        fifo: true,
        max_bytes: outbox_core::size::DEFAULT_SNS_BYTES,
    };
    let settings = OutboxSettings::new(
        &rig.stack.table,
        EventLimits::eventbridge("outbox.orders"),
        8,
    )
    .with_limits(limits)
    .with_keys(schema.clone());
    for version in versions {
        let kind = if version == 1 {
            "OrderCreated"
        } else {
            "OrderPaid"
        };
        let payload = serde_json::json!({"orderId": order, "version": version});
        let envelope =
            EventEnvelope::new(kind, "Order", order, version, payload).expect("envelope");
        let pk = format!("ORDER#{order}");
        let item = HashMap::from([
            (schema.partition_key.clone(), AttributeValue::S(pk.clone())),
            (schema.sort_key.clone(), AttributeValue::S("META".into())),
            ("version".to_owned(), AttributeValue::N(version.to_string())),
        ]);
        let put = Put::builder()
            .table_name(&rig.stack.table)
            .set_item(Some(item));
        OutboxTransaction::new(&settings)
            .put("order", put.build().expect("put"))
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
    let rig = Adopter::theirs().await;
    let schema = their_schema();
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

    write_order(&rig, &rig.env(), &["create", "py-1"]);
    rust_events(&rig, &schema, "rs-1", 1..=2).await;
    write_order(&rig, &rig.env(), &["pay", "py-1"]);
    write_python_poison(&rig, &rig.env(), "py-poison");

    let publisher = rig.function("publisher", "strict", &[]);
    let mut pump = rig.pump(&publisher);
    pump.run_until_idle().await.expect("pump");
    assert_eq!(pump.stats.on_failure_messages, 0);
    // From the stream, by the publisher.
    let (received, messages) = drained(&rig).await;
    assert_eq!(received.get("py-1"), Some(&vec![1, 2]), "{received:?}");
    assert_eq!(received.get("rs-1"), Some(&vec![1, 2]), "{received:?}");
    assert_eq!(received.len(), 2, "the poison event is not published");
    assert_eq!(messages, 4, "each event once");

    // Stranded: written after the stream was read, swept from the outbox's
    // own pending index.
    write_order(&rig, &rig.env(), &["create", "py-2"]);
    rust_events(&rig, &schema, "rs-2", 1..=1).await;
    let sweeper = rig.function("sweeper", "strict", &[("STRANDED_AFTER_SECONDS", "0")]);
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    rig.invoke(&sweeper, &scheduled()).await;

    let (received, messages) = drained(&rig).await;
    assert_eq!(received.get("py-2"), Some(&vec![1]), "{received:?}");
    assert_eq!(received.get("rs-2"), Some(&vec![1]), "{received:?}");
    assert_eq!(received.len(), 2, "{received:?}");
    assert_eq!(messages, 2, "each event once");

    // Left: the poison event's dead letter only (the outbox items are the
    // `sk`s under `evt#`), in the outbox's own dead-letter index, which the
    // operator's tool reads with the stack's keys.
    let outbox = rig.stack.outbox_raw().await;
    assert_eq!(outbox.len(), 1, "{outbox:?}");
    assert!(outbox[0].contains_key("outboxDeadPk"), "{outbox:?}");
    assert!(outbox[0].contains_key(DEAD_LETTER_REASON));
    let filter = outboxctl::DeadLetterFilter::default();
    let listed = rig
        .stack
        .operations()
        .dead_letters(&filter)
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);

    // The application's GSI1 holds its item and nothing of the outbox.
    let gsi1 = rig
        .stack
        .ddb
        .scan()
        .table_name(&rig.stack.table)
        .index_name("GSI1");
    assert_eq!(gsi1.send().await.expect("scan GSI1").count(), 1);
}

/// Strict ordering, two invocations of one shard at once (a
/// `ParallelizationFactor` of 2), a writer on the default index names: A2's
/// invocation comes while A1 is in the table and holds it. At `b82c310` the
/// hold's condition failed on the missing stack keys, read as "gone", and
/// A2's record was consumed: A2 was never published. Now the publisher
/// gives A2 the stack's keys before it holds it, and the sweep releases it.
#[tokio::test]
async fn a_writer_on_other_index_names_loses_nothing_held_behind_an_older_event() {
    let rig = Adopter::theirs().await;
    rust_events(&rig, &writer_on_defaults(), "a", 1..=2).await;
    let records = rig.stack.outbox_inserts().await;
    assert_eq!(records.len(), 2);
    // The adopter's table: the functions take its names (the template's
    // key parameters), the writer does not.
    let publisher = rig.function("publisher", "strict", &[]);
    for batch in [vec![records[1].clone()], vec![records[0].clone()]] {
        assert_no_failures(&rig.invoke(&publisher, &stream_event(batch)).await);
    }
    let held = rig.stack.outbox_items().await;
    assert_eq!(held.len(), 1, "A2 waits behind A1: {held:?}");
    let sweepable = rig.stack.keys.sweepable(&held[0], 8);
    assert!(
        sweepable,
        "A2 carries the stack's pending-index keys: {held:?}"
    );
    let sweeper = rig.function("sweeper", "strict", &[]);
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
    let rig = Adopter::theirs().await;
    let orders: Vec<String> = (0..12).map(|i| format!("burst-{i}")).collect();
    for order in &orders {
        rust_events(&rig, &writer_on_defaults(), order, 1..=2).await;
    }
    let records = rig.stack.outbox_inserts().await;
    assert_eq!(records.len(), 24);
    let version = |r: &aws_lambda_events::event::dynamodb::EventRecord| {
        let v = r.change.new_image.get("aggregateVersion");
        v.map(|v| format!("{v:?}"))
    };
    let (pays, creates): (Vec<_>, Vec<_>) = records
        .into_iter()
        .partition(|r| version(r).is_some_and(|v| v.contains('2')));
    assert_eq!((pays.len(), creates.len()), (12, 12));
    // Two lanes, two sandboxes, both warm so start-up does not decide it.
    let first = rig.function("publisher", "strict", &[]);
    let second = rig.function("publisher", "strict", &[]);
    for f in [&first, &second] {
        rig.invoke(f, &stream_event(Vec::new())).await;
    }
    let (pays, creates) = (stream_event(pays), stream_event(creates));
    let (paid, created) = tokio::join!(rig.invoke(&first, &pays), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        rig.invoke(&second, &creates).await
    });
    assert_no_failures(&paid);
    assert_no_failures(&created);
    let sweeper = rig.function("sweeper", "strict", &[]);
    rig.invoke(&sweeper, &scheduled()).await;
    // The FIFO subscriber, drained once: each order's versions in the
    // order received, each event once.
    let (received, _) = drained(&rig).await;
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
    let rig = Adopter::theirs().await;
    let publisher = rig.function("publisher", "relaxed", &[]);
    let sweeper = rig.function("sweeper", "relaxed", &[]);
    let mut pump = rig.pump(&publisher);
    rust_events(&rig, &writer_on_defaults(), "a", 1..=1).await;
    let outage = testkit::proxy::Fault::refuse_all("InternalError");
    rig.proxy.inject("PublishBatch", outage, None);
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
    let rig = Adopter::new(schema.clone(), &[]).await;
    rust_events(&rig, &schema, "a", 1..=2).await;
    rust_events(&rig, &schema, "p", 1..=1).await;
    // A poison copy of p's event: same aggregate, a new id, an envelope
    // that is not JSON.
    let valid = rig.stack.outbox_raw().await;
    let p1 = valid
        .iter()
        .find(|i| text(i, AGGREGATE_ID).as_deref() == Some("p"))
        .expect("p's event")
        .clone();
    let p1_id = text(&p1, EVENT_ID);
    let id = ulid::Ulid::new().to_string();
    let mut poison = p1.clone();
    poison.insert("date".into(), AttributeValue::S(format!("OUTBOX#{id}")));
    poison.insert("status".into(), AttributeValue::S(id.clone()));
    poison.insert(EVENT_ID.into(), AttributeValue::S(id));
    let not_json = AttributeValue::S("not json".into());
    poison.insert(ENVELOPE.into(), not_json);
    rig.stack
        .ddb
        .delete_item()
        .table_name(&rig.stack.table)
        .key("type", p1["type"].clone())
        .key("date", p1["date"].clone())
        .send()
        .await
        .expect("p1 out of the way");
    rig.stack.put_raw(poison).await;
    let records: Vec<_> = rig
        .stack
        .outbox_inserts()
        .await
        .into_iter()
        .filter(|r| {
            !matches!(
                r.change.new_image.get(EVENT_ID),
                Some(serde_dynamo::AttributeValue::S(id)) if Some(id) == p1_id.as_ref()
            )
        })
        .collect();
    assert_eq!(records.len(), 3, "A1, A2 and the poison event");

    let publisher = rig.function("publisher", "strict", &[]);
    // A2's invocation while A1 is in the table: held.
    for batch in [
        vec![records[1].clone()],
        vec![records[0].clone(), records[2].clone()],
    ] {
        assert_no_failures(&rig.invoke(&publisher, &stream_event(batch)).await);
    }
    let sweeper = rig.function("sweeper", "strict", &[]);
    rig.invoke(&sweeper, &scheduled()).await;
    assert_eq!(rig.received("a").await, vec![1, 2]);

    // The stack's schema: these names, the functions' home region.
    let ops = rig.stack.operations();
    let filter = outboxctl::DeadLetterFilter::default();
    let listed = ops.dead_letters(&filter).await.expect("list");
    assert_eq!(listed.len(), 1, "the poison event: {listed:?}");
    let redriven = ops.redrive(&listed[0]).await.expect("redrive");
    assert_eq!(redriven, outbox_engine::Marked::Updated);
    rig.invoke(&sweeper, &scheduled()).await;
    let listed = ops.dead_letters(&filter).await.expect("list");
    let again = "dead-lettered again by the sweep";
    assert_eq!(listed.len(), 1, "{again}: {listed:?}");
    let left = rig.stack.outbox_raw().await;
    assert_eq!(left.len(), 1, "the dead letter only: {left:?}");
    assert!(left[0].contains_key("dead-letter.pk"));
    assert!(!left[0].contains_key("data"));
}
