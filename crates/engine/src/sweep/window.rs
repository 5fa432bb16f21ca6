//! The publisher mapping's OnFailure destination: what its messages say
//! ([`OnFailureMessage`]) and which items they point at ([`Window`]). The
//! runtime's `redrive_messages` takes them from an SQS batch and redrives
//! each window through [`Sweeper::redrive`](crate::Sweeper::redrive).

use serde::Deserialize;
use time::OffsetDateTime;

use super::SweepSettings;

/// The message a DynamoDB stream mapping sends to its OnFailure destination
/// (metadata only). Unknown fields and `condition` values are accepted.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct OnFailureMessage {
    /// Why the batch was discarded.
    #[serde(rename = "requestContext", default)]
    pub request_context: RequestContext,
    /// Which records.
    #[serde(rename = "DDBStreamBatchInfo")]
    pub batch: StreamBatchInfo,
}

/// The message's `requestContext`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestContext {
    /// `RetryAttemptsExhausted`, `RecordAgeExceeded`, or any other value.
    #[serde(default)]
    pub condition: Option<String>,
}

/// The message's `DDBStreamBatchInfo`: the discarded batch.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StreamBatchInfo {
    /// The stream shard.
    #[serde(default)]
    pub shard_id: Option<String>,
    /// The batch's first record.
    #[serde(default)]
    pub start_sequence_number: Option<String>,
    /// The batch's last record.
    #[serde(default)]
    pub end_sequence_number: Option<String>,
    /// When the first record reached the stream.
    #[serde(with = "time::serde::rfc3339")]
    pub approximate_arrival_of_first_record: OffsetDateTime,
    /// When the last record reached the stream.
    #[serde(with = "time::serde::rfc3339")]
    pub approximate_arrival_of_last_record: OffsetDateTime,
    /// Records in the batch.
    #[serde(default)]
    pub batch_size: Option<u64>,
    /// The stream.
    #[serde(default)]
    pub stream_arn: Option<String>,
}

/// The creation-time range of an abandoned batch's events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// Events created from.
    pub from: OffsetDateTime,
    /// Events created to.
    pub to: OffsetDateTime,
}

impl Window {
    /// The window of `message`, widened by the settings' lead and lag.
    pub fn of(message: &OnFailureMessage, settings: &SweepSettings) -> Self {
        let first = message.batch.approximate_arrival_of_first_record;
        let last = message.batch.approximate_arrival_of_last_record.max(first);
        Self {
            from: first - settings.window_lead,
            to: last + settings.window_lag,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn on_failure_messages_parse_whatever_their_condition() {
        for condition in [
            "RetryAttemptsExhausted",
            "RecordAgeExceeded",
            "SomethingNew",
        ] {
            let body = serde_json::json!({
                "requestContext": {"requestId": "r", "functionArn": "arn", "condition": condition, "approximateInvokeCount": 3},
                "responseContext": {"statusCode": 200},
                "version": "1.0",
                "timestamp": "2026-11-30T10:00:10.000Z",
                "DDBStreamBatchInfo": {
                    "shardId": "shardId-1", "startSequenceNumber": "100", "endSequenceNumber": "200",
                    "approximateArrivalOfFirstRecord": "2026-11-30T10:00:00.123Z",
                    "approximateArrivalOfLastRecord": "2026-11-30T10:00:05Z",
                    "batchSize": 3, "streamArn": "arn:stream", "somethingNew": true
                }
            });
            let message: OnFailureMessage = serde_json::from_value(body).unwrap();
            assert_eq!(
                message.request_context.condition.as_deref(),
                Some(condition)
            );
            let settings = crate::sweep::tests::settings();
            let window = Window::of(&message, &settings);
            assert_eq!(
                window.from,
                message.batch.approximate_arrival_of_first_record - Duration::from_secs(300)
            );
            assert_eq!(
                window.to,
                message.batch.approximate_arrival_of_last_record + Duration::from_secs(2)
            );
        }
    }
}
