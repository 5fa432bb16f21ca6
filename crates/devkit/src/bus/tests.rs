//! The local bus through the real `aws-sdk-eventbridgev2` client, its FIFO
//! subscriber to an SQS FIFO queue on moto (`infra/local/with-local.sh`
//! runs these with moto's endpoint). Each test its own bus and queue.

use super::*;
use aws_sdk_eventbridgev2::types::{
    OrderingType, PutEventsRequestEntry, PutEventsSystemMetadata, SuccessCode,
};
use aws_sdk_sqs::types::MessageSystemAttributeName;

struct Fixture {
    bus: LocalBus,
    events: aws_sdk_eventbridgev2::Client,
    sqs: aws_sdk_sqs::Client,
    arn: String,
    queue: crate::Subscriber,
}

async fn fixture() -> Fixture {
    let sdk = crate::sdk_config().await.expect("a local run");
    let bus = LocalBus::start(&sdk).await.expect("the bus starts");
    let events = bus.client(&sdk);
    let name = format!("bus-{}", ulid::Ulid::new().to_string().to_ascii_lowercase());
    let (arn, queue) = create_custom_bus(&sdk, &events, &name, 3)
        .await
        .expect("the bus and its subscriber");
    Fixture {
        bus,
        events,
        sqs: aws_sdk_sqs::Client::new(&sdk),
        arn,
        queue,
    }
}

fn entry(group: &str, id: &str) -> PutEventsRequestEntry {
    entry_with(
        group,
        id,
        format!(r#"{{"eventId":"{id}","aggregateId":"{group}"}}"#),
    )
}

fn entry_with(group: &str, id: &str, detail: String) -> PutEventsRequestEntry {
    PutEventsRequestEntry::builder()
        .source("outbox.orders")
        .detail_type("OrderCreated")
        .detail(detail)
        .system_metadata(
            PutEventsSystemMetadata::builder()
                .event_group_id(group)
                .deduplication_id(id)
                .build(),
        )
        .build()
        .expect("source and detail type are set")
}

impl Fixture {
    async fn put(
        &self,
        entries: Vec<PutEventsRequestEntry>,
    ) -> Result<
        aws_sdk_eventbridgev2::operation::put_events::PutEventsOutput,
        aws_sdk_eventbridgev2::error::SdkError<
            aws_sdk_eventbridgev2::operation::put_events::PutEventsError,
        >,
    > {
        self.events
            .put_events()
            .event_bus_arn(&self.arn)
            .set_entries(Some(entries))
            .send()
            .await
    }

    /// What the FIFO queue holds: (message group, event id of the detail).
    async fn received(&self) -> Vec<(String, String)> {
        assert!(self.bus.settle().await, "delivered");
        let mut out = Vec::new();
        crate::receive_until_empty(
            &self.sqs,
            &self.queue.queue_url,
            || false,
            |m| {
                let group = m
                    .attributes()
                    .and_then(|a| a.get(&MessageSystemAttributeName::MessageGroupId))
                    .cloned()
                    .unwrap_or_default();
                let event: serde_json::Value =
                    serde_json::from_str(m.body().unwrap_or("")).expect("an event");
                assert_eq!(event["detail-type"], "OrderCreated", "{event}");
                assert_eq!(event["source"], "outbox.orders", "{event}");
                let id = event["detail"]["eventId"].as_str().unwrap_or("").to_owned();
                out.push((group, id));
            },
        )
        .await
        .expect("the queue answers");
        out
    }
}

fn code<E: aws_sdk_eventbridgev2::error::ProvideErrorMetadata>(
    e: &aws_sdk_eventbridgev2::error::SdkError<E>,
) -> String {
    e.as_service_error()
        .and_then(|e| e.code())
        .unwrap_or("not a service error")
        .to_owned()
}

#[tokio::test]
async fn a_hundred_entries_are_published_and_delivered_in_order_per_group() {
    let f = fixture().await;
    let entries: Vec<_> = (0..100)
        .map(|i| entry(&format!("order-{}", i % 3), &format!("e{i:03}")))
        .collect();
    let out = f.put(entries).await.expect("accepted");
    assert_eq!(out.failed_entry_count(), 0);
    assert_eq!(out.entries().len(), 100);
    for (i, e) in out.entries().iter().enumerate() {
        assert_eq!(e.success_code(), Some(&SuccessCode::Published), "entry {i}");
        assert!(e.event_id().is_some(), "entry {i}");
    }
    let received = f.received().await;
    assert_eq!(received.len(), 100);
    for group in ["order-0", "order-1", "order-2"] {
        let ids: Vec<_> = received
            .iter()
            .filter(|(g, _)| g == group)
            .map(|(_, id)| id)
            .collect();
        let mut sorted = ids.clone();
        sorted.sort();
        assert_eq!(ids, sorted, "{group} out of publish order");
    }
    assert_eq!(f.bus.stats().delivered, 100);
}

#[tokio::test]
async fn a_request_the_model_refuses_publishes_nothing() {
    let f = fixture().await;
    let too_many: Vec<_> = (0..101).map(|i| entry("g", &format!("e{i}"))).collect();
    let over_1_mb = vec![
        entry_with("g", "a", format!(r#""{}""#, "x".repeat(600_000))),
        entry_with("g", "b", format!(r#""{}""#, "x".repeat(600_000))),
    ];
    let long_group = vec![entry(&"g".repeat(129), "c")];
    for (case, entries) in [
        ("101 entries", too_many),
        ("1 MB", over_1_mb),
        ("group", long_group),
    ] {
        let err = f.put(entries).await.expect_err(case);
        assert_eq!(code(&err), "InvalidInputException", "{case}");
    }
    let err = f
        .events
        .put_events()
        .event_bus_arn("arn:aws:events:us-east-1:000000000000:event-bus/classic")
        .entries(entry("g", "d"))
        .send()
        .await
        .expect_err("a classic bus ARN");
    assert_eq!(code(&err), "InvalidInputException");
    let unknown = format!("{}x", &f.arn[..f.arn.len() - 1]);
    let err = f
        .events
        .put_events()
        .event_bus_arn(unknown)
        .entries(entry("g", "e"))
        .send()
        .await
        .expect_err("an unknown bus");
    assert_eq!(code(&err), "ResourceNotFoundException");
    assert!(f.received().await.is_empty(), "nothing published");
    assert_eq!(f.bus.stats().refused_calls, 5);
}

#[tokio::test]
async fn a_repeat_within_five_minutes_of_its_group_is_deduplicated() {
    let f = fixture().await;
    let first = f.put(vec![entry("order-1", "e1")]).await.expect("accepted");
    let first_id = first.entries()[0].event_id().map(str::to_owned);
    // The same id again, in its group and in another group, in one call.
    let again = f
        .put(vec![entry("order-1", "e1"), entry("order-2", "e1")])
        .await
        .expect("accepted");
    assert_eq!(again.failed_entry_count(), 0);
    assert_eq!(
        again.entries()[0].success_code(),
        Some(&SuccessCode::Deduplicated)
    );
    assert_eq!(again.entries()[0].event_id().map(str::to_owned), first_id);
    assert_eq!(
        again.entries()[1].success_code(),
        Some(&SuccessCode::Published)
    );
    // Just inside the window, then past it.
    f.bus.advance(DEDUPLICATION_WINDOW - Duration::from_secs(1));
    let inside = f.put(vec![entry("order-1", "e1")]).await.expect("accepted");
    assert_eq!(
        inside.entries()[0].success_code(),
        Some(&SuccessCode::Deduplicated)
    );
    f.bus.advance(Duration::from_secs(1));
    let past = f.put(vec![entry("order-1", "e1")]).await.expect("accepted");
    assert_eq!(
        past.entries()[0].success_code(),
        Some(&SuccessCode::Published)
    );
    let received = f.received().await;
    assert_eq!(
        received,
        vec![
            ("order-1".to_owned(), "e1".to_owned()),
            ("order-2".to_owned(), "e1".to_owned()),
            ("order-1".to_owned(), "e1".to_owned()),
        ]
    );
    let stats = f.bus.stats();
    assert_eq!((stats.published, stats.deduplicated), (3, 2));
}

#[tokio::test]
async fn an_entry_that_is_not_json_fails_alone() {
    let f = fixture().await;
    let bad = entry_with("g", "bad", "{not json".into());
    let out = f.put(vec![entry("g", "ok"), bad]).await.expect("accepted");
    assert_eq!(out.failed_entry_count(), 1);
    assert_eq!(
        out.entries()[0].success_code(),
        Some(&SuccessCode::Published)
    );
    assert_eq!(out.entries()[1].error_code(), Some("MalformedDetail"));
    assert_eq!(f.received().await, vec![("g".to_owned(), "ok".to_owned())]);
}

#[tokio::test]
async fn what_the_local_bus_does_not_implement_is_refused() {
    let f = fixture().await;
    let invoke = aws_sdk_eventbridgev2::types::InvokeConfiguration::builder()
        .role_arn("arn:aws:iam::000000000000:role/r")
        .target_arn(&f.queue.queue_arn)
        .build()
        .expect("invoke");
    let err = f
        .events
        .create_subscriber()
        .name("filtered")
        .event_bus_arn(&f.arn)
        .r#type(OrderingType::Fifo)
        .invoke_configuration(invoke.clone())
        .filter_configuration(aws_sdk_eventbridgev2::types::FilterConfiguration::builder().build())
        .send()
        .await
        .expect_err("a filter");
    assert_eq!(code(&err), "InvalidInputException");
    let err = f
        .events
        .create_subscriber()
        .name("unordered-to-fifo")
        .event_bus_arn(&f.arn)
        .r#type(OrderingType::Unordered)
        .invoke_configuration(invoke)
        .send()
        .await
        .expect_err("an unordered subscriber to a FIFO queue");
    assert_eq!(code(&err), "InvalidInputException");
    let described = f
        .events
        .describe_event_bus()
        .event_bus_arn(&f.arn)
        .send()
        .await
        .expect("described");
    assert_eq!(
        described
            .storage_configuration()
            .and_then(|s| s.retention_period_in_days()),
        Some(3)
    );
}

/// The subscriber sends no `MessageDeduplicationId` (the pages do not say
/// it sets one): a FIFO queue without content-based deduplication refuses
/// the delivery, as SQS does, and the bus keeps the event and tries again;
/// the queue `create_custom_bus` makes derives it from the body.
#[tokio::test]
async fn a_fifo_queue_without_content_based_deduplication_refuses_the_delivery() {
    let f = fixture().await;
    let sdk = crate::sdk_config().await.expect("a local run");
    let name = format!(
        "plain-{}.fifo",
        ulid::Ulid::new().to_string().to_ascii_lowercase()
    );
    let plain = crate::create_queue(&sdk, &name, true)
        .await
        .expect("a FIFO queue without content-based deduplication");
    crate::bus::subscribe_fifo(&f.events, &f.arn, "plain-subscriber", &plain.queue_arn)
        .await
        .expect("a second FIFO subscriber");
    f.put(vec![entry("g", "e1")]).await.expect("accepted");
    assert!(
        !f.bus.settle().await,
        "the plain queue refuses the delivery"
    );
    assert!(f.bus.stats().delivery_failures > 0);
    // The subscriber whose queue derives the id got it (its pass runs
    // before the refusing one's).
    assert_eq!(f.bus.stats().delivered, 1);
}
