//! `outboxctl doctor` against DynamoDB Local (the table, its stream, TTL)
//! and moto (the sink; Lambda's mapping list): the stack's own table
//! passes, and each broken copy is a problem of its own check, with a fix.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};
use outbox_core::KeySchema;
use outboxctl::{diagnose, problems, SinkToCheck};
use testkit::{unique, Stack};

/// A table like the stack's, but with one thing changed.
struct Shape {
    keys: (&'static str, &'static str),
    stream: Option<StreamViewType>,
    /// The pending index's keys (`None`: no pending index).
    pending: Option<(&'static str, &'static str)>,
    dead_letter_projection: ProjectionType,
    ttl: Option<&'static str>,
}

const FIT: Shape = Shape {
    keys: ("PK", "SK"),
    stream: Some(StreamViewType::NewImage),
    pending: Some(("GSI1PK", "GSI1SK")),
    dead_letter_projection: ProjectionType::All,
    ttl: Some("expiresAt"),
};

async fn table(stack: &Stack, shape: Shape) -> String {
    let name = unique("doctor");
    let key = |n: &str, k: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(n)
            .key_type(k)
            .build()
            .unwrap()
    };
    let string = |n: &str| {
        AttributeDefinition::builder()
            .attribute_name(n)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .unwrap()
    };
    let index = |n: &str, (h, r): (&str, &str), p: ProjectionType| {
        GlobalSecondaryIndex::builder()
            .index_name(n)
            .key_schema(key(h, KeyType::Hash))
            .key_schema(key(r, KeyType::Range))
            .projection(Projection::builder().projection_type(p).build())
            .build()
            .unwrap()
    };
    let mut create = stack
        .ddb
        .create_table()
        .table_name(&name)
        .billing_mode(BillingMode::PayPerRequest)
        .key_schema(key(shape.keys.0, KeyType::Hash))
        .key_schema(key(shape.keys.1, KeyType::Range))
        .attribute_definitions(string(shape.keys.0))
        .attribute_definitions(string(shape.keys.1))
        .attribute_definitions(string("GSI2PK"))
        .attribute_definitions(string("GSI2SK"))
        .global_secondary_indexes(index(
            "GSI2",
            ("GSI2PK", "GSI2SK"),
            shape.dead_letter_projection,
        ));
    if let Some(keys) = shape.pending {
        create = create
            .attribute_definitions(string(keys.0))
            .attribute_definitions(string(keys.1))
            .global_secondary_indexes(index("GSI1", keys, ProjectionType::All));
    }
    if let Some(view) = shape.stream {
        create = create.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(view)
                .build()
                .unwrap(),
        );
    }
    create.send().await.expect("create table");
    if let Some(attribute) = shape.ttl {
        stack
            .ddb
            .update_time_to_live()
            .table_name(&name)
            .time_to_live_specification(
                TimeToLiveSpecification::builder()
                    .enabled(true)
                    .attribute_name(attribute)
                    .build()
                    .unwrap(),
            )
            .send()
            .await
            .expect("ttl");
    }
    name
}

/// The stack's own table and bus: no problem; before any publisher is
/// deployed, the mapping check is a warning, not a problem. The CLI exits
/// 0 and prints the findings as JSON.
#[tokio::test]
async fn the_stacks_table_is_fit() {
    let stack = Stack::with_bus().await;
    let bus = stack.bus.as_ref().expect("bus").0.clone();
    let (ok, out, err) = stack.operator().doctor(&["--bus", &bus, "--json"]);
    assert!(ok, "{out}\n{err}");
    let findings: Vec<serde_json::Value> = serde_json::from_str(&out).expect("JSON");
    let checks: Vec<&str> = findings
        .iter()
        .filter_map(|f| f["check"].as_str())
        .collect();
    assert_eq!(
        checks,
        [
            "table",
            "keys",
            "stream",
            "pending-index",
            "dead-letter-index",
            "stacks",
            "ttl",
            "mappings",
            "publisher-mapping",
            "sink"
        ]
    );
    assert!(findings.iter().all(|f| f["severity"] != "problem"), "{out}");
    assert_eq!(findings[8]["severity"], "warning", "no publisher yet");
    assert_eq!(
        findings[5]["severity"], "warning",
        "no stack's function has run yet: {out}"
    );

    // A table shaped like it, made here: the same.
    let fit = table(&stack, FIT).await;
    let findings = check(&stack, &fit, &SinkToCheck::default()).await;
    assert!(problems(&findings).is_empty(), "{findings:?}");
}

/// `diagnose` of `table` (the default key schema) and `sink`.
async fn check(stack: &Stack, table: &str, sink: &SinkToCheck) -> Vec<outboxctl::Finding> {
    diagnose(&stack.sdk, &KeySchema::default(), table, sink).await
}

/// One broken copy per finding, each a problem of its own check only,
/// with a fix; the CLI exits 1.
#[tokio::test]
async fn each_broken_copy_is_a_problem_of_its_own_check() {
    let stack = Stack::with_bus().await;
    type Break = fn(&mut Shape);
    let cases: [(&str, Break); 8] = [
        ("keys", |s| s.keys = ("pk", "sk")),
        ("stream", |s| s.stream = None),
        ("stream", |s| s.stream = Some(StreamViewType::KeysOnly)),
        ("pending-index", |s| s.pending = None),
        ("pending-index", |s| s.pending = Some(("gsi1pk", "gsi1sk"))),
        ("dead-letter-index", |s| {
            s.dead_letter_projection = ProjectionType::KeysOnly
        }),
        ("ttl", |s| s.ttl = None),
        ("ttl", |s| s.ttl = Some("ttl")),
    ];
    for (check_name, broken) in cases {
        let mut shape = FIT;
        broken(&mut shape);
        let name = table(&stack, shape).await;
        let findings = check(&stack, &name, &SinkToCheck::default()).await;
        assert_eq!(problems(&findings), vec![check_name], "{findings:?}");
        let finding = findings.iter().find(|f| f.check == check_name).unwrap();
        assert!(
            finding.fix.as_deref().is_some_and(|f| !f.is_empty()),
            "{finding:?}"
        );
    }

    // No table.
    let findings = check(&stack, &unique("missing"), &SinkToCheck::default()).await;
    assert_eq!(problems(&findings), vec!["table"]);

    // The sink: a bus that does not exist; a topic that does not accept
    // 1 MiB (its MaximumMessageSize is 256 KiB unless raised).
    let missing_bus = SinkToCheck {
        bus: Some(unique("no-bus")),
        ..SinkToCheck::default()
    };
    let findings = check(&stack, &stack.table, &missing_bus).await;
    assert_eq!(problems(&findings), vec!["sink"], "{findings:?}");
    let (topic, _) = testkit::create_fifo_topic(&stack.sdk, &unique("doctor"))
        .await
        .expect("topic");
    let too_big = SinkToCheck {
        topic: Some(topic.clone()),
        max_event_bytes: Some(1024 * 1024),
        ..SinkToCheck::default()
    };
    let findings = check(&stack, &stack.table, &too_big).await;
    assert_eq!(problems(&findings), vec!["sink"], "{findings:?}");
    let fits = SinkToCheck {
        topic: Some(topic),
        ..SinkToCheck::default()
    };
    let findings = check(&stack, &stack.table, &fits).await;
    assert!(problems(&findings).is_empty(), "{findings:?}");

    // The CLI: exit 1, the finding and its fix on stdout, the count on stderr.
    let broken = table(&stack, Shape { ttl: None, ..FIT }).await;
    let (ok, out, err) = testkit::Operator::new(&broken).doctor(&[]);
    assert!(!ok);
    assert!(out.contains("update-time-to-live"), "{out}");
    assert!(err.contains("1 problem"), "{err}");
}
