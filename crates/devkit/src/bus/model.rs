//! The rules of the `eventbridgev2` API that the local bus enforces, each
//! from its source:
//! - the service model, `botocore/data/eventbridgev2/2025-05-15/service-2.json`
//!   (shapes `PutEventsRequest`, `PutEventsRequestEntry`,
//!   `PutEventsSystemMetadata`, `EventBusArn`, `EventBusName`,
//!   `RetentionPeriodInDays`, `SubscriberName`, `OrderingType`): lengths,
//!   patterns, list sizes, enums. `model_tests` reads the model that
//!   `make venv` installs and checks every constant here against it.
//! - the `PutEvents` documentation in the same model: "The total size of
//!   all event entries in a request must not exceed 1 MB (1,048,576
//!   bytes) … the request fails with `InvalidInputException` and the
//!   service publishes none of the entries".
//! - the EventBridge user guide, "Ordering and deduplicating events on a
//!   Custom Event Bus": an entry whose `DeduplicationId` was accepted within
//!   the last 5 minutes is suppressed (`SuccessCode` `DEDUPLICATED`); the
//!   scope is the account and, when set, the event group. A `FIFO`
//!   subscriber delivers in publish order within an event group; to an SQS
//!   FIFO queue the group is the `MessageGroupId`.
//! - "Calculating PutEvents event entry size" (EventBridge user guide): an
//!   entry is the UTF-8 bytes of `Source`, `DetailType`, `Detail` and each
//!   `Resources` string, plus 14 bytes for `Time`. The Custom Event Bus
//!   pages give no other rule; the local bus also counts the
//!   `SystemMetadata` strings, so it refuses no less than AWS would.

use std::time::Duration;

use regex::Regex;

/// `PutEventsRequestEntryList`: 1 to 100 entries.
pub(super) const MAX_ENTRIES: usize = 100;
/// `PutEvents`: the entries of one request, 1 MB at most.
pub(super) const MAX_REQUEST_BYTES: usize = 1_048_576;
/// `Source`: 1 to 256 characters.
pub(super) const MAX_SOURCE: usize = 256;
/// `DetailType`: 1 to 128 characters.
pub(super) const MAX_DETAIL_TYPE: usize = 128;
/// `PutEventsResourceList`: at most 100.
pub(super) const MAX_RESOURCES: usize = 100;
/// `EventGroupId` and `EventDeduplicationId`: 1 to 128 characters.
pub(super) const MAX_SYSTEM_ID: usize = 128;
/// `RetentionPeriodInDays`: 1 to 365.
pub(super) const RETENTION_DAYS: std::ops::RangeInclusive<i64> = 1..=365;
/// The deduplication window (user guide).
pub const DEDUPLICATION_WINDOW: Duration = Duration::from_secs(5 * 60);
/// The `Time` field's share of an entry's size.
const TIME_BYTES: usize = 14;

/// `EventBusArn` (1 to 1011 characters).
pub(super) const EVENT_BUS_ARN: &str = r"arn:aws(-[a-z0-9]+)*:events:[a-z][a-z0-9]*(-[a-z0-9]+)*:([0-9]{12}):event-busv2\/[A-Za-z0-9][\.\-_A-Za-z0-9]{0,255}\/[a-z0-9]{25}";
/// `EventBusName` and `SubscriberName` (1 to 256 characters).
pub(super) const RESOURCE_NAME: &str = r"[A-Za-z0-9][\.\-_A-Za-z0-9]*";
/// `EventDeduplicationId`: something other than white space.
pub(super) const DEDUPLICATION_ID: &str = r"[\s\S]*[^\u0009-\u000D\u001C-\u0020\u1680\u2000-\u2006\u2008-\u200A\u2028\u2029\u205F\u3000][\s\S]*";

/// Whether `value` matches a model pattern as a whole (Smithy patterns are
/// not anchored; the model's are written to match whole values, and the
/// service validates the whole value).
pub(super) fn matches(pattern: &str, value: &str) -> bool {
    Regex::new(&format!("^(?:{pattern})$")).is_ok_and(|re| re.is_match(value))
}

/// A request the model refuses: `InvalidInputException` with this message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Invalid(pub String);

fn length(name: &str, value: &str, max: usize) -> Result<(), Invalid> {
    let n = value.chars().count();
    if (1..=max).contains(&n) {
        Ok(())
    } else {
        Err(Invalid(format!(
            "{name} must be 1 to {max} characters, got {n}"
        )))
    }
}

/// An event bus ARN of the model's form.
pub(super) fn check_bus_arn(arn: &str) -> Result<(), Invalid> {
    length("EventBusArn", arn, 1011)?;
    if matches(EVENT_BUS_ARN, arn) {
        Ok(())
    } else {
        Err(Invalid(format!(
            "EventBusArn {arn:?} is not an event-busv2 ARN"
        )))
    }
}

/// A bus or subscriber name of the model's form.
pub(super) fn check_name(field: &str, name: &str) -> Result<(), Invalid> {
    length(field, name, 256)?;
    if matches(RESOURCE_NAME, name) {
        Ok(())
    } else {
        Err(Invalid(format!(
            "{field} {name:?} has a character the model refuses"
        )))
    }
}

/// One `PutEvents` entry as the local bus reads it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(super) struct Entry {
    /// `Source`.
    pub(super) source: String,
    /// `DetailType`.
    pub(super) detail_type: String,
    /// `Detail`.
    pub(super) detail: Option<String>,
    /// `Resources`.
    pub(super) resources: Vec<String>,
    /// Whether `Time` was set.
    pub(super) time: bool,
    /// `SystemMetadata.EventGroupId`.
    pub(super) group: Option<String>,
    /// `SystemMetadata.DeduplicationId`.
    pub(super) deduplication_id: Option<String>,
}

impl Entry {
    /// Its size as the request limit counts it.
    pub(super) fn size(&self) -> usize {
        self.source.len()
            + self.detail_type.len()
            + self.detail.as_deref().map_or(0, str::len)
            + self.resources.iter().map(String::len).sum::<usize>()
            + if self.time { TIME_BYTES } else { 0 }
            + self.group.as_deref().map_or(0, str::len)
            + self.deduplication_id.as_deref().map_or(0, str::len)
    }

    /// The model's constraints on one entry.
    pub(super) fn check(&self) -> Result<(), Invalid> {
        length("Source", &self.source, MAX_SOURCE)?;
        if self.source.starts_with("aws.") {
            return Err(Invalid("Source: the `aws.` prefix is reserved".into()));
        }
        length("DetailType", &self.detail_type, MAX_DETAIL_TYPE)?;
        if self.resources.len() > MAX_RESOURCES {
            return Err(Invalid(format!(
                "Resources: at most {MAX_RESOURCES}, got {}",
                self.resources.len()
            )));
        }
        if let Some(group) = &self.group {
            length("EventGroupId", group, MAX_SYSTEM_ID)?;
        }
        if let Some(id) = &self.deduplication_id {
            length("DeduplicationId", id, MAX_SYSTEM_ID)?;
            if !matches(DEDUPLICATION_ID, id) {
                return Err(Invalid("DeduplicationId is only white space".into()));
            }
        }
        Ok(())
    }
}

/// The request-level rules of `PutEvents`: 1 to 100 entries, each valid,
/// 1 MB in all.
pub(super) fn check_put_events(entries: &[Entry]) -> Result<(), Invalid> {
    if entries.is_empty() || entries.len() > MAX_ENTRIES {
        return Err(Invalid(format!(
            "Entries: 1 to {MAX_ENTRIES}, got {}",
            entries.len()
        )));
    }
    for entry in entries {
        entry.check()?;
    }
    let total: usize = entries.iter().map(Entry::size).sum();
    if total > MAX_REQUEST_BYTES {
        return Err(Invalid(format!(
            "the entries total {total} bytes, above {MAX_REQUEST_BYTES}"
        )));
    }
    Ok(())
}

/// The key an entry is deduplicated by: its event group (or none) and its
/// `DeduplicationId`, within the bus's account.
pub(super) fn deduplication_key(entry: &Entry) -> Option<(String, String)> {
    entry
        .deduplication_id
        .clone()
        .map(|id| (entry.group.clone().unwrap_or_default(), id))
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod model_tests;
