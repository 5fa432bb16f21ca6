//! Issue #61 points 2 and 3: one table, one publishing stack, and writers
//! that learn the stack's settings from the table.
//!
//! The fault each test names: a second outbox stack deployed on a table
//! that already has one (a migration from EventBridge to SNS, a second
//! sink added). At `b82c310` both stacks' publishers published and deleted
//! whatever their mapping gave them first, each read the other's deletes
//! as its own publishes, and `outboxctl` took whichever stack's settings
//! were recorded last. Now the stack that was there first keeps
//! publishing, the second one's publisher fails its cold start and its
//! sweeper fails its runs (their `Errors` alarms), the events stay in the
//! table, `doctor` reports both stacks, and `outboxctl` asks which one.

use outbox_core::transaction::{OutboxSettings, StackSettingsError};
use outbox_core::{keys, size::EventLimits, KeySchema};
use testkit::lambda::FunctionError;
use testkit::rig::{scheduled, stream_event};
use testkit::scenario::{assert_no_failures, node, python};
use testkit::{unique, Operator, Stack};

/// Two stacks on one table, through the real binaries with the templates'
/// environments: stack one (the orders example on a bus) runs first;
/// stack two is the same templates deployed under another stack name.
#[tokio::test]
async fn a_second_stack_on_the_table_refuses_to_publish_and_the_first_goes_on() {
    let stack = Stack::with_bus().await;
    let one_publisher = stack.function(devkit::Function::Publisher, &[], &[]);
    let one_sweeper = stack.function(devkit::Function::Sweeper, &[], &[]);
    let payload = |v: &serde_json::Value| serde_json::to_vec(v).expect("JSON");
    // Stack one is in service: its sweeper's run records its heartbeat.
    let swept = one_sweeper.invoke(&payload(&scheduled())).await;
    swept.expect("stack one's sweep");

    let second = unique("second");
    let two_publisher = stack.function_of_stack(&second, devkit::Function::Publisher, &[]);
    let two_sweeper = stack.function_of_stack(&second, devkit::Function::Sweeper, &[]);
    assert_eq!(two_publisher.env("STACK_NAME"), Some(second.as_str()));
    assert_ne!(two_publisher.env("STACK_ID"), one_publisher.env("STACK_ID"));

    stack.create_orders(1).await;
    let records = stack.outbox_inserts().await;
    assert_eq!(records.len(), 1);
    let event = payload(&stream_event(records.clone()));

    // Stack two's mapping delivers the record first: its publisher does
    // not start, and publishes nothing.
    let refused = two_publisher.invoke(&event).await;
    let crashed = matches!(refused, Err(FunctionError::Crashed));
    assert!(
        crashed,
        "the second stack's publisher fails its cold start: {refused:?}"
    );
    let log = std::fs::read_to_string(two_publisher.log()).unwrap_or_default();
    let names = log.contains("another outbox stack publishes from")
        && log.contains(&stack.deployment.stack_name);
    assert!(names, "the failure names the stack in service: {log}");
    let kept = stack.outbox_items().await;
    assert_eq!(kept.len(), 1, "the event stays in the table");
    // Its sweeper refuses its runs too (it would republish and delete).
    let sweep = two_sweeper.invoke(&payload(&scheduled())).await;
    assert!(
        sweep.is_err(),
        "the second stack's sweeper refuses: {sweep:?}"
    );
    assert_eq!(stack.outbox_items().await.len(), 1);

    // Stack one, started after stack two recorded its settings, goes on:
    // adding a stack never stops the one in service.
    let answer = one_publisher.invoke(&event).await;
    assert_no_failures(&answer.expect("stack one publishes"));
    let left = stack.outbox_items().await;
    assert!(left.is_empty(), "published, then deleted: {left:?}");
    let delivered = stack.drain_subscriber().await;
    assert_eq!(delivered.len(), 1, "stack one's bus has the event");

    // doctor reports the two stacks; outboxctl asks which one.
    let (keys, sink) = (KeySchema::default(), outboxctl::SinkToCheck::default());
    let findings = outboxctl::diagnose(&stack.sdk, &keys, &stack.table, &sink).await;
    let problems = outboxctl::problems(&findings);
    assert!(problems.contains(&"stacks"), "{findings:?}");
    // outboxctl and a writer take the stack in service (the refused one
    // recorded too, and stays live while its functions are invoked), and
    // the other one by its name.
    let operator = Operator::new(&stack.table);
    let (ok, out, err) = operator.status(&["--json"]);
    assert!(ok, "{out}{err}");
    let status: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    let recorded = status["settings"]["stack"].as_str();
    let one = Some(stack.deployment.stack_name.as_str());
    assert_eq!(recorded, one, "stack one's record: {out}");
    let (ok, out, err) = operator.status(&["--stack", &second]);
    assert!(ok, "{out}{err}");
    let (ok, _, err) = operator.status(&["--stack", "no-such-stack"]);
    assert!(!ok && err.contains(&second), "{err}");
    let from_stack = || OutboxSettings::from_stack(&stack.ddb, &stack.table);
    let unnamed = from_stack().load().await.expect("the stack in service");
    assert_eq!(unnamed.keys, stack.keys);
    let missing = from_stack().stack("no-such-stack").load().await;
    let missing = missing.expect_err("no such stack");
    use keys::StackChoiceError::NoSuchStack;
    let no_such = matches!(
        &missing,
        StackSettingsError::Choice {
            source: NoSuchStack { .. },
            ..
        }
    );
    assert!(no_such, "{missing}");
    let named = from_stack()
        .stack(&stack.deployment.stack_name)
        .load()
        .await;
    assert_eq!(named.expect("the named stack's settings").keys, stack.keys);
}

/// A writer that takes its settings from the table cannot drift from its
/// stack: on an adopter's table with its own key names, an SNS FIFO sink
/// and 4 shards, one `Query` gives the writer the stack's names, shards,
/// home region and the SNS limit (at `b82c310` the writer restated them,
/// and `OutboxSettings::new` assumed EventBridge's 1 MB, four times what
/// the SNS stack can publish).
#[tokio::test]
async fn a_writer_learns_the_stacks_key_names_shards_region_and_limit_from_the_table() {
    let schema = KeySchema {
        partition_key: "pk".into(),
        sort_key: "sk".into(),
        outbox_prefix: "evt#".into(),
        pending_index: "pending".into(),
        pending_partition_key: "data".into(),
        pending_sort_key: "status".into(),
        ..KeySchema::default()
    };
    let mut stack = Stack::with_schema(&schema, &[]).await;
    let (topic, _) = testkit::create_fifo_topic(&stack.sdk, &unique("orders"))
        .await
        .expect("topic");
    stack.use_topic(&topic).await;
    // The functions record as they start (the sweeper's run).
    let sweeper = stack.function(devkit::Function::Sweeper, &[("OutboxShards", "4")], &[]);
    let swept = sweeper
        .invoke(&serde_json::to_vec(&scheduled()).expect("JSON"))
        .await;
    swept.expect("the sweep");

    let from_stack = || OutboxSettings::from_stack(&stack.ddb, &stack.table);
    let without_names = from_stack().load().await;
    let refused = matches!(
        &without_names,
        Err(StackSettingsError::Read { code, .. }) if code == "ValidationException"
    );
    assert!(
        refused,
        "a table keyed pk/sk is read with its key names: {without_names:?}"
    );
    let settings = from_stack().key_names("pk", "sk").load().await;
    let settings = settings.expect("the stack's settings");
    assert_eq!(settings.table, stack.table);
    assert_eq!(settings.shards, 4);
    assert_eq!(settings.keys.pending_partition_key, "data");
    assert_eq!(settings.keys.outbox_prefix, "evt#");
    let home = settings.keys.home_region.as_deref();
    assert_eq!(home, Some(stack.deployment.region.as_str()));
    assert_eq!(settings.key_attributes, ["pk", "sk"]);
    assert_eq!(settings.limits, EventLimits::sns(true));

    // The Python writer package reads the same record to the same settings.
    let region = [("AWS_REGION", stack.deployment.region.as_str())];
    let script = r#"
import json, sys, boto3
from dynamodb_outbox import OutboxSettings
s = OutboxSettings.from_stack(boto3.client("dynamodb"), sys.argv[1], partition_key="pk", sort_key="sk")
print(json.dumps([s.table, s.shards, s.keys.outbox_prefix, s.keys.pending_partition_key,
                  s.keys.pending_sort_key, s.keys.home_region, s.limits.kind, s.limits.fifo, s.limits.max_bytes]))
"#;
    let out = python(&["-c", script, &stack.table], &region);
    let read: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(
        read,
        serde_json::json!([
            settings.table,
            4,
            "evt#",
            "data",
            "status",
            stack.deployment.region,
            "sns",
            true,
            outbox_core::size::DEFAULT_SNS_BYTES
        ])
    );

    // And so does the TypeScript package.
    let module = testkit::root().join("clients/typescript/dist/src/index.js");
    let script = format!(
        r#"
import {{ DynamoDBClient }} from "@aws-sdk/client-dynamodb";
const {{ OutboxSettings }} = await import({module:?});
const s = await OutboxSettings.fromStack(new DynamoDBClient({{}}), process.argv[1], {{ partitionKey: "pk", sortKey: "sk" }});
console.log(JSON.stringify([s.table, s.shards, s.keys.outboxPrefix, s.keys.pendingPartitionKey,
  s.keys.pendingSortKey, s.keys.homeRegion, s.limits.kind, s.limits.fifo, s.limits.maxBytes]));
"#,
        module = module.display().to_string()
    );
    let args = ["--input-type=module", "-e", &script, &stack.table];
    let out = node(&args, &region, "clients/typescript");
    let read_ts: serde_json::Value = serde_json::from_str(&out).expect("JSON");
    assert_eq!(read_ts, read, "TypeScript reads what Python and Rust read");
}

/// A stack deleted and made again under its name (another CloudFormation
/// stack id) is not "there first" with the deleted one's date: its record
/// in DynamoDB starts anew (a conditional `UpdateItem` on the recorded
/// `STACK_ID`, then an unconditional one), while the same stack recording
/// again keeps its date.
#[tokio::test]
async fn a_stack_made_again_under_its_name_starts_its_record_anew() {
    use outbox_engine::PublishStore;
    let stack = Stack::new().await;
    let store = stack.store();
    let record = |id: &str, since: &str| {
        let mut r = stack.settings_record(devkit::Function::Sweeper);
        r.variables.insert("STACK_ID".into(), id.into());
        r.since = Some(since.into());
        r
    };
    let read = || async {
        let records = store.recorded_settings(&testkit::far_deadline()).await;
        records
            .expect("read")
            .into_iter()
            .find(|r| r.function == "sweeper")
            .and_then(|r| r.since)
    };
    for (id, since) in [
        ("arn:old", "2026-01-01T00:00:00Z"),
        ("arn:new", "2026-12-07T10:00:00Z"),
        ("arn:new", "2026-12-07T11:00:00Z"),
    ] {
        store
            .record_settings(&record(id, since), &testkit::far_deadline())
            .await
            .expect("recorded");
    }
    assert_eq!(read().await.as_deref(), Some("2026-12-07T10:00:00Z"));
}
