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
mod tests;
