//! The consumer side on the local AWS API: the inbox library and the
//! `projector` keep the read model exactly once in effect under duplicates,
//! every arrival order, concurrent deliveries, unknown types, malformed
//! bodies and throttling; and end to end, writer → publisher → bus → queue
//! → projector (the real binary under the local Lambda runtime).

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use inbox::{EventOutcome, Inbox};
use outbox_core::EventEnvelope;
use projector::{project_batch, Counts, Projector};
use serde_json::json;
use testkit::lambda::{FunctionSpec, LambdaFunction};
use testkit::proxy::{Fault, FaultProxy};
use testkit::{far_deadline, sdk, unique, InProcessPublisher, Item, Stack};

/// A fresh read-model table.
async fn read_model() -> (aws_config::SdkConfig, String) {
    let sdk = sdk().await;
    let table = unique("read-model");
    devkit::create_read_model_table(&sdk, &table)
        .await
        .expect("read-model table");
    (sdk, table)
}

/// A read model fed by a rule on the stack's bus (visibility 1 s).
async fn read_model_on(stack: &Stack) -> (String, devkit::ReadModel) {
    let (bus, _) = stack.bus.clone().expect("stack has a bus");
    let rm = devkit::create_read_model(&stack.sdk, &unique("read-model"), &bus, "outbox.orders", 1)
        .await
        .expect("read model");
    (bus, rm)
}

fn projector(sdk: &aws_config::SdkConfig, table: &str) -> Projector {
    Projector::new(
        aws_sdk_dynamodb::Client::new(sdk),
        Inbox::new(table, inbox::DEFAULT_TTL_SECONDS).unwrap(),
    )
}

/// An order event as the bus delivers it to the queue.
fn order_event(order: &str, customer: &str, version: u64, paid: bool, cents: u64) -> String {
    let event_type = if paid { "OrderPaid" } else { "OrderCreated" };
    let payload = json!({
        "orderId": order, "customerId": customer, "currency": "EUR",
        "items": [{"sku": "A", "quantity": 1, "unitPriceCents": cents}],
        "totalCents": cents, "status": if paid { "PAID" } else { "PENDING" },
        "version": version, "createdAt": "2026-11-30T00:00:00Z", "updatedAt": "2026-11-30T00:00:00Z"
    });
    let envelope = EventEnvelope::new(event_type, "Order", order, version, payload).unwrap();
    bus_message(&envelope)
}

fn bus_message(envelope: &EventEnvelope) -> String {
    json!({
        "version": "0", "id": ulid::Ulid::new().to_string(),
        "detail-type": envelope.event_type, "source": "outbox.orders",
        "account": "123456789012", "time": "2026-11-30T00:00:00Z", "region": "us-east-1",
        "resources": [], "detail": envelope
    })
    .to_string()
}

fn batch(bodies: &[&str]) -> SqsEvent {
    let mut event = SqsEvent::default();
    for (i, body) in bodies.iter().enumerate() {
        let mut message = SqsMessage::default();
        message.message_id = Some(format!("m{i}"));
        message.body = Some((*body).to_owned());
        event.records.push(message);
    }
    event
}

fn failed_ids(response: &SqsBatchResponse) -> Vec<String> {
    response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.clone())
        .collect()
}

/// The real `projector` binary on `table`, under the local Lambda runtime.
fn projector_binary(table: &str) -> LambdaFunction {
    LambdaFunction::new(FunctionSpec {
        name: "projector".into(),
        binary: testkit::lambda::binary("projector").unwrap(),
        env: testkit::lambda::loopback_env()
            .into_iter()
            .chain(testkit::lambda::projector_env(table))
            .collect(),
        timeout: Duration::from_secs(30),
        log: std::env::temp_dir().join(format!("{table}.log")),
    })
}

async fn scan(sdk: &aws_config::SdkConfig, table: &str) -> Vec<Item> {
    devkit::scan_all(&aws_sdk_dynamodb::Client::new(sdk), table)
        .await
        .expect("scan")
}

fn text(item: &Item, name: &str) -> String {
    match item.get(name) {
        Some(AttributeValue::S(s)) => s.clone(),
        Some(AttributeValue::N(n)) => n.clone(),
        _ => String::new(),
    }
}

/// The read model as (customer → summary) and (order → (status, version,
/// cents)), plus the number of inbox records.
#[derive(Debug, Default, PartialEq, Eq)]
struct Model {
    summaries: BTreeMap<String, (u64, u64, u64)>,
    orders: BTreeMap<String, (String, u64, u64)>,
    inbox: usize,
}

async fn model(sdk: &aws_config::SdkConfig, table: &str) -> Model {
    let mut model = Model::default();
    for item in scan(sdk, table).await {
        let (pk, sk) = (text(&item, "PK"), text(&item, "SK"));
        let n = |name: &str| text(&item, name).parse::<u64>().unwrap_or(0);
        if pk.starts_with("INBOX#") {
            model.inbox += 1;
        } else if sk == "SUMMARY" {
            let customer = pk.trim_start_matches("CUSTOMER#").to_owned();
            model
                .summaries
                .insert(customer, (n("orders"), n("paidOrders"), n("paidCents")));
        } else {
            model.orders.insert(
                text(&item, "orderId"),
                (text(&item, "status"), n("version"), n("totalCents")),
            );
        }
    }
    model
}

#[tokio::test]
async fn duplicates_in_one_batch_and_across_batches_apply_once() {
    let (sdk, table) = read_model().await;
    let p = projector(&sdk, &table);
    let created = order_event("o1", "c1", 1, false, 1500);
    let paid = order_event("o1", "c1", 2, true, 1500);

    let (response, counts) =
        project_batch(&p, &batch(&[&created, &created, &paid]), &far_deadline()).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!((counts.applied, counts.duplicate), (2, 1));
    let (response, counts) = project_batch(&p, &batch(&[&paid, &created]), &far_deadline()).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!((counts.applied, counts.duplicate), (0, 2));

    let model = model(&sdk, &table).await;
    assert_eq!(model.summaries["c1"], (1, 1, 1500));
    assert_eq!(model.orders["o1"], ("PAID".into(), 2, 1500));
    assert_eq!(model.inbox, 2, "one inbox record per distinct event");
}

fn permutations<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut all = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, first.clone());
            all.push(tail);
        }
    }
    all
}

#[tokio::test]
async fn every_arrival_order_of_create_and_pay_gives_the_same_read_model() {
    let (sdk, table) = read_model().await;
    let p = projector(&sdk, &table);
    // Each order's create and pay, each delivered twice: every order of
    // those four deliveries, one message per invocation, on its own
    // customer and order.
    let orders = permutations(&["C", "C", "P", "P"]);
    let mut expected = Model::default();
    let mut totals = Counts::default();
    for (n, arrival) in orders.iter().enumerate() {
        let (order, customer) = (format!("o{n}"), format!("c{n}"));
        let cents = 100 + n as u64;
        let created = order_event(&order, &customer, 1, false, cents);
        let paid = order_event(&order, &customer, 2, true, cents);
        for which in arrival {
            let body = if *which == "C" { &created } else { &paid };
            let (response, counts) = project_batch(&p, &batch(&[body]), &far_deadline()).await;
            assert!(response.batch_item_failures.is_empty(), "{arrival:?}");
            totals.applied += counts.applied;
            totals.duplicate += counts.duplicate;
            totals.stale += counts.stale;
        }
        expected.summaries.insert(customer, (1, 1, cents));
        expected.orders.insert(order, ("PAID".into(), 2, cents));
    }
    let got = model(&sdk, &table).await;
    assert_eq!(got.summaries, expected.summaries);
    assert_eq!(got.orders, expected.orders);
    // Pay first: both late creates are Stale (a stale event leaves no
    // inbox record, so its duplicate is Stale again, not Duplicate).
    let pay_first = orders.iter().filter(|o| o[0] == "P").count() as u32;
    assert_eq!(totals.stale, 2 * pay_first);
    assert_eq!(
        totals.applied + totals.duplicate + totals.stale,
        4 * orders.len() as u32
    );
}

#[tokio::test]
async fn concurrent_deliveries_of_one_event_apply_it_once() {
    let (_, table) = read_model().await;
    // Both invocations build and send their transactions concurrently,
    // which is the race the inbox settles.
    let proxy = FaultProxy::start().await;
    let sdk = proxy.sdk().await;
    let a = projector(&sdk, &table);
    let b = projector(&sdk, &table);
    let events: Vec<String> = (0..20)
        .map(|i| order_event(&format!("o{i}"), "c1", 1, false, 10))
        .collect();
    let mut outcomes = Vec::new();
    for body in &events {
        let (x, y) = tokio::join!(a.project(body), b.project(body));
        let mut pair = [x.unwrap().outcome, y.unwrap().outcome];
        pair.sort_by_key(|o| o.as_str());
        outcomes.push(pair);
    }
    for pair in &outcomes {
        assert_eq!(pair, &[EventOutcome::Applied, EventOutcome::Duplicate]);
    }
    let model = model(&sdk, &table).await;
    assert_eq!(model.summaries["c1"], (20, 0, 0));
}

#[tokio::test]
async fn unknown_types_are_ignored_and_malformed_bodies_are_reported() {
    let (sdk, table) = read_model().await;
    let p = projector(&sdk, &table);
    let unknown = bus_message(
        &EventEnvelope::new("OrderShipped", "Order", "o1", 3, json!({"orderId": "o1"})).unwrap(),
    );
    let not_json = "{not json";
    let not_ours =
        json!({"version":"0","id":"x","detail-type":"X","source":"s","detail":{"hello":"world"}})
            .to_string();
    let bad_payload = bus_message(
        &EventEnvelope::new("OrderCreated", "Order", "o2", 1, json!({"orderId": "o2"})).unwrap(),
    );
    let good = order_event("o3", "c3", 1, false, 700);
    // A schema version this projector does not read: ignored, not misread.
    let next_version = bus_message(
        &EventEnvelope::new("OrderCreated", "Order", "o4", 1, json!({"orderId": "o4"}))
            .unwrap()
            .with_schema_version(2),
    );
    let (response, counts) = project_batch(
        &p,
        &batch(&[
            &unknown,
            not_json,
            &not_ours,
            &bad_payload,
            &good,
            &next_version,
        ]),
        &far_deadline(),
    )
    .await;
    assert_eq!(failed_ids(&response), vec!["m1", "m2", "m3"]);
    assert_eq!((counts.ignored, counts.applied, counts.failed), (2, 1, 3));
    let model = model(&sdk, &table).await;
    assert_eq!(model.orders.len(), 1, "nothing written for the others");
    assert_eq!(model.inbox, 1, "an ignored event leaves no inbox record");
}

#[tokio::test]
async fn throttling_on_the_read_model_is_reported_retried_and_applied_once() {
    let (_, table) = read_model().await;
    let proxy = FaultProxy::start().await;
    let sdk = proxy.sdk().await;
    let p = projector(&sdk, &table);
    let created = order_event("o1", "c1", 1, false, 900);
    // More throttles than the SDK's 3 attempts: the message is reported.
    proxy.inject("TransactWriteItems", Fault::Throttle, Some(3));
    let (response, counts) = project_batch(&p, &batch(&[&created]), &far_deadline()).await;
    assert_eq!(failed_ids(&response), vec!["m0"]);
    assert_eq!(counts.failed, 1);
    // Its redelivery applies it; a further one is a duplicate.
    let (response, counts) =
        project_batch(&p, &batch(&[&created, &created]), &far_deadline()).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!((counts.applied, counts.duplicate), (1, 1));
    assert_eq!(model(&sdk, &table).await.summaries["c1"], (1, 0, 0));
}

#[tokio::test]
async fn the_sqs_mapping_emulator_retries_reported_messages_then_dead_letters_them() {
    let stack = Stack::with_bus().await;
    let (_, rm) = read_model_on(&stack).await;
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    for body in ["{not json", &order_event("o1", "c1", 1, false, 5)] {
        sqs.send_message()
            .queue_url(&rm.queue.queue_url)
            .message_body(body)
            .send()
            .await
            .unwrap();
    }
    let p = projector(&stack.sdk, &rm.table);
    let stats = devkit::drain_queue(
        &sqs,
        &rm.queue.queue_url,
        Duration::from_secs(10),
        |event| {
            let p = &p;
            async move {
                let (response, _) = project_batch(p, &event, &far_deadline()).await;
                Ok::<_, String>(failed_ids(&response).into_iter().collect::<HashSet<_>>())
            }
        },
    )
    .await
    .unwrap();
    assert_eq!(stats.deleted, 1, "the good message, once");
    assert_eq!(
        stats.reported,
        devkit::PROJECTOR_MAX_RECEIVES as usize,
        "the malformed one, on each receive"
    );
    let dead = testkit::drain_queue(&stack.sdk, &rm.dead_letters.queue_url).await;
    assert_eq!(dead.len(), 1, "then it is in the dead-letter queue");
    assert_eq!(
        model(&stack.sdk, &rm.table).await.summaries["c1"],
        (1, 0, 0)
    );
}

/// Writer → outbox → stream → publisher → bus → rule → queue → the real
/// `projector` binary under the local Lambda runtime, with a third of the
/// events published twice on the bus: the read model equals what the
/// writer committed.
#[tokio::test]
async fn end_to_end_the_read_model_equals_what_the_writer_committed() {
    let stack = Stack::with_bus().await;
    let (bus, rm) = read_model_on(&stack).await;

    // 200 orders of 20 customers; two in three paid.
    let service = writer::OrderService::from_config(stack.ddb.clone(), &stack.config(&[]));
    let mut committed = BTreeMap::new();
    for i in 0..200u64 {
        let request: writer::CreateOrderRequest = serde_json::from_value(json!({
            "customerId": format!("cust-{}", i % 20), "currency": "EUR",
            "items": [{"sku": "SKU-1", "quantity": 1 + i % 3, "unitPriceCents": 100 + i}]
        }))
        .unwrap();
        let new = writer::NewOrder::try_from(request).unwrap();
        let mut order = match service
            .create(&testkit::test_caller(), new, None, None)
            .await
            .unwrap()
        {
            writer::Reply::Done(order) => order,
            other => panic!("{other:?}"),
        };
        if i % 3 != 0 {
            order = match service
                .pay(&testkit::test_caller(), &order.order_id, None, None)
                .await
                .unwrap()
            {
                writer::Reply::Done(order) => order,
                other => panic!("{other:?}"),
            };
        }
        committed.insert(order.order_id.clone(), order);
    }

    // The stack's archive of the bus (for the rebuild below).
    let events = aws_sdk_eventbridge::Client::new(&stack.sdk);
    let archive = stack.archive_of_bus().await;
    let archived_from = time::OffsetDateTime::now_utc() - time::Duration::minutes(1);

    let (sink, _) = stack.eventbridge_sink();
    let mut pump = stack.pump(InProcessPublisher::new(sink, stack.store()), None);
    pump.run_until_idle().await.unwrap();

    // Duplicates on the bus: every third event published again, as a
    // publisher retry would (same eventId, new EventBridge id).
    let delivered = stack.drain_subscriber_checked().await;
    let mut again = 0;
    for message in delivered.iter().step_by(3) {
        let entry = aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
            .event_bus_name(&bus)
            .source("outbox.orders")
            .detail_type(message["detail-type"].as_str().unwrap())
            .detail(message["detail"].to_string())
            .build();
        events.put_events().entries(entry).send().await.unwrap();
        again += 1;
    }

    let function = projector_binary(&rm.table);
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    let stats = testkit::lambda::drain_queue_through(&sqs, &rm.queue.queue_url, &function).await;
    let events_committed = committed.len() + committed.values().filter(|o| o.version == 2).count();
    assert_eq!(delivered.len(), events_committed);
    assert_eq!(
        stats.deleted,
        events_committed + again,
        "every delivery handled, none reported"
    );
    assert_eq!(stats.reported, 0);

    let mut expected = Model {
        inbox: events_committed,
        ..Model::default()
    };
    for order in committed.values() {
        let paid = order.status == writer::OrderStatus::Paid;
        expected.orders.insert(
            order.order_id.clone(),
            (
                order.status.as_str().to_owned(),
                order.version,
                order.total_cents,
            ),
        );
        let summary = expected
            .summaries
            .entry(order.customer_id.clone())
            .or_default();
        summary.0 += 1;
        if paid {
            summary.1 += 1;
            summary.2 += order.total_cents;
        }
    }
    assert_eq!(model(&stack.sdk, &rm.table).await, expected);

    // Issue #25 item 9: a rebuild by replay rebuilds. The read model is
    // damaged (rows lost, a summary wrong). Replayed into the same table,
    // the events would be `Duplicate` (their inbox records live on) and
    // change nothing; so the runbook's rebuild gives the projector a fresh
    // table (the template's next `ReadModelGeneration`) and replays the
    // archive onto the projector's rule only.
    let ddb = aws_sdk_dynamodb::Client::new(&stack.sdk);
    let s = |v: &str| AttributeValue::S(v.to_owned());
    for order in committed.values().take(10) {
        ddb.delete_item()
            .table_name(&rm.table)
            .key("PK", s(&format!("CUSTOMER#{}", order.customer_id)))
            .key("SK", s(&format!("ORDER#{}", order.order_id)))
            .send()
            .await
            .unwrap();
    }
    assert_ne!(model(&stack.sdk, &rm.table).await, expected, "damaged");
    let next_generation = format!("{}-g2", rm.table);
    devkit::create_read_model_table(&stack.sdk, &next_generation)
        .await
        .unwrap();
    let rebuilt = projector_binary(&next_generation);
    let rfc = |t: time::OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let replay = tokio::process::Command::new(testkit::lambda::binary("outboxctl").unwrap())
        .args([
            "replay",
            "--bus",
            &bus,
            "--archive",
            &archive,
            "--from",
            &rfc(archived_from),
            "--to",
            &rfc(time::OffsetDateTime::now_utc() + time::Duration::minutes(1)),
            "--rule",
            &format!("{bus}-to-{}", rm.table),
        ])
        .output()
        .await
        .unwrap();
    assert!(
        replay.status.success(),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    let stats = testkit::lambda::drain_queue_through(&sqs, &rm.queue.queue_url, &rebuilt).await;
    assert_eq!(stats.reported, 0);
    assert!(stats.deleted >= events_committed, "the archive replayed");
    assert_eq!(
        model(&stack.sdk, &next_generation).await,
        expected,
        "the rebuilt generation equals what the writer committed"
    );
}

/// `cargo lambda invoke projector --data-file events/projector-*.json`:
/// each sample does what docs/consumer.md says, on a fresh read model.
#[tokio::test]
async fn the_sample_events_do_what_the_docs_say() {
    for (sample, applied, duplicate, stale, failed) in [
        ("projector-batch.json", 3, 0, 0, 0),
        ("projector-duplicate.json", 1, 1, 0, 0),
        ("projector-out-of-order.json", 1, 0, 1, 0),
        ("projector-malformed.json", 1, 0, 0, 1),
    ] {
        let (sdk, table) = read_model().await;
        let event: SqsEvent = serde_json::from_str(&testkit::sample(sample)).unwrap();
        let (response, counts) =
            project_batch(&projector(&sdk, &table), &event, &far_deadline()).await;
        assert_eq!(
            (
                counts.applied,
                counts.duplicate,
                counts.stale,
                counts.failed
            ),
            (applied, duplicate, stale, failed),
            "{sample}"
        );
        assert_eq!(
            response.batch_item_failures.len(),
            failed as usize,
            "{sample}"
        );
        if sample == "projector-out-of-order.json" {
            let model = model(&sdk, &table).await;
            assert_eq!(model.summaries["sample-cust-3"], (1, 1, 4200));
        }
    }
}

/// Issue #25 item 8: a guarded action whose *own* condition fails while the
/// stored version is older is not `Stale` (acknowledging it would drop the
/// event); `Stale` is read from the stored item's version.
#[tokio::test]
async fn a_guarded_actions_own_condition_is_never_called_stale() {
    use aws_sdk_dynamodb::types::Update;
    let (sdk, table) = read_model().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let s = |v: &str| AttributeValue::S(v.into());
    client
        .put_item()
        .table_name(&table)
        .item("PK", s("ACCOUNT#a1"))
        .item("SK", s("META"))
        .item("version", AttributeValue::N("2".into()))
        .item("state", s("LOCKED"))
        .send()
        .await
        .expect("seed the account");
    let inbox = Inbox::new(&table, inbox::DEFAULT_TTL_SECONDS).unwrap();
    // Renames only an unlocked account, and only from an older version.
    let rename = |version: u64| {
        let event =
            EventEnvelope::new("AccountRenamed", "Account", "a1", version, json!({})).unwrap();
        let update = Update::builder()
            .table_name(&table)
            .key("PK", s("ACCOUNT#a1"))
            .key("SK", s("META"))
            .update_expression("SET #n = :n, version = :v")
            .condition_expression("#st <> :locked")
            .expression_attribute_names("#n", "name")
            .expression_attribute_names("#st", "state")
            .expression_attribute_values(":n", s("Ada"))
            .expression_attribute_values(":v", AttributeValue::N(version.to_string()))
            .expression_attribute_values(":locked", s("LOCKED"))
            .build()
            .unwrap();
        let tx = inbox
            .begin(&event)
            .unwrap()
            .guarded_update("account", update, version);
        (event, tx)
    };

    // Version 3 against stored 2: the guard holds, the lock fails.
    let (event, tx) = rename(3);
    match tx.commit(&client).await {
        Err(inbox::InboxError::ConditionFailed(failed)) => {
            assert_eq!(failed.len(), 1);
            assert_eq!(failed[0].label, "account");
            let stored = failed[0].item.as_ref().expect("ALL_OLD item");
            assert_eq!(stored["version"].as_n().unwrap(), "2");
        }
        other => panic!("a failed own condition must be an error, got {other:?}"),
    }
    let record = client
        .get_item()
        .table_name(&table)
        .key("PK", s(&inbox::inbox_pk(event.event_id)))
        .key("SK", s("META"))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    assert!(record.item.is_none(), "nothing was written");

    // Version 2 against stored 2: the guard failed: Stale.
    let (_, tx) = rename(2);
    assert_eq!(tx.commit(&client).await.unwrap(), EventOutcome::Stale);
}

/// Issue #25 item 10, through the real binary: a projector configured with
/// an inbox TTL that a redelivery can outlive refuses to start, saying why.
#[test]
fn the_projector_refuses_an_inbox_ttl_shorter_than_the_redelivery_window() {
    let binary = testkit::lambda::binary("projector").expect("projector binary");
    let run = |ttl: &str| {
        std::process::Command::new(&binary)
            .env_clear()
            .envs(testkit::lambda::loopback_env())
            .env("TABLE_NAME", "read-model")
            .env("INBOX_TTL_SECONDS", ttl)
            .env("INBOX_REDELIVERY_WINDOW_SECONDS", "432000")
            // Never reached: the settings are read before the runtime.
            .env("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9")
            .output()
            .expect("run the projector")
    };
    for ttl in ["3600", "432000"] {
        let out = run(ttl);
        assert!(!out.status.success(), "TTL {ttl} must be refused");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains("redelivery window (432000 s"),
            "the reason is given: {text}"
        );
    }
}

/// Issue #25 item 11, through the real projector binary: with the read
/// model's table hung on the wire, the function still answers before its
/// timeout, reporting every message (the one cut in flight and the ones
/// never started), instead of timing out the whole batch. After the table
/// heals, the redelivered batch applies each message once.
#[tokio::test]
async fn a_hung_table_costs_the_batch_its_turn_not_a_timeout() {
    let (_, table) = read_model().await;
    let proxy = FaultProxy::start().await;
    let sdk = proxy.sdk().await;
    let function = LambdaFunction::new(FunctionSpec {
        name: "projector".into(),
        binary: testkit::lambda::binary("projector").unwrap(),
        env: testkit::lambda::loopback_env()
            .into_iter()
            .filter(|(k, _)| !k.starts_with("AWS_ENDPOINT_URL"))
            .chain(devkit::endpoint_env_at(&proxy.endpoint))
            .chain(testkit::lambda::projector_env(&table))
            .collect(),
        // The projector's timeout is 30 s in the template; a short one
        // here, with the same margin.
        timeout: Duration::from_secs(8),
        log: std::env::temp_dir().join(format!("{table}-hung.log")),
    });
    let bodies: Vec<String> = (0..10)
        .map(|i| order_event(&format!("o{i}"), "c1", 1, false, 100))
        .collect();
    let refs: Vec<&str> = bodies.iter().map(String::as_str).collect();
    let event = batch(&refs);
    let payload = serde_json::to_vec(&event).unwrap();

    proxy.inject("TransactWriteItems", Fault::Hang, None);
    let answer = function
        .invoke(&payload)
        .await
        .expect("an answer, not a timeout of the whole batch");
    let response: SqsBatchResponse = serde_json::from_slice(&answer).unwrap();
    let mut reported = failed_ids(&response);
    reported.sort();
    let mut all: Vec<String> = (0..10).map(|i| format!("m{i}")).collect();
    all.sort();
    assert_eq!(reported, all, "every message is reported");
    // Only the first message was started: its attempts (the SDK makes at
    // most 3), not one call per message.
    let calls = proxy.seen("TransactWriteItems");
    assert!(
        (1..=3).contains(&calls),
        "only the first was started: {calls} calls"
    );

    proxy.heal();
    let answer = function.invoke(&payload).await.expect("an answer");
    let response: SqsBatchResponse = serde_json::from_slice(&answer).unwrap();
    assert!(response.batch_item_failures.is_empty());
    let model = model(&sdk, &table).await;
    assert_eq!(model.summaries["c1"], (10, 0, 0), "each order once");
}
