//! `template.yaml` as the single source of truth of the stream mapping: its
//! filter pattern (through the same code the local pipeline uses) against
//! sample and real stream records, and its settings.

use std::collections::HashSet;

use aws_sdk_dynamodb::types::AttributeValue;
use outboxctl::template::MappingSettings;
use serde_json::Value;
use testkit::{far_deadline, root, sample, Stack};

fn mapping() -> MappingSettings {
    MappingSettings::from_template(&root().join("template.yaml")).expect("template has the mapping")
}

#[test]
fn mapping_settings_are_the_safe_ones() {
    let m = mapping();
    assert_eq!(m.function, "PublisherFunction");
    assert_eq!(m.starting_position, "TRIM_HORIZON");
    assert!(m.report_batch_item_failures);
    assert!(m.bisect_on_error);
    assert!(m.maximum_retry_attempts >= 0, "bounded retries");
    assert!(m.maximum_record_age_seconds > 0, "bounded record age");
    // One parameter feeds both; its default is the sweeper's default too.
    let config =
        outbox_core::Config::from_lookup(|k| (k == "TABLE_NAME").then(|| "t".to_owned())).unwrap();
    assert_eq!(
        m.maximum_record_age_seconds as u64,
        config.stranded_after.as_secs()
    );
    assert_eq!(m.patterns.len(), 1);
}

#[test]
fn the_pattern_passes_only_outbox_inserts_of_the_samples() {
    let filters = mapping().filters().unwrap();
    let event: Value = serde_json::from_str(&sample("publisher-mixed-batch.json")).unwrap();
    let passed: Vec<(String, String)> = event["Records"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| filters.matches(r))
        .map(|r| {
            (
                r["eventName"].as_str().unwrap().to_owned(),
                r["dynamodb"]["Keys"]["SK"]["S"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            )
        })
        .collect();
    assert_eq!(passed.len(), 2, "{passed:?}");
    assert!(passed
        .iter()
        .all(|(name, sk)| name == "INSERT" && sk.starts_with("OUTBOX#")));
    for name in [
        "publisher-single-insert.json",
        "publisher-malformed-outbox.json",
    ] {
        let event: Value = serde_json::from_str(&sample(name)).unwrap();
        assert!(
            event["Records"]
                .as_array()
                .unwrap()
                .iter()
                .all(|r| filters.matches(r)),
            "{name}"
        );
    }
}

#[tokio::test]
async fn the_pattern_against_real_stream_records() {
    let stack = Stack::with_bus().await;
    stack.create_orders(2).await;
    let mut stream = stack.stream();
    let inserts = stream.read().await.unwrap();
    // Publish (the publisher's deletes become REMOVE records) and modify a META.
    let (sink, _) = stack.eventbridge_sink();
    publisher::Publisher::new(sink, stack.store())
        .process(&inserts, &far_deadline())
        .await
        .unwrap();
    let mut meta = stack.items().await.into_iter().next().unwrap();
    meta.insert("status".into(), AttributeValue::S("PAID".into()));
    stack.put_raw(meta).await;
    let mut records = inserts;
    records.extend(stream.read().await.unwrap());

    let filters = mapping().filters().unwrap();
    let mut seen = HashSet::new();
    for record in &records {
        let json = serde_json::to_value(record).unwrap();
        let sk = record.change.keys.get("SK").cloned();
        let sk: String = serde_dynamo::from_attribute_value(sk.unwrap()).unwrap();
        let outbox_insert = record.event_name == "INSERT" && sk.starts_with("OUTBOX#");
        assert_eq!(
            filters.matches(&json),
            outbox_insert,
            "{} {sk}",
            record.event_name
        );
        seen.insert((record.event_name.clone(), sk.starts_with("OUTBOX#")));
    }
    // Every kind of record was seen: outbox INSERT and REMOVE, META INSERT and MODIFY.
    for kind in [
        ("INSERT", true),
        ("REMOVE", true),
        ("INSERT", false),
        ("MODIFY", false),
    ] {
        assert!(
            seen.contains(&(kind.0.to_owned(), kind.1)),
            "{kind:?} missing from {seen:?}"
        );
    }
}
