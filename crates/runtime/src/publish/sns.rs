//! SNS adapter: `PublishBatch`; FIFO topics get the aggregate id as message
//! group and the event id as deduplication id.

use aws_sdk_sns::types::{MessageAttributeValue, PublishBatchRequestEntry};

use super::{classify, sdk_failure};
use outbox_core::{claim, size, OutboxItem};
use outbox_engine::{EntryOutcome, EventSink, FailureKind, PublishFailure, SinkError};

/// Entry error codes that mean the entry itself can never be accepted.
const POISON_CODES: &[&str] = &[
    "InvalidParameter",
    "InvalidParameterValue",
    "ValidationError",
];

/// Publishes to one SNS topic. Message body = the envelope; attributes
/// `eventType` and `eventId` let subscriptions filter without parsing it.
#[derive(Debug, Clone)]
pub struct SnsSink {
    client: aws_sdk_sns::Client,
    topic_arn: String,
    fifo: bool,
    max_bytes: usize,
}

impl SnsSink {
    /// A sink with the default limit (256 KiB per message and per call).
    pub fn new(client: aws_sdk_sns::Client, topic_arn: String) -> Self {
        let fifo = topic_arn.ends_with(".fifo");
        Self {
            client,
            topic_arn,
            fifo,
            max_bytes: size::DEFAULT_SNS_BYTES,
        }
    }

    /// The same sink with `MAX_EVENT_BYTES` = `max_bytes`.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    fn entry(
        &self,
        id: usize,
        item: &OutboxItem,
    ) -> Result<PublishBatchRequestEntry, PublishFailure> {
        let attribute = |value: &str| {
            MessageAttributeValue::builder()
                .data_type("String")
                .string_value(value)
                .build()
        };
        let invalid = |e: aws_sdk_sns::error::BuildError| {
            PublishFailure::new(FailureKind::Poison, "InvalidAttribute", e.to_string())
        };
        let mut builder = PublishBatchRequestEntry::builder().id(id.to_string());
        builder = match &item.payload_ref {
            None => builder.message(&item.envelope),
            // A claim check (ClaimChecked leaves the reference only on an
            // event too large for the topic): the Extended Client
            // libraries' pointer and size, which their SQS client on a
            // raw-delivery subscription fetches unchanged.
            Some(r) => builder
                .message(r.extended_client_pointer())
                .message_attributes(
                    claim::EXTENDED_PAYLOAD_SIZE,
                    MessageAttributeValue::builder()
                        .data_type("Number")
                        .string_value(r.size.to_string())
                        .build()
                        .map_err(invalid)?,
                ),
        };
        for (name, value) in [
            ("eventType", item.event_type.as_str()),
            ("eventId", &item.event_id.to_string()),
        ] {
            builder = builder.message_attributes(name, attribute(value).map_err(invalid)?);
        }
        if self.fifo {
            builder = builder
                .message_group_id(&item.aggregate_id)
                .message_deduplication_id(item.event_id.to_string());
        }
        builder
            .build()
            .map_err(|e| PublishFailure::new(FailureKind::Poison, "InvalidEntry", e.to_string()))
    }
}

impl EventSink for SnsSink {
    fn max_entries(&self) -> usize {
        size::MAX_SNS_ENTRIES
    }

    fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    fn entry_size(&self, item: &OutboxItem) -> usize {
        let id = item.event_id.to_string();
        match &item.payload_ref {
            None => size::sns_entry_size(&item.event_type, &id, &item.envelope),
            Some(r) => size::sns_message_size(
                &r.extended_client_pointer(),
                &[
                    ("eventType", &item.event_type),
                    ("eventId", &id),
                    (claim::EXTENDED_PAYLOAD_SIZE, &r.size.to_string()),
                ],
            ),
        }
    }

    async fn publish_batch(
        &self,
        items: &[&OutboxItem],
        max_sends: u32,
        sends: &outbox_engine::SendCounter,
    ) -> Vec<EntryOutcome> {
        let mut outcomes: Vec<Option<EntryOutcome>> = vec![None; items.len()];
        let mut entries = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            match self.entry(i, item) {
                Ok(entry) => entries.push(entry),
                Err(failure) => outcomes[i] = Some(Err(failure)),
            }
        }
        if !entries.is_empty() {
            match self
                .client
                .publish_batch()
                .topic_arn(&self.topic_arn)
                .set_publish_batch_request_entries(Some(entries))
                .customize()
                .config_override(
                    aws_sdk_sns::config::Builder::default()
                        .retry_config(crate::aws::retry_for_sends(max_sends)),
                )
                .interceptor(crate::aws::CountSends(sends.clone()))
                .send()
                .await
            {
                Ok(response) => {
                    for ok in response.successful() {
                        if let Some(slot) = ok
                            .id()
                            .and_then(|id| id.parse::<usize>().ok())
                            .and_then(|i| outcomes.get_mut(i))
                        {
                            *slot = Some(Ok(()));
                        }
                    }
                    for failed in response.failed() {
                        if let Some(slot) = failed
                            .id()
                            .parse::<usize>()
                            .ok()
                            .and_then(|i| outcomes.get_mut(i))
                        {
                            let kind = match classify(failed.code(), POISON_CODES) {
                                // A poison code the caller did not cause is not poison.
                                FailureKind::Poison if !failed.sender_fault() => {
                                    FailureKind::Rejected
                                }
                                other => other,
                            };
                            *slot = Some(Err(PublishFailure::new(
                                kind,
                                failed.code(),
                                failed.message().unwrap_or(""),
                            )));
                        }
                    }
                }
                Err(err) => {
                    let failure = sdk_failure(&err);
                    for slot in outcomes.iter_mut().filter(|o| o.is_none()) {
                        *slot = Some(Err(failure.clone()));
                    }
                }
            }
        }
        outbox_engine::answered(
            outcomes,
            "MissingResult",
            "PublishBatch returned no result for this entry",
        )
    }

    /// Checks that the topic exists and that `MAX_EVENT_BYTES` fits its
    /// `MaximumMessageSize` (256 KiB unless raised, up to 1 MiB): a larger
    /// setting would send batches the topic refuses as too long, and
    /// dead-letter innocent events.
    async fn verify(&self) -> Result<(), SinkError> {
        let refused = |reason: String| SinkError {
            target: format!("topic {}", self.topic_arn),
            reason,
        };
        let attributes = self
            .client
            .get_topic_attributes()
            .topic_arn(&self.topic_arn)
            .send()
            .await
            .map_err(|e| refused(sdk_failure(&e).to_string()))?;
        let limit = topic_message_limit(attributes.attributes());
        if self.max_bytes > limit {
            return Err(refused(format!(
                "MAX_EVENT_BYTES is {} but the topic's MaximumMessageSize is {limit}: raise the topic's attribute (the stack's MaxEventBytes sets it) or lower MAX_EVENT_BYTES",
                self.max_bytes
            )));
        }
        Ok(())
    }
}

/// The largest message a topic accepts: its `MaximumMessageSize`
/// attribute, which SNS returns only when it was set; 256 KiB otherwise.
fn topic_message_limit(attributes: Option<&std::collections::HashMap<String, String>>) -> usize {
    attributes
        .and_then(|a| a.get("MaximumMessageSize"))
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(size::DEFAULT_SNS_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_topic_limit_is_its_attribute_or_the_default() {
        let set = |v: &str| {
            std::collections::HashMap::from([("MaximumMessageSize".to_owned(), v.to_owned())])
        };
        assert_eq!(topic_message_limit(None), 256 * 1024);
        assert_eq!(topic_message_limit(Some(&Default::default())), 256 * 1024);
        assert_eq!(topic_message_limit(Some(&set("1048576"))), 1_048_576);
        assert_eq!(topic_message_limit(Some(&set("4096"))), 4096);
        assert_eq!(topic_message_limit(Some(&set("many"))), 256 * 1024);
    }
}
