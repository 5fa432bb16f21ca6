//! Least privilege, measured: each function's role in `template.yaml` grants
//! exactly the data-plane actions its function calls. The calls are seen on
//! the wire (the fault proxy, passing everything) while the writer, the
//! publisher, the sweeper and the projector do all they do; the roles are read from the
//! template (the EventBridge branch of `!If [UseSns, …]`; the SNS branch is
//! checked against the SNS adapter's calls).

use std::collections::BTreeSet;
use std::time::Duration;

use lambda_runtime::LambdaEvent;
use outbox_core::publish::sns::SnsSink;
use outbox_core::publish::EventSink;
use outbox_core::{EventEnvelope, OutboxItem};
use serde_yaml_ng::Value;
use sweeper::{SweepSettings, Sweeper};
use testkit::proxy::{Fault, FaultProxy};
use testkit::{far_deadline, fast_retry, root, Stack};

/// Actions the Lambda service makes with a function's role, not the
/// function: reading the stream and the OnFailure queue for the mappings,
/// sending to the OnFailure destination, logs and traces.
fn made_by_the_service(action: &str) -> bool {
    matches!(
        action,
        "dynamodb:DescribeStream"
            | "dynamodb:GetRecords"
            | "dynamodb:GetShardIterator"
            | "dynamodb:ListStreams"
    ) || ["sqs:", "logs:", "xray:"]
        .iter()
        .any(|p| action.starts_with(p))
}

/// The actions of a role's inline policies, the `sns` branch of
/// `!If [UseSns, …]` when `sns`, the other otherwise.
fn role_actions(role: &str, sns: bool) -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    let template: Value = serde_yaml_ng::from_str(&text).unwrap();
    let statements = template["Resources"][role]["Properties"]["Policies"]
        .as_sequence()
        .unwrap()
        .iter()
        .flat_map(|p| {
            p["PolicyDocument"]["Statement"]
                .as_sequence()
                .cloned()
                .unwrap_or_default()
        })
        .collect::<Vec<_>>();
    let mut actions = BTreeSet::new();
    for statement in statements {
        let statement = match &statement {
            Value::Tagged(tagged) if tagged.tag == "!If" => {
                let branches = tagged.value.as_sequence().unwrap();
                assert_eq!(branches[0].as_str(), Some("UseSns"), "{role}");
                branches[if sns { 1 } else { 2 }].clone()
            }
            other => other.clone(),
        };
        match &statement["Action"] {
            Value::String(a) => {
                actions.insert(a.clone());
            }
            Value::Sequence(list) => {
                actions.extend(list.iter().filter_map(|a| a.as_str().map(str::to_owned)))
            }
            other => panic!("{role}: unexpected Action {other:?}"),
        }
    }
    actions
        .into_iter()
        .filter(|a| !made_by_the_service(a))
        .collect()
}

/// The calls seen, as IAM actions, read from each request by the proxy (a
/// `TransactWriteItems` is authorized by the action of each of its items).
fn called(proxy: &FaultProxy) -> BTreeSet<String> {
    proxy.actions()
}

#[tokio::test]
async fn the_writer_role_grants_what_the_writer_calls() {
    let stack = Stack::new().await;
    let proxy = FaultProxy::start().await;
    let ddb = aws_sdk_dynamodb::Client::new(&proxy.sdk().await);
    let config = stack.config(&[]);
    // Cold start, twice: the second finds the mark already there.
    for _ in 0..2 {
        outbox_core::store::record_shard_count(&ddb, &stack.table, config.outbox_shards)
            .await
            .unwrap();
    }
    let service = writer::OrderService::from_config(ddb, &config);
    let key = writer::IdempotencyKey::parse("least-privilege").unwrap();
    let request = || {
        writer::NewOrder::try_from(
            serde_json::from_value::<writer::CreateOrderRequest>(serde_json::json!({
                "customerId": "c-1", "currency": "EUR",
                "items": [{"sku": "A-1", "quantity": 1, "unitPriceCents": 100}]
            }))
            .unwrap(),
        )
        .unwrap()
    };
    let order = match service
        .create(&testkit::test_caller(), request(), Some(&key), None)
        .await
        .unwrap()
    {
        writer::Reply::Done(order) => order,
        other => panic!("{other:?}"),
    };
    service
        .create(&testkit::test_caller(), request(), Some(&key), None)
        .await
        .unwrap();
    service
        .pay(&testkit::test_caller(), &order.order_id, None, None)
        .await
        .unwrap();
    service
        .get(&testkit::test_caller(), &order.order_id)
        .await
        .unwrap();
    assert_eq!(called(&proxy), role_actions("WriterRole", false));
}

#[tokio::test]
async fn the_publisher_role_grants_what_the_publisher_calls() {
    let stack = Stack::with_bus().await;
    stack.create_orders(2).await;
    // An envelope that is not JSON: it passes the mapping's filter (an
    // envelope exists) and cannot be published.
    stack.put_poison("poison", Some("not json")).await;
    let records = stack.stream().read().await.unwrap();

    let proxy = FaultProxy::start().await;
    let (sink, store) = stack.through(&proxy, 8).await;
    sink.verify().await.unwrap();
    let mut publisher = publisher::Publisher::new(sink, store);
    publisher.retry = fast_retry();
    let report = publisher.process(records, &far_deadline()).await.unwrap();
    assert_eq!((report.published, report.dead_lettered), (2, 1));
    assert_eq!(called(&proxy), role_actions("PublisherRole", false));
}

#[tokio::test]
async fn the_sweeper_role_grants_what_the_sweeper_calls() {
    let stack = Stack::with_bus().await;
    let failing = stack.put_event_aged(Duration::from_secs(2 * 86_400)).await;
    stack.put_event_aged(Duration::from_secs(3 * 86_400)).await;
    let proxy = FaultProxy::start().await;
    let (sink, store) = stack.through(&proxy, 8).await;
    sink.verify().await.unwrap();
    proxy.inject(
        "PutEvents",
        Fault::refuse(&[failing.event_id.to_string()], "ThrottlingException"),
        None,
    );
    let mut sweeper = Sweeper::new(sink, store, SweepSettings::from(&stack.config(&[])));
    sweeper.retry = fast_retry();
    // Two scheduled runs (the second finds the shard mark already there),
    // then an OnFailure message.
    for _ in 0..2 {
        let event = serde_json::from_str(&testkit::sample("sweeper-scheduled.json")).unwrap();
        sweeper::handler(&sweeper, LambdaEvent::new(event, testkit::context()))
            .await
            .unwrap();
    }
    let event = serde_json::from_str(&testkit::sample("sweeper-on-failure.json")).unwrap();
    sweeper::handler(&sweeper, LambdaEvent::new(event, testkit::context()))
        .await
        .unwrap();
    assert_eq!(
        stack.outbox_items().await.len(),
        1,
        "one republished, one backing off"
    );
    assert_eq!(called(&proxy), role_actions("SweeperRole", false));
}

#[tokio::test]
async fn the_sns_branch_grants_what_the_sns_sink_calls() {
    let stack = Stack::new().await;
    let (topic_arn, _) = devkit::create_fifo_topic(&stack.sdk, &testkit::unique("events"))
        .await
        .unwrap();
    stack.create_orders(2).await;
    let records = stack.stream().read().await.unwrap();
    let proxy = FaultProxy::start().await;
    let sdk = proxy.sdk().await;
    let sink = SnsSink::new(aws_sdk_sns::Client::new(&sdk), topic_arn);
    sink.verify().await.unwrap();
    let items: Vec<OutboxItem> = records
        .iter()
        .filter_map(|r| OutboxItem::from_item(r.change.new_image.clone()).ok())
        .collect();
    let refs: Vec<&OutboxItem> = items.iter().collect();
    assert!(sink.publish_batch(&refs).await.iter().all(Result::is_ok));
    let sink_actions: BTreeSet<String> = called(&proxy);
    for role in ["PublisherRole", "SweeperRole"] {
        let sns: BTreeSet<String> = role_actions(role, true)
            .into_iter()
            .filter(|a| a.starts_with("sns:"))
            .collect();
        assert_eq!(sns, sink_actions, "{role}");
        assert!(
            role_actions(role, true)
                .iter()
                .all(|a| !a.starts_with("events:")),
            "{role}: no EventBridge action in SNS mode"
        );
    }
}

#[tokio::test]
async fn the_projector_role_grants_what_the_projector_calls() {
    let sdk = testkit::sdk().await;
    let table = testkit::unique("read-model");
    devkit::create_read_model_table(&sdk, &table).await.unwrap();
    let proxy = FaultProxy::start().await;
    let projector = projector::Projector::new(
        aws_sdk_dynamodb::Client::new(&proxy.sdk().await),
        inbox::Inbox::new(&table, inbox::DEFAULT_TTL_SECONDS).unwrap(),
    );
    // Every path: new, paid, duplicate, stale, paid before created.
    let order = |id: &str, version: u64, status: &str| {
        let event_type = if status == "PAID" {
            "OrderPaid"
        } else {
            "OrderCreated"
        };
        let envelope = EventEnvelope::new(
            event_type,
            "Order",
            id,
            version,
            serde_json::json!({"orderId": id, "customerId": "c", "status": status,
                "currency": "EUR", "totalCents": 5}),
        )
        .unwrap();
        serde_json::json!({"version": "0", "id": "x", "detail-type": event_type,
            "source": "outbox.orders", "detail": envelope})
        .to_string()
    };
    let created = order("o1", 1, "PENDING");
    for body in [
        created.clone(),
        order("o1", 2, "PAID"),
        created,
        order("o2", 2, "PAID"),
        order("o2", 1, "PENDING"),
    ] {
        projector.project(&body).await.unwrap();
    }
    assert_eq!(called(&proxy), role_actions("ProjectorRole", false));
}
