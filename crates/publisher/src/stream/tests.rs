use super::*;
use aws_lambda_events::event::dynamodb::Event;

/// As `lambda_runtime` decodes a payload (its `deserializer.rs`).
fn as_the_runtime_decodes(json: &str) -> StreamEvent {
    let de = &mut serde_json::Deserializer::from_slice(json.as_bytes());
    serde_path_to_error::deserialize(de).unwrap()
}

/// [`as_the_runtime_decodes`], its records read with the default key
/// schema (the event leaked: a test's records borrow from it).
fn records_of(json: &str) -> Result<Vec<Record<'static>>, StreamDecodeError> {
    Box::leak(Box::new(as_the_runtime_decodes(json))).records(&KeySchema::default())
}

/// The sort key of an outbox event the records below carry.
const OUTBOX_SK: &str = "OUTBOX#01JDQ3V7XB0000000000000002";

fn sample(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../../events/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn outbox_keys<'a>(records: &'a [Record<'_>]) -> Vec<Option<&'a str>> {
    records
        .iter()
        .map(|r| match &r.change {
            Change::OutboxInsert { key, .. } => Some(key.sk.as_str()),
            Change::Other => None,
        })
        .collect()
}

#[test]
fn the_sample_batch_decodes_as_the_typed_model_reads_it() {
    for name in [
        "publisher-mixed-batch.json",
        "publisher-single-insert.json",
        "publisher-malformed-outbox.json",
    ] {
        let json = sample(name);
        let event = as_the_runtime_decodes(&json);
        let schema = KeySchema::default();
        let records = event.records(&schema).unwrap();
        let typed: Event = serde_json::from_str(&json).unwrap();
        assert_eq!(records.len(), typed.records.len(), "{name}");
        for (lean, typed) in records.iter().zip(&typed.records) {
            let change = &typed.change;
            let sequence = change.sequence_number.as_deref();
            assert_eq!(lean.sequence.as_deref(), sequence);
            let created_ms = change.approximate_creation_date_time.timestamp_millis();
            assert_eq!(lean.created_ms, created_ms);
            let sk = match change.keys.get("SK") {
                Some(serde_dynamo::AttributeValue::S(s)) => s.clone(),
                _ => String::new(),
            };
            match &lean.change {
                Change::OutboxInsert { key, image, view } => {
                    assert_eq!(typed.event_name, "INSERT");
                    assert!(sk.starts_with("OUTBOX#"));
                    assert_eq!(key.sk, sk);
                    assert_eq!(image, &change.new_image);
                    assert_eq!(view, &change.stream_view_type);
                }
                Change::Other => {
                    assert!(typed.event_name != "INSERT" || !sk.starts_with("OUTBOX#"))
                }
            }
        }
    }
}

#[test]
fn sequence_numbers_borrow_from_the_event() {
    let records = records_of(&sample("publisher-mixed-batch.json")).unwrap();
    assert!(records
        .iter()
        .all(|r| matches!(r.sequence, Some(Cow::Borrowed(_)))));
    let last = "OUTBOX#01JDQ3V7XC0000000000000003";
    assert_eq!(
        outbox_keys(&records),
        [None, Some(OUTBOX_SK), None, None, Some(last)]
    );
}

/// An image that cannot decode as a DynamoDB item: decoding it would
/// fail the whole batch, so these records show it was never decoded.
const UNDECODABLE: &str = r#"{"PK": {"NOT_A_TYPE": 1}}"#;

fn swapped(swap: bool, a: String, b: String) -> (String, String) {
    if swap {
        (b, a)
    } else {
        (a, b)
    }
}

fn record(name: &str, sk: &str, dynamodb_first: bool, image_first: bool) -> String {
    let keys = format!(r#""Keys": {{"PK": {{"S": "ORDER#1"}}, "SK": {{"S": "{sk}"}}}}"#);
    let image = format!(r#""NewImage": {UNDECODABLE}"#);
    let (a, b) = swapped(image_first, keys, image);
    let dynamodb = format!(
        r#""dynamodb": {{"ApproximateCreationDateTime": 1796047200.5, {a}, {b}, "SequenceNumber": "7", "StreamViewType": "NEW_IMAGE"}}"#
    );
    let name = format!(r#""eventName": "{name}""#);
    let (a, b) = swapped(dynamodb_first, name, dynamodb);
    format!(r#"{{"eventID": "1", {a}, "awsRegion": "us-east-1", {b}}}"#)
}

#[test]
fn records_that_are_not_outbox_inserts_are_skipped_without_decoding_their_image() {
    for (name, sk) in [
        ("MODIFY", OUTBOX_SK),
        ("REMOVE", "META"),
        ("INSERT", "META"),
    ] {
        let json = format!(r#"{{"Records": [{}]}}"#, record(name, sk, false, false));
        let records = records_of(&json).unwrap();
        assert_eq!(records[0].change, Change::Other, "{name} {sk}");
        assert_eq!(records[0].created_ms, 1_796_047_200_500);
    }
    // The same image on an outbox insert is decoded, and fails.
    let insert = record("INSERT", OUTBOX_SK, false, false);
    let json = format!(r#"{{"Records": [{insert}]}}"#);
    assert!(records_of(&json).is_err());
}

#[test]
fn fields_in_another_order_are_decoded_the_slow_way_and_read_the_same() {
    let image = format!(r#"{{"PK": {{"S": "ORDER#1"}}, "SK": {{"S": "{OUTBOX_SK}"}}}}"#);
    for (dynamodb_first, image_first) in [(true, false), (false, true), (true, true)] {
        let of = |name| record(name, OUTBOX_SK, dynamodb_first, image_first);
        let json = format!(r#"{{"Records": [{}, {}]}}"#, of("REMOVE"), of("INSERT"));
        let records = records_of(&json.replace(UNDECODABLE, &image)).unwrap();
        assert_eq!(outbox_keys(&records), [None, Some(OUTBOX_SK)], "{json}");
    }
}

#[test]
fn a_table_with_its_own_key_names_is_read_by_them() {
    let schema = KeySchema {
        partition_key: "pk".into(),
        sort_key: "sk".into(),
        outbox_prefix: "EVT#".into(),
        ..KeySchema::default()
    };
    let json = r#"{"Records": [
        {"eventName": "INSERT", "dynamodb": {"Keys": {"pk": {"S": "A#1"}, "sk": {"S": "EVT#x"}}, "NewImage": {"pk": {"S": "A#1"}}, "SequenceNumber": "1"}},
        {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "A#1"}, "SK": {"S": "OUTBOX#x"}}, "NewImage": {"PK": {"S": "A#1"}}, "SequenceNumber": "2"}},
        {"eventName": "INSERT", "dynamodb": {"Keys": {"pk": {"N": "1"}, "sk": {"S": "EVT#y"}}, "SequenceNumber": "3"}}
    ]}"#;
    let event = as_the_runtime_decodes(json);
    let records = event.records(&schema).unwrap();
    assert_eq!(outbox_keys(&records), [Some("EVT#x"), None, None]);
}

#[test]
fn an_insert_without_a_new_image_is_an_outbox_insert_with_an_empty_image() {
    let json = r#"{"Records": [{"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "A#1"}, "SK": {"S": "OUTBOX#x"}}, "SequenceNumber": "1", "StreamViewType": "KEYS_ONLY"}}]}"#;
    let records = records_of(json).unwrap();
    assert!(matches!(
        &records[0].change,
        Change::OutboxInsert { image, view: Some(StreamViewType::KeysOnly), .. } if image.is_empty()
    ));
}

#[test]
fn an_event_that_is_not_a_stream_event_is_an_error() {
    for json in [
        r#"{}"#,
        r#"{"Records": {}}"#,
        r#"{"Records": [{"eventName": "INSERT"}]}"#,
        r#"[]"#,
    ] {
        assert!(records_of(json).is_err(), "{json}");
    }
}

#[test]
fn a_field_given_twice_or_a_record_without_its_name_fails_the_batch() {
    let keys = r#""Keys": {"PK": {"S": "A#1"}, "SK": {"S": "OUTBOX#x"}}"#;
    for json in [
        format!(r#"{{"Records": [{{"eventName": "INSERT", "dynamodb": {{{keys}, {keys}}}}}]}}"#),
        format!(
            r#"{{"Records": [{{"eventName": "INSERT", "eventName": "MODIFY", "dynamodb": {{{keys}}}}}]}}"#
        ),
        format!(
            r#"{{"Records": [{{"eventName": "INSERT", "dynamodb": {{{keys}}}, "dynamodb": {{}}}}]}}"#
        ),
        format!(
            r#"{{"Records": [], "Records": [{{"eventName": "INSERT", "dynamodb": {{{keys}}}}}]}}"#
        ),
        format!(r#"{{"Records": [{{"dynamodb": {{{keys}}}}}]}}"#),
    ] {
        assert!(records_of(&json).is_err(), "{json}");
    }
}

#[test]
fn nulls_read_as_the_general_model_reads_them() {
    let json = r#"{"Records": [
        {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "A#1"}, "SK": {"S": "OUTBOX#x"}}, "NewImage": null, "SequenceNumber": null, "ApproximateCreationDateTime": null}},
        {"eventName": "INSERT", "dynamodb": {"Keys": null, "NewImage": null, "SequenceNumber": "2"}}
    ]}"#;
    let records = records_of(json).unwrap();
    assert!(matches!(
        &records[0].change,
        Change::OutboxInsert { image, .. } if image.is_empty()
    ));
    assert_eq!(records[0].sequence, None);
    assert_eq!(records[1].change, Change::Other);
}

#[test]
fn records_become_the_event_lambda_would_send() {
    let typed = |name| serde_json::from_str::<Event>(&sample(name)).unwrap();
    let event = StreamEvent::from(typed("publisher-mixed-batch.json").records);
    let records = event.records(&KeySchema::default()).unwrap();
    assert_eq!(outbox_keys(&records).iter().flatten().count(), 2);
    // Records without sequence numbers become an event that decodes.
    let mut single = typed("publisher-single-insert.json").records;
    single[0].change.sequence_number = None;
    let event = StreamEvent::from(single);
    let records = event.records(&KeySchema::default()).unwrap();
    assert_eq!(records[0].sequence, None);
    assert!(matches!(records[0].change, Change::OutboxInsert { .. }));
}
