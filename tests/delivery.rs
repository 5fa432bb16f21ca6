//! The delivery path under faults on the wire: the real SDK clients (with
//! the functions' retry and timeout settings) talk to DynamoDB Local and the moto server
//! through `testkit::proxy::FaultProxy`. One test per behaviour the
//! publisher and the sweeper owe (see docs/publisher.md and docs/sweeper.md).

use outbox_runtime::SweepMetrics;
use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use lambda_runtime::LambdaEvent;
use outbox_engine::PublishStore;
use outbox_runtime::{DynamoStore, SnsSink};
use serde_json::Value;
use sweeper::Response;
use testkit::proxy::{Fault, FaultProxy};
use testkit::scenario::{envelopes, process, publisher, sweep_now, sweeper, versions, Wire};
use testkit::{far_deadline, Stack};
use time::OffsetDateTime;

const DAY: Duration = Duration::from_secs(86_400);

/// The store of `stack`'s table writing `shards` shards.
fn store(stack: &Stack, shards: u16) -> DynamoStore {
    DynamoStore::new(stack.ddb.clone(), &stack.table, shards).with_keys(stack.keys.clone())
}

/// 1. A poison record whose dead-letter write fails: nothing after it is
/// published in that invocation, so its redelivery duplicates nothing.
#[tokio::test]
async fn a_poison_record_whose_dead_letter_fails_sends_nothing_after_it() {
    let w = Wire::orders(1).await;
    // Invoked with its record (the mapping's filter would drop an outbox
    // insert without an envelope; one that is not JSON is the same case).
    w.put_poison("poison", None).await;
    w.create_orders(3).await;
    let records = w.outbox_inserts().await;
    assert_eq!(records.len(), 5);

    let publisher = w.publisher().await;
    // Every dead-letter write is throttled (the SDK's retries included).
    w.proxy.inject("UpdateItem", Fault::Throttle, None);
    let report = process(&publisher, records.clone()).await;
    let published = report.relayed.published;
    assert_eq!(published, 1, "only the record before the poison");
    let reported = &report.first_failure;
    assert_eq!(
        reported, &records[1].change.sequence_number,
        "the poison record is reported"
    );
    assert_eq!(report.unhandled, 4);
    assert!(w.proxy.faulted("UpdateItem") > 0);
    assert_eq!(envelopes(&w.drain_subscriber().await).len(), 1);

    // Lambda redelivers from the reported record; the throttling is over.
    w.proxy.heal();
    let report = process(&publisher, records[1..].to_vec()).await;
    assert_eq!(report.first_failure, None);
    let relayed = (report.relayed.dead_lettered, report.relayed.published);
    assert_eq!(relayed, (1, 3));
    let delivered = envelopes(&w.drain_subscriber().await);
    let distinct: HashSet<_> = delivered.iter().map(|e| e.event_id).collect();
    let counts = (delivered.len(), distinct.len());
    assert_eq!(counts, (3, 3), "no event went out twice");
}

/// 2. An INSERT without its NewImage (a KEYS_ONLY stream) is a
/// configuration error: reported, never dead-lettered.
#[tokio::test]
async fn an_insert_without_its_image_is_reported_never_dead_lettered() {
    let w = Wire::orders(2).await;
    let mut records = w.outbox_inserts().await;
    for record in &mut records {
        record.change.new_image = Default::default();
        record.change.stream_view_type =
            Some(aws_lambda_events::event::dynamodb::StreamViewType::KeysOnly);
    }
    let report = process(&w.publisher().await, records.clone()).await;
    assert_eq!(report.first_failure, records[0].change.sequence_number);
    assert_eq!(report.relayed.dead_lettered, 0);
    assert_eq!(w.proxy.seen("UpdateItem"), 0, "no dead-letter write");
    assert_eq!(w.proxy.seen("PutEvents"), 0);
    let kept = w.outbox_items().await;
    assert_eq!(kept.len(), 2, "both kept");
    assert!(kept.iter().all(|i| i.dead_lettered_at.is_none()));
}

/// 3. A sink call that never answers ends in a normal response, before the
/// deadline, that reports the first record.
#[tokio::test]
async fn a_hung_sink_call_ends_in_a_normal_response_before_the_deadline() {
    let w = Wire::orders(3).await;
    let records = w.outbox_inserts().await;
    w.proxy.inject("PutEvents", Fault::Hang, None);
    let publisher = w.publisher().await;
    let context = testkit::context_with_deadline(Duration::from_secs(6));
    let lambda_deadline = SystemTime::UNIX_EPOCH + Duration::from_millis(context.deadline);
    let event = publisher::StreamEvent::from(records.clone());
    let handled = publisher::handler(&publisher, LambdaEvent::new(event, context));
    let response = tokio::time::timeout(Duration::from_secs(60), handled)
        .await
        .expect("the handler returns")
        .expect("a normal response, not an error");
    let answered = SystemTime::now() < lambda_deadline;
    assert!(answered, "answered before Lambda's deadline");
    assert_eq!(response.batch_item_failures.len(), 1);
    let first = &response.batch_item_failures[0].item_identifier;
    assert_eq!(first, &records[0].change.sequence_number);
    assert_eq!(w.outbox_items().await.len(), 3, "nothing lost");
}

/// 3b. The sweeper, with a sink that never answers, still returns its
/// report (and its statistics) before the deadline.
#[tokio::test]
async fn a_hung_sink_still_lets_the_sweeper_report_before_the_deadline() {
    let w = Wire::orders(0).await;
    w.put_event_aged(DAY * 2).await;
    w.proxy.inject("PutEvents", Fault::Hang, None);
    let sweeper = w.sweeper(8, &[]).await;
    let context = testkit::context_with_deadline(Duration::from_secs(14));
    let lambda_deadline = SystemTime::UNIX_EPOCH + Duration::from_millis(context.deadline);
    let event = testkit::rig::scheduled();
    let handled = sweeper::handler(&sweeper, None, LambdaEvent::new(event, context));
    let response = tokio::time::timeout(Duration::from_secs(60), handled)
        .await
        .expect("the handler returns")
        .expect("a report");
    assert!(SystemTime::now() < lambda_deadline);
    let Response::Sweep(report) = response else {
        panic!("a sweep report: {response:?}")
    };
    assert!(report.stats_read, "the metric that matters was emitted");
    assert!(report.oldest_pending_age_seconds.unwrap() >= 2.0 * 86_400.0 - 60.0);
    assert_eq!(report.republished, 0);
    assert_eq!(w.outbox_items().await.len(), 1);
}

/// 4. The statistics read a bounded amount: the oldest item per shard, and
/// counts that stop at the limit (then flagged as lower bounds).
#[tokio::test]
async fn sweeper_statistics_cost_a_bounded_amount() {
    let stack = Stack::with_bus().await;
    let old = Duration::from_secs(3_600);
    let oldest = stack.put_aggregate_event("old", 1, old, 0, 8).await;
    for i in 0..40 {
        stack
            .put_aggregate_event("busy", i + 1, Duration::ZERO, i, 8)
            .await;
    }
    let (sink, _) = stack.eventbridge_sink();
    let mut sweeper = sweeper(sink, stack.store(), &stack, &[]);
    sweeper.settings.count_limit = 5;
    let report = sweep_now(&sweeper).await;
    assert_eq!(report.stranded, 0, "nothing is a day old");
    let capped = report.pending_capped;
    assert!(capped, "41 pending, counted up to 5 per shard");
    assert!(report.pending <= 5 * 8);
    let age = report.oldest_pending_age_seconds.expect("every shard read");
    let expected =
        (OffsetDateTime::now_utc() - outbox_core::ulid_time(oldest.event_id)).as_seconds_f64();
    assert!((age - expected).abs() < 60.0, "{age} vs {expected}");
    // Per shard: one range page, the oldest item, two bounded counts.
    assert_eq!(report.queries, 8 * 4);
    let items_read = report.items_read;
    assert!(items_read <= 8 * (1 + 5 + 5), "read {items_read}");
}

/// 4b. The statistics are all or nothing (#26 item 7): when one shard's
/// statistics query fails, the oldest age is not emitted from the shards
/// that answered (it could understate the age, or read 0 as healthy); the
/// run is counted as incomplete and the alarm sees missing data.
#[tokio::test]
async fn statistics_are_emitted_only_when_every_shard_answered() {
    let w = Wire::orders(0).await;
    w.put_aggregate_event("old", 1, Duration::from_secs(3_600), 0, 8)
        .await;
    let sweeper = w.sweeper(8, &[]).await;
    // The sweep's queries pass (with the region's keys, as deployed, first
    // 16 looking for items written before the home-region rule, both
    // indexes of each shard, then 8 range queries); then one statistics
    // query is refused (a non-retryable code: exactly one shard fails).
    let sweep_queries = if w.keys.home_region.is_some() { 24 } else { 8 };
    w.proxy.inject("Query", Fault::Pass, Some(sweep_queries));
    let refused = Fault::Refuse("ValidationException".into());
    w.proxy.inject("Query", refused, Some(1));
    let report = sweep_now(&sweeper).await;
    assert_eq!(w.proxy.faulted("Query"), 1);
    assert!(report.stats_incomplete && !report.stats_read);
    assert_eq!(report.oldest_pending_age_seconds, None);
    assert_eq!(report.shard_errors, 1);
    let emf: Value = serde_json::from_str(&report.emf()).unwrap();
    assert_eq!(emf["StatsIncomplete"], 1.0);
    for absent in ["OldestPendingAgeSeconds", "PendingCount", "DeadLetterCount"] {
        assert!(emf.get(absent).is_none(), "{absent} emitted: {emf}");
    }

    // Every shard answers: the age is emitted, and it is the real one.
    w.proxy.heal();
    let report = sweep_now(&sweeper).await;
    assert!(report.stats_read && !report.stats_incomplete);
    assert!(report.oldest_pending_age_seconds.unwrap() >= 3_590.0);
    let emf: Value = serde_json::from_str(&report.emf()).unwrap();
    assert_eq!(emf["StatsIncomplete"], 0.0);
    assert!(emf["OldestPendingAgeSeconds"].as_f64().unwrap() >= 3_590.0);
}

/// 5. Stranded events of many aggregates, sink failures injected on the
/// wire: per aggregate, what reaches the subscriber is never inverted.
#[tokio::test]
async fn stranded_events_reach_the_sink_in_aggregate_order_despite_failures() {
    let w = Wire::orders(0).await;
    let (aggregates, versions_each) = (12, 4);
    for v in 1..=versions_each {
        for a in 0..aggregates {
            let aggregate = format!("agg-{a}");
            w.put_aggregate_event(&aggregate, v, DAY * 2, v * 100 + a, 8)
                .await;
        }
    }
    let sweeper = w.sweeper(8, &[]).await;
    // Some entries refused in 200 answers, and throttled calls.
    w.proxy
        .inject("PutEvents", Fault::FailEntries(vec![0]), Some(6));
    let second = Fault::refuse(&["\"aggregateVersion\":2".into()], "ThrottlingException");
    w.proxy.inject("PutEvents", second, Some(4));
    w.proxy.inject("PutEvents", Fault::Throttle, Some(2));
    let mut now = OffsetDateTime::now_utc();
    for _ in 0..6 {
        sweeper.sweep(now, &far_deadline()).await;
        if w.outbox_items().await.is_empty() {
            break;
        }
        w.proxy.heal();
        now += DAY; // every backoff is due
    }
    assert!(w.outbox_items().await.is_empty(), "all delivered");
    assert!(w.proxy.faulted("PutEvents") > 0, "faults were injected");

    let delivered = envelopes(&w.drain_subscriber().await);
    let distinct: HashSet<_> = delivered.iter().map(|e| e.event_id).collect();
    assert_eq!(distinct.len() as u64, aggregates * versions_each);
    let sorted: Vec<u64> = (1..=versions_each).collect();
    for (aggregate, order) in &versions(&delivered, true) {
        assert_eq!(order, &sorted, "{aggregate} delivered out of order");
    }
}

/// 6. Lowering OUTBOX_SHARDS strands nothing: the sweeper reads every shard
/// up to the recorded high-water mark, and counts every dead letter.
#[tokio::test]
async fn lowering_the_shard_count_strands_nothing() {
    let stack = Stack::with_bus().await;
    // The writer's cold start with 16 shards records them.
    outbox_runtime::record_shard_count(&stack.ddb, &stack.table, &Default::default(), 16)
        .await
        .unwrap();
    let mut items = Vec::new();
    for a in 0..24 {
        let aggregate = format!("order-{a}");
        items.push(
            stack
                .put_aggregate_event(&aggregate, 1, DAY * 2, a, 16)
                .await,
        );
    }
    let high = items
        .iter()
        .find(|i| outbox_core::keys::shard_of(&i.aggregate_id, 16) >= 4)
        .expect("an item in a shard above 4");
    let letter = outbox_engine::DeadLetter {
        key: &high.key(),
        aggregate_id: Some(&high.aggregate_id),
        reason: "test",
        attempts: None,
        claim: None,
    };
    store(&stack, 16)
        .dead_letter(letter, &far_deadline())
        .await
        .unwrap();

    // Now the stack runs with 4 shards.
    let (sink, _) = stack.eventbridge_sink();
    let report = sweep_now(&sweeper(sink, store(&stack, 4), &stack, &[])).await;
    assert_eq!(report.shards, 16);
    assert_eq!(report.republished, 23);
    assert_eq!(report.pending, 0);
    let dead = report.dead_letter_count;
    assert_eq!(dead, 1, "the dead letter of shard >= 4 counted");
    assert_eq!(stack.outbox_items().await.len(), 1, "only the dead letter");
}

/// 6b. Raising it strands nothing either, and is recorded by the sweeper
/// itself when no writer did.
#[tokio::test]
async fn raising_the_shard_count_strands_nothing() {
    let stack = Stack::with_bus().await;
    for a in 0..12 {
        let aggregate = format!("order-{a}");
        stack
            .put_aggregate_event(&aggregate, 1, DAY * 2, a, 4)
            .await;
    }
    let (sink, _) = stack.eventbridge_sink();
    let report = sweep_now(&sweeper(sink, store(&stack, 16), &stack, &[])).await;
    assert_eq!((report.shards, report.republished), (16, 12));
    // Back to 4: the mark stays at 16.
    let keys = Default::default();
    let mark = outbox_runtime::record_shard_count(&stack.ddb, &stack.table, &keys, 4);
    assert_eq!(mark.await.unwrap(), 16);
}

/// A stack publishing to an SNS FIFO topic with a fault proxy in front: the
/// sink and the store of its publisher through the proxy, and the
/// topic's FIFO subscriber queue.
async fn sns_fifo() -> (Stack, FaultProxy, SnsSink, DynamoStore, String) {
    let stack = Stack::new().await;
    let (topic_arn, queue) = testkit::create_fifo_topic(&stack.sdk, &testkit::unique("events"))
        .await
        .unwrap();
    let proxy = FaultProxy::start().await;
    let sdk = proxy.sdk().await;
    let sink = SnsSink::new(aws_sdk_sns::Client::new(&sdk), topic_arn);
    let store = DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), &stack.table, 8)
        .with_keys(stack.keys.clone());
    (stack, proxy, sink, store, queue.queue_url)
}

/// 5b. SNS FIFO (group = aggregate): a partial `PublishBatch` failure never
/// lets a later message of a group reach the queue before an earlier one
/// that failed; the retry's duplicates are dropped by SNS.
#[tokio::test]
async fn a_partial_publish_batch_failure_never_inverts_a_fifo_group() {
    let (stack, proxy, sink, store, queue) = sns_fifo().await;
    // Two orders, three events each, interleaved in the stream.
    for v in 1..=3 {
        for a in ["order-a", "order-b"] {
            stack.put_aggregate_event(a, v, Duration::ZERO, v, 8).await;
        }
    }
    let records = stack.outbox_inserts().await;
    assert_eq!(records.len(), 6);
    let publisher = publisher(sink, store, &stack);
    // order-a's first event is refused (in-call retries included) while
    // order-b's goes through.
    let first_of_a = "\"aggregateId\":\"order-a\",\"aggregateVersion\":1".to_owned();
    let refused = Fault::refuse(&[first_of_a], "InternalError");
    proxy.inject("PublishBatch", refused, Some(3));
    let report = process(&publisher, records.clone()).await;
    assert_eq!(report.first_failure, records[0].change.sequence_number);
    assert_eq!(proxy.faulted("PublishBatch"), 3);
    // Lambda redelivers from the reported record.
    let report = process(&publisher, records).await;
    assert_eq!(report.first_failure, None);

    // Every message, duplicates included (none: SNS dropped them).
    let order = versions(
        &envelopes(&testkit::drain_queue(&stack.sdk, &queue).await),
        false,
    );
    assert_eq!(order["order-a"], vec![1, 2, 3], "never inverted");
    let b = &order["order-b"];
    assert_eq!(b, &vec![1, 2, 3], "the retry's duplicate dropped by SNS");
    assert!(stack.outbox_items().await.is_empty());
}

/// #26 item 11: errors are classified as the SDK's retry classifiers do.
/// Whole calls: a 429 whose code nobody knows, and codes the SDK lists as
/// throttling that a hand-written list missed, are transient; an unknown
/// 400 is not. Per entry: SNS's `KMSThrottling` is retried within the call,
/// so the batch is published in one invocation instead of being reported.
#[tokio::test]
async fn errors_are_classified_as_the_sdk_classifies_them() {
    use outbox_engine::{EventSink, FailureKind};
    let (stack, proxy, sink, store, queue) = sns_fifo().await;
    stack
        .put_aggregate_event("order-a", 1, Duration::ZERO, 1, 8)
        .await;
    let records = stack.outbox_inserts().await;
    let item = stack.outbox_items().await.remove(0);
    for (status, code, kind) in [
        (429, "SomethingNobodyKnows", FailureKind::Transient),
        (
            400,
            "TransactionInProgressException",
            FailureKind::Transient,
        ),
        (400, "LimitExceededException", FailureKind::Transient),
        (400, "SomethingNobodyKnows", FailureKind::Rejected),
    ] {
        proxy.heal();
        proxy.inject("PublishBatch", Fault::Status(status, code.into()), None);
        let sends = outbox_engine::SendCounter::default();
        let outcome = sink
            .publish_batch(&[&item], outbox_runtime::SDK_MAX_ATTEMPTS, &sends)
            .await;
        let failure = outcome[0].clone().expect_err("refused");
        let got = (failure.kind, failure.code.as_str(), failure.whole_call);
        assert_eq!(got, (kind, code, true), "{status} {code}");
    }

    proxy.heal();
    let before = proxy.faulted("PublishBatch");
    let throttled = Fault::refuse(&[String::new()], "KMSThrottling");
    proxy.inject("PublishBatch", throttled, Some(1));
    let report = process(&publisher(sink, store, &stack), records).await;
    assert_eq!(proxy.faulted("PublishBatch") - before, 1);
    let outcome = (report.relayed.published, report.first_failure);
    assert_eq!(outcome, (1, None), "retried within the call");
    assert_eq!(testkit::drain_queue(&stack.sdk, &queue).await.len(), 1);
}

/// #26 item 8: a `MAX_EVENT_BYTES` above the topic's `MaximumMessageSize`
/// is refused at cold start (before, it was accepted, and batches over the
/// topic's limit dead-lettered innocent events); one within it passes.
#[tokio::test]
async fn an_sns_limit_above_the_topics_maximum_message_size_is_refused_at_cold_start() {
    use outbox_engine::EventSink;
    let stack = Stack::new().await;
    let (topic_arn, _) = testkit::create_fifo_topic(&stack.sdk, &testkit::unique("events"))
        .await
        .unwrap();
    let client = aws_sdk_sns::Client::new(&stack.sdk);
    let sink = |bytes| SnsSink::new(client.clone(), topic_arn.clone()).with_max_bytes(bytes);
    // The topic's attribute is not set: 256 KiB.
    let err = sink(300_000).verify().await.expect_err("refused");
    assert!(err.reason.contains("MaximumMessageSize is 262144"), "{err}");
    sink(256 * 1024).verify().await.expect("the default fits");
    sink(100_000).verify().await.expect("a smaller limit fits");
}

/// #26 item 10: one entry is sent at most `MAX_SENDS_PER_ENTRY` times per
/// invocation, the SDK's attempts included. Each call is accepted but
/// answered after the SDK's attempt timeout, and its second attempt refuses
/// the entry in a 200: two calls of two sends, then no more (6 sends with
/// these tests' 3 relay attempts before, 8 with the functions' 4; 12 when
/// three attempts of a call are sent).
#[tokio::test]
async fn an_entry_is_sent_a_bounded_number_of_times_per_invocation() {
    use outbox_engine::MAX_SENDS_PER_ENTRY;
    let w = Wire::orders(1).await;
    let records = w.outbox_inserts().await;
    let publisher = w.publisher().await;
    for _ in 0..4 {
        w.proxy
            .inject("PutEvents", Fault::Late(Duration::from_secs(6)), Some(1));
        w.proxy
            .inject("PutEvents", Fault::FailEntries(vec![0]), Some(1));
    }
    let report = process(&publisher, records).await;
    assert!(report.first_failure.is_some(), "not published: reported");
    assert_eq!(w.proxy.seen("PutEvents") as u32, MAX_SENDS_PER_ENTRY);
}
