//! The `eventbridge-bus` sink (an EventBridge Custom Event Bus) through
//! the real publisher and sweeper binaries, their environment from the
//! templates at `Sink=eventbridge-bus`, publishing to the local bus
//! (`devkit::LocalBus`) whose FIFO subscriber forwards to an SQS FIFO queue
//! on moto. The one variable the templates do not give is the local bus's
//! endpoint (`AWS_ENDPOINT_URL_EVENTBRIDGEV2`, loopback), as the other
//! local endpoints come from `with-local.sh`.

use std::collections::BTreeMap;
use std::time::Duration;

use devkit::{LocalBus, BUS_ENDPOINT_ENV};
use testkit::lambda::LambdaFunction;
use testkit::Stack;

struct BusStack {
    stack: Stack,
    bus: LocalBus,
    subscriber: String,
}

async fn bus_stack() -> BusStack {
    let mut stack = Stack::new().await;
    let bus = LocalBus::start(&stack.sdk).await.expect("the local bus");
    let (_, queue) = stack.use_custom_bus(&bus).await;
    BusStack {
        stack,
        bus,
        subscriber: queue.queue_url,
    }
}

impl BusStack {
    fn function(&self, function: devkit::Function) -> LambdaFunction {
        self.stack
            .function(function, &[], &[(BUS_ENDPOINT_ENV, self.bus.endpoint())])
    }

    /// What the FIFO subscriber queue got: per message group, the
    /// aggregate versions in delivery order (duplicates kept), and the
    /// number of messages.
    async fn received(&self) -> (BTreeMap<String, Vec<u64>>, usize) {
        assert!(
            self.bus.settle().await,
            "the bus delivered what it accepted"
        );
        let messages = testkit::drain_queue(&self.stack.sdk, &self.subscriber).await;
        let mut groups: BTreeMap<String, Vec<u64>> = BTreeMap::new();
        for m in &messages {
            let detail = &m["detail"];
            let group = m["__sqs"]["MessageGroupId"].as_str().unwrap_or_default();
            assert_eq!(
                detail["aggregateId"].as_str(),
                Some(group),
                "the event group is the aggregate id: {m}"
            );
            assert_eq!(m["source"], "outbox.orders", "{m}");
            let version = detail["aggregateVersion"].as_u64().expect("a version");
            groups.entry(group.to_owned()).or_default().push(version);
        }
        (groups, messages.len())
    }
}

/// From the stream, at the templates' defaults for this sink (strict
/// order): each order's two events once and in order, 100 events a
/// `PutEvents` at most, so fewer calls than the classic bus's floor of one
/// per 10, and nothing left in the table.
#[tokio::test]
async fn the_stream_goes_out_in_order_per_aggregate_in_fewer_calls() {
    let s = bus_stack().await;
    let orders = s.stack.create_orders(120).await;
    s.stack.pay_orders(&orders).await;
    let publisher = s.function(devkit::Function::Publisher);
    assert_eq!(publisher.env("SINK"), Some("eventbridge-bus"));
    assert_eq!(
        publisher.env("ORDERING"),
        None,
        "auto: strict for this sink"
    );
    let mut pump = s.stack.pump(&publisher, None);
    pump.run_until_idle().await.expect("pump");
    let (groups, messages) = s.received().await;
    assert_eq!(messages, 240, "each event once");
    assert_eq!(groups.len(), 120);
    for (order, versions) in &groups {
        assert_eq!(versions, &vec![1, 2], "{order}");
    }
    assert!(s.stack.outbox_items().await.is_empty(), "all deleted");
    let stats = s.bus.stats();
    assert_eq!(
        (stats.published, stats.deduplicated),
        (240, 0),
        "nothing sent twice"
    );
    assert!(
        stats.put_events_calls < 240 / 10,
        "{} PutEvents calls for 240 events",
        stats.put_events_calls
    );
}

/// A kill between the sink call and the delete leaves an item whose event
/// is already out; the next publish of it (here the sweeper's, the item
/// stranded) is the same event id within 5 minutes, which the bus drops:
/// the subscriber sees it once, and the item is deleted. Past the window
/// the bus lets the resend through: the duplicate a consumer deduplicates
/// by event id.
#[tokio::test]
async fn a_resend_within_five_minutes_is_dropped_at_the_bus() {
    let s = bus_stack().await;
    let sweeper = s.function(devkit::Function::Sweeper);
    let item = s
        .stack
        .put_event_aged(Duration::from_secs(2 * 86_400))
        .await;
    let raw = s.stack.outbox_raw().await;
    assert_eq!(raw.len(), 1);
    let resend = || async {
        // The item as it was before its delete: the kill's state.
        s.stack.put_raw(raw[0].clone()).await;
        sweeper.sweep_scheduled().await
    };
    resend().await;
    assert!(
        s.stack.outbox_items().await.is_empty(),
        "published, deleted"
    );
    resend().await;
    assert!(
        s.stack.outbox_items().await.is_empty(),
        "deduplicated, deleted"
    );
    let (groups, messages) = s.received().await;
    assert_eq!(messages, 1, "once: {groups:?}");
    assert_eq!(s.bus.stats().deduplicated, 1);
    s.bus.advance(devkit::DEDUPLICATION_WINDOW);
    assert_eq!(
        groups.get(&item.aggregate_id).map(Vec::len),
        Some(1),
        "{groups:?}"
    );
    resend().await;
    let (again, messages) = s.received().await;
    assert_eq!(messages, 1, "past the window the resend goes through");
    assert_eq!(
        again.get(&item.aggregate_id),
        groups.get(&item.aggregate_id),
        "the same event again: {again:?}"
    );
}

/// The consumer side of this sink, as the example app deploys it: the
/// bus's second FIFO subscriber (`ProjectorSubscriber`) feeds the
/// projector's SQS FIFO queue, which the real `projector` binary drains
/// (the SQS mapping's part): every event applied once, in each order's
/// order, so every paid order ends at version 2, PAID.
#[tokio::test]
async fn the_projector_reads_its_fifo_queue_behind_the_bus() {
    let s = bus_stack().await;
    let arn = match &s.stack.deployment.sink {
        devkit::LocalSink::CustomBus(arn) => arn.clone(),
        other => panic!("not the Custom Event Bus: {other:?}"),
    };
    let rm = devkit::create_custom_bus_read_model(
        &s.stack.sdk,
        &s.bus.client(&s.stack.sdk),
        &testkit::unique("read-model"),
        &arn,
        1,
    )
    .await
    .expect("the read model behind the bus");
    assert!(rm.queue.queue_url.ends_with(".fifo"));
    let orders = s.stack.create_orders(30).await;
    s.stack.pay_orders(&orders).await;
    let publisher = s.function(devkit::Function::Publisher);
    s.stack
        .pump(&publisher, None)
        .run_until_idle()
        .await
        .expect("pump");
    assert!(s.bus.settle().await, "the bus delivered what it accepted");

    let projector = LambdaFunction::new(testkit::lambda::FunctionSpec {
        name: "projector".into(),
        binary: testkit::lambda::binary("projector").expect("the projector binary"),
        env: testkit::lambda::loopback_env()
            .into_iter()
            .chain(testkit::lambda::projector_env(&rm.table))
            .collect(),
        timeout: Duration::from_secs(30),
        log: std::env::temp_dir().join(format!("{}.log", testkit::unique("projector"))),
    });
    let sqs = aws_sdk_sqs::Client::new(&s.stack.sdk);
    let stats = testkit::lambda::drain_queue_through(&sqs, &rm.queue.queue_url, &projector).await;
    assert_eq!((stats.deleted, stats.reported), (60, 0), "{stats:?}");
    let items = devkit::scan_all(&s.stack.ddb, &rm.table)
        .await
        .expect("scan the read model");
    let text = |item: &testkit::Item, name: &str| match item.get(name) {
        Some(
            aws_sdk_dynamodb::types::AttributeValue::S(v)
            | aws_sdk_dynamodb::types::AttributeValue::N(v),
        ) => v.clone(),
        _ => String::new(),
    };
    let inbox = items.iter().filter(|i| text(i, "PK").starts_with("INBOX#"));
    assert_eq!(inbox.count(), 60, "each event applied once");
    let rows: BTreeMap<String, (String, String)> = items
        .iter()
        .filter(|i| !text(i, "orderId").is_empty())
        .map(|i| (text(i, "orderId"), (text(i, "status"), text(i, "version"))))
        .collect();
    assert_eq!(rows.len(), 30);
    for order in &orders {
        assert_eq!(
            rows.get(&order.order_id),
            Some(&("PAID".to_owned(), "2".to_owned())),
            "{}",
            order.order_id
        );
    }
}
