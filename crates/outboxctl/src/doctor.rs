//! `outboxctl doctor`: whether a table, its stream, the mappings that read
//! it and the sink are fit for the outbox, each finding with its fix. It
//! only reads (`DescribeTable`, `DescribeTimeToLive`, one `Query` of the
//! stack settings records, `ListEventSourceMappings`, and the sink's own
//! cold-start check).
//!
//! The checks are plain functions of what AWS answered, so each broken
//! case is a unit test; the calls are tested against the local servers.

use std::collections::HashMap;

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{
    GlobalSecondaryIndexDescription, KeyType, ProjectionType, ScalarAttributeType, StreamViewType,
    TableDescription, TimeToLiveDescription, TimeToLiveStatus,
};
use aws_sdk_lambda::types::EventSourceMappingConfiguration;
use outbox_core::KeySchema;
use outbox_engine::EventSink;
use outbox_runtime::error_line;
use outbox_runtime::Config;
use outbox_runtime::SinkAdapter;
use serde::Serialize;

use crate::context::{JsonArg, TableArg};
use crate::error::Error;
use crate::output::{print_json, table};
use crate::stack::Stack;

/// AWS's advice: at most two readers (mappings) per stream shard; a third
/// is throttled.
const MAX_READERS: usize = 2;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// As it should be.
    Ok,
    /// Works, but worth a look (no mapping yet, an index still building).
    Warning,
    /// The outbox loses its guarantees or does not work: `doctor` exits 1.
    Problem,
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// What was checked: `table`, `keys`, `stream`, `pending-index`,
    /// `dead-letter-index`, `ttl`, `mappings`, `publisher-mapping`, `sink`,
    /// `stacks` (one live stack per table and region), and with `--scan`
    /// `unsweepable` (pending items under keys no stack's sweeper reads).
    pub check: &'static str,
    /// How bad.
    pub severity: Severity,
    /// What was found.
    pub detail: String,
    /// What to do about it (an AWS CLI command where there is one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    fn ok(check: &'static str, detail: impl Into<String>) -> Self {
        Self {
            check,
            severity: Severity::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn warning(check: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            check,
            severity: Severity::Warning,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn problem(check: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            check,
            severity: Severity::Problem,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// The sink to check, as the stack's functions are configured.
#[derive(Debug, Clone, Default)]
pub struct SinkToCheck {
    /// `EVENT_BUS_NAME` (EventBridge).
    pub bus: Option<String>,
    /// `SNS_TOPIC_ARN` (SNS).
    pub topic: Option<String>,
    /// `MAX_EVENT_BYTES`, when the stack sets it.
    pub max_event_bytes: Option<usize>,
}

/// The checks whose finding is a problem (what makes `doctor` exit 1).
pub fn problems(findings: &[Finding]) -> Vec<&'static str> {
    findings
        .iter()
        .filter(|f| f.severity == Severity::Problem)
        .map(|f| f.check)
        .collect()
}

/// Every check, in order. Stops after `table` when there is no table.
pub async fn diagnose(
    sdk: &SdkConfig,
    schema: &KeySchema,
    table_name: &str,
    sink: &SinkToCheck,
) -> Vec<Finding> {
    let dynamodb = aws_sdk_dynamodb::Client::new(sdk);
    let described = dynamodb
        .describe_table()
        .table_name(table_name)
        .send()
        .await;
    let Some(description) = (match described {
        Ok(out) => out.table,
        Err(e) => {
            return vec![Finding::problem(
                "table",
                error_line("DescribeTable", &e),
                "check --table, the region and the credentials",
            )]
        }
    }) else {
        return vec![Finding::problem(
            "table",
            "DescribeTable returned no table",
            "check --table",
        )];
    };
    let ttl = dynamodb
        .describe_time_to_live()
        .table_name(table_name)
        .send()
        .await;
    let mut findings = vec![Finding::ok("table", format!("{table_name} exists"))];
    findings.extend(check_table(schema, table_name, &description));
    // The records under the table's own key names (a table keyed other
    // than the schema says is the keys check's finding, not this one's).
    let mut probe = schema.clone();
    for key in description.key_schema() {
        match key.key_type() {
            KeyType::Hash => probe.partition_key = key.attribute_name().to_owned(),
            KeyType::Range => probe.sort_key = key.attribute_name().to_owned(),
            _ => {}
        }
    }
    let store = outbox_runtime::DynamoStore::new(
        dynamodb.clone(),
        table_name,
        outbox_runtime::DEFAULT_OUTBOX_SHARDS,
    )
    .with_keys(probe);
    let deadline = outbox_engine::Deadline::after(std::time::Duration::from_secs(30));
    findings.push(
        match outbox_engine::PublishStore::recorded_settings(&store, &deadline).await {
            Ok(records) => check_stacks(
                &records,
                &sdk.region().map(|r| r.to_string()).unwrap_or_default(),
                time::OffsetDateTime::now_utc(),
            ),
            Err(e) => Finding::problem(
                "stacks",
                format!("the stack settings records were not read: {e}"),
                "grant dynamodb:Query on the table",
            ),
        },
    );
    findings.push(match ttl {
        Ok(out) => check_ttl(schema, table_name, out.time_to_live_description()),
        Err(e) => Finding::problem(
            "ttl",
            error_line("DescribeTimeToLive", &e),
            "grant dynamodb:DescribeTimeToLive",
        ),
    });
    if let Some(stream) = description.latest_stream_arn() {
        findings.extend(match mappings_of(sdk, stream).await {
            Ok(mappings) => check_mappings(schema, &mappings),
            Err(e) => vec![Finding::problem(
                "mappings",
                e,
                "grant lambda:ListEventSourceMappings",
            )],
        });
    }
    if let Some(finding) = check_sink(sdk, table_name, sink).await {
        findings.push(finding);
    }
    findings
}

async fn mappings_of(
    sdk: &SdkConfig,
    stream: &str,
) -> Result<Vec<EventSourceMappingConfiguration>, String> {
    let lambda = aws_sdk_lambda::Client::new(sdk);
    let mut mappings = Vec::new();
    let mut marker = None;
    loop {
        let page = lambda
            .list_event_source_mappings()
            .event_source_arn(stream)
            .set_marker(marker)
            .send()
            .await
            .map_err(|e| error_line("ListEventSourceMappings", &e))?;
        mappings.extend(page.event_source_mappings().iter().cloned());
        marker = page.next_marker().map(str::to_owned);
        if marker.is_none() {
            return Ok(mappings);
        }
    }
}

/// The keys, the stream and the two indexes.
pub(crate) fn check_table(
    schema: &KeySchema,
    table: &str,
    description: &TableDescription,
) -> Vec<Finding> {
    let types: HashMap<&str, &ScalarAttributeType> = description
        .attribute_definitions()
        .iter()
        .map(|a| (a.attribute_name(), a.attribute_type()))
        .collect();
    let is_string = |name: &str| types.get(name) == Some(&&ScalarAttributeType::S);
    let key_of = |schema: &[aws_sdk_dynamodb::types::KeySchemaElement], kind: KeyType| {
        schema
            .iter()
            .find(|k| k.key_type() == &kind)
            .map(|k| k.attribute_name().to_owned())
    };
    let mut findings = Vec::new();

    let table_keys = description.key_schema();
    let (pk, sk) = (
        key_of(table_keys, KeyType::Hash),
        key_of(table_keys, KeyType::Range),
    );
    findings.push(
        if pk.as_deref() == Some(schema.partition_key.as_str()) && sk.as_deref() == Some(schema.sort_key.as_str()) && is_string(schema.partition_key.as_str()) && is_string(schema.sort_key.as_str()) {
            Finding::ok("keys", format!("{} (S) / {} (S)", schema.partition_key.as_str(), schema.sort_key.as_str()))
        } else {
            Finding::problem(
                "keys",
                format!(
                    "the table's keys are {} / {}; the outbox writes {} (S) / {} (S)",
                    pk.as_deref().unwrap_or("none"),
                    sk.as_deref().unwrap_or("none"),
                    schema.partition_key.as_str(),
                    schema.sort_key.as_str()
                ),
                "the outbox item must share its aggregate's item collection: use a table keyed by string partition and sort keys",
            )
        },
    );

    let view = description
        .stream_specification()
        .filter(|s| s.stream_enabled())
        .and_then(|s| s.stream_view_type());
    let enable = format!("aws dynamodb update-table --table-name {table} --stream-specification StreamEnabled=true,StreamViewType=NEW_IMAGE");
    findings.push(match view {
        Some(StreamViewType::NewImage | StreamViewType::NewAndOldImages) => {
            Finding::ok("stream", format!("on, {}", view.map_or("", |v| v.as_str())))
        }
        Some(other) => Finding::problem(
            "stream",
            format!("on with {}, which carries no new image: the publisher has nothing to publish", other.as_str()),
            format!("a stream's view type cannot change in place: disable it (aws dynamodb update-table --table-name {table} --stream-specification StreamEnabled=false), then {enable}; the mappings on the old stream must be recreated on the new one"),
        ),
        None => Finding::problem("stream", "off: nothing reaches the publisher", enable),
    });

    let indexes = description.global_secondary_indexes();
    for (check, name, hash, range) in [
        (
            "pending-index",
            schema.pending_index.as_str(),
            schema.pending_partition_key.as_str(),
            schema.pending_sort_key.as_str(),
        ),
        (
            "dead-letter-index",
            schema.dead_letter_index.as_str(),
            schema.dead_letter_partition_key.as_str(),
            schema.dead_letter_sort_key.as_str(),
        ),
    ] {
        let index = indexes.iter().find(|i| i.index_name() == Some(name));
        findings.push(check_index(
            table,
            check,
            (name, hash, range),
            index,
            &is_string,
        ));
    }
    findings
}

fn check_index(
    table: &str,
    check: &'static str,
    (name, hash, range): (&str, &str, &str),
    index: Option<&GlobalSecondaryIndexDescription>,
    is_string: &dyn Fn(&str) -> bool,
) -> Finding {
    let create = format!(
        "aws dynamodb update-table --table-name {table} --attribute-definitions AttributeName={hash},AttributeType=S AttributeName={range},AttributeType=S --global-secondary-index-updates '[{{\"Create\":{{\"IndexName\":\"{name}\",\"KeySchema\":[{{\"AttributeName\":\"{hash}\",\"KeyType\":\"HASH\"}},{{\"AttributeName\":\"{range}\",\"KeyType\":\"RANGE\"}}],\"Projection\":{{\"ProjectionType\":\"ALL\"}}}}}}]'"
    );
    let Some(index) = index else {
        return Finding::problem(check, format!("no index {name}"), create);
    };
    let schema = index.key_schema();
    let keys_of = |kind: KeyType| {
        schema
            .iter()
            .find(|k| k.key_type() == &kind)
            .map(|k| k.attribute_name())
    };
    if keys_of(KeyType::Hash) != Some(hash)
        || keys_of(KeyType::Range) != Some(range)
        || !is_string(hash)
        || !is_string(range)
    {
        return Finding::problem(
            check,
            format!(
                "{name} is keyed {} / {}, not {hash} (S) / {range} (S): it is some other index",
                keys_of(KeyType::Hash).unwrap_or("none"),
                keys_of(KeyType::Range).unwrap_or("none")
            ),
            format!("{name} must be the outbox's own index: delete it or move the table's other use off it, then {create}"),
        );
    }
    let projection = index.projection().and_then(|p| p.projection_type());
    if projection != Some(&ProjectionType::All) {
        return Finding::problem(
            check,
            format!(
                "{name} projects {}: the sweeper and outboxctl read whole items from it",
                projection.map_or("nothing", |p| p.as_str())
            ),
            format!("a projection cannot change in place: delete {name} and create it again with ProjectionType ALL ({create})"),
        );
    }
    match index.index_status().map(|s| s.as_str()) {
        Some("ACTIVE") | None => Finding::ok(check, format!("{name}: {hash} / {range}, ALL")),
        Some(status) => Finding::warning(
            check,
            format!("{name} is {status}"),
            "wait until it is ACTIVE; the sweeper cannot read it before",
        ),
    }
}

/// TTL on the attribute the writer's idempotency records carry.
pub(crate) fn check_ttl(
    schema: &KeySchema,
    table: &str,
    ttl: Option<&TimeToLiveDescription>,
) -> Finding {
    let enable = format!("aws dynamodb update-time-to-live --table-name {table} --time-to-live-specification Enabled=true,AttributeName={}", schema.ttl_attribute.as_str());
    let status = ttl.and_then(|t| t.time_to_live_status());
    let attribute = ttl.and_then(|t| t.attribute_name());
    match status {
        Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)
            if attribute == Some(schema.ttl_attribute.as_str()) =>
        {
            Finding::ok("ttl", format!("on {}", schema.ttl_attribute.as_str()))
        }
        Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling) => Finding::problem(
            "ttl",
            format!(
                "on {}, not {}: the writer's idempotency records would never expire",
                attribute.unwrap_or("?"),
                schema.ttl_attribute.as_str()
            ),
            "a table has one TTL attribute: use the same name for both, or do not use the writer's idempotency records on this table",
        ),
        _ => Finding::problem(
            "ttl",
            format!("off: the writer's idempotency records ({}) would never expire", schema.ttl_attribute.as_str()),
            enable,
        ),
    }
}

/// How many outbox stacks of `region` recorded their settings in the table
/// within the last hour ([`outbox_core::keys::LIVE_WITHIN`]): more than one
/// is a problem (each would publish and delete a share of the events; the
/// later one's functions refuse to start, `publish::refuse_rivals`).
pub(crate) fn check_stacks(
    records: &[outbox_core::keys::RecordedSettings],
    region: &str,
    now: time::OffsetDateTime,
) -> Finding {
    let mut live: Vec<&outbox_core::keys::RecordedSettings> = Vec::new();
    for record in records
        .iter()
        .filter(|r| r.region == region && r.is_live(now))
    {
        if !live.iter().any(|l| l.same_stack(record)) {
            live.push(record);
        }
    }
    let name = |r: &outbox_core::keys::RecordedSettings| {
        if r.stack.is_empty() {
            "(unnamed)".to_owned()
        } else {
            r.stack.clone()
        }
    };
    match live.as_slice() {
        [] if records.iter().any(|r| r.region == region) => Finding::warning(
            "stacks",
            format!("no outbox stack's function recorded its settings in {region} within the last hour"),
            "check that the stack's sweeper runs (its schedule, its Errors alarm)",
        ),
        [] => Finding::warning(
            "stacks",
            format!("no outbox stack recorded its settings in {region}"),
            "deploy the stack (docs/deploy.md), or wait for its first sweep",
        ),
        [one] => Finding::ok("stacks", format!("one stack publishes in {region}: {}", name(one))),
        several => Finding::problem(
            "stacks",
            format!(
                "{} outbox stacks publish from this table in {region}: {}; the later ones' functions refuse to start",
                several.len(),
                several.iter().map(|r| format!("{} ({})", name(r), r.by)).collect::<Vec<_>>().join(", ")
            ),
            "delete all but one stack, or give each its own table (docs/adopt.md, \"One table, one stack\")",
        ),
    }
}

/// How many mappings read the stream, and whether one of them is a
/// publisher's: a filter on the outbox prefix, batch item failures
/// reported, an OnFailure destination, enabled.
pub(crate) fn check_mappings(
    schema: &KeySchema,
    mappings: &[EventSourceMappingConfiguration],
) -> Vec<Finding> {
    let prefix = schema.outbox_prefix.as_str();
    let mut findings = Vec::new();
    let count = mappings.len();
    findings.push(if count > MAX_READERS {
        Finding::problem(
            "mappings",
            format!("{count} mappings read the stream; AWS advises at most {MAX_READERS} readers per shard, and the others are throttled (the publisher's iterator age grows)"),
            "remove a reader, or fan out from one (EventBridge Pipes, or a Kinesis Data Streams copy of the table's changes)",
        )
    } else {
        Finding::ok("mappings", format!("{count} of at most {MAX_READERS} readers"))
    });
    let publishers: Vec<&EventSourceMappingConfiguration> = mappings
        .iter()
        .filter(|m| filter_prefixes(schema, m).iter().any(|p| p == prefix))
        .collect();
    if publishers.is_empty() {
        let other: Vec<String> = mappings
            .iter()
            .flat_map(|m| filter_prefixes(schema, m))
            .collect();
        findings.push(if other.is_empty() {
            Finding::warning(
                "publisher-mapping",
                format!("no mapping filters on the sort-key prefix {prefix}: the publisher is not deployed on this stream yet"),
                "deploy the stack's publisher (docs/deploy.md); run doctor again",
            )
        } else {
            Finding::problem(
                "publisher-mapping",
                format!("the mappings filter on {}, not on the outbox prefix {prefix}: outbox items never reach a publisher", other.join(", ")),
                format!("set the publisher mapping's filter to the template's, with the prefix {prefix}"),
            )
        });
        return findings;
    }
    let enabled = publishers
        .iter()
        .filter(|m| !matches!(m.state(), Some("Disabled" | "Disabling")))
        .count();
    if enabled > 1 {
        findings.push(Finding::problem(
            "publisher-mapping",
            format!("{enabled} enabled mappings filter on {prefix}: each publisher would publish and delete a share of the events, so each sink misses the others' share"),
            "keep one publisher per table (delete the other stack, or disable its mapping)",
        ));
    }
    for mapping in publishers {
        let name = mapping
            .function_arn()
            .and_then(|a| a.rsplit(':').next())
            .unwrap_or("?");
        let reports = mapping
            .function_response_types()
            .iter()
            .any(|t| t.as_str() == "ReportBatchItemFailures");
        let on_failure = mapping
            .destination_config()
            .and_then(|d| d.on_failure())
            .and_then(|f| f.destination())
            .is_some();
        let state = mapping.state().unwrap_or("?");
        findings.push(if !reports {
            Finding::problem(
                "publisher-mapping",
                format!("{name}: ReportBatchItemFailures is off, so one failed event retries its whole batch"),
                "set FunctionResponseTypes: [ReportBatchItemFailures] (the template does)",
            )
        } else if !on_failure {
            Finding::problem(
                "publisher-mapping",
                format!("{name}: no OnFailure destination, so a batch the mapping gives up leaves no trace until the sweeper's next run"),
                "set DestinationConfig.OnFailure to an SQS queue (the template does)",
            )
        } else if !matches!(state, "Enabled" | "Enabling" | "Creating" | "Updating") {
            Finding::warning(
                "publisher-mapping",
                format!("{name}: {state}"),
                "enable the mapping (aws lambda update-event-source-mapping --uuid UUID --enabled)",
            )
        } else {
            Finding::ok("publisher-mapping", format!("{name}: filters on {prefix}, reports batch item failures, has an OnFailure destination"))
        });
    }
    findings
}

/// The sort-key prefixes a mapping's filter patterns select
/// (`{"dynamodb":{"Keys":{"<SK>":{"S":[{"prefix":…}]}}}}`).
fn filter_prefixes(schema: &KeySchema, mapping: &EventSourceMappingConfiguration) -> Vec<String> {
    mapping
        .filter_criteria()
        .map(|c| c.filters())
        .unwrap_or_default()
        .iter()
        .filter_map(|f| f.pattern())
        .filter_map(|p| serde_json::from_str::<serde_json::Value>(p).ok())
        .flat_map(|p| {
            p["dynamodb"]["Keys"][schema.sort_key.as_str()]["S"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|c| c["prefix"].as_str().map(str::to_owned))
        .collect()
}

/// The sink, checked exactly as the functions check it at cold start (the
/// bus exists; the topic exists and accepts `MAX_EVENT_BYTES`). `None`
/// when no sink was named.
async fn check_sink(sdk: &SdkConfig, table: &str, sink: &SinkToCheck) -> Option<Finding> {
    let mut vars: HashMap<&str, String> = HashMap::from([("TABLE_NAME", table.to_owned())]);
    match (&sink.bus, &sink.topic) {
        (Some(bus), _) => {
            let kind = crate::context::bus_sink(bus);
            vars.insert("SINK", kind.into());
            let variable = if kind == "eventbridge" {
                "EVENT_BUS_NAME"
            } else {
                "EVENT_BUS_ARN"
            };
            vars.insert(variable, bus.clone());
        }
        (_, Some(topic)) => {
            vars.insert("SINK", "sns".into());
            vars.insert("SNS_TOPIC_ARN", topic.clone());
        }
        (None, None) => return None,
    }
    if let Some(bytes) = sink.max_event_bytes {
        vars.insert("MAX_EVENT_BYTES", bytes.to_string());
    }
    let config = match Config::from_lookup(|k| vars.get(k).cloned()) {
        Ok(config) => config,
        Err(e) => {
            return Some(Finding::problem(
                "sink",
                e.to_string(),
                "fix the flag the message names",
            ))
        }
    };
    let target = sink.bus.clone().or(sink.topic.clone()).unwrap_or_default();
    Some(match SinkAdapter::from_config(&config, sdk).verify().await {
        Ok(()) => Finding::ok(
            "sink",
            format!("{target} exists and accepts {} bytes per event", config.max_event_bytes),
        ),
        Err(e) => Finding::problem(
            "sink",
            e.to_string(),
            "create the bus or topic, grant events:DescribeEventBus or sns:GetTopicAttributes, or align MAX_EVENT_BYTES with the topic's MaximumMessageSize",
        ),
    })
}

/// `outboxctl doctor`: prints the findings; an error when one is a problem
/// (exit code 1).
/// `outboxctl doctor`.
#[derive(Debug, clap::Args)]
pub(crate) struct DoctorArgs {
    #[command(flatten)]
    table: TableArg,
    /// The event bus the functions publish to (EventBridge sink).
    #[arg(long, conflicts_with = "topic")]
    bus: Option<String>,
    /// The topic ARN the functions publish to (SNS sink).
    #[arg(long)]
    topic: Option<String>,
    /// The stack's MAX_EVENT_BYTES, which the sink must accept (by
    /// default the sink's: 1 MiB for EventBridge, 256 KiB for SNS).
    #[arg(long)]
    max_event_bytes: Option<usize>,
    /// Also read the whole table (one paginated `Scan`, `dynamodb:Scan`):
    /// pending outbox items under keys no stack's sweeper reads are a
    /// problem (`status --scan` lists them).
    #[arg(long)]
    scan: bool,
    #[command(flatten)]
    json: JsonArg,
}

/// Runs the checks and prints the findings; an error when one is a problem.
pub(crate) async fn run(sdk: &SdkConfig, args: DoctorArgs) -> Result<(), Error> {
    let sink = SinkToCheck {
        bus: args.bus,
        topic: args.topic,
        max_event_bytes: args.max_event_bytes,
    };
    let TableArg {
        table,
        settings,
        stack,
    } = &args.table;
    // The table's recorded key schema when it can be read; else (no such
    // table, several stacks, say) the environment's, and the doctor
    // reports what it finds.
    let loaded = Stack::load(sdk, table, settings, stack.as_deref()).await;
    let keys = match &loaded {
        Ok(stack) => stack.keys().clone(),
        Err(_) => KeySchema::from_lookup(|k| std::env::var(k).ok())?,
    };
    let mut extra = Vec::new();
    if args.scan {
        extra.push(match &loaded {
            Ok(stack) => match stack.unsweepable().await {
                Ok(u) if u.count == 0 => Finding::ok(
                    "unsweepable",
                    format!("all {} outbox items are where a sweeper looks", u.scanned),
                ),
                Ok(u) => Finding::problem(
                    "unsweepable",
                    format!(
                        "{} of {} outbox items are pending under keys no stack's sweeper reads: {}",
                        u.count,
                        u.scanned,
                        u.examples.join(", ")
                    ),
                    "fix their writer's key settings (docs/adopt.md \"What the publisher checks\"), then give them the stack's keys",
                ),
                Err(e) => Finding::problem("unsweepable", e.to_string(), "grant dynamodb:Scan on the table"),
            },
            Err(e) => Finding::problem(
                "unsweepable",
                format!("no stack settings to scan with: {e}"),
                "run where the stack's settings are recorded (--region, --stack)",
            ),
        });
    }
    report(sdk, &keys, table, &sink, extra, args.json.json).await
}

async fn report(
    sdk: &SdkConfig,
    schema: &KeySchema,
    table_name: &str,
    sink: &SinkToCheck,
    extra: Vec<Finding>,
    json: bool,
) -> Result<(), Error> {
    let mut findings = diagnose(sdk, schema, table_name, sink).await;
    findings.extend(extra);
    if json {
        print_json(&findings)?;
    } else {
        let mut out = table(&["check", "", "finding", "fix"], &[]);
        for f in &findings {
            let mark = match f.severity {
                Severity::Ok => "ok",
                Severity::Warning => "warning",
                Severity::Problem => "PROBLEM",
            };
            out.add_row(vec![
                f.check,
                mark,
                &f.detail,
                f.fix.as_deref().unwrap_or(""),
            ]);
        }
        println!("{out}");
    }
    match problems(&findings).len() {
        0 => Ok(()),
        n => Err(Error::Incomplete(format!(
            "{n} problem(s) found on {table_name}"
        ))),
    }
}

#[cfg(test)]
mod tests;
