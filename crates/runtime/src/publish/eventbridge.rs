//! EventBridge adapter: `PutEvents`, every response entry checked.

use aws_sdk_eventbridge::types::PutEventsRequestEntry;

use super::sdk_failure;
use outbox_core::size;
use outbox_core::xray_trace_header;
use outbox_core::OutboxItem;
use outbox_engine::{EntryOutcome, EventSink, SinkError};

/// Entry error codes that mean the entry itself can never be accepted.
const POISON_CODES: &[&str] = &["MalformedDetail", "InvalidArgument", "ValidationException"];

/// Publishes to one event bus: `Source` from configuration, `DetailType` =
/// event type, `Detail` = the envelope, `TraceHeader` from the traceparent.
#[derive(Debug, Clone)]
pub struct EventBridgeSink {
    client: aws_sdk_eventbridge::Client,
    bus_name: String,
    source: String,
    max_bytes: usize,
}

impl EventBridgeSink {
    /// A sink with the default limit (1 MB per entry and per call).
    pub fn new(client: aws_sdk_eventbridge::Client, bus_name: String, source: String) -> Self {
        Self {
            client,
            bus_name,
            source,
            max_bytes: size::DEFAULT_EVENTBRIDGE_BYTES,
        }
    }

    /// The same sink with `MAX_EVENT_BYTES` = `max_bytes`.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The `PutEvents` entry of an item.
    pub fn entry(&self, item: &OutboxItem) -> PutEventsRequestEntry {
        PutEventsRequestEntry::builder()
            .event_bus_name(&self.bus_name)
            .source(&self.source)
            .detail_type(&item.event_type)
            .detail(&item.envelope)
            .set_trace_header(item.traceparent.as_deref().and_then(xray_trace_header))
            .build()
    }
}

impl EventSink for EventBridgeSink {
    fn max_entries(&self) -> usize {
        size::MAX_EVENTBRIDGE_ENTRIES
    }

    fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    fn entry_size(&self, item: &OutboxItem) -> usize {
        size::eventbridge_entry_size(&self.source, &item.event_type, &item.envelope)
    }

    async fn publish_batch(
        &self,
        items: &[&OutboxItem],
        max_sends: u32,
        sends: &outbox_engine::SendCounter,
    ) -> Vec<EntryOutcome> {
        let entries = items.iter().map(|item| self.entry(item)).collect();
        let response = match self
            .client
            .put_events()
            .set_entries(Some(entries))
            .customize()
            .config_override(
                aws_sdk_eventbridge::config::Builder::default()
                    .retry_config(crate::aws::retry_for_sends(max_sends)),
            )
            .interceptor(crate::aws::CountSends(sends.clone()))
            .send()
            .await
        {
            Ok(response) => response,
            Err(err) => {
                let failure = sdk_failure(&err);
                return items.iter().map(|_| Err(failure.clone())).collect();
            }
        };
        let results = response.entries();
        super::in_request_order(
            (items.len(), results.len()),
            |i| {
                results
                    .get(i)
                    .map(|e| (e.error_code(), e.error_message(), e.event_id().is_some()))
            },
            POISON_CODES,
        )
    }

    async fn verify(&self) -> Result<(), SinkError> {
        self.client
            .describe_event_bus()
            .name(&self.bus_name)
            .send()
            .await
            .map(|_| ())
            .map_err(|e| SinkError {
                target: format!("event bus {}", self.bus_name),
                reason: sdk_failure(&e).to_string(),
            })
    }
}
