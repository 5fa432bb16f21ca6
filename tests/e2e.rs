//! End to end on the local AWS API: writer → table → stream → the mapping
//! emulator (settings and filter from infra/outbox.yaml) → publisher →
//! EventBridge → subscriber queue, with faults injected.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use lambda_runtime::LambdaEvent;
use outbox_core::keys::{self, ItemKey};
use outbox_engine::Deadline;
use outbox_engine::EventSink;
use outbox_engine::{DeadLetter, Marked, PublishStore, StoreError};
use outbox_engine::{SweepSettings, Sweeper};
use outbox_runtime::DynamoStore;
use outbox_runtime::EventBridgeSink;
use sweeper::Response;
use testkit::proxy::{Fault, FaultProxy};
use testkit::scenario::envelopes;
use testkit::{drain_queue, far_deadline, queue_with, InProcessPublisher, Stack};
use writer::{CreateOrderRequest, NewOrder};
use writer::{OrderService, Reply};

type BusPump = devkit::Pump<InProcessPublisher<EventBridgeSink, DynamoStore>>;

/// The stack's stream mapping into the publisher in-process on `sink` and
/// the stack's store, its OnFailure destination `on_failure`.
fn bus_pump(stack: &Stack, sink: EventBridgeSink, on_failure: Option<&str>) -> BusPump {
    let publisher = InProcessPublisher::new(sink, stack.store(), &stack.keys);
    stack.pump(publisher, on_failure)
}

#[tokio::test]
async fn hundreds_of_concurrent_orders_are_each_delivered_once() {
    let stack = Stack::with_bus().await;
    let service = OrderService::from_config(stack.ddb.clone(), &stack.config(&[]));
    let n = 300;
    let permits = Arc::new(tokio::sync::Semaphore::new(8));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        let service = service.clone();
        let permits = permits.clone();
        tasks.spawn(async move {
            let _permit = permits.acquire_owned().await.unwrap();
            let request: CreateOrderRequest = serde_json::from_value(serde_json::json!({
                "customerId": format!("c-{i}"), "currency": "EUR",
                "items": [{"sku": format!("SKU-{i}"), "quantity": 1 + i % 5, "unitPriceCents": 100 + i}]
            }))
            .unwrap();
            match service.create(&testkit::test_caller(), NewOrder::try_from(request).unwrap(), None, None).await.unwrap() {
                Reply::Done(order) => order,
                other => panic!("{other:?}"),
            }
        });
    }
    let mut orders = HashMap::new();
    while let Some(order) = tasks.join_next().await {
        let order = order.unwrap();
        orders.insert(order.order_id.clone(), order);
    }
    assert_eq!(orders.len(), n);

    let mut pump = bus_pump(&stack, stack.eventbridge_sink().0, None);
    pump.run_until_idle().await.unwrap();

    let delivered = envelopes(&stack.drain_subscriber_checked().await);
    let deliveries = delivered.len();
    assert_eq!(
        deliveries, n,
        "exactly N deliveries, no duplicates without faults"
    );
    let ids: HashSet<_> = delivered.iter().map(|e| e.event_id).collect();
    assert_eq!(ids.len(), n, "N distinct event ids");
    for envelope in &delivered {
        let order = &orders[&envelope.aggregate_id];
        assert_eq!(envelope.event_type, "OrderCreated");
        let payload = serde_json::to_value(order).unwrap();
        assert_eq!(envelope.payload, payload, "envelope matches its order");
    }
    assert!(stack.outbox_items().await.is_empty());
    assert_eq!(
        pump.stats.filtered_out,
        2 * n + 2,
        "the META inserts, the publisher's own REMOVEs and the 2 settings records never reached the function"
    );
}

#[tokio::test]
async fn a_sink_outage_loses_nothing_and_duplicates_stay_within_bounds() {
    let stack = Stack::with_bus().await;
    let orders = stack.create_orders(120).await;
    // On the wire: three calls go through, the bus is down for 17 calls
    // (every entry throttled in a 200 answer), then in four calls entry 2
    // fails while its call-mates go through.
    let proxy = FaultProxy::start().await;
    let (sink, store) = stack.through(&proxy, 8).await;
    proxy.inject("PutEvents", Fault::Pass, Some(3));
    let outage = Fault::refuse_all("ThrottlingException");
    proxy.inject("PutEvents", outage, Some(17));
    proxy.inject("PutEvents", Fault::FailEntries(vec![2]), Some(4));
    let on_failure = queue_with(&stack.sdk, "on-failure", &[]).await;
    let publisher = InProcessPublisher::new(sink, store, &stack.keys);
    let mut pump = stack.pump(publisher, Some(&on_failure));
    pump.mapping_mut().batch_size = 25;
    pump.run_until_idle().await.unwrap();

    let delivered = envelopes(&stack.drain_subscriber_checked().await);
    let distinct: HashSet<_> = delivered.iter().map(|e| e.event_id).collect();
    let expected: HashSet<String> = orders.iter().map(|o| o.order_id.clone()).collect();
    let got: HashSet<String> = delivered.iter().map(|e| e.aggregate_id.clone()).collect();
    assert_eq!(got, expected, "after recovery every event was delivered");
    assert_eq!(distinct.len(), orders.len());
    let duplicates = delivered.len() - distinct.len();
    // docs/publisher.md: a failed entry costs at most its call-mates that
    // were accepted after it, in that call. Entry 2 of four calls failed:
    // the bound is what those calls delivered past position 2 (the
    // outage's calls refused every entry, so they cost none).
    let reported = pump.stats.partial_failures > 0;
    assert!(reported, "the outage made the publisher report failures");
    let bound: usize = proxy
        .journal()
        .iter()
        .filter(|c| c.fault == Some(Fault::FailEntries(vec![2])))
        .map(|c| c.delivered.len().saturating_sub(2))
        .sum();
    assert!(
        duplicates <= bound,
        "{duplicates} duplicates over the bound of {bound} (entries accepted after a failed one)"
    );
    assert_eq!(pump.stats.on_failure_messages, 0);
    assert!(stack.outbox_items().await.is_empty());
    println!(
        "outage: {} deliveries, {duplicates} duplicates, {} partial failures",
        delivered.len(),
        pump.stats.partial_failures
    );
}

/// A store that "crashes" before deleting: the invocation dies after
/// publishing. The publisher's role of the port only.
struct CrashBeforeDelete {
    inner: DynamoStore,
    crashes_left: AtomicUsize,
    crashed: Arc<AtomicUsize>,
}

/// The methods of the port `CrashBeforeDelete` leaves to its inner store.
macro_rules! forward {
    ($($name:ident($($arg:ident: $ty:ty),*) -> $out:ty;)*) => {$(
        async fn $name(&self, $($arg: $ty),*) -> $out {
            self.inner.$name($($arg),*).await
        }
    )*};
}

impl PublishStore for CrashBeforeDelete {
    async fn delete_published(&self, keys: &[ItemKey], deadline: &Deadline) -> Vec<ItemKey> {
        if self.crashes_left.load(Ordering::SeqCst) > 0 {
            self.crashes_left.fetch_sub(1, Ordering::SeqCst);
            self.crashed.fetch_add(1, Ordering::SeqCst);
            return keys.to_vec();
        }
        self.inner.delete_published(keys, deadline).await
    }

    forward! {
        dead_letter(letter: DeadLetter<'_>, deadline: &Deadline) -> Result<Marked, StoreError>;
        record_failure(
            key: &ItemKey, attempts: u32, next: i64, error: &str, claim: Option<&str>,
            deadline: &Deadline
        ) -> Result<Marked, StoreError>;
        make_sweepable(
            key: &ItemKey, seen: Option<&str>, pending_pk: &str, pending_sk: &str,
            deadline: &Deadline
        ) -> Result<Marked, StoreError>;
        publishable(keys: &[ItemKey], deadline: &Deadline) -> Result<HashSet<ItemKey>, StoreError>;
        claim_pending(
            key: &ItemKey, claim: &outbox_engine::Claim, deadline: &Deadline
        ) -> Result<outbox_engine::ClaimOutcome, StoreError>;
        collection_below(
            key: &ItemKey, limit: i32, deadline: &Deadline
        ) -> Result<outbox_engine::CollectionRead, StoreError>;
        hold(
            key: &ItemKey, behind: &str, claim: Option<&str>, deadline: &Deadline
        ) -> Result<Marked, StoreError>;
        newer_pending(
            key: &ItemKey, deadline: &Deadline
        ) -> Result<Vec<outbox_engine::PendingItem>, StoreError>;
        release_claim(
            key: &ItemKey, claim: &outbox_engine::Claim, error: Option<&str>, deadline: &Deadline
        ) -> Result<Marked, StoreError>;
        record_settings(
            settings: &outbox_runtime::RecordedSettings, deadline: &Deadline
        ) -> Result<(), StoreError>;
        recorded_settings(
            deadline: &Deadline
        ) -> Result<Vec<outbox_runtime::RecordedSettings>, StoreError>;
    }
}

/// Fails the invocation (as a crash would) whenever the store "crashed".
struct Crashing<S: EventSink> {
    inner: InProcessPublisher<S, CrashBeforeDelete>,
    crashed: Arc<AtomicUsize>,
}

impl<S: EventSink> devkit::Invoker for Crashing<S> {
    async fn invoke(
        &self,
        event: aws_lambda_events::event::dynamodb::Event,
    ) -> Result<aws_lambda_events::event::streams::DynamoDbEventResponse, devkit::InvokeError> {
        let before = self.crashed.load(Ordering::SeqCst);
        let response = self.inner.invoke(event).await;
        if self.crashed.load(Ordering::SeqCst) > before {
            return Err(devkit::InvokeError::Failed(
                "Runtime.ExitError: the process died after publishing".into(),
            ));
        }
        response
    }
}

#[tokio::test]
async fn a_crash_between_publish_and_delete_redelivers_the_same_event() {
    let stack = Stack::with_bus().await;
    stack.create_orders(1).await;
    let (sink, _) = stack.eventbridge_sink();
    let crashed = Arc::new(AtomicUsize::new(0));
    let store = CrashBeforeDelete {
        inner: stack.store(),
        crashes_left: AtomicUsize::new(1),
        crashed: crashed.clone(),
    };
    let invoker = Crashing {
        inner: InProcessPublisher::new(sink, store, &stack.keys),
        crashed,
    };
    let mut pump = stack.pump(invoker, None);
    pump.run_until_idle().await.unwrap();
    assert_eq!(pump.stats.function_errors, 1);

    let delivered = envelopes(&stack.drain_subscriber_checked().await);
    assert_eq!(delivered.len(), 2, "delivered again after the crash");
    let (first, again) = (delivered[0].event_id, delivered[1].event_id);
    assert_eq!(first, again, "with the same event id");
    // An idempotent consumer sees it once.
    let mut processed = HashSet::new();
    let effects = delivered
        .iter()
        .filter(|e| processed.insert(e.event_id))
        .count();
    assert_eq!(effects, 1);
    let left = stack.outbox_items().await;
    assert!(left.is_empty(), "deleted on the retry: {left:?}");
}

/// Writes three orders and pumps them to a publisher whose bus does not
/// exist (every publish fails, not the events' fault) until the mapping
/// gives up after `retries` retries: one OnFailure message, in the returned
/// queue.
async fn abandoned_batch(stack: &Stack, retries: i64) -> (String, BusPump) {
    stack.create_orders(3).await;
    let missing = EventBridgeSink::new(
        aws_sdk_eventbridge::Client::new(&stack.sdk),
        "no-such-bus".into(),
        "outbox.orders".into(),
    );
    let on_failure = queue_with(&stack.sdk, "on-failure", &[]).await;
    let mut pump = bus_pump(stack, missing, Some(&on_failure));
    pump.mapping_mut().maximum_retry_attempts = retries;
    pump.run_until_idle().await.unwrap();
    assert_eq!(pump.stats.on_failure_messages, 1);
    (on_failure, pump)
}

#[tokio::test]
async fn retry_exhaustion_sends_on_failure_and_the_sweeper_recovers() {
    let stack = Stack::with_bus().await;
    let (on_failure, pump) = abandoned_batch(&stack, 2).await;
    assert_eq!(pump.stats.invocations, 3, "first delivery and two retries");

    let messages = drain_queue(&stack.sdk, &on_failure).await;
    assert_eq!(messages.len(), 1);
    let message = &messages[0];
    let context = &message["requestContext"];
    assert_eq!(context["condition"], "RetryAttemptsExhausted");
    assert_eq!(context["approximateInvokeCount"], 3);
    let info = &message["DDBStreamBatchInfo"];
    assert_eq!(info["batchSize"], 3);
    assert!(info["startSequenceNumber"].is_string() && info["endSequenceNumber"].is_string());
    assert!(info["shardId"].is_string());
    assert_eq!(info["streamArn"], stack.stream_arn.as_str());
    assert!(message.get("Records").is_none(), "metadata only, like AWS");

    // The items stay; the sweeper publishes them once they are stranded.
    assert_eq!(stack.outbox_items().await.len(), 3);
    let (sink, _) = stack.eventbridge_sink();
    let sweeper = Sweeper::new(sink, stack.store(), SweepSettings::from(&stack.config(&[])));
    let later = time::OffsetDateTime::now_utc() + Duration::from_secs(86_400 + 60);
    let report = sweeper.sweep(later, &far_deadline()).await;
    assert_eq!(report.republished, 3);
    assert_eq!(envelopes(&stack.drain_subscriber_checked().await).len(), 3);
    assert!(stack.outbox_items().await.is_empty());
}

/// A batch the mapping gave up on is recovered in minutes, not a day: its
/// OnFailure message, given to the sweeper as its SQS trigger, republishes
/// the pending items of that window right away, with the usual backoff.
#[tokio::test]
async fn an_on_failure_message_makes_the_sweeper_republish_its_window_now() {
    let stack = Stack::with_bus().await;
    let (on_failure, _) = abandoned_batch(&stack, 1).await;

    // The sink is still down when the message arrives: the attempts are
    // recorded with their backoff and handed to the scheduled sweep (their
    // pending keys become `!<ulid>`): the window is settled, the message
    // acknowledged (#26 item 9: it never waits on a backoff).
    let proxy = FaultProxy::start().await;
    let (sink, store) = stack.through(&proxy, 8).await;
    let mut sweeper = testkit::scenario::sweeper(sink, store, &stack, &[]);
    sweeper.settings.backoff = testkit::instant_backoff();
    proxy.inject("PutEvents", Fault::ServerError, None);
    let mut event = testkit::sqs_event(&stack.sdk, &on_failure).await;
    assert_eq!(event.records.len(), 1);
    let invoke = |event: &aws_lambda_events::event::sqs::SqsEvent| {
        sweeper::handler(
            &sweeper,
            None,
            LambdaEvent::new(serde_json::to_value(event).unwrap(), testkit::context()),
        )
    };
    let Response::Batch(response) = invoke(&event).await.unwrap() else {
        panic!("an SQS event gets a batch response")
    };
    assert!(response.batch_item_failures.is_empty(), "{response:?}");
    let items = stack.outbox_items().await;
    assert_eq!(items.len(), 3);
    assert!(items.iter().all(|i| i.attempts == 1
        && i.dead_lettered_at.is_none()
        && i.pending_sk.as_deref().is_some_and(keys::is_redriven_sk)));

    // A message that is not ours is reported.
    proxy.heal();
    let mut junk = event.records[0].clone();
    junk.message_id = Some("junk".into());
    junk.body = Some("{\"not\": \"an OnFailure message\"}".into());
    event.records.push(junk);
    let Response::Batch(response) = invoke(&event).await.unwrap() else {
        panic!("an SQS event gets a batch response")
    };
    let failed: Vec<&str> = response
        .batch_item_failures
        .iter()
        .map(|f| f.item_identifier.as_str())
        .collect();
    assert_eq!(failed, vec!["junk"]);

    // The sink is back: the next scheduled sweep (every 5 minutes) publishes
    // them once their backoff is due, with no 24-hour wait.
    let report = sweeper
        .sweep(
            time::OffsetDateTime::now_utc() + Duration::from_secs(1),
            &far_deadline(),
        )
        .await;
    assert_eq!(report.republished, 3);
    assert_eq!(envelopes(&stack.drain_subscriber_checked().await).len(), 3);
    assert!(stack.outbox_items().await.is_empty());
}

#[tokio::test]
async fn a_poison_record_is_dead_lettered_and_the_rest_flows() {
    let stack = Stack::with_bus().await;
    stack.create_orders(3).await;
    // An envelope that is not JSON: it passes the mapping's filter (an
    // envelope exists) and cannot be published.
    stack.put_poison("poison", Some("not json")).await;
    stack.create_orders(3).await;

    let on_failure = queue_with(&stack.sdk, "on-failure", &[]).await;
    let mut pump = bus_pump(&stack, stack.eventbridge_sink().0, Some(&on_failure));
    pump.run_until_idle().await.unwrap();
    let delivered = envelopes(&stack.drain_subscriber_checked().await);
    assert_eq!(delivered.len(), 6, "the records after it still flow");
    assert_eq!(pump.stats.on_failure_messages, 0);
    assert_eq!(pump.stats.function_errors + pump.stats.partial_failures, 0);
    let left = stack.items().await;
    let dead: Vec<_> = left
        .iter()
        .filter(|i| i.contains_key("deadLetteredAt"))
        .collect();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["PK"].as_s().unwrap(), "ORDER#poison");
}

#[tokio::test]
async fn meta_writes_and_the_publishers_deletes_never_invoke_it() {
    let stack = Stack::with_bus().await;
    let orders = stack.create_orders(4).await;
    let mut pump = bus_pump(&stack, stack.eventbridge_sink().0, None);
    pump.run_until_idle().await.unwrap();
    // Pay two orders (META MODIFY + outbox INSERT each), then pump again: the
    // stream now also holds the publisher's REMOVEs.
    stack.pay_orders(&orders[..2]).await;
    pump.run_until_idle().await.unwrap();

    let seen = pump.invoker().seen.lock().unwrap().clone();
    let only = "4 OrderCreated + 2 OrderPaid inserts, nothing else";
    assert_eq!(seen.len(), 6, "{only}");
    for record in &seen {
        assert_eq!(record.event_name, "INSERT");
        let sk = record.change.keys.get("SK").cloned().unwrap();
        let sk: String = serde_dynamo::from_attribute_value(sk).unwrap();
        assert!(sk.starts_with("OUTBOX#"), "{sk}");
    }
    // Filtered out: 4 META inserts, 2 META modifies, 6 outbox REMOVEs, and
    // the 2 inserts of the stack's settings records (its functions' cold
    // starts).
    assert_eq!(pump.stats.filtered_out, 14);
    assert_eq!(envelopes(&stack.drain_subscriber_checked().await).len(), 6);
}
