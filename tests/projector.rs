//! The consumer side on the local AWS API: the inbox library and the
//! `projector` keep the read model exactly once in effect under duplicates,
//! every arrival order, concurrent deliveries, unknown types, malformed
//! bodies and throttling; and end to end, writer → publisher → bus → queue
//! → projector (the real binary under the local Lambda runtime). The end
//! to end run is here, beside the helpers every module below shares.

mod exactly_once;
mod failures;
mod samples;

use std::collections::BTreeMap;
use std::time::Duration;

use aws_lambda_events::event::sqs::{SqsBatchResponse, SqsEvent, SqsMessage};
use aws_sdk_dynamodb::types::AttributeValue;
use inbox::Inbox;
use outbox_core::EventEnvelope;
use projector::Projector;
use serde_json::json;
use testkit::lambda::{FunctionSpec, LambdaFunction};
use testkit::proxy::FaultProxy;
use testkit::{sdk, unique, InProcessPublisher, Item, Stack};

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
        aws_sdk_s3::Client::new(sdk),
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

/// The real `projector` binary on `table`, under the local Lambda runtime
/// with the function timeout `timeout`, its AWS calls through `proxy` when
/// one is given.
fn projector_binary(table: &str, proxy: Option<&FaultProxy>, timeout: Duration) -> LambdaFunction {
    let endpoints = proxy.map(|p| devkit::endpoint_env_at(&p.endpoint));
    LambdaFunction::new(FunctionSpec {
        name: "projector".into(),
        binary: testkit::lambda::binary("projector").unwrap(),
        env: testkit::lambda::loopback_env()
            .into_iter()
            .filter(|(k, _)| proxy.is_none() || !k.starts_with("AWS_ENDPOINT_URL"))
            .chain(endpoints.into_iter().flatten())
            .chain(testkit::lambda::projector_env(table))
            .collect(),
        timeout,
        log: std::env::temp_dir().join(format!("{}.log", unique(table))),
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
    let done = |reply| match reply {
        writer::Reply::Done(order) => order,
        other => panic!("{other:?}"),
    };
    let mut committed = BTreeMap::new();
    for i in 0..200u64 {
        let request: writer::CreateOrderRequest = serde_json::from_value(json!({
            "customerId": format!("cust-{}", i % 20), "currency": "EUR",
            "items": [{"sku": "SKU-1", "quantity": 1 + i % 3, "unitPriceCents": 100 + i}]
        }))
        .unwrap();
        let new = writer::NewOrder::try_from(request).unwrap();
        let caller = testkit::test_caller();
        let mut order = done(service.create(&caller, new, None, None).await.unwrap());
        if i % 3 != 0 {
            order = done(
                service
                    .pay(&caller, &order.order_id, None, None)
                    .await
                    .unwrap(),
            );
        }
        committed.insert(order.order_id.clone(), order);
    }

    // The stack's archive of the bus (for the rebuild below).
    let events = aws_sdk_eventbridge::Client::new(&stack.sdk);
    let archive = stack.archive_of_bus().await;
    let archived_from = time::OffsetDateTime::now_utc() - time::Duration::minutes(1);

    let (sink, _) = stack.eventbridge_sink();
    let mut pump = stack.pump(
        InProcessPublisher::new(sink, stack.store(), &stack.keys),
        None,
    );
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

    let function = projector_binary(&rm.table, None, Duration::from_secs(30));
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
    let rebuilt = projector_binary(&next_generation, None, Duration::from_secs(30));
    let replay = tokio::process::Command::new(testkit::lambda::binary("outboxctl").unwrap())
        .args(crate::operations::replay_args(
            &bus,
            &archive,
            archived_from,
            time::OffsetDateTime::now_utc() + time::Duration::minutes(1),
            Some(&format!("{bus}-to-{}", rm.table)),
        ))
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
