//! Unit tests of `crates/outboxctl/src/doctor.rs`.

use aws_sdk_dynamodb::types::{
    AttributeDefinition, IndexStatus, KeySchemaElement, Projection, StreamSpecification,
};
use aws_sdk_lambda::types::{
    DestinationConfig, EventSourceMappingConfiguration as Mapping, Filter, FilterCriteria,
    FunctionResponseType, OnFailure,
};

use super::*;

fn key(name: &str, kind: KeyType) -> KeySchemaElement {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .unwrap()
}

fn index(
    name: &str,
    hash: &str,
    range: &str,
    projection: ProjectionType,
) -> GlobalSecondaryIndexDescription {
    GlobalSecondaryIndexDescription::builder()
        .index_name(name)
        .key_schema(key(hash, KeyType::Hash))
        .key_schema(key(range, KeyType::Range))
        .projection(Projection::builder().projection_type(projection).build())
        .index_status(IndexStatus::Active)
        .build()
}

/// The table the stack creates.
fn good() -> aws_sdk_dynamodb::types::builders::TableDescriptionBuilder {
    let mut table = TableDescription::builder()
        .key_schema(key("PK", KeyType::Hash))
        .key_schema(key("SK", KeyType::Range))
        .stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(StreamViewType::NewImage)
                .build()
                .unwrap(),
        )
        .global_secondary_indexes(index("GSI1", "GSI1PK", "GSI1SK", ProjectionType::All))
        .global_secondary_indexes(index("GSI2", "GSI2PK", "GSI2SK", ProjectionType::All));
    for name in ["PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK"] {
        table = table.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(name)
                .attribute_type(ScalarAttributeType::S)
                .build()
                .unwrap(),
        );
    }
    table
}

#[test]
fn the_stacks_table_is_fit() {
    let findings = check_table(&KeySchema::default(), "t", &good().build());
    assert!(problems(&findings).is_empty(), "{findings:?}");
    assert_eq!(findings.len(), 4);
}

#[test]
fn each_broken_table_names_its_check_and_a_fix() {
    let keys_only = StreamSpecification::builder()
        .stream_enabled(true)
        .stream_view_type(StreamViewType::KeysOnly)
        .build()
        .unwrap();
    let off = StreamSpecification::builder()
        .stream_enabled(false)
        .build()
        .unwrap();
    let gsi1 = |hash, range| index("GSI1", hash, range, ProjectionType::All);
    let gsi2 = |projection| index("GSI2", "GSI2PK", "GSI2SK", projection);
    let indexes = |list| good().set_global_secondary_indexes(Some(list)).build();
    let other_keys = vec![key("pk", KeyType::Hash), key("sk", KeyType::Range)];
    let cases: Vec<(&str, TableDescription)> = vec![
        ("stream", good().stream_specification(keys_only).build()),
        ("stream", good().stream_specification(off).build()),
        ("pending-index", indexes(vec![gsi2(ProjectionType::All)])),
        (
            "pending-index",
            indexes(vec![gsi1("gsi1pk", "gsi1sk"), gsi2(ProjectionType::All)]),
        ),
        (
            "dead-letter-index",
            indexes(vec![
                gsi1("GSI1PK", "GSI1SK"),
                gsi2(ProjectionType::KeysOnly),
            ]),
        ),
        ("keys", good().set_key_schema(Some(other_keys)).build()),
    ];
    for (check, table) in cases {
        let findings = check_table(&KeySchema::default(), "t", &table);
        assert_eq!(problems(&findings), vec![check], "{findings:?}");
        let finding = findings.iter().find(|f| f.check == check).unwrap();
        assert!(finding.fix.as_deref().is_some_and(|f| !f.is_empty()));
    }
}

#[test]
fn ttl_must_be_on_the_writers_attribute() {
    let ttl = |status, name: &str| {
        TimeToLiveDescription::builder()
            .time_to_live_status(status)
            .attribute_name(name)
            .build()
    };
    let fit = ttl(TimeToLiveStatus::Enabled, "expiresAt");
    let finding = check_ttl(&KeySchema::default(), "t", Some(&fit));
    assert_eq!(finding.severity, Severity::Ok);
    for broken in [
        Some(ttl(TimeToLiveStatus::Enabled, "ttl")),
        Some(ttl(TimeToLiveStatus::Disabled, "expiresAt")),
        None,
    ] {
        let finding = check_ttl(&KeySchema::default(), "t", broken.as_ref());
        assert_eq!(finding.severity, Severity::Problem, "{broken:?}");
    }
}

fn mapping(prefix: &str, reports: bool, on_failure: bool) -> Mapping {
    let pattern =
        format!(r#"{{"dynamodb":{{"Keys":{{"SK":{{"S":[{{"prefix":"{prefix}"}}]}}}}}}}}"#);
    let mut m = Mapping::builder()
        .function_arn("arn:aws:lambda:us-east-1:1:function:publisher")
        .state("Enabled")
        .filter_criteria(
            FilterCriteria::builder()
                .filters(Filter::builder().pattern(pattern).build())
                .build(),
        );
    if reports {
        m = m.function_response_types(FunctionResponseType::ReportBatchItemFailures);
    }
    if on_failure {
        m = m.destination_config(
            DestinationConfig::builder()
                .on_failure(
                    OnFailure::builder()
                        .destination("arn:aws:sqs:us-east-1:1:q")
                        .build(),
                )
                .build(),
        );
    }
    m.build()
}

#[test]
fn mappings_are_counted_and_the_publishers_checked() {
    let check = |mappings: &[Mapping]| check_mappings(&KeySchema::default(), mappings);
    let good = mapping("OUTBOX#", true, true);
    assert!(problems(&check(std::slice::from_ref(&good))).is_empty());
    let none = check(&[]);
    assert!(problems(&none).is_empty(), "before deploying: a warning");
    assert!(none.iter().any(|f| f.severity == Severity::Warning));
    let cases = [
        (
            vec![good.clone(), good.clone(), good.clone()],
            vec!["mappings", "publisher-mapping"],
        ),
        // Two publishers on one stream (#61 point 3): each would delete
        // what it published, so the other's sink misses it.
        (vec![good.clone(), good.clone()], vec!["publisher-mapping"]),
        (vec![mapping("evt#", true, true)], vec!["publisher-mapping"]),
        (
            vec![mapping("OUTBOX#", false, true)],
            vec!["publisher-mapping"],
        ),
        (
            vec![mapping("OUTBOX#", true, false)],
            vec!["publisher-mapping"],
        ),
    ];
    for (mappings, checks) in cases {
        let findings = check(&mappings);
        assert_eq!(problems(&findings), checks, "{findings:?}");
    }
}

#[test]
fn two_live_stacks_in_a_region_are_a_problem() {
    use outbox_core::keys::RecordedSettings;
    let now = time::OffsetDateTime::now_utc();
    let record = |stack: &str, minutes_ago: i64| RecordedSettings {
        region: "eu-west-1".into(),
        stack: stack.into(),
        function: "sweeper".into(),
        by: RecordedSettings::by_now(stack, now - time::Duration::minutes(minutes_ago)),
        since: None,
        variables: Default::default(),
    };
    let check = |records: &[RecordedSettings]| check_stacks(records, "eu-west-1", now).severity;
    assert_eq!(check(&[record("one", 5)]), Severity::Ok);
    // A deleted stack's record stays, and is not live.
    assert_eq!(
        check(&[record("one", 5), record("gone", 600)]),
        Severity::Ok
    );
    assert_eq!(
        check(&[record("one", 5), record("two", 1)]),
        Severity::Problem
    );
    assert_eq!(check(&[record("gone", 600)]), Severity::Warning);
    assert_eq!(check(&[]), Severity::Warning);
}
