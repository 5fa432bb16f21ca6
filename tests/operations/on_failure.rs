//! `outboxctl redrive-on-failure`: a window the stream's mapping gave up
//! on, republished and its message deleted; a message that cannot be
//! settled is kept with a non-zero exit; the stack's ordering is honoured.

use std::time::Duration;

use testkit::{failed_json, ok_json, Stack};

use super::{gave_up, on_failure_queue, redrive_on_failure};

#[tokio::test]
async fn redrive_on_failure_republishes_the_window_and_deletes_the_message() {
    let stack = Stack::with_bus().await;
    for _ in 0..3 {
        stack.put_event_aged(Duration::from_secs(30)).await;
    }
    assert_eq!(stack.outbox_inserts().await.len(), 3);
    let queue = on_failure_queue(&stack).await;
    let json = ok_json(redrive_on_failure(&stack, &queue));
    assert_eq!(json["handled"], 1, "{json}");
    assert_eq!(json["republished"], 3, "{json}");
    assert_eq!(stack.drain_subscriber().await.len(), 3);
    assert!(stack.outbox_items().await.is_empty());
    assert!(
        testkit::drain_queue(&stack.sdk, &queue).await.is_empty(),
        "deleted"
    );
}

/// A message that cannot be settled is kept (it comes back after the
/// visibility timeout) and the command says so with a non-zero exit, after
/// handling everything else in the queue.
#[tokio::test]
async fn redrive_on_failure_exits_non_zero_when_a_message_is_kept() {
    let stack = Stack::with_bus().await;
    stack.put_event_aged(Duration::from_secs(30)).await;
    let message = gave_up(&stack, &stack.outbox_inserts().await);
    let bodies = ["not an OnFailure message".to_owned(), message.to_string()];
    let queue = testkit::queue_with(&stack.sdk, "on-failure", &bodies).await;
    let (json, err) = failed_json(
        redrive_on_failure(&stack, &queue),
        "a kept message fails the command",
    );
    assert!(err.contains("1 OnFailure messages were kept"), "{err}");
    assert_eq!(
        (json["handled"].as_u64(), json["kept"].as_u64()),
        (Some(1), Some(1)),
        "{json}"
    );
    assert_eq!(json["republished"], 1, "{json}");
}

/// #39 item 5: `redrive-on-failure` honours the stack's ordering, read
/// from the recorded settings. A stack on EventBridge (relaxed by
/// default) deployed with `Ordering=strict`: the window covers A2 only,
/// while A1, older (outside the window's lead), is still pending. Strict
/// holds A2 behind A1 and publishes nothing; relaxed, the control,
/// publishes A2 ahead of A1.
#[tokio::test]
async fn redrive_on_failure_honours_the_stacks_ordering() {
    for ordering in ["strict", "relaxed"] {
        let mut stack = Stack::with_bus().await;
        // The parameter under test.
        stack.deployment = stack
            .deployment
            .clone()
            .with_parameter("Ordering", ordering);
        stack.record_settings().await;
        let a1 = stack
            .put_aggregate_event("a", 1, Duration::from_secs(3_600), 0, 8)
            .await;
        let a2 = stack
            .put_aggregate_event("a", 2, Duration::from_secs(30), 0, 8)
            .await;
        let a2_record: Vec<_> = stack
            .outbox_inserts()
            .await
            .into_iter()
            .filter(|r| {
                serde_json::to_value(&r.change.keys).unwrap_or_default()[outbox_core::keys::SK]["S"]
                    == a2.sk.as_str()
            })
            .collect();
        assert_eq!(a2_record.len(), 1);
        let queue = testkit::queue_with(
            &stack.sdk,
            "on-failure",
            &[gave_up(&stack, &a2_record).to_string()],
        )
        .await;
        let (ok, out, err) = redrive_on_failure(&stack, &queue);
        assert!(ok, "{ordering}: {err}");
        let json: serde_json::Value = serde_json::from_str(&out).unwrap();
        let received = stack.drain_subscriber().await;
        let left = stack.outbox_items().await;
        if ordering == "strict" {
            assert_eq!(json["republished"], 0, "{json}");
            assert!(received.is_empty(), "A2 waits for A1");
            let held = left.iter().find(|i| i.event_id == a2.event_id).unwrap();
            assert_eq!(held.held_behind.as_deref(), Some(a1.sk.as_str()));
        } else {
            assert_eq!(json["republished"], 1, "{json}");
            assert_eq!(received.len(), 1, "relaxed: A2 goes out before A1");
            assert_eq!(left.len(), 1);
        }
    }
}

/// #61 finding 4: another stack's OnFailure queue given by mistake. At
/// `b82c310` the command searched this table for the other stream's
/// window, found nothing, settled, and deleted the message: the other
/// stack's abandoned events waited 24 hours. Now a message whose
/// `streamArn` is not the table's stream is kept and named, and the
/// command fails.
#[tokio::test]
async fn redrive_on_failure_keeps_another_streams_message() {
    let ours = Stack::with_bus().await;
    let theirs = Stack::with_bus().await;
    theirs.put_event_aged(Duration::from_secs(30)).await;
    let queue = on_failure_queue(&theirs).await;
    let (json, err) = failed_json(
        redrive_on_failure(&ours, &queue),
        "another stream's message fails the command",
    );
    assert!(err.contains(&theirs.stream_arn), "{err}");
    assert_eq!(
        (json["handled"].as_u64(), json["kept"].as_u64()),
        (Some(0), Some(1)),
        "{json}"
    );
    assert_eq!(
        json["otherStreams"][0],
        theirs.stream_arn.as_str(),
        "{json}"
    );
    let sqs = aws_sdk_sqs::Client::new(&ours.sdk);
    let (visible, in_flight) = outbox_runtime::queue_depth(&sqs, &queue).await.unwrap();
    assert_eq!(visible + in_flight, 1, "the message is still in the queue");
    assert_eq!(theirs.outbox_items().await.len(), 1, "their event waits");
}
