//! Custom Event Bus adapter (the `eventbridgev2` API): `PutEvents` of up
//! to 100 entries on a bus ARN, each in its aggregate's event group
//! (`SystemMetadata.EventGroupId`, so FIFO subscribers get each aggregate
//! in publish order) and deduplicated by its event id
//! (`SystemMetadata.DeduplicationId`: the bus drops a resend within 5
//! minutes). Every result entry is read, as on the classic bus; a
//! `DEDUPLICATED` entry was published before, so it is a success.

use aws_sdk_eventbridgev2::types::{PutEventsRequestEntry, PutEventsSystemMetadata};

use super::sdk_failure;
use outbox_core::size;
use outbox_core::OutboxItem;
use outbox_engine::{EntryOutcome, EventSink, FailureKind, PublishFailure, SinkError};

/// Entry error codes that mean the entry itself can never be accepted.
const POISON_CODES: &[&str] = &[
    "MalformedDetail",
    "InvalidInputException",
    "ValidationException",
];

/// Publishes to one Custom Event Bus: `Source` from configuration,
/// `DetailType` = event type, `Detail` = the envelope.
#[derive(Debug, Clone)]
pub struct EventBusSink {
    client: aws_sdk_eventbridgev2::Client,
    bus_arn: String,
    source: String,
    max_bytes: usize,
}

impl EventBusSink {
    /// A sink with the default limit (1 MB per entry and per call).
    pub fn new(client: aws_sdk_eventbridgev2::Client, bus_arn: String, source: String) -> Self {
        Self {
            client,
            bus_arn,
            source,
            max_bytes: size::DEFAULT_EVENTBRIDGE_BYTES,
        }
    }

    /// The same sink with `MAX_EVENT_BYTES` = `max_bytes`.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// The `PutEvents` entry of an item; `None` only if the builder were to
    /// refuse it (it requires `Source` and `DetailType`, which are set).
    /// [`EventSink::publish_batch`] keeps such an item, failed.
    fn entry(&self, item: &OutboxItem) -> Option<PutEventsRequestEntry> {
        PutEventsRequestEntry::builder()
            .source(&self.source)
            .detail_type(&item.event_type)
            .detail(&item.envelope)
            .system_metadata(
                PutEventsSystemMetadata::builder()
                    .event_group_id(&item.aggregate_id)
                    .deduplication_id(item.event_id.to_string())
                    .build(),
            )
            .build()
            .ok()
    }
}

impl EventSink for EventBusSink {
    fn max_entries(&self) -> usize {
        size::MAX_EVENTBRIDGE_BUS_ENTRIES
    }

    fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    fn entry_size(&self, item: &OutboxItem) -> usize {
        size::eventbridge_bus_entry_size(
            &self.source,
            &item.event_type,
            &item.event_id.to_string(),
            &item.envelope,
        )
    }

    async fn publish_batch(
        &self,
        items: &[&OutboxItem],
        max_sends: u32,
        sends: &outbox_engine::SendCounter,
    ) -> Vec<EntryOutcome> {
        // An entry the model refuses fails the whole request: one the bus
        // can never take (an aggregate id that is no event group id, which
        // only a writer skipping the item contract's check commits) is
        // poison here, and the rest go out.
        let mut outcomes: Vec<EntryOutcome> = items
            .iter()
            .map(|item| {
                let refused = PublishFailure::new(
                    FailureKind::Poison,
                    "InvalidEventGroupId",
                    "the aggregate id is not 1 to 128 bytes",
                );
                if size::is_event_group_id(&item.aggregate_id) {
                    Ok(())
                } else {
                    Err(refused)
                }
            })
            .collect();
        // An entry the builder refuses is not sent and not reported as
        // published: its item is kept, failed.
        let mut sent = Vec::new();
        let mut entries = Vec::new();
        for (i, item) in items.iter().enumerate() {
            if outcomes[i].is_err() {
                continue;
            }
            match self.entry(item) {
                Some(entry) => {
                    sent.push(i);
                    entries.push(entry);
                }
                None => {
                    outcomes[i] = Err(PublishFailure::new(
                        FailureKind::Rejected,
                        "EntryNotBuilt",
                        "the PutEvents entry could not be built",
                    ))
                }
            }
        }
        if entries.is_empty() {
            return outcomes;
        }
        let response = match self
            .client
            .put_events()
            .event_bus_arn(&self.bus_arn)
            .set_entries(Some(entries))
            .customize()
            .config_override(
                aws_sdk_eventbridgev2::config::Builder::default()
                    .retry_config(crate::aws::retry_for_sends(max_sends)),
            )
            .interceptor(crate::aws::CountSends(sends.clone()))
            .send()
            .await
        {
            Ok(response) => response,
            Err(err) => {
                let mut failure = sdk_failure(&err);
                // A bus being created or updated takes events again soon.
                if failure.code == "InvalidStateException" {
                    failure = PublishFailure::new(
                        FailureKind::Transient,
                        failure.code.clone(),
                        failure.message.clone(),
                    )
                    .of_whole_call();
                }
                for &i in &sent {
                    outcomes[i] = Err(failure.clone());
                }
                return outcomes;
            }
        };
        let results = response.entries();
        let read = super::in_request_order(
            (sent.len(), results.len()),
            |j| {
                results.get(j).map(|e| {
                    // A DEDUPLICATED entry was published before.
                    let accepted = e.event_id().is_some() || e.success_code().is_some();
                    (e.error_code(), e.error_message(), accepted)
                })
            },
            POISON_CODES,
        );
        for (&i, outcome) in sent.iter().zip(read) {
            outcomes[i] = outcome;
        }
        outcomes
    }

    /// The bus exists and takes events: `ACTIVE`, or `UPDATING` (a bus
    /// being created, deleted or that failed to be is refused, its state
    /// and reason named).
    async fn verify(&self) -> Result<(), SinkError> {
        use aws_sdk_eventbridgev2::types::BusState;
        let error = |reason: String| SinkError {
            target: format!("event bus {}", self.bus_arn),
            reason,
        };
        let bus = self
            .client
            .describe_event_bus()
            .event_bus_arn(&self.bus_arn)
            .send()
            .await
            .map_err(|e| error(sdk_failure(&e).to_string()))?;
        match bus.state() {
            None | Some(BusState::Active | BusState::Updating) => Ok(()),
            Some(state) => Err(error(format!(
                "the bus is {}{}",
                state.as_str(),
                bus.state_reason()
                    .map(|r| format!(": {r}"))
                    .unwrap_or_default()
            ))),
        }
    }
}
