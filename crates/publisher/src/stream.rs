//! The publisher's own decode of a DynamoDB stream event: only what it uses
//! (sequence numbers, event names, keys, approximate creation times, the
//! view type and the outbox items' images), borrowing from the event's text
//! where it can. The general `aws_lambda_events` model decodes every field
//! of every record into owned strings and maps: most of the handler's time
//! (docs/performance.md §2).
//!
//! The runtime hands the handler the event's JSON text ([`StreamEvent`]:
//! one validating pass and one copy); [`StreamEvent::records`] then reads
//! it once with the table's key schema in hand. A record that is not an
//! insert, or whose keys are not an outbox item's, is skipped without its
//! image being decoded (Lambda sends `eventName` before `dynamodb`, and
//! `Keys` before `NewImage`; in any other order the image is decoded and
//! dropped: slower, never wrong).

use std::borrow::Cow;
use std::fmt;

use aws_lambda_events::event::dynamodb::{EventRecord, StreamViewType};
use outbox_core::keys::{ItemKey, KeySchema};
use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// A DynamoDB stream event as Lambda delivers it, kept as its JSON text
/// until [`StreamEvent::records`] reads it with the table's key schema.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub struct StreamEvent(Box<RawValue>);

/// A stream event that does not decode: the whole batch fails (Lambda
/// retries it, then gives it to the mapping's OnFailure destination).
#[derive(Debug, thiserror::Error)]
#[error("the stream event does not decode: {0}")]
pub struct StreamDecodeError(#[from] serde_json::Error);

impl StreamEvent {
    /// The event of these records, as Lambda would send them (tests, and
    /// callers holding `aws_lambda_events` records).
    pub(crate) fn from_records(records: &[EventRecord]) -> Result<Self, StreamDecodeError> {
        #[derive(serde::Serialize)]
        struct Records<'r> {
            #[serde(rename = "Records")]
            records: &'r [EventRecord],
        }
        Ok(Self(serde_json::value::to_raw_value(&Records { records })?))
    }

    /// The event's records, in stream order.
    pub fn records(&self, schema: &KeySchema) -> Result<Vec<Record<'_>>, StreamDecodeError> {
        let mut de = serde_json::Deserializer::from_str(self.0.get());
        let records = EventSeed(schema).deserialize(&mut de)?;
        de.end()?;
        Ok(records)
    }
}

impl From<Vec<EventRecord>> for StreamEvent {
    /// Serializing `aws_lambda_events`' records cannot fail (every map key is
    /// a string); should it ever, the event is `null`, which
    /// [`StreamEvent::records`] refuses: an error, never a panic.
    fn from(records: Vec<EventRecord>) -> Self {
        Self::from_records(&records).unwrap_or_else(|e| {
            tracing::error!(error = %e, "stream records did not serialize");
            Self(Box::default())
        })
    }
}

/// One stream record: what the publisher uses of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<'a> {
    /// `dynamodb.SequenceNumber`: what a partial-batch response names.
    pub sequence: Option<Cow<'a, str>>,
    /// `dynamodb.ApproximateCreationDateTime`, in epoch milliseconds.
    pub created_ms: i64,
    /// Whether the record is an outbox insert, and its image if so.
    pub change: Change,
}

/// What a record is to the publisher.
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The insert of an outbox item: its key, its `NewImage` (empty when
    /// the stream does not carry new images) and the stream's view type.
    OutboxInsert {
        /// The item's key.
        key: ItemKey,
        /// `dynamodb.NewImage`.
        image: serde_dynamo::Item,
        /// `dynamodb.StreamViewType`.
        view: Option<StreamViewType>,
    },
    /// Anything else (a modify, a remove, another item's insert): skipped,
    /// its images never decoded.
    Other,
}

/// A string that borrows from the event's text unless it has escapes.
#[derive(Deserialize)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// An attribute value of which only a string (`S`) matters.
#[derive(Deserialize)]
struct StringAttribute<'a> {
    #[serde(rename = "S", borrow, default)]
    s: Option<Cow<'a, str>>,
}

/// `{"Records": [...]}`.
struct EventSeed<'s>(&'s KeySchema);

impl<'de> DeserializeSeed<'de> for EventSeed<'_> {
    type Value = Vec<Record<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EventSeed<'_> {
    type Value = Vec<Record<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a DynamoDB stream event")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut records = None;
        while let Some(Text(name)) = map.next_key()? {
            if name == "Records" {
                if records.is_some() {
                    return Err(serde::de::Error::duplicate_field("Records"));
                }
                records = Some(map.next_value_seed(RecordsSeed(self.0))?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        records.ok_or_else(|| serde::de::Error::missing_field("Records"))
    }
}

struct RecordsSeed<'s>(&'s KeySchema);

impl<'de> DeserializeSeed<'de> for RecordsSeed<'_> {
    type Value = Vec<Record<'de>>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for RecordsSeed<'_> {
    type Value = Vec<Record<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of stream records")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut records = Vec::with_capacity(seq.size_hint().unwrap_or(100));
        while let Some(record) = seq.next_element_seed(RecordSeed(self.0))? {
            records.push(record);
        }
        Ok(records)
    }
}

/// One record: `eventName` and `dynamodb`, nothing else.
struct RecordSeed<'s>(&'s KeySchema);

impl<'de> DeserializeSeed<'de> for RecordSeed<'_> {
    type Value = Record<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RecordSeed<'_> {
    type Value = Record<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a DynamoDB stream record")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut insert = None;
        let mut change = None;
        while let Some(Text(name)) = map.next_key()? {
            match name.as_ref() {
                "eventName" if insert.is_some() => {
                    return Err(serde::de::Error::duplicate_field("eventName"))
                }
                "eventName" => insert = Some(map.next_value::<Text>()?.0 == "INSERT"),
                "dynamodb" if change.is_some() => {
                    return Err(serde::de::Error::duplicate_field("dynamodb"))
                }
                "dynamodb" => {
                    change = Some(map.next_value_seed(ChangeSeed {
                        schema: self.0,
                        insert,
                    })?)
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        // Both, as the general model requires: a record without them is not
        // skipped, the batch fails.
        let insert = insert.ok_or_else(|| serde::de::Error::missing_field("eventName"))?;
        let change = change.ok_or_else(|| serde::de::Error::missing_field("dynamodb"))?;
        Ok(Record {
            sequence: change.sequence,
            created_ms: change.created_ms,
            change: match (insert, change.key, change.image) {
                (true, Some(key), image) => Change::OutboxInsert {
                    key,
                    image: image.unwrap_or_default(),
                    view: change.view,
                },
                _ => Change::Other,
            },
        })
    }
}

/// `dynamodb`: keys first; the image only when they are an outbox item's.
struct ChangeSeed<'s> {
    schema: &'s KeySchema,
    /// Whether the record is an insert, when `eventName` came first.
    insert: Option<bool>,
}

struct Decoded<'a> {
    sequence: Option<Cow<'a, str>>,
    created_ms: i64,
    /// The key, when it is an outbox item's.
    key: Option<ItemKey>,
    image: Option<serde_dynamo::Item>,
    view: Option<StreamViewType>,
}

impl<'de> DeserializeSeed<'de> for ChangeSeed<'_> {
    type Value = Decoded<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ChangeSeed<'_> {
    type Value = Decoded<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a stream record's dynamodb object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut decoded = Decoded {
            sequence: None,
            created_ms: 0,
            key: None,
            image: None,
            view: None,
        };
        // Known once the keys are read: whether the image is needed.
        let mut outbox_keys = None;
        // A field given twice fails the batch, as the general model does
        // (never a record read from the wrong copy and skipped).
        let mut seen = [false; 5];
        let mut once = |i: usize, field: &'static str| {
            if std::mem::replace(&mut seen[i], true) {
                Err(serde::de::Error::duplicate_field(field))
            } else {
                Ok(())
            }
        };
        while let Some(Text(name)) = map.next_key()? {
            match name.as_ref() {
                "SequenceNumber" => {
                    once(0, "SequenceNumber")?;
                    decoded.sequence = map.next_value::<Option<Text>>()?.map(|t| t.0);
                }
                "ApproximateCreationDateTime" => {
                    once(1, "ApproximateCreationDateTime")?;
                    let seconds: Option<f64> = map.next_value()?;
                    // Milliseconds kept; a value out of range saturates.
                    decoded.created_ms = seconds.map_or(0, |s| (s * 1000.0) as i64);
                }
                "StreamViewType" => {
                    once(2, "StreamViewType")?;
                    decoded.view = map.next_value()?;
                }
                "Keys" => {
                    once(3, "Keys")?;
                    decoded.key = map.next_value_seed(KeysSeed(self.schema))?;
                    outbox_keys = Some(decoded.key.is_some());
                }
                "NewImage" => {
                    once(4, "NewImage")?;
                    if self.insert == Some(false) || outbox_keys == Some(false) {
                        map.next_value::<IgnoredAny>()?;
                    } else {
                        decoded.image = map.next_value::<Option<serde_dynamo::Item>>()?;
                    }
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(decoded)
    }
}

/// `Keys`: the item's key if it is an outbox item's (string keys named as
/// the schema names them, an outbox sort key).
struct KeysSeed<'s>(&'s KeySchema);

impl<'de> DeserializeSeed<'de> for KeysSeed<'_> {
    type Value = Option<ItemKey>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        // `null` is no keys, as the general model reads it.
        deserializer.deserialize_option(self)
    }
}

impl<'de> Visitor<'de> for KeysSeed<'_> {
    type Value = Option<ItemKey>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a stream record's keys")
    }

    fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut pk, mut sk) = (None, None);
        while let Some(Text(name)) = map.next_key()? {
            if name == self.0.partition_key {
                pk = map.next_value::<StringAttribute>()?.s;
            } else if name == self.0.sort_key {
                sk = map.next_value::<StringAttribute>()?.s;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(match (pk, sk) {
            (Some(pk), Some(sk)) if self.0.is_outbox_sk(&sk) => {
                Some(ItemKey::new(pk.into_owned(), sk.into_owned()))
            }
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lambda_events::event::dynamodb::Event;

    /// As `lambda_runtime` decodes a payload (its `deserializer.rs`).
    fn as_the_runtime_decodes(json: &str) -> StreamEvent {
        let de = &mut serde_json::Deserializer::from_slice(json.as_bytes());
        serde_path_to_error::deserialize(de).unwrap()
    }

    fn sample(name: &str) -> String {
        std::fs::read_to_string(format!(
            "{}/../../events/{name}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap()
    }

    fn outbox_keys(records: &[Record<'_>]) -> Vec<Option<String>> {
        records
            .iter()
            .map(|r| match &r.change {
                Change::OutboxInsert { key, .. } => Some(key.sk.clone()),
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
                assert_eq!(
                    lean.sequence.as_deref(),
                    typed.change.sequence_number.as_deref()
                );
                assert_eq!(
                    lean.created_ms,
                    typed
                        .change
                        .approximate_creation_date_time
                        .timestamp_millis()
                );
                let sk = match typed.change.keys.get("SK") {
                    Some(serde_dynamo::AttributeValue::S(s)) => s.clone(),
                    _ => String::new(),
                };
                match &lean.change {
                    Change::OutboxInsert { key, image, view } => {
                        assert_eq!(typed.event_name, "INSERT");
                        assert!(sk.starts_with("OUTBOX#"));
                        assert_eq!(key.sk, sk);
                        assert_eq!(image, &typed.change.new_image);
                        assert_eq!(view, &typed.change.stream_view_type);
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
        let event = as_the_runtime_decodes(&sample("publisher-mixed-batch.json"));
        let records = event.records(&KeySchema::default()).unwrap();
        assert!(records
            .iter()
            .all(|r| matches!(r.sequence, Some(Cow::Borrowed(_)))));
        assert_eq!(
            outbox_keys(&records),
            [
                None,
                Some("OUTBOX#01JDQ3V7XB0000000000000002".into()),
                None,
                None,
                Some("OUTBOX#01JDQ3V7XC0000000000000003".into())
            ]
        );
    }

    /// An image that cannot decode as a DynamoDB item: decoding it would
    /// fail the whole batch, so these records show it was never decoded.
    const UNDECODABLE: &str = r#"{"PK": {"NOT_A_TYPE": 1}}"#;

    fn record(name: &str, sk: &str, dynamodb_first: bool, image_first: bool) -> String {
        let keys = format!(r#""Keys": {{"PK": {{"S": "ORDER#1"}}, "SK": {{"S": "{sk}"}}}}"#);
        let image = format!(r#""NewImage": {UNDECODABLE}"#);
        let (a, b) = if image_first {
            (image, keys)
        } else {
            (keys, image)
        };
        let dynamodb = format!(
            r#""dynamodb": {{"ApproximateCreationDateTime": 1796047200.5, {a}, {b}, "SequenceNumber": "7", "StreamViewType": "NEW_IMAGE"}}"#
        );
        let name = format!(r#""eventName": "{name}""#);
        let (a, b) = if dynamodb_first {
            (dynamodb, name)
        } else {
            (name, dynamodb)
        };
        format!(r#"{{"eventID": "1", {a}, "awsRegion": "us-east-1", {b}}}"#)
    }

    #[test]
    fn records_that_are_not_outbox_inserts_are_skipped_without_decoding_their_image() {
        for (name, sk) in [
            ("MODIFY", "OUTBOX#01JDQ3V7XB0000000000000002"),
            ("REMOVE", "META"),
            ("INSERT", "META"),
        ] {
            let json = format!(r#"{{"Records": [{}]}}"#, record(name, sk, false, false));
            let event = as_the_runtime_decodes(&json);
            let records = event.records(&KeySchema::default()).unwrap();
            assert_eq!(records[0].change, Change::Other, "{name} {sk}");
            assert_eq!(records[0].created_ms, 1_796_047_200_500);
        }
        // The same image on an outbox insert is decoded, and fails.
        let json = format!(
            r#"{{"Records": [{}]}}"#,
            record("INSERT", "OUTBOX#01JDQ3V7XB0000000000000002", false, false)
        );
        assert!(as_the_runtime_decodes(&json)
            .records(&KeySchema::default())
            .is_err());
    }

    #[test]
    fn fields_in_another_order_are_decoded_the_slow_way_and_read_the_same() {
        let image = r#"{"PK": {"S": "ORDER#1"}, "SK": {"S": "OUTBOX#01JDQ3V7XB0000000000000002"}}"#;
        for (dynamodb_first, image_first) in [(true, false), (false, true), (true, true)] {
            let json = format!(
                r#"{{"Records": [{}, {}]}}"#,
                record(
                    "REMOVE",
                    "OUTBOX#01JDQ3V7XB0000000000000002",
                    dynamodb_first,
                    image_first
                )
                .replace(UNDECODABLE, image),
                record(
                    "INSERT",
                    "OUTBOX#01JDQ3V7XB0000000000000002",
                    dynamodb_first,
                    image_first
                )
                .replace(UNDECODABLE, image)
            );
            let event = as_the_runtime_decodes(&json);
            let records = event.records(&KeySchema::default()).unwrap();
            assert_eq!(
                outbox_keys(&records),
                [None, Some("OUTBOX#01JDQ3V7XB0000000000000002".into())]
            );
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
        assert_eq!(outbox_keys(&records), [Some("EVT#x".into()), None, None]);
    }

    #[test]
    fn an_insert_without_a_new_image_is_an_outbox_insert_with_an_empty_image() {
        let json = r#"{"Records": [{"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "A#1"}, "SK": {"S": "OUTBOX#x"}}, "SequenceNumber": "1", "StreamViewType": "KEYS_ONLY"}}]}"#;
        let event = as_the_runtime_decodes(json);
        let records = event.records(&KeySchema::default()).unwrap();
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
            let event = as_the_runtime_decodes(json);
            assert!(event.records(&KeySchema::default()).is_err(), "{json}");
        }
    }

    #[test]
    fn a_field_given_twice_or_a_record_without_its_name_fails_the_batch() {
        let keys = r#""Keys": {"PK": {"S": "A#1"}, "SK": {"S": "OUTBOX#x"}}"#;
        for json in [
            format!(
                r#"{{"Records": [{{"eventName": "INSERT", "dynamodb": {{{keys}, {keys}}}}}]}}"#
            ),
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
            let event = as_the_runtime_decodes(&json);
            assert!(event.records(&KeySchema::default()).is_err(), "{json}");
        }
    }

    #[test]
    fn nulls_read_as_the_general_model_reads_them() {
        let json = r#"{"Records": [
            {"eventName": "INSERT", "dynamodb": {"Keys": {"PK": {"S": "A#1"}, "SK": {"S": "OUTBOX#x"}}, "NewImage": null, "SequenceNumber": null, "ApproximateCreationDateTime": null}},
            {"eventName": "INSERT", "dynamodb": {"Keys": null, "NewImage": null, "SequenceNumber": "2"}}
        ]}"#;
        let event = as_the_runtime_decodes(json);
        let records = event.records(&KeySchema::default()).unwrap();
        assert!(matches!(
            &records[0].change,
            Change::OutboxInsert { image, .. } if image.is_empty()
        ));
        assert_eq!(records[0].sequence, None);
        assert_eq!(records[1].change, Change::Other);
    }

    #[test]
    fn records_without_sequence_numbers_become_an_event_that_decodes() {
        let typed: Event = serde_json::from_str(&sample("publisher-single-insert.json")).unwrap();
        let mut records = typed.records;
        records[0].change.sequence_number = None;
        let event = StreamEvent::from(records);
        let records = event.records(&KeySchema::default()).unwrap();
        assert_eq!(records[0].sequence, None);
        assert!(matches!(records[0].change, Change::OutboxInsert { .. }));
    }

    #[test]
    fn records_become_the_event_lambda_would_send() {
        let typed: Event = serde_json::from_str(&sample("publisher-mixed-batch.json")).unwrap();
        let event = StreamEvent::from(typed.records);
        let records = event.records(&KeySchema::default()).unwrap();
        assert_eq!(outbox_keys(&records).iter().flatten().count(), 2);
    }
}
