//! Size arithmetic, done the way the services do it, so that limits are
//! enforced before a call rather than discovered from its error.

use std::collections::HashMap;

use aws_sdk_dynamodb::types::AttributeValue;

/// Largest DynamoDB item (400 KB).
pub const MAX_ITEM_BYTES: usize = 400 * 1024;
/// Largest `TransactWriteItems` request payload (4 MB).
pub const MAX_TRANSACTION_BYTES: usize = 4 * 1024 * 1024;
/// Largest `TransactWriteItems` action count.
pub const MAX_TRANSACTION_ACTIONS: usize = 100;
/// Default `MAX_EVENT_BYTES` for EventBridge: 1 MB per entry and per
/// `PutEvents` request (since 2026-01-29; 256 KB before).
pub const DEFAULT_EVENTBRIDGE_BYTES: usize = 1024 * 1024;
/// Largest number of entries in one `PutEvents` call.
pub const MAX_EVENTBRIDGE_ENTRIES: usize = 10;
/// Largest number of entries in one `PutEvents` call of a Custom Event Bus
/// (the `eventbridgev2` API), whose request holds 1 MB in all.
pub const MAX_EVENTBRIDGE_BUS_ENTRIES: usize = 100;
/// Largest `EventGroupId` and `DeduplicationId` of a Custom Event Bus entry.
pub const MAX_BUS_SYSTEM_ID: usize = 128;
/// Default `MAX_EVENT_BYTES` for SNS: 256 KiB per message (attributes
/// included) and per `PublishBatch` payload.
pub const DEFAULT_SNS_BYTES: usize = 256 * 1024;
/// Largest number of entries in one SNS `PublishBatch` call.
pub const MAX_SNS_ENTRIES: usize = 10;
/// Largest SNS FIFO `MessageGroupId` (the aggregate id).
pub const MAX_FIFO_GROUP_ID: usize = 128;

/// What the configured sink accepts, as the writer must check it before
/// committing an event and as the publishing module batches it. One
/// computation of an entry's size for both, so an event the writer accepts
/// is never refused by the sink for its size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EventLimits {
    /// `PutEvents`: the entry is `Source` + `DetailType` + `Detail`.
    EventBridge {
        /// The events' `Source`.
        source: String,
        /// `MAX_EVENT_BYTES`.
        max_bytes: usize,
    },
    /// A Custom Event Bus's `PutEvents` (`SINK=eventbridge-bus`): the entry
    /// as EventBridge counts it, plus its `EventGroupId` (the aggregate id,
    /// counted at its largest) and `DeduplicationId` (the event id); the
    /// aggregate id must be a valid event group id.
    EventBridgeBus {
        /// The events' `Source`.
        source: String,
        /// `MAX_EVENT_BYTES`.
        max_bytes: usize,
    },
    /// `PublishBatch`: the message plus its `eventType` and `eventId`
    /// attributes; a FIFO topic also needs the aggregate id as a valid
    /// message group id.
    Sns {
        /// Whether the topic is FIFO.
        fifo: bool,
        /// `MAX_EVENT_BYTES`.
        max_bytes: usize,
    },
}

/// The events' `Source` unless `EVENT_SOURCE` says otherwise.
pub const DEFAULT_EVENT_SOURCE: &str = "outbox.orders";

impl EventLimits {
    /// EventBridge with `source` and the default limit.
    pub fn eventbridge(source: impl Into<String>) -> Self {
        Self::EventBridge {
            source: source.into(),
            max_bytes: DEFAULT_EVENTBRIDGE_BYTES,
        }
    }

    /// SNS (a FIFO topic when `fifo`) and the default limit.
    pub fn sns(fifo: bool) -> Self {
        Self::Sns {
            fifo,
            max_bytes: DEFAULT_SNS_BYTES,
        }
    }

    /// The limits of the sink the variables configure, as the stack's
    /// functions read them: `SINK` (`eventbridge`, the default,
    /// `eventbridge-bus` or `sns`),
    /// `EVENT_SOURCE`, `SNS_TOPIC_ARN` (FIFO when it ends in `.fifo`) and
    /// `MAX_EVENT_BYTES` (1 KiB to 1 MB; the sink's default).
    pub fn from_lookup(
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, crate::ConfigError> {
        use crate::ConfigError;
        let get = |name: &str| lookup(name).filter(|v| !v.trim().is_empty());
        let max = |default: usize| match get("MAX_EVENT_BYTES") {
            None => Ok(default),
            Some(raw) => {
                ConfigError::bounded("MAX_EVENT_BYTES", &raw, 1_024, DEFAULT_EVENTBRIDGE_BYTES)
            }
        };
        let source = || {
            let source = get("EVENT_SOURCE").unwrap_or_else(|| DEFAULT_EVENT_SOURCE.to_owned());
            if source.len() > 256 {
                return Err(ConfigError::Invalid {
                    name: "EVENT_SOURCE",
                    value: source,
                    reason: "longer than 256 characters".to_owned(),
                });
            }
            // Both buses refuse every entry of such a source
            // (botocore's eventbridgev2 model: "The aws. value prefix is
            // service-reserved"; the classic bus answers
            // NotAuthorizedForSourceException).
            if source.starts_with("aws.") {
                return Err(ConfigError::Invalid {
                    name: "EVENT_SOURCE",
                    value: source,
                    reason: "the aws. prefix is reserved for AWS services".to_owned(),
                });
            }
            Ok(source)
        };
        match get("SINK").as_deref().unwrap_or("eventbridge") {
            "eventbridge" => Ok(Self::EventBridge {
                source: source()?,
                max_bytes: max(DEFAULT_EVENTBRIDGE_BYTES)?,
            }),
            "eventbridge-bus" => Ok(Self::EventBridgeBus {
                source: source()?,
                max_bytes: max(DEFAULT_EVENTBRIDGE_BYTES)?,
            }),
            "sns" => {
                let topic = get("SNS_TOPIC_ARN").ok_or(ConfigError::Missing("SNS_TOPIC_ARN"))?;
                Ok(Self::Sns {
                    fifo: topic.ends_with(".fifo"),
                    max_bytes: max(DEFAULT_SNS_BYTES)?,
                })
            }
            other => Err(ConfigError::Invalid {
                name: "SINK",
                value: other.to_owned(),
                reason: "expected `eventbridge`, `eventbridge-bus` or `sns`".to_owned(),
            }),
        }
    }

    /// Largest entry (and sink call) in bytes.
    pub fn max_bytes(&self) -> usize {
        match self {
            Self::EventBridge { max_bytes, .. }
            | Self::EventBridgeBus { max_bytes, .. }
            | Self::Sns { max_bytes, .. } => *max_bytes,
        }
    }

    /// The size of an event's entry as the sink counts it.
    pub fn entry_size(&self, event_type: &str, event_id: &str, envelope: &str) -> usize {
        match self {
            Self::EventBridge { source, .. } => {
                eventbridge_entry_size(source, event_type, envelope)
            }
            Self::EventBridgeBus { source, .. } => {
                eventbridge_bus_entry_size(source, event_type, event_id, envelope)
            }
            Self::Sns { .. } => sns_entry_size(event_type, event_id, envelope),
        }
    }

    /// Whether the aggregate id can route the event (an SNS FIFO message
    /// group id: 1 to 128 characters of letters, digits and punctuation; a
    /// Custom Event Bus's event group id: 1 to 128 bytes).
    pub fn check_aggregate_id(&self, aggregate_id: &str) -> Result<(), String> {
        match self {
            Self::EventBridgeBus { .. } => {
                if is_event_group_id(aggregate_id) {
                    Ok(())
                } else {
                    Err(format!(
                        "aggregateId must be 1 to {MAX_BUS_SYSTEM_ID} bytes to be an event group id"
                    ))
                }
            }
            Self::Sns { fifo: true, .. } => {
                let ok = !aggregate_id.is_empty()
                    && aggregate_id.len() <= MAX_FIFO_GROUP_ID
                    && aggregate_id.chars().all(|c| c.is_ascii_graphic());
                if ok {
                    Ok(())
                } else {
                    Err(format!(
                        "aggregateId must be 1 to {MAX_FIFO_GROUP_ID} letters, digits or punctuation to be an SNS FIFO message group id"
                    ))
                }
            }
            _ => Ok(()),
        }
    }
}

/// Size of one `PutEvents` entry as EventBridge counts it ("Calculating
/// PutEvents event entry size"): the UTF-8 bytes of `Source`, `DetailType`,
/// `Detail` and each `Resources` entry, plus 14 bytes when `Time` is set.
/// We set neither `Resources` nor `Time`.
pub fn eventbridge_entry_size(source: &str, detail_type: &str, detail: &str) -> usize {
    source.len() + detail_type.len() + detail.len()
}

/// Whether an aggregate id can be a Custom Event Bus's `EventGroupId`: 1
/// to 128 bytes (the model counts characters; bytes bound the entry's
/// size, [`eventbridge_bus_entry_size`]). The writer's check and the sink's.
pub fn is_event_group_id(aggregate_id: &str) -> bool {
    (1..=MAX_BUS_SYSTEM_ID).contains(&aggregate_id.len())
}

/// Size of one Custom Event Bus `PutEvents` entry: the classic entry's
/// ([`eventbridge_entry_size`]), its `DeduplicationId` (the event id) and
/// its `EventGroupId` (the aggregate id) counted at its largest, 128 bytes
/// ([`EventLimits::check_aggregate_id`]).
/// The bus's pages give no rule of their own for the 1 MB request; this
/// counts every string an entry carries, so a batch never exceeds it.
pub fn eventbridge_bus_entry_size(
    source: &str,
    detail_type: &str,
    event_id: &str,
    detail: &str,
) -> usize {
    eventbridge_entry_size(source, detail_type, detail) + event_id.len() + MAX_BUS_SYSTEM_ID
}

/// Size of an outbox event as an SNS message: the envelope and the
/// `eventType` and `eventId` attributes the SNS adapter sets.
pub fn sns_entry_size(event_type: &str, event_id: &str, envelope: &str) -> usize {
    sns_message_size(
        envelope,
        &[("eventType", event_type), ("eventId", event_id)],
    )
}

/// Size of one SNS message: the body plus each attribute's name, data type
/// and value.
pub fn sns_message_size(body: &str, attributes: &[(&str, &str)]) -> usize {
    body.len()
        + attributes
            .iter()
            .map(|(name, value)| name.len() + "String".len() + value.len())
            .sum::<usize>()
}

/// Size of a DynamoDB item following the documented rules: attribute names
/// plus values (strings and binaries by length, numbers by significant digits,
/// one byte for booleans and nulls, three bytes of overhead for lists and maps
/// plus one per element).
pub fn item_size(item: &HashMap<String, AttributeValue>) -> usize {
    item.iter().map(|(k, v)| k.len() + value_size(v)).sum()
}

fn value_size(value: &AttributeValue) -> usize {
    match value {
        AttributeValue::S(s) => s.len(),
        AttributeValue::N(n) => number_size(n),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Bool(_) | AttributeValue::Null(_) => 1,
        AttributeValue::Ss(v) => v.iter().map(String::len).sum(),
        AttributeValue::Ns(v) => v.iter().map(|n| number_size(n)).sum(),
        AttributeValue::Bs(v) => v.iter().map(|b| b.as_ref().len()).sum(),
        AttributeValue::L(v) => 3 + v.iter().map(|e| 1 + value_size(e)).sum::<usize>(),
        AttributeValue::M(m) => {
            3 + m
                .iter()
                .map(|(k, e)| 1 + k.len() + value_size(e))
                .sum::<usize>()
        }
        // Unknown future variants: count generously rather than under-count.
        _ => 64,
    }
}

fn number_size(n: &str) -> usize {
    let digits = n
        .chars()
        .take_while(|c| *c != 'e' && *c != 'E')
        .filter(char::is_ascii_digit)
        .count();
    digits.div_ceil(2) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An `aws.` source is refused at configuration, on both buses: the
    /// bus would refuse every entry of it.
    #[test]
    fn an_aws_source_is_refused() {
        for sink in ["eventbridge", "eventbridge-bus"] {
            let vars = [("SINK", sink), ("EVENT_SOURCE", "aws.orders")];
            let lookup = |name: &str| {
                vars.iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            };
            let err = EventLimits::from_lookup(lookup).expect_err(sink);
            assert!(err.to_string().contains("aws. prefix"), "{sink}: {err}");
        }
        let ok = |name: &str| (name == "EVENT_SOURCE").then(|| "my.aws.orders".to_owned());
        assert!(EventLimits::from_lookup(ok).is_ok());
    }

    #[test]
    fn item_size_counts_names_and_values() {
        let item = HashMap::from([
            ("PK".to_owned(), AttributeValue::S("ORDER#1".into())),
            ("n".to_owned(), AttributeValue::N("12345".into())),
            ("b".to_owned(), AttributeValue::Bool(true)),
        ]);
        assert_eq!(item_size(&item), 2 + 7 + 1 + 4 + 1 + 1);
    }

    #[test]
    fn limits_count_as_each_sink_does() {
        let eb = EventLimits::eventbridge("src");
        assert_eq!(eb.max_bytes(), 1024 * 1024);
        assert_eq!(eb.entry_size("Type", "01J", "{}"), 3 + 4 + 2);
        let sns = EventLimits::Sns {
            fifo: true,
            max_bytes: DEFAULT_SNS_BYTES,
        };
        assert_eq!(
            sns.entry_size("Type", "01J", "{}"),
            2 + ("eventType".len() + 6 + 4) + ("eventId".len() + 6 + 3)
        );
        assert!(sns.check_aggregate_id(&"a".repeat(128)).is_ok());
        assert!(sns.check_aggregate_id(&"a".repeat(129)).is_err());
        assert!(sns.check_aggregate_id("has space").is_err());
        assert!(eb.check_aggregate_id(&"a".repeat(200)).is_ok());
        // A Custom Event Bus: the entry, its deduplication id and its
        // event group at its largest; a group of 1 to 128 bytes.
        let bus = EventLimits::from_lookup(|k| (k == "SINK").then(|| "eventbridge-bus".into()))
            .expect("limits");
        assert_eq!(bus.max_bytes(), 1024 * 1024);
        assert_eq!(bus.entry_size("Type", "01J", "{}"), 13 + 4 + 2 + 3 + 128);
        assert!(bus.check_aggregate_id(&"a".repeat(128)).is_ok());
        assert!(bus.check_aggregate_id("has space").is_ok());
        assert!(bus.check_aggregate_id(&"a".repeat(129)).is_err());
        assert!(
            bus.check_aggregate_id(&"é".repeat(65)).is_err(),
            "130 bytes"
        );
        assert!(bus.check_aggregate_id("").is_err());
    }

    #[test]
    fn eventbridge_size_counts_utf8_bytes() {
        assert_eq!(
            eventbridge_entry_size("src", "Type", "{\"a\":\"é\"}"),
            3 + 4 + 10
        );
    }
}
