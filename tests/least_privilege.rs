//! Least privilege, measured by request and resource: each function's role
//! in `infra/outbox.yaml` (publisher, sweeper) or `template.yaml` (writer,
//! projector) grants exactly the (action, resource) pairs that are
//! used, no more and no fewer.
//!
//! What is used comes from two places:
//! - **the function's own calls**, seen on the wire by the test proxy while
//!   the real binary runs under the local Lambda runtime, cold start
//!   included; each call is read for the IAM action that authorizes it (a
//!   `TransactWriteItems` by each of its items' kinds) and the resource it
//!   names (table, index, stream, bus, topic, queue);
//! - **the calls the Lambda service makes with the function's role**, which
//!   follow from the function's configuration in the template and AWS's
//!   documentation: its stream mapping (`DescribeStream`, `GetRecords`,
//!   `GetShardIterator`, `ListStreams` on that stream), its SQS mapping
//!   (`ReceiveMessage`, `DeleteMessage`, `GetQueueAttributes` on that queue,
//!   the three the SQS guide lists for the execution role), its OnFailure
//!   destinations (`SendMessage`), its log group (`CreateLogStream`,
//!   `PutLogEvents`) and active tracing (`PutTraceSegments`,
//!   `PutTelemetryRecords`). The local kit's mapping emulators make their
//!   stream and queue reads through the proxy too, so those are seen as
//!   well; logs and traces cannot be seen here.
//!
//! The grants are read from the role's inline policies and from every
//! separate `AWS::IAM::Policy`/`ManagedPolicy` resource attached to it; a
//! managed policy ARN on a role fails the test (it could grant anything).
//! That checker is `least_privilege/policy.rs`; this file runs each
//! function through the proxy and checks its role.

use std::time::Duration;

use serde_yaml_ng::Value;
use testkit::lambda::{drain_queue_through, LambdaFunction};
use testkit::proxy::{Fault, FaultProxy};
use testkit::{api_event, root, unique, Principal, Stack};

mod policy;
use policy::{assert_exact, by_the_service, granted, granted_in, Bindings, Grants};

/// A function binary whose every AWS call goes through `proxy`, with the
/// environment the templates give it on `stack` and the variables `env`
/// on top (each test names why).
fn function(name: &str, stack: &Stack, proxy: &FaultProxy, env: &[(&str, &str)]) -> LambdaFunction {
    let function = devkit::Function::of_binary(name).expect("a function of the stack");
    stack.function_through(function, Some(&proxy.endpoint), &[], env)
}

/// The stream mapping (the local kit's emulator, with the template's
/// settings) into `publisher` until the stream is drained, its stream reads
/// and OnFailure sends made through `proxy`, as Lambda makes them with the
/// function's role.
async fn pump_through(
    proxy: &FaultProxy,
    stack: &Stack,
    publisher: &LambdaFunction,
    on_failure: Option<&str>,
) {
    let proxied = proxy.sdk().await;
    let mapping =
        devkit::MappingSettings::from_template(&root().join(devkit::OUTBOX_TEMPLATE)).unwrap();
    let mut pump = devkit::Pump::new(
        devkit::StreamCursor::new(&proxied, &stack.stream_arn),
        mapping,
        publisher,
        on_failure.map(|url| devkit::OnFailure {
            sqs: aws_sdk_sqs::Client::new(&proxied),
            queue_url: url.to_owned(),
        }),
    )
    .unwrap();
    pump.run_until_idle().await.unwrap();
}

fn queue_name(url: &str) -> String {
    format!("queue/{}", url.rsplit('/').next().unwrap_or(url))
}

/// The bindings of the publisher's and the sweeper's roles on `stack`: its
/// table, `sink` (the bus or the topic, by logical name), the OnFailure
/// queue `failures`, and for the sweeper its operations queue.
fn relay_bindings(
    stack: &Stack,
    sink: (&'static str, String),
    failures: &str,
    sweeper: bool,
) -> Bindings {
    let mut names = vec![
        ("OutboxTable", format!("table/{}", stack.table)),
        sink.clone(),
        ("PublisherFailureQueue", queue_name(failures)),
    ];
    if sweeper {
        names.push(("OperationsDeadLetterQueue", "queue/operations".into()));
    }
    Bindings::new(sink.0 == "EventTopic", &names)
}

/// The publisher's workload, run by `relaxed` then by `strict` (the
/// stack's two orderings), its calls through `proxy`: two orders and a
/// poison event (it passes the mapping's filter, an envelope exists, and is
/// dead-lettered: an UpdateItem; relaxed checks its process's first batch
/// against the table, a BatchGetItem, which strict's guard read does
/// without); then, strict, the payments and a version 2 behind the dead
/// letter, each guarded by a consistent read of its aggregate's collection
/// (Query), the one behind the dead letter held (an UpdateItem); then a
/// lone event, its item deleted with a DeleteItem where the batches took a
/// BatchWriteItem (the stream is read again from its start; strict order
/// skips what is gone and keeps the held one).
async fn publisher_workload(
    stack: &Stack,
    proxy: &FaultProxy,
    (relaxed, strict): (&LambdaFunction, &LambdaFunction),
    failures: Option<&str>,
) {
    let orders = stack.create_orders(2).await;
    stack.put_poison("poison", Some("not json")).await;
    pump_through(proxy, stack, relaxed, failures).await;
    assert_eq!(stack.outbox_raw().await.len(), 1, "the dead letter stays");
    stack.pay_orders(&orders).await;
    stack
        .put_aggregate_event("poison", 2, Duration::ZERO, 0, 8)
        .await;
    pump_through(proxy, stack, strict, failures).await;
    let held = "the dead letter and the event held behind it";
    assert_eq!(stack.outbox_raw().await.len(), 2, "{held}");
    stack.create_orders(1).await;
    pump_through(proxy, stack, strict, failures).await;
    assert_eq!(stack.outbox_raw().await.len(), 2, "the lone event deleted");
}

#[tokio::test]
async fn the_writer_role_grants_what_the_writer_uses() {
    let stack = Stack::new().await;
    let proxy = FaultProxy::start().await;
    let writer = function("writer", &stack, &proxy, &[]);
    let call = |method: &'static str, path: String, key: Option<&'static str>| {
        let writer = &writer;
        async move {
            let body = (path == "/orders").then_some({
                r#"{"customerId":"c-1","currency":"EUR","items":[{"sku":"A-1","quantity":1,"unitPriceCents":100}]}"#
            });
            let mut headers = vec![("content-type", "application/json")];
            if let Some(key) = key {
                headers.push(("idempotency-key", key));
            }
            let event = api_event(
                Principal::Iam(testkit::TEST_CALLER_ARN),
                method,
                &path,
                &headers,
                body,
            );
            let answer = writer
                .invoke(event.to_string().as_bytes())
                .await
                .expect("an answer");
            let response: serde_json::Value = serde_json::from_slice(&answer).unwrap();
            let body: serde_json::Value =
                serde_json::from_str(response["body"].as_str().unwrap_or("null"))
                    .unwrap_or_default();
            (response["statusCode"].as_u64().unwrap_or(0), body)
        }
    };
    // Create, its replay, pay, its replay, get: every path of the API.
    let (status, order) = call("POST", "/orders".into(), Some("lp-create")).await;
    assert_eq!(status, 201, "{order}");
    let id = order["orderId"].as_str().unwrap().to_owned();
    assert_eq!(
        call("POST", "/orders".into(), Some("lp-create")).await.0,
        201
    );
    let pay = format!("/orders/{id}/payment");
    assert_eq!(call("POST", pay.clone(), Some("lp-pay")).await.0, 200);
    assert_eq!(call("POST", pay, Some("lp-pay")).await.0, 200);
    assert_eq!(call("GET", format!("/orders/{id}"), None).await.0, 200);

    let bindings = Bindings::new(false, &[("OutboxTable", format!("table/{}", stack.table))]);
    let seen = proxy.grants_used();
    assert_exact("WriterRole", "WriterFunction", &bindings, &seen);
}

#[tokio::test]
async fn the_publisher_role_grants_what_the_publisher_uses() {
    let stack = Stack::with_bus().await;
    let (bus, _) = stack.bus.clone().unwrap();
    let failures = testkit::queue_with(&stack.sdk, "publisher-failures", &[]).await;
    let proxy = FaultProxy::start().await;
    // The default on a bus (relaxed), then the stack's other ordering
    // (ORDERING=strict, the parameter Ordering's other value).
    let publisher = function("publisher", &stack, &proxy, &[]);
    let strict = function("publisher", &stack, &proxy, &[("ORDERING", "strict")]);
    publisher_workload(&stack, &proxy, (&publisher, &strict), Some(&failures)).await;

    let bus = ("EventBus", format!("event-bus/{bus}"));
    let bindings = relay_bindings(&stack, bus, &failures, false);
    let seen = proxy.grants_used();
    assert_exact("PublisherRole", "PublisherFunction", &bindings, &seen);
    // A copy of the reusable stack whose PublisherRole lacks the Query:
    // this run used it, so the check fails on that copy.
    let text = std::fs::read_to_string(root().join(devkit::OUTBOX_TEMPLATE)).unwrap();
    let without = text.replacen(
        "[dynamodb:BatchWriteItem, dynamodb:DeleteItem, dynamodb:UpdateItem, dynamodb:Query, dynamodb:BatchGetItem]",
        "[dynamodb:BatchWriteItem, dynamodb:DeleteItem, dynamodb:UpdateItem, dynamodb:BatchGetItem]",
        1,
    );
    assert_ne!(without, text, "the copy drops the publisher's Query");
    let copy: Value = devkit::template::parse(&without).unwrap();
    let missing: Vec<_> = seen
        .difference(&granted_in(&copy, "PublisherRole", &bindings))
        .cloned()
        .collect();
    assert_eq!(
        missing,
        vec![(
            "dynamodb:Query".to_owned(),
            format!("table/{}", stack.table)
        )],
        "the copy without Query is caught"
    );
}

#[tokio::test]
async fn the_sweeper_role_grants_what_the_sweeper_uses() {
    let stack = Stack::with_bus().await;
    let (bus, _) = stack.bus.clone().unwrap();
    let failing = stack.put_event_aged(Duration::from_secs(2 * 86_400)).await;
    stack.put_event_aged(Duration::from_secs(3 * 86_400)).await;
    let on_failure =
        serde_json::from_str::<serde_json::Value>(&testkit::sample("sweeper-on-failure.json"))
            .unwrap()["Records"][0]["body"]
            .as_str()
            .unwrap()
            .to_owned();
    let failures = testkit::queue_with(&stack.sdk, "publisher-failures", &[on_failure]).await;

    let proxy = FaultProxy::start().await;
    // One attempt: the event the sink refuses is dead-lettered at once.
    let sweeper = function(
        "sweeper",
        &stack,
        &proxy,
        &[("STRANDED_AFTER_SECONDS", "0"), ("MAX_ATTEMPTS", "1")],
    );
    proxy.inject(
        "PutEvents",
        Fault::refuse(&[failing.event_id.to_string()], "ThrottlingException"),
        None,
    );
    sweeper.sweep_scheduled().await;
    // Redriven by the operator: the next sweep reads its aggregate's item
    // collection (a consistent Query on the table) before sending it again
    // (refused again: a dead letter again).
    let operations = stack.operations();
    let dead = operations
        .dead_letters(&outboxctl::DeadLetterFilter::default())
        .await
        .unwrap();
    assert_eq!(dead.len(), 1);
    operations.redrive(&dead[0]).await.unwrap();
    sweeper.sweep_scheduled().await;
    let left = stack.outbox_items().await;
    assert_eq!(left.len(), 1, "the other one published");
    assert_eq!(left[0].event_id, failing.event_id);
    // The deletes so far were of one item each (a DeleteItem); two
    // stranded events of one aggregate (so of one shard: the sweeper
    // relays shard by shard) published in one sweep are deleted together
    // (a BatchWriteItem).
    let two_days = Duration::from_secs(2 * 86_400);
    stack.put_aggregate_event("both", 1, two_days, 0, 8).await;
    stack.put_aggregate_event("both", 2, two_days, 1, 8).await;
    sweeper.sweep_scheduled().await;
    assert_eq!(stack.outbox_items().await.len(), 1, "both published");
    // A batch the publisher mapping gave up on, through the SQS mapping.
    let proxied = aws_sdk_sqs::Client::new(&proxy.sdk().await);
    drain_queue_through(&proxied, &failures, &sweeper).await;

    let bus = ("EventBus", format!("event-bus/{bus}"));
    let bindings = relay_bindings(&stack, bus, &failures, true);
    let seen = proxy.grants_used();
    assert_exact("SweeperRole", "SweeperFunction", &bindings, &seen);
}

#[tokio::test]
async fn the_sns_branch_grants_what_the_sns_sink_uses() {
    let mut stack = Stack::new().await;
    let (topic_arn, _) = testkit::create_fifo_topic(&stack.sdk, &unique("events"))
        .await
        .unwrap();
    let failures = testkit::queue_with(&stack.sdk, "publisher-failures", &[]).await;
    let proxy = FaultProxy::start().await;
    stack.use_topic(&topic_arn).await;
    // The stack's other ordering first (ORDERING=relaxed, the parameter
    // Ordering's other value), then SNS FIFO's default, strict.
    let relaxed = function("publisher", &stack, &proxy, &[("ORDERING", "relaxed")]);
    let publisher = function("publisher", &stack, &proxy, &[]);
    publisher_workload(&stack, &proxy, (&relaxed, &publisher), None).await;

    let topic = (
        "EventTopic",
        format!("topic/{}", topic_arn.rsplit(':').next().unwrap()),
    );
    let seen = proxy.grants_used();
    let bindings = relay_bindings(&stack, topic.clone(), &failures, false);
    // (Its UpdateItem is the cold start's settings write.)
    assert_exact("PublisherRole", "PublisherFunction", &bindings, &seen);
    // The sweeper publishes through the same adapter: the same SNS grants.
    let sns = |grants: Grants| -> Grants {
        grants
            .into_iter()
            .filter(|(a, _)| a.starts_with("sns:") || a.starts_with("events:"))
            .collect()
    };
    let sweeper_bindings = relay_bindings(&stack, topic, &failures, true);
    assert_eq!(sns(granted("SweeperRole", &sweeper_bindings)), sns(seen));
}

/// The Custom Event Bus branch (`EventBusArn`, the eventbridge-bus sink):
/// its calls (the RPC v2 CBOR protocol, on the local bus) go through the
/// proxy like the others; the roles grant `events:PutEvents` and
/// `events:DescribeEventBus` on that bus's ARN and nothing of the others.
#[tokio::test]
async fn the_custom_bus_branch_grants_what_the_custom_bus_sink_uses() {
    let mut stack = Stack::new().await;
    let bus = devkit::LocalBus::start(&stack.sdk).await.unwrap();
    let (arn, _) = stack.use_custom_bus(&bus).await;
    let failures = testkit::queue_with(&stack.sdk, "publisher-failures", &[]).await;
    let proxy = FaultProxy::start_with_bus(bus.endpoint()).await;
    // The bus's endpoint: the proxy's, as the others are.
    let via = proxy.bus_env();
    let relaxed = function("publisher", &stack, &proxy, &[("ORDERING", "relaxed"), via]);
    let publisher = function("publisher", &stack, &proxy, &[via]);
    publisher_workload(&stack, &proxy, (&relaxed, &publisher), None).await;
    assert!(
        bus.stats().published > 0,
        "published on the Custom Event Bus"
    );

    let resource = ("EventBusArn", arn.splitn(6, ':').nth(5).unwrap().to_owned());
    let seen = proxy.grants_used();
    let bindings = relay_bindings(&stack, resource.clone(), &failures, false);
    assert_exact("PublisherRole", "PublisherFunction", &bindings, &seen);
    let events = |grants: Grants| -> Grants {
        grants
            .into_iter()
            .filter(|(a, _)| a.starts_with("sns:") || a.starts_with("events:"))
            .collect()
    };
    let sweeper_bindings = relay_bindings(&stack, resource, &failures, true);
    assert_eq!(
        events(granted("SweeperRole", &sweeper_bindings)),
        events(seen)
    );
}

/// Large events (#66): with `PayloadBucket` (a team's own bucket), the
/// publisher reads a claim-checked event's object (s3:GetObject on
/// `outbox/*`, seen on the wire); S3 itself consults s3:ListBucket when
/// that object is missing (NoSuchKey rather than AccessDenied: "GetObject",
/// Permissions), which no request shows, so it is added as the service's
/// use. The sweeper's S3 grants are the publisher's.
#[tokio::test]
async fn the_payload_bucket_branch_grants_what_the_claim_check_uses() {
    let mut stack = Stack::with_bus().await;
    let (bus, _) = stack.bus.clone().unwrap();
    let s3 = aws_sdk_s3::Client::new(&stack.sdk);
    let bucket = unique("payloads").to_lowercase();
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    stack.deployment = stack
        .deployment
        .clone()
        .with_parameter("PayloadBucket", &bucket);
    stack.record_settings().await;
    let failures = testkit::queue_with(&stack.sdk, "publisher-failures", &[]).await;
    let proxy = FaultProxy::start().await;
    let publisher = function("publisher", &stack, &proxy, &[]);
    let strict = function("publisher", &stack, &proxy, &[("ORDERING", "strict")]);

    // The large event first, then the publisher's whole workload (which
    // uses every other grant): the large event goes with its first batch.
    let settings = outbox_core::transaction::OutboxSettings::from_stack(&stack.ddb, &stack.table)
        .load()
        .await
        .unwrap();
    let large = outbox_core::EventEnvelope::new(
        "OrderDocumentAttached",
        "Order",
        "o-large",
        1,
        serde_json::json!({"document": "x".repeat(500_000)}),
    )
    .unwrap();
    outbox_core::transaction::OutboxTransaction::new(&settings)
        .event("ORDER#o-large", &large)
        .send_with_payloads(&stack.ddb, &s3)
        .await
        .unwrap();
    publisher_workload(&stack, &proxy, (&publisher, &strict), Some(&failures)).await;
    let published = stack.outbox_raw().await.iter().all(|item| {
        item["eventId"].as_s().map(String::as_str) != Ok(large.event_id.to_string().as_str())
    });
    assert!(published, "the large event was published and deleted");

    let mut seen = proxy.grants_used();
    assert!(
        seen.contains(&("s3:GetObject".to_owned(), format!("{bucket}/outbox/*"))),
        "{seen:?}"
    );
    seen.insert(("s3:ListBucket".to_owned(), bucket.clone()));
    let names = |sweeper: bool| {
        let mut names = vec![
            ("OutboxTable", format!("table/{}", stack.table)),
            ("EventBus", format!("event-bus/{bus}")),
            ("PublisherFailureQueue", queue_name(&failures)),
            ("PayloadBucket", bucket.clone()),
        ];
        if sweeper {
            names.push(("OperationsDeadLetterQueue", "queue/operations".into()));
        }
        Bindings::new(false, &names)
    };
    assert_exact("PublisherRole", "PublisherFunction", &names(false), &seen);
    let s3_only = |grants: Grants| -> Grants {
        grants
            .into_iter()
            .filter(|(a, _)| a.starts_with("s3:"))
            .collect()
    };
    assert_eq!(s3_only(granted("SweeperRole", &names(true))), s3_only(seen));
}

#[tokio::test]
async fn the_projector_role_grants_what_the_projector_uses() {
    let sdk = testkit::sdk().await;
    let table = unique("read-model");
    devkit::create_read_model_table(&sdk, &table).await.unwrap();
    // Every path: new, paid, duplicate, stale, paid before created.
    let order = |id: &str, version: u64, status: &str| {
        let event_type = if status == "PAID" {
            "OrderPaid"
        } else {
            "OrderCreated"
        };
        let envelope = outbox_core::EventEnvelope::new(
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
    let bodies = [
        created.clone(),
        order("o1", 2, "PAID"),
        created,
        order("o2", 2, "PAID"),
        order("o2", 1, "PENDING"),
    ];
    let queue = testkit::queue_with(&sdk, "projector", &bodies).await;
    let proxy = FaultProxy::start().await;
    // The example's stack, its read model this table.
    let mut stack = Stack::new().await;
    stack.deployment.read_model = Some(table.clone());
    let projector = function("projector", &stack, &proxy, &[]);
    let proxied = aws_sdk_sqs::Client::new(&proxy.sdk().await);
    drain_queue_through(&proxied, &queue, &projector).await;

    let bindings = Bindings::new(
        false,
        &[
            ("ReadModelTable", format!("table/{table}")),
            ("ProjectorQueue", queue_name(&queue)),
        ],
    );
    let seen = proxy.grants_used();
    assert_exact("ProjectorRole", "ProjectorFunction", &bindings, &seen);
}

/// Large events (#66) at the example's projector: with `PayloadBucket`, a
/// stub on its queue is resolved from S3 (s3:GetObject on `outbox/*`,
/// seen on the wire, granted by `ProjectorPayloadPolicy`); s3:ListBucket,
/// which S3 consults itself for a missing object, is added as the
/// service's use, as for the publisher.
#[tokio::test]
async fn the_projector_payload_policy_grants_what_resolving_a_stub_uses() {
    let sdk = testkit::sdk().await;
    let table = unique("read-model");
    devkit::create_read_model_table(&sdk, &table).await.unwrap();
    let s3 = aws_sdk_s3::Client::new(&sdk);
    let bucket = unique("payloads").to_lowercase();
    s3.create_bucket().bucket(&bucket).send().await.unwrap();
    let envelope = outbox_core::EventEnvelope::new(
        "OrderCreated",
        "Order",
        "o-large",
        1,
        serde_json::json!({"orderId": "o-large", "customerId": "c", "status": "PENDING",
            "currency": "EUR", "totalCents": 5, "document": "x".repeat(2_000)}),
    )
    .unwrap();
    let body = envelope.to_json().unwrap().into_bytes();
    let reference =
        outbox_core::claim::ClaimCheck::new(&bucket).reference(envelope.event_id, &body);
    s3.put_object()
        .bucket(&bucket)
        .key(&reference.key)
        .body(body.into())
        .send()
        .await
        .unwrap();
    let stub = envelope.stub(reference);
    let message = serde_json::json!({"version": "0", "id": "x", "detail-type": "OrderCreated",
        "source": "outbox.orders", "detail": stub})
    .to_string();
    let queue = testkit::queue_with(&sdk, "projector", &[message]).await;
    let proxy = FaultProxy::start().await;
    let mut stack = Stack::new().await;
    stack.deployment = stack
        .deployment
        .clone()
        .with_parameter("PayloadBucket", &bucket);
    stack.deployment.read_model = Some(table.clone());
    let projector = function("projector", &stack, &proxy, &[]);
    let proxied = aws_sdk_sqs::Client::new(&proxy.sdk().await);
    let stats = drain_queue_through(&proxied, &queue, &projector).await;
    assert_eq!(stats.deleted, 1, "the stub resolved and applied");

    let mut seen = proxy.grants_used();
    assert!(
        seen.contains(&("s3:GetObject".to_owned(), format!("{bucket}/outbox/*"))),
        "{seen:?}"
    );
    seen.insert(("s3:ListBucket".to_owned(), bucket.clone()));
    let bindings = Bindings::new(
        false,
        &[
            ("ReadModelTable", format!("table/{table}")),
            ("ProjectorQueue", queue_name(&queue)),
            ("PayloadBucket", bucket.clone()),
        ],
    );
    assert_exact("ProjectorRole", "ProjectorFunction", &bindings, &seen);
}

/// The checker itself: resources are compared, not only actions; a
/// separate policy resource attached to the role is read; a managed policy
/// is refused.
#[test]
fn the_check_reads_resources_and_separate_policies() {
    let bindings = Bindings::new(
        false,
        &[
            ("OutboxTable", "table/t".to_owned()),
            ("EventBus", "event-bus/b".to_owned()),
            ("PublisherFailureQueue", "queue/f".to_owned()),
        ],
    );
    let granted = granted("PublisherRole", &bindings);
    assert!(granted.contains(&("dynamodb:BatchWriteItem".into(), "table/t".into())));
    assert!(granted.contains(&("events:PutEvents".into(), "event-bus/b".into())));
    assert!(granted.contains(&("dynamodb:GetRecords".into(), "table/t/stream".into())));
    assert!(!granted.contains(&("dynamodb:BatchWriteItem".into(), "table/other".into())));
    let service = by_the_service("PublisherFunction", &bindings);
    assert!(service.contains(&("sqs:SendMessage".into(), "queue/f".into())));
    assert!(service.contains(&("dynamodb:ListStreams".into(), "table/t/stream".into())));

    let synthetic: Value = devkit::template::parse(
        r#"
Resources:
  R:
    Type: AWS::IAM::Role
    Properties:
      Policies:
        - PolicyName: inline
          PolicyDocument:
            Statement:
              - Effect: Allow
                Action: dynamodb:GetItem
                Resource: !GetAtt OutboxTable.Arn
  Extra:
    Type: AWS::IAM::Policy
    Properties:
      Roles: [!Ref R]
      PolicyDocument:
        Statement:
          - Effect: Allow
            Action: [dynamodb:Query]
            Resource: !Sub "${OutboxTable.Arn}/index/GSI1"
  Elsewhere:
    Type: AWS::IAM::Policy
    Properties:
      Roles: [!Ref Other]
      PolicyDocument:
        Statement:
          - Effect: Allow
            Action: dynamodb:DeleteItem
            Resource: !GetAtt OutboxTable.Arn
"#,
    )
    .unwrap();
    assert_eq!(
        granted_in(&synthetic, "R", &bindings),
        Grants::from([
            ("dynamodb:GetItem".to_owned(), "table/t".to_owned()),
            ("dynamodb:Query".to_owned(), "table/t/index/GSI1".to_owned()),
        ])
    );
    let managed: Value = devkit::template::parse(
        "Resources:\n  R:\n    Type: AWS::IAM::Role\n    Properties:\n      ManagedPolicyArns: [arn:aws:iam::aws:policy/AdministratorAccess]\n",
    )
    .unwrap();
    assert!(std::panic::catch_unwind(|| granted_in(&managed, "R", &bindings)).is_err());
}
