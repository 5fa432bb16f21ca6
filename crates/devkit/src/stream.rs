//! Reading a table's stream the way an event source mapping does:
//! DescribeStream, a `TRIM_HORIZON` iterator per shard, GetRecords, and the
//! records turned into the exact JSON Lambda delivers.

use std::collections::BTreeMap;

use aws_config::SdkConfig;
use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodbstreams::types::{Record, ShardIteratorType};
use serde_json::{json, Value};

/// A stream call failed.
#[derive(Debug, thiserror::Error)]
#[error("stream {operation} failed: {message}")]
pub struct StreamError {
    /// The Streams operation.
    pub operation: &'static str,
    /// What failed.
    pub message: String,
}

fn err(operation: &'static str) -> impl Fn(String) -> StreamError {
    move |message| StreamError { operation, message }
}

/// A position in every shard of one stream, advancing as records are read.
#[derive(Debug)]
pub struct StreamCursor {
    client: aws_sdk_dynamodbstreams::Client,
    stream_arn: String,
    region: String,
    /// Next iterator per shard (`None` once a closed shard is exhausted).
    iterators: BTreeMap<String, Option<String>>,
    /// Last sequence number read per shard: where a new cursor resumes.
    positions: BTreeMap<String, String>,
}

impl StreamCursor {
    /// A cursor at `TRIM_HORIZON` of every shard.
    pub fn new(sdk: &SdkConfig, stream_arn: &str) -> Self {
        Self {
            client: aws_sdk_dynamodbstreams::Client::new(sdk),
            stream_arn: stream_arn.to_owned(),
            region: sdk
                .region()
                .map(|r| r.to_string())
                .unwrap_or_else(|| "us-east-1".into()),
            iterators: BTreeMap::new(),
            positions: BTreeMap::new(),
        }
    }

    /// A cursor resuming after the given positions (shard → last sequence
    /// number read); shards not named start at `TRIM_HORIZON`.
    pub fn resume(sdk: &SdkConfig, stream_arn: &str, positions: BTreeMap<String, String>) -> Self {
        let mut cursor = Self::new(sdk, stream_arn);
        cursor.positions = positions;
        cursor
    }

    /// Last sequence number read per shard.
    pub fn positions(&self) -> &BTreeMap<String, String> {
        &self.positions
    }

    async fn discover(&mut self) -> Result<(), StreamError> {
        let description = self
            .client
            .describe_stream()
            .stream_arn(&self.stream_arn)
            .send()
            .await
            .map_err(|e| err("DescribeStream")(outbox_runtime::error_line("DescribeStream", &e)))?;
        let shards = description
            .stream_description()
            .map(|d| d.shards().to_vec())
            .unwrap_or_default();
        for shard in shards {
            let Some(id) = shard.shard_id() else { continue };
            if self.iterators.contains_key(id) {
                continue;
            }
            let mut request = self
                .client
                .get_shard_iterator()
                .stream_arn(&self.stream_arn)
                .shard_id(id);
            request = match self.positions.get(id) {
                Some(sequence) => request
                    .shard_iterator_type(ShardIteratorType::AfterSequenceNumber)
                    .sequence_number(sequence),
                None => request.shard_iterator_type(ShardIteratorType::TrimHorizon),
            };
            let iterator = request
                .send()
                .await
                .map_err(|e| {
                    err("GetShardIterator")(outbox_runtime::error_line("GetShardIterator", &e))
                })?
                .shard_iterator;
            self.iterators.insert(id.to_owned(), iterator);
        }
        Ok(())
    }

    /// Every record written since the last call, in stream order, as Lambda
    /// would deliver them.
    pub async fn read(&mut self) -> Result<Vec<EventRecord>, StreamError> {
        Ok(self
            .read_by_shard()
            .await?
            .into_iter()
            .flat_map(|(_, records)| records)
            .collect())
    }

    /// The stream's ARN.
    pub fn stream_arn(&self) -> &str {
        &self.stream_arn
    }

    /// Every record written since the last call, by shard, each shard in
    /// stream order.
    pub(crate) async fn read_by_shard(
        &mut self,
    ) -> Result<Vec<(String, Vec<EventRecord>)>, StreamError> {
        self.discover().await?;
        let mut out = Vec::new();
        let shards: Vec<String> = self.iterators.keys().cloned().collect();
        for shard in shards {
            let mut records_of_shard = Vec::new();
            let mut renewed = false;
            while let Some(Some(iterator)) = self.iterators.get(&shard).cloned() {
                let page = match self
                    .client
                    .get_records()
                    .shard_iterator(iterator)
                    .limit(1000)
                    .send()
                    .await
                {
                    Ok(page) => page,
                    // An iterator expires 15 minutes after it was handed
                    // out. A mapping then takes a new one after the last
                    // record it read: so does this cursor (once per shard
                    // and read; a fresh iterator cannot have expired).
                    //
                    // DynamoDB Local sometimes answers a shard's first
                    // iterator, taken at TRIM_HORIZON while the shard was
                    // still empty and other tables were busy, with
                    // TrimmedDataAccessException; a new iterator from the
                    // same position reads on (nothing is skipped: the
                    // position is the last record read, or the horizon).
                    Err(e)
                        if !renewed
                            && matches!(
                                outbox_runtime::error_code(&e).as_str(),
                                "ExpiredIteratorException" | "TrimmedDataAccessException"
                            ) =>
                    {
                        renewed = true;
                        self.iterators.remove(&shard);
                        self.discover().await?;
                        continue;
                    }
                    Err(e) => {
                        return Err(err("GetRecords")(outbox_runtime::error_line(
                            "GetRecords",
                            &e,
                        )))
                    }
                };
                let read_at = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                let records = page.records();
                let empty = records.is_empty();
                for record in records {
                    if let Some(sequence) = record.dynamodb().and_then(|c| c.sequence_number()) {
                        self.positions.insert(shard.clone(), sequence.to_owned());
                    }
                    records_of_shard.push(self.to_lambda(record, read_at)?);
                }
                self.iterators
                    .insert(shard.clone(), page.next_shard_iterator().map(str::to_owned));
                if empty {
                    break;
                }
            }
            out.push((shard, records_of_shard));
        }
        Ok(out)
    }

    /// One stream record in the shape of a Lambda DynamoDB event record,
    /// read at `read_at` (Unix seconds).
    ///
    /// AWS rounds `ApproximateCreationDateTime` down to the second; DynamoDB
    /// Local (its stream ARNs name the region `ddblocal`) rounds it down to
    /// the minute, which would put the arrival times of an OnFailure message
    /// up to a minute before the records of its batch were written. The
    /// record's second is then taken as the latest it can be: its minute's
    /// last second, or the second it was read, whichever is earlier
    /// (docs/local.md, deviations).
    fn to_lambda(&self, record: &Record, read_at: i64) -> Result<EventRecord, StreamError> {
        let change = record.dynamodb();
        let image = |m: Option<
            &std::collections::HashMap<String, aws_sdk_dynamodbstreams::types::AttributeValue>,
        >| {
            m.map(|m| {
                serde_json::to_value(serde_dynamo::Item::from(m.clone())).unwrap_or(Value::Null)
            })
        };
        let created = change
            .and_then(|c| c.approximate_creation_date_time())
            .map(|t| t.secs())
            .unwrap_or(0);
        let created = if self.stream_arn.contains(":ddblocal:") {
            (created + 59).min(read_at).max(created)
        } else {
            created
        };
        let mut dynamodb = json!({
            "ApproximateCreationDateTime": created,
            "Keys": image(change.and_then(|c| c.keys.as_ref())),
            "SequenceNumber": change.and_then(|c| c.sequence_number()),
            "SizeBytes": change.and_then(|c| c.size_bytes()).unwrap_or(0),
            "StreamViewType": change.and_then(|c| c.stream_view_type()).map(|v| v.as_str().to_owned()),
        });
        if let Some(new) = image(change.and_then(|c| c.new_image.as_ref())) {
            dynamodb["NewImage"] = new;
        }
        if let Some(old) = image(change.and_then(|c| c.old_image.as_ref())) {
            dynamodb["OldImage"] = old;
        }
        let value = json!({
            "eventID": record.event_id(),
            "eventName": record.event_name().map(|n| n.as_str().to_owned()),
            "eventVersion": record.event_version().unwrap_or("1.1"),
            "eventSource": "aws:dynamodb",
            "awsRegion": self.region,
            "dynamodb": dynamodb,
            "eventSourceARN": self.stream_arn,
        });
        serde_json::from_value(value).map_err(|e| err("decode")(e.to_string()))
    }
}
