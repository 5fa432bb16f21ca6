//! #66: events larger than a DynamoDB item, through a claim check in S3
//! (moto's S3), written by the library as a service writes them and
//! published by the real publisher binary from real stream records, with
//! the templates' environment and `PayloadBucket` set to the test's own
//! bucket (a team's own bucket: the stack's `create` makes one like it).
//!
//! The faults each test names: an object deleted before its event is
//! published (a lifecycle rule that expired it, an operator), and a
//! transaction cancelled after its upload.

use aws_sdk_dynamodb::types::{AttributeValue, Put};
use outbox_core::claim::{PayloadRef, PayloadStore, EXTENDED_PAYLOAD_SIZE};
use outbox_core::transaction::{OutboxSettings, OutboxTransaction, TransactionError};
use outbox_core::{ulid_time, EventEnvelope, OutboxItem};
use testkit::{queue_with, unique, Stack};

/// A new bucket on moto, the stack's `PayloadBucket` (its settings
/// recorded again, as the stack's functions record them at cold start, so
/// writers learn it); the S3 client and the bucket.
async fn with_payload_bucket(stack: &mut Stack) -> (aws_sdk_s3::Client, String) {
    let s3 = aws_sdk_s3::Client::new(&stack.sdk);
    let bucket = unique("payloads").to_lowercase();
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("CreateBucket on moto");
    stack.deployment = stack
        .deployment
        .clone()
        .with_parameter("PayloadBucket", &bucket);
    stack.record_settings().await;
    (s3, bucket)
}

/// What a writer of the team's learns from the stack's recorded settings.
async fn writer_settings(stack: &Stack) -> OutboxSettings {
    OutboxSettings::from_stack(&stack.ddb, &stack.table)
        .load()
        .await
        .expect("the stack's recorded settings")
}

/// An event of `bytes` payload bytes about order `id`.
fn large(id: &str, bytes: usize) -> EventEnvelope {
    EventEnvelope::new(
        "OrderDocumentAttached",
        "Order",
        id,
        1,
        serde_json::json!({"orderId": id, "document": "x".repeat(bytes)}),
    )
    .expect("a valid event")
}

/// The order's item: a put that fails when it exists already.
fn order_put(table: &str, id: &str) -> Put {
    Put::builder()
        .table_name(table)
        .item("PK", AttributeValue::S(format!("ORDER#{id}")))
        .item("SK", AttributeValue::S("META".into()))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .expect("a put")
}

/// Writes `event` with its order in one transaction, its object first.
async fn write(
    stack: &Stack,
    settings: &OutboxSettings,
    s3: &aws_sdk_s3::Client,
    event: &EventEnvelope,
) -> Result<(), TransactionError> {
    OutboxTransaction::new(settings)
        .put("order", order_put(&stack.table, &event.aggregate_id))
        .event(&format!("ORDER#{}", event.aggregate_id), event)
        .send_with_payloads(&stack.ddb, s3)
        .await
        .map(|_| ())
}

/// The bodies `tests/claim_check/extended_client.py` receives from
/// `queue_url` with the SQS Extended Client (the project's pinned venv).
fn extended_client(queue_url: &str) -> Vec<String> {
    let python = testkit::root().join(".venv/bin/python");
    let script = testkit::root().join("tests/claim_check/extended_client.py");
    let out = std::process::Command::new(python)
        .arg(script)
        .arg(queue_url)
        .output()
        .expect("the venv's python (make venv)");
    assert!(
        out.status.success(),
        "extended_client.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("a JSON list of bodies")
}

/// Writes `gone` and `kept`, then deletes `gone`'s object (a lifecycle
/// rule that expired it, an operator): the fault before publishing.
async fn write_losing_one(
    stack: &Stack,
    settings: &OutboxSettings,
    (s3, bucket): (&aws_sdk_s3::Client, &str),
    gone: &EventEnvelope,
    kept: &EventEnvelope,
) {
    for event in [gone, kept] {
        write(stack, settings, s3, event).await.expect("committed");
    }
    s3.delete_object()
        .bucket(bucket)
        .key(key_of(gone))
        .send()
        .await
        .expect("DeleteObject");
}

/// The key of `event`'s object: `outbox/<eventId>/<sha256 of its JSON>`.
fn key_of(event: &EventEnvelope) -> String {
    let body = event.to_json().expect("JSON");
    outbox_core::claim::ClaimCheck::new("any")
        .reference(event.event_id, body.as_bytes())
        .key
}

async fn object_keys(s3: &aws_sdk_s3::Client, bucket: &str) -> Vec<String> {
    s3.list_objects_v2()
        .bucket(bucket)
        .send()
        .await
        .expect("ListObjectsV2")
        .contents()
        .iter()
        .filter_map(|o| o.key().map(str::to_owned))
        .collect()
}

/// The stream into the real publisher binary (the templates' environment
/// with the stack's PayloadBucket) until the stream is idle.
async fn publish_through_the_binary(stack: &Stack) {
    let publisher = stack.function(devkit::Function::Publisher, &[], &[]);
    assert!(
        publisher.env("PAYLOAD_BUCKET").is_some(),
        "the template sets it"
    );
    let on_failure = queue_with(&stack.sdk, "on-failure", &[]).await;
    let mut pump = stack.pump(&publisher, Some(&on_failure));
    pump.run_until_idle().await.expect("the mapping runs");
    assert_eq!(pump.stats.on_failure_messages, 0);
}

#[tokio::test]
async fn a_900_kb_event_is_stored_in_s3_and_published_whole_on_eventbridge() {
    let mut stack = Stack::with_bus().await;
    let (s3, bucket) = with_payload_bucket(&mut stack).await;
    let settings = writer_settings(&stack).await;
    assert_eq!(
        settings.claim_check.as_ref().map(|c| c.bucket.as_str()),
        Some(bucket.as_str()),
        "PAYLOAD_BUCKET, learnt from the stack"
    );
    let event = large("o-900", 900 * 1000);
    write(&stack, &settings, &s3, &event)
        .await
        .expect("committed");

    // The item holds the stub and the reference; the object the envelope.
    let items = stack.outbox_items().await;
    assert_eq!(items.len(), 1);
    let r = items[0].payload_ref.clone().expect("a payloadRef");
    assert_eq!(
        (r.bucket.as_str(), r.key.clone()),
        (bucket.as_str(), key_of(&event))
    );
    assert!(items[0].envelope.len() < 2_000, "the stub is small");
    let object = s3.get_payload(&r).await.expect("the object");
    assert!(r.check(&object).is_ok());

    publish_through_the_binary(&stack).await;
    let delivered = stack.drain_subscriber_checked().await;
    assert_eq!(delivered.len(), 1);
    let detail: EventEnvelope =
        serde_json::from_value(delivered[0]["detail"].clone()).expect("the envelope");
    assert_eq!(detail, event, "published whole: the payload, no payloadRef");
    assert!(
        stack.outbox_items().await.is_empty(),
        "deleted once published"
    );
}

#[tokio::test]
async fn a_2_mb_event_goes_to_sns_as_an_extended_client_pointer() {
    let mut stack = Stack::new().await;
    let (topic, queue) = testkit::create_fifo_topic(&stack.sdk, &unique("large"))
        .await
        .expect("topic and raw-delivery queue");
    stack.use_topic(&topic).await;
    let (s3, bucket) = with_payload_bucket(&mut stack).await;
    let settings = writer_settings(&stack).await;
    let event = large("o-2mb", 2 * 1024 * 1024);
    write(&stack, &settings, &s3, &event)
        .await
        .expect("committed");

    publish_through_the_binary(&stack).await;
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    let received = sqs
        .receive_message()
        .queue_url(&queue.queue_url)
        .message_attribute_names("All")
        .max_number_of_messages(10)
        .send()
        .await
        .expect("ReceiveMessage");
    let messages = received.messages();
    assert_eq!(messages.len(), 1);
    let key = key_of(&event);
    // The body the SNS and SQS Extended Client libraries send and fetch.
    let pointer: serde_json::Value =
        serde_json::from_str(messages[0].body().unwrap_or_default()).expect("a JSON pointer");
    assert_eq!(
        pointer,
        serde_json::json!([
            "software.amazon.payloadoffloading.PayloadS3Pointer",
            {"s3BucketName": bucket, "s3Key": key}
        ])
    );
    let attributes = messages[0]
        .message_attributes()
        .expect("message attributes");
    let whole = event.to_json().expect("JSON").len();
    assert_eq!(
        attributes[EXTENDED_PAYLOAD_SIZE].string_value(),
        Some(whole.to_string().as_str())
    );
    assert_eq!(
        attributes["eventId"].string_value(),
        Some(event.event_id.to_string().as_str())
    );
    // A Python subscriber with the SQS Extended Client reads the whole
    // envelope from the same message (visible again at once).
    sqs.change_message_visibility()
        .queue_url(&queue.queue_url)
        .receipt_handle(messages[0].receipt_handle().unwrap_or_default())
        .visibility_timeout(0)
        .send()
        .await
        .expect("ChangeMessageVisibility");
    let bodies = extended_client(&queue.queue_url);
    assert_eq!(bodies.len(), 1);
    let read: EventEnvelope = serde_json::from_str(&bodies[0]).expect("the whole envelope");
    assert_eq!(
        read, event,
        "the Extended Client fetched the whole envelope"
    );
    // What the pointer names is the whole envelope.
    let r = PayloadRef {
        bucket: bucket.clone(),
        key,
        sha256: String::new(),
        size: 0,
    };
    let object = s3.get_payload(&r).await.expect("the object");
    assert_eq!(
        serde_json::from_slice::<EventEnvelope>(&object).expect("an envelope"),
        event
    );
    assert!(stack.outbox_items().await.is_empty());
}

#[tokio::test]
async fn an_object_deleted_before_publishing_makes_a_dead_letter_not_a_publish() {
    let mut stack = Stack::with_bus().await;
    let (s3, bucket) = with_payload_bucket(&mut stack).await;
    let settings = writer_settings(&stack).await;
    let (gone, kept) = (large("o-gone", 500 * 1000), large("o-kept", 500 * 1000));
    write_losing_one(&stack, &settings, (&s3, &bucket), &gone, &kept).await;

    publish_through_the_binary(&stack).await;
    let delivered = stack.drain_subscriber_checked().await;
    assert_eq!(delivered.len(), 1, "the other event still flows");
    assert_eq!(delivered[0]["detail"]["aggregateId"], "o-kept");
    let left: Vec<OutboxItem> = stack.outbox_items().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].event_id, gone.event_id);
    let reason = left[0].dead_letter_reason.as_deref().unwrap_or_default();
    assert!(left[0].dead_lettered_at.is_some(), "a dead letter");
    assert!(reason.contains("PayloadMissing"), "its reason: {reason}");
}

#[tokio::test]
async fn a_transaction_cancelled_after_its_upload_leaves_only_an_orphan_object() {
    let mut stack = Stack::with_bus().await;
    let (s3, bucket) = with_payload_bucket(&mut stack).await;
    let settings = writer_settings(&stack).await;
    let first = large("o-twice", 450 * 1000);
    write(&stack, &settings, &s3, &first)
        .await
        .expect("committed");
    // The same order again: its put's condition cancels the transaction,
    // after the second event's object is stored.
    let again = large("o-twice", 450 * 1000);
    let err = write(&stack, &settings, &s3, &again)
        .await
        .expect_err("cancelled");
    assert!(err.failed_condition("order").is_some(), "{err}");

    let keys = object_keys(&s3, &bucket).await;
    assert!(keys.contains(&key_of(&again)), "the orphan");
    let items = stack.outbox_items().await;
    assert_eq!(
        items.len(),
        1,
        "no item without its object, none for the cancelled event"
    );
    assert_eq!(items[0].event_id, first.event_id);
}

/// The consumer's side: an order event larger than the bus takes (1.5 MB)
/// goes out as its stub; the real projector binary, with the templates'
/// environment, resolves it from S3 (hash checked) and applies the order.
#[tokio::test]
async fn the_projector_resolves_a_stub_from_s3_and_applies_the_order() {
    let mut stack = Stack::with_bus().await;
    let (bus, _) = stack.bus.clone().expect("a bus");
    let read_model =
        devkit::create_read_model(&stack.sdk, &unique("read-model"), &bus, "outbox.orders", 1)
            .await
            .expect("the read model and its queue");
    let (s3, _) = with_payload_bucket(&mut stack).await;
    stack.deployment.read_model = Some(read_model.table.clone());
    let settings = writer_settings(&stack).await;
    let order = serde_json::json!({
        "orderId": "o-big", "customerId": "c-1", "currency": "EUR",
        "items": [{"sku": "A", "quantity": 1, "unitPriceCents": 100}],
        "totalCents": 100, "status": "PENDING", "version": 1,
        "createdAt": "2026-12-07T00:00:00Z", "updatedAt": "2026-12-07T00:00:00Z",
        "attachment": "x".repeat(1_500_000),
    });
    let event = EventEnvelope::new("OrderCreated", "Order", "o-big", 1, order).expect("an event");
    write(&stack, &settings, &s3, &event)
        .await
        .expect("committed");
    publish_through_the_binary(&stack).await;

    let projector = stack.function(devkit::Function::Projector, &[], &[]);
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    let stats =
        testkit::lambda::drain_queue_through(&sqs, &read_model.queue.queue_url, &projector).await;
    assert_eq!(stats.deleted, 1, "the stub handled, not reported");
    let row = stack
        .ddb
        .get_item()
        .table_name(&read_model.table)
        .key("PK", AttributeValue::S("CUSTOMER#c-1".into()))
        .key("SK", AttributeValue::S("ORDER#o-big".into()))
        .send()
        .await
        .expect("GetItem")
        .item;
    assert!(row.is_some(), "the order row, from the resolved envelope");
}

/// The sweeper's path: a large event the stream never delivered (stranded
/// past `STRANDED_AFTER_SECONDS`, a day at the templates' default) is
/// republished whole by the real sweeper binary from its checked object;
/// one whose object is gone is dead-lettered by it, not published.
#[tokio::test]
async fn the_sweeper_republishes_a_stranded_large_event_from_its_object() {
    let mut stack = Stack::with_bus().await;
    let (s3, bucket) = with_payload_bucket(&mut stack).await;
    let settings = writer_settings(&stack).await;
    // Two days old: its id and occurredAt from then, as a writer of then
    // made them.
    let aged = |id: &str| {
        let mut event = large(id, 600 * 1000);
        let at = time::OffsetDateTime::now_utc() - time::Duration::days(2);
        let millis = (at.unix_timestamp_nanos() / 1_000_000) as u64;
        event.event_id = ulid::Ulid::from_parts(millis, fastrand::u128(..));
        event.occurred_at = ulid_time(event.event_id);
        event
    };
    let (kept, gone) = (aged("o-stranded"), aged("o-stranded-gone"));
    write_losing_one(&stack, &settings, (&s3, &bucket), &gone, &kept).await;

    let sweeper = stack.function(devkit::Function::Sweeper, &[], &[]);
    assert!(
        sweeper.env("PAYLOAD_BUCKET").is_some(),
        "the template sets it"
    );
    sweeper.sweep_scheduled().await;
    let delivered = stack.drain_subscriber_checked().await;
    assert_eq!(
        delivered.len(),
        1,
        "the stranded event, not the one without its object"
    );
    let detail: EventEnvelope =
        serde_json::from_value(delivered[0]["detail"].clone()).expect("the envelope");
    assert_eq!(detail, kept, "republished whole");
    let left = stack.outbox_items().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].event_id, gone.event_id);
    let reason = left[0].dead_letter_reason.as_deref().unwrap_or_default();
    assert!(reason.contains("PayloadMissing"), "a dead letter: {reason}");
}

/// The Python writer package (`clients/python`, boto3): a 700 KB event,
/// its bucket learnt from the stack's recorded settings, stored in S3 and
/// committed by `send_with_payloads`; the real publisher publishes it whole.
const PYTHON_WRITER: &str = r#"
import sys, boto3
from dynamodb_outbox import OutboxSettings, OutboxTransaction
table, bucket, order = sys.argv[1], sys.argv[2], sys.argv[3]
ddb, s3 = boto3.client("dynamodb"), boto3.client("s3")
settings = OutboxSettings.from_stack(ddb, table)
assert settings.claim_check is not None and settings.claim_check.bucket == bucket, settings
tx = (OutboxTransaction(settings)
      .put("order", {"TableName": table, "Item": {"PK": {"S": "ORDER#" + order}, "SK": {"S": "META"}},
                     "ConditionExpression": "attribute_not_exists(PK)"})
      .event("ORDER#" + order, "OrderDocumentAttached", "Order", order, 1,
             {"orderId": order, "document": "x" * 700000}))
assert len(tx.offloads) == 1
print(tx.send_with_payloads(ddb, s3)[0])
"#;

/// The TypeScript writer package (`clients/typescript`, the AWS SDK v3,
/// `@aws-sdk/client-s3` loaded only by `sendWithPayloads`): the same.
const TYPESCRIPT_WRITER: &str = r#"
import { DynamoDBClient } from "@aws-sdk/client-dynamodb";
import { S3Client } from "@aws-sdk/client-s3";
import { OutboxSettings, OutboxTransaction } from "./dist/src/index.js";
const [table, bucket, order] = process.argv.slice(1);
const ddb = new DynamoDBClient({}), s3 = new S3Client({ forcePathStyle: true });
const settings = await OutboxSettings.fromStack(ddb, table);
if (settings.claimCheck?.bucket !== bucket) throw new Error(`no claim check: ${JSON.stringify(settings)}`);
const tx = new OutboxTransaction(settings)
  .put("order", { TableName: table, Item: { PK: { S: `ORDER#${order}` }, SK: { S: "META" } },
                  ConditionExpression: "attribute_not_exists(PK)" })
  .event(`ORDER#${order}`, { eventType: "OrderDocumentAttached", aggregateType: "Order", aggregateId: order,
                             aggregateVersion: 1, payload: { orderId: order, document: "x".repeat(700000) } });
if (tx.offloads.length !== 1) throw new Error("not claim-checked");
console.log((await tx.sendWithPayloads(ddb, s3))[0]);
"#;

#[tokio::test]
async fn the_python_and_typescript_writers_store_large_events_in_s3_first() {
    let mut stack = Stack::with_bus().await;
    let (s3, bucket) = with_payload_bucket(&mut stack).await;
    let table = stack.table.clone();
    let python_id =
        testkit::scenario::python(&["-c", PYTHON_WRITER, &table, &bucket, "py-big"], &[]);
    let node_id = testkit::scenario::node(
        &[
            "--input-type=module",
            "-e",
            TYPESCRIPT_WRITER,
            &table,
            &bucket,
            "ts-big",
        ],
        &[],
        "clients/typescript",
    );
    let keys = object_keys(&s3, &bucket).await;
    for id in [&python_id, &node_id] {
        let id = id.trim();
        assert!(
            keys.iter().any(|k| k.starts_with(&format!("outbox/{id}/"))),
            "{id}: {keys:?}"
        );
    }
    publish_through_the_binary(&stack).await;
    let delivered = stack.drain_subscriber_checked().await;
    let mut ids: Vec<String> = delivered
        .iter()
        .map(|m| {
            let envelope: EventEnvelope =
                serde_json::from_value(m["detail"].clone()).expect("an envelope");
            assert_eq!(
                envelope.payload["document"].as_str().map(str::len),
                Some(700_000)
            );
            envelope.event_id.to_string()
        })
        .collect();
    ids.sort();
    let mut written = vec![python_id.trim().to_owned(), node_id.trim().to_owned()];
    written.sort();
    assert_eq!(ids, written, "both published whole");
    assert!(stack.outbox_items().await.is_empty());
}
