//! What the projector does with what it cannot apply: unknown types are
//! ignored and malformed bodies reported; throttling is reported and the
//! redelivery applied once; the SQS mapping moves a poison message to the
//! dead-letter queue; a hung table costs the batch its turn, not a
//! timeout; an inbox TTL a redelivery could outlive is refused at start.

use std::collections::HashSet;
use std::time::Duration;

use aws_lambda_events::event::sqs::SqsBatchResponse;
use outbox_core::EventEnvelope;
use projector::project_batch;
use serde_json::json;
use testkit::proxy::{Fault, FaultProxy};
use testkit::{far_deadline, Stack};

use super::{
    batch, bus_message, failed_ids, model, order_event, projector, projector_binary, read_model,
    read_model_on,
};

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
        let send = sqs.send_message().queue_url(&rm.queue.queue_url);
        send.message_body(body).send().await.unwrap();
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
    // The projector's timeout is 30 s in the template; a short one here,
    // with the same margin.
    let function = projector_binary(&table, Some(&proxy), Duration::from_secs(8));
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
