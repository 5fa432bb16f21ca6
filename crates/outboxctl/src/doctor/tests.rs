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

fn stream(enabled: bool, view: Option<StreamViewType>) -> StreamSpecification {
    let spec = StreamSpecification::builder().stream_enabled(enabled);
    spec.set_stream_view_type(view).build().unwrap()
}

/// The table the stack creates.
fn good() -> aws_sdk_dynamodb::types::builders::TableDescriptionBuilder {
    let mut table = TableDescription::builder()
        .key_schema(key("PK", KeyType::Hash))
        .key_schema(key("SK", KeyType::Range))
        .stream_specification(stream(true, Some(StreamViewType::NewImage)))
        .global_secondary_indexes(index("GSI1", "GSI1PK", "GSI1SK", ProjectionType::All))
        .global_secondary_indexes(index("GSI2", "GSI2PK", "GSI2SK", ProjectionType::All));
    for name in ["PK", "SK", "GSI1PK", "GSI1SK", "GSI2PK", "GSI2SK"] {
        let definition = AttributeDefinition::builder().attribute_name(name);
        let definition = definition.attribute_type(ScalarAttributeType::S);
        table = table.attribute_definitions(definition.build().unwrap());
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
    let with_stream = |enabled, view| good().stream_specification(stream(enabled, view)).build();
    let gsi1 = |hash, range| index("GSI1", hash, range, ProjectionType::All);
    let gsi2 = |projection| index("GSI2", "GSI2PK", "GSI2SK", projection);
    let indexes = |list| good().set_global_secondary_indexes(Some(list)).build();
    let (all, keys_only) = (gsi2(ProjectionType::All), gsi2(ProjectionType::KeysOnly));
    let (pending, lowercase) = (gsi1("GSI1PK", "GSI1SK"), gsi1("gsi1pk", "gsi1sk"));
    let other_keys = vec![key("pk", KeyType::Hash), key("sk", KeyType::Range)];
    let cases = [
        ("stream", with_stream(true, Some(StreamViewType::KeysOnly))),
        ("stream", with_stream(false, None)),
        ("pending-index", indexes(vec![all.clone()])),
        ("pending-index", indexes(vec![lowercase, all.clone()])),
        ("dead-letter-index", indexes(vec![pending, keys_only])),
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
    let filter = Filter::builder().pattern(pattern).build();
    let mut m = Mapping::builder()
        .function_arn("arn:aws:lambda:us-east-1:1:function:publisher")
        .state("Enabled")
        .filter_criteria(FilterCriteria::builder().filters(filter).build());
    if reports {
        m = m.function_response_types(FunctionResponseType::ReportBatchItemFailures);
    }
    if on_failure {
        let queue = OnFailure::builder().destination("arn:aws:sqs:us-east-1:1:q");
        let destination = DestinationConfig::builder().on_failure(queue.build());
        m = m.destination_config(destination.build());
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
    let three = check(&[good.clone(), good.clone(), good.clone()]);
    assert_eq!(problems(&three), ["mappings", "publisher-mapping"]);
    for mappings in [
        // Two publishers on one stream (#61 point 3): each would delete
        // what it published, so the other's sink misses it.
        vec![good.clone(), good.clone()],
        vec![mapping("evt#", true, true)],
        vec![mapping("OUTBOX#", false, true)],
        vec![mapping("OUTBOX#", true, false)],
    ] {
        let findings = check(&mappings);
        assert_eq!(problems(&findings), ["publisher-mapping"], "{findings:?}");
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
    let (one, two, gone) = (record("one", 5), record("two", 1), record("gone", 600));
    assert_eq!(check(std::slice::from_ref(&one)), Severity::Ok);
    // A deleted stack's record stays, and is not live.
    assert_eq!(check(&[one.clone(), gone.clone()]), Severity::Ok);
    assert_eq!(check(&[one, two]), Severity::Problem);
    assert_eq!(check(&[gone]), Severity::Warning);
    assert_eq!(check(&[]), Severity::Warning);
}
