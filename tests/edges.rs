//! The delivery edges of issue #26 (items 7 to 11), each through the real
//! publisher or sweeper binary under the local Lambda runtime, its AWS calls
//! going through the fault proxy, with the case that showed the defect.

use std::time::Duration;

use testkit::lambda::drain_queue_through;
use testkit::proxy::Fault;
use testkit::rig::{scheduled, stream_event, Rig};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// A new queue (its name from `prefix`) holding an OnFailure message whose
/// window covers the last minute.
async fn on_failure_queue(rig: &Rig, prefix: &str) -> String {
    let now = OffsetDateTime::now_utc();
    let at = |t: OffsetDateTime| t.format(&Rfc3339).unwrap();
    let body = serde_json::json!({
        "requestContext": {"condition": "RetryAttemptsExhausted"},
        "DDBStreamBatchInfo": {
            "shardId": "shardId-1",
            "startSequenceNumber": "1",
            "endSequenceNumber": "3",
            "approximateArrivalOfFirstRecord": at(now - Duration::from_secs(60)),
            "approximateArrivalOfLastRecord": at(now),
            "batchSize": 3,
            "streamArn": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/1"
        }
    });
    testkit::queue_with(&rig.stack.sdk, prefix, &[body.to_string()]).await
}

/// Item 7: one shard's statistics query fails: the sweeper emits no
/// `OldestPendingAgeSeconds` (before: the age of the shards that answered,
/// or 0), counts `StatsIncomplete`, and fails the run for its Errors alarm.
#[tokio::test]
async fn statistics_are_all_or_nothing() {
    let rig = Rig::new().await;
    rig.stack
        .put_aggregate_event("old", 1, Duration::from_secs(3_600), 0, 8)
        .await;
    let sweeper = rig.function("sweeper", "relaxed", &[]);
    // The sweep's queries pass (the stack settings records read at cold
    // start and again by the run, one stack per table; with the region's
    // keys, as deployed, 16 looking for items written before the
    // home-region rule, both indexes of each shard, then 8 range queries);
    // then one statistics query is refused.
    let sweep_queries = 2 + if rig.stack.keys.home_region.is_some() {
        24
    } else {
        8
    };
    rig.proxy.inject("Query", Fault::Pass, Some(sweep_queries));
    let refused = Fault::Refuse("ValidationException".into());
    rig.proxy.inject("Query", refused, Some(1));
    let failed = sweeper
        .invoke(&serde_json::to_vec(&scheduled()).unwrap())
        .await;
    assert!(failed.is_err(), "the run fails for the Errors alarm");
    rig.proxy.heal();
    rig.invoke(&sweeper, &scheduled()).await;
    let emf = sweeper.emf();
    assert_eq!(emf.len(), 2, "{emf:?}");
    assert_eq!(emf[0]["StatsIncomplete"], 1.0);
    let age = emf[0].get("OldestPendingAgeSeconds");
    assert!(age.is_none(), "{}", emf[0]);
    assert_eq!(emf[1]["StatsIncomplete"], 0.0);
    assert!(emf[1]["OldestPendingAgeSeconds"].as_f64().unwrap() >= 3_590.0);
}

/// Item 8: `MAX_EVENT_BYTES` above the topic's `MaximumMessageSize` (256
/// KiB unless raised): the publisher refuses to start (before, it started,
/// and batches over the topic's limit dead-lettered innocent events).
#[tokio::test]
async fn a_publisher_above_the_topics_message_size_does_not_start() {
    let rig = Rig::new().await;
    rig.event("a", 1, 8).await;
    let publisher = rig.function("publisher", "relaxed", &[("MAX_EVENT_BYTES", "300000")]);
    let event = stream_event(rig.stack.outbox_inserts().await);
    let answer = publisher.invoke(&serde_json::to_vec(&event).unwrap()).await;
    assert!(answer.is_err(), "the init failed: {answer:?}");
    let log = std::fs::read_to_string(publisher.log()).unwrap();
    assert!(log.contains("MaximumMessageSize is 262144"), "{log}");
    let kept = rig.stack.outbox_items().await;
    assert_eq!(kept.len(), 1, "nothing sent, nothing lost");
}

/// Item 9: an OnFailure window holds A1 and B1, B2; the sink refuses B.
/// A1 is published, B1's attempt is recorded and B2 waits behind it, both
/// handed to the scheduled sweep: the message is settled (before, it came
/// back until its dead-letter queue for B's backoff).
#[tokio::test]
async fn an_on_failure_message_settles_on_its_own_window() {
    let rig = Rig::new().await;
    rig.event("a", 1, 8).await;
    let b1 = rig.event("b", 1, 8).await;
    rig.event("b", 2, 8).await;
    let sweeper = rig.function("sweeper", "relaxed", &[]);
    let refused = Fault::refuse(&["\"aggregateId\":\"b\"".to_owned()], "InternalError");
    rig.proxy.inject("PublishBatch", refused, None);
    let queue = on_failure_queue(&rig, "on-failure").await;
    let sqs = aws_sdk_sqs::Client::new(&rig.stack.sdk);
    let drained = drain_queue_through(&sqs, &queue, &sweeper).await;
    let counts = (drained.messages, drained.reported);
    assert_eq!(counts, (1, 0), "settled at once");
    assert_eq!(rig.received("a").await, vec![1]);
    let left = rig.stack.outbox_items().await;
    assert_eq!(left.len(), 2);
    let redriven = |i: &outbox_core::OutboxItem| {
        let sk = i.pending_sk.as_deref();
        sk.is_some_and(outbox_core::keys::is_redriven_sk)
    };
    assert!(left.iter().all(redriven), "{left:?}");
    let b2 = left.iter().find(|i| i.event_id != b1.event_id).unwrap();
    assert_eq!(b2.held_behind.as_deref(), Some(b1.sk.as_str()));
}

/// Item 10: the sink accepts a call but answers after the SDK's attempt
/// timeout, then refuses the entry on the SDK's second attempt, every time:
/// the publisher sends it 4 times in the invocation (two calls of two
/// attempts), not 8 (four calls, the relay's attempts).
#[tokio::test]
async fn an_entry_is_sent_at_most_four_times_per_invocation() {
    let rig = Rig::new().await;
    rig.event("a", 1, 8).await;
    let publisher = rig.function("publisher", "relaxed", &[]);
    for _ in 0..4 {
        rig.proxy
            .inject("PublishBatch", Fault::Late(Duration::from_secs(6)), Some(1));
        rig.proxy
            .inject("PublishBatch", Fault::FailEntries(vec![0]), Some(1));
    }
    let event = stream_event(rig.stack.outbox_inserts().await);
    let response: serde_json::Value =
        serde_json::from_slice(&rig.invoke(&publisher, &event).await).unwrap();
    let failures = response["batchItemFailures"].as_array().map(Vec::len);
    assert_eq!(failures, Some(1), "{response}");
    assert_eq!(rig.proxy.seen("PublishBatch"), 4);
}

/// Item 10: two OnFailure messages whose windows overlap, delivered at the
/// same moment to two sweeper sandboxes: every event reaches the sink once.
/// A window that met the other sandbox's claims is reported (#43: the
/// claimer may die with them), so its message comes back after the
/// visibility timeout and then finds the events gone.
#[tokio::test]
async fn overlapping_windows_in_two_sandboxes_publish_each_event_once() {
    let rig = Rig::new().await;
    for i in 0..20 {
        rig.event(&format!("agg-{i}"), 1, 8).await;
    }
    let first = rig.function("sweeper", "relaxed", &[]);
    let second = rig.function("sweeper", "relaxed", &[]);
    let q1 = on_failure_queue(&rig, "on-failure-1").await;
    let q2 = on_failure_queue(&rig, "on-failure-2").await;
    let sqs = aws_sdk_sqs::Client::new(&rig.stack.sdk);
    let (a, b) = tokio::join!(
        drain_queue_through(&sqs, &q1, &first),
        drain_queue_through(&sqs, &q2, &second)
    );
    assert!(a.reported <= 1 && b.reported <= 1, "{a:?} {b:?}");
    let journal = rig.proxy.journal().into_iter();
    let sent: Vec<String> = journal
        .filter(|c| c.operation == "PublishBatch")
        .flat_map(|c| c.delivered)
        .collect();
    let distinct: std::collections::HashSet<&String> = sent.iter().collect();
    assert_eq!((sent.len(), distinct.len()), (20, 20));
    assert!(rig.stack.outbox_items().await.is_empty());
}

/// Item 11: SNS refuses an entry with `KMSThrottling` (a per-entry code the
/// hand-written list missed): the publisher retries it within the call and
/// the batch is published in one invocation (before: reported, retried by
/// the mapping).
#[tokio::test]
async fn a_kms_throttled_entry_is_retried_within_the_call() {
    let rig = Rig::new().await;
    rig.event("a", 1, 8).await;
    let publisher = rig.function("publisher", "relaxed", &[]);
    let throttled = Fault::refuse(&[String::new()], "KMSThrottling");
    rig.proxy.inject("PublishBatch", throttled, Some(1));
    let mut pump = rig.stack.pump(&publisher, Some(&rig.failures));
    pump.run_until_idle().await.expect("pump");
    assert_eq!(pump.stats.invocations, 1);
    assert_eq!(pump.stats.partial_failures + pump.stats.function_errors, 0);
    assert_eq!(rig.proxy.faulted("PublishBatch"), 1);
    assert_eq!(rig.received("a").await, vec![1]);
}
