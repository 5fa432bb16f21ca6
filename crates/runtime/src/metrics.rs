//! CloudWatch Embedded Metric Format: one JSON line on stdout per flush,
//! turned into metrics by CloudWatch Logs without an API call.
//!
//! Every metric has two dimensions, `Stack` and `Function`: the stack's name
//! (the `STACK_NAME` variable the templates set, the prefix of the
//! functions' names) and the function that emitted it. Two outbox stacks in
//! one account (another service, a staging copy) therefore never share a
//! metric, and each stack's alarms and dashboard read only its own.
//!
//! Every document carries a `level` and an RFC 3339 `timestamp`: Lambda's
//! log-level filter (the templates' `LogLevel`, JSON log format) treats a
//! JSON line without a `level` as INFO, so at the default WARN it would drop
//! every metric. The level is the function's own (`AWS_LAMBDA_LOG_LEVEL`,
//! which Lambda sets from it), the lowest that passes its filter.

use std::sync::OnceLock;

use serde_json::{json, Map, Value};

/// The metric namespace of every function in the stack.
pub const NAMESPACE: &str = "DynamoDbOutbox";

/// A unit CloudWatch understands.
#[derive(Debug, Clone, Copy)]
pub enum Unit {
    /// A count.
    Count,
    /// A duration in seconds.
    Seconds,
    /// A duration in milliseconds.
    Milliseconds,
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Self::Count => "Count",
            Self::Seconds => "Seconds",
            Self::Milliseconds => "Milliseconds",
        }
    }
}

/// The environment variable that names the stack: set by the templates
/// (`infra/outbox.yaml` and `template.yaml`, their `Globals`) to the prefix
/// of the functions' names.
pub(crate) const STACK_NAME_VAR: &str = "STACK_NAME";

/// The `Stack` dimension's value when `STACK_NAME` is unset or empty (a
/// function deployed without the templates): its metrics are still
/// emitted, under this name, where no alarm of a stack reads them.
pub(crate) const UNNAMED_STACK: &str = "unnamed";

/// The `Stack` dimension's value: `STACK_NAME`, read once per process, or
/// `UNNAMED_STACK` (with one warning) when it is unset or empty.
pub fn stack_name() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| {
        let name = stack_name_from(std::env::var(STACK_NAME_VAR).ok());
        if name == UNNAMED_STACK {
            tracing::warn!(
                "{STACK_NAME_VAR} is not set: metrics carry Stack={UNNAMED_STACK}, which no stack's alarms read"
            );
        }
        name
    })
}

/// `STACK_NAME`'s value, trimmed, or [`UNNAMED_STACK`] when it is missing
/// or empty.
fn stack_name_from(value: Option<String>) -> String {
    value
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| UNNAMED_STACK.to_owned())
}

/// The metrics CloudWatch is told about by default: those the templates'
/// alarms read, and the dashboard's first row. Every other value stays in
/// the document as a log field (CloudWatch Logs Insights reads it) and
/// becomes a metric only with `DETAILED_METRICS=true` (the templates'
/// `DetailedMetrics`): each metric name costs $0.30 a month a stack.
pub const CORE_METRICS: [&str; 5] = [
    "OldestPendingAgeSeconds",
    "DeadLetterCount",
    "KeysRepaired",
    "ParkedAggregates",
    "ProjectionLagSeconds",
];

/// The environment variable that turns on every metric (`true`) or leaves
/// [`CORE_METRICS`] alone (`false`, unset or empty).
pub const DETAILED_METRICS_VAR: &str = "DETAILED_METRICS";

/// Which metrics the documents declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Declared {
    /// [`CORE_METRICS`] only.
    Core,
    /// Every value.
    All,
}

impl Declared {
    /// `DETAILED_METRICS`'s value: `true`, or `false` when unset or empty.
    pub(crate) fn parse(value: Option<&str>) -> Result<Self, String> {
        match value.map(str::trim) {
            None | Some("") | Some("false") => Ok(Self::Core),
            Some("true") => Ok(Self::All),
            Some(other) => Err(other.to_owned()),
        }
    }

    fn declares(self, name: &str) -> bool {
        self == Self::All || CORE_METRICS.contains(&name)
    }
}

/// This process's [`Declared`], read once (an invalid value, which the
/// functions' configuration refuses at cold start, counts as `false`).
fn declared() -> Declared {
    static DECLARED: OnceLock<Declared> = OnceLock::new();
    *DECLARED.get_or_init(|| {
        Declared::parse(std::env::var(DETAILED_METRICS_VAR).ok().as_deref())
            .unwrap_or(Declared::Core)
    })
}

/// Builds one EMF document of this process's stack ([`stack_name`]): all
/// `metrics` under the dimensions `Stack` and `Function` = `function`,
/// those this process declares ([`CORE_METRICS`] unless
/// `DETAILED_METRICS=true`) as metrics, the others as log fields.
pub fn emf_line(function: &str, metrics: &[(&str, f64, Unit)]) -> String {
    emf_line_of(stack_name(), function, metrics, declared())
}

/// Per event published, milliseconds from its commit to the sink's
/// acknowledgement (publisher and sweeper).
pub const COMMIT_TO_PUBLISH: &str = "CommitToPublishLatency";

/// The most values one metric carries in one EMF document (CloudWatch's
/// limit).
pub(crate) const MAX_VALUES: usize = 100;

/// A metric with many values in one period (one per event), from which
/// CloudWatch computes percentiles.
#[derive(Debug, Clone, Copy)]
pub struct Distribution<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its values.
    pub values: &'a [u64],
    /// Their unit.
    pub unit: Unit,
}

/// [`emf_line`], with `distribution`'s values: the first `MAX_VALUES` in
/// that document, the rest in more documents of that metric alone. No
/// values, no metric (CloudWatch would read an empty array as an error).
pub fn emf_lines(
    function: &str,
    metrics: &[(&str, f64, Unit)],
    distribution: Distribution<'_>,
) -> Vec<String> {
    emf_lines_of(stack_name(), function, metrics, distribution, declared())
}

/// [`emf_lines`] for the stack named `stack`.
pub(crate) fn emf_lines_of(
    stack: &str,
    function: &str,
    metrics: &[(&str, f64, Unit)],
    distribution: Distribution<'_>,
    declared: Declared,
) -> Vec<String> {
    let mut chunks = distribution.values.chunks(MAX_VALUES);
    let scalars = metrics
        .iter()
        .map(|(name, value, unit)| (*name, json!(value), *unit));
    let first: Vec<(&str, Value, Unit)> = match chunks.next() {
        Some(values) => scalars
            .chain(std::iter::once((
                distribution.name,
                json!(values),
                distribution.unit,
            )))
            .collect(),
        None => scalars.collect(),
    };
    let mut lines = vec![document(stack, function, &first, declared)];
    for values in chunks {
        lines.push(document(
            stack,
            function,
            &[(distribution.name, json!(values), distribution.unit)],
            declared,
        ));
    }
    lines
}

/// [`emf_line`] for the stack named `stack`.
pub(crate) fn emf_line_of(
    stack: &str,
    function: &str,
    metrics: &[(&str, f64, Unit)],
    declared: Declared,
) -> String {
    let metrics: Vec<(&str, Value, Unit)> = metrics
        .iter()
        .map(|(name, value, unit)| (*name, json!(value), *unit))
        .collect();
    document(stack, function, &metrics, declared)
}

/// The level of the metric documents: the function's application log level
/// as Lambda sets it (`AWS_LAMBDA_LOG_LEVEL`), `INFO` when it sets none.
fn level() -> &'static str {
    static LEVEL: OnceLock<&'static str> = OnceLock::new();
    LEVEL.get_or_init(|| level_of(std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().as_deref()))
}

fn level_of(lambda_level: Option<&str>) -> &'static str {
    crate::telemetry::LambdaLogLevel::parse(lambda_level).as_str()
}

/// One EMF document: `metrics` (a number or an array of numbers each)
/// under the dimensions `Stack` and `Function`, the `declared` ones as
/// metrics. A document that declares none has no `_aws` member: a log line
/// CloudWatch extracts nothing from.
fn document(
    stack: &str,
    function: &str,
    metrics: &[(&str, Value, Unit)],
    declared: Declared,
) -> String {
    let now = outbox_core::now_utc_millis();
    let timestamp = u64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(0);
    let definitions: Vec<Value> = metrics
        .iter()
        .filter(|(name, _, _)| declared.declares(name))
        .map(|(name, _, unit)| json!({"Name": name, "Unit": unit.as_str()}))
        .collect();
    let mut doc = Map::new();
    doc.insert("level".into(), json!(level()));
    doc.insert(
        "timestamp".into(),
        json!(now
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default()),
    );
    if !definitions.is_empty() {
        doc.insert(
            "_aws".into(),
            json!({
                "Timestamp": timestamp,
                "CloudWatchMetrics": [{
                    "Namespace": NAMESPACE,
                    "Dimensions": [["Stack", "Function"]],
                    "Metrics": definitions,
                }]
            }),
        );
    }
    doc.insert("Stack".into(), json!(stack));
    doc.insert("Function".into(), json!(function));
    for (name, value, _) in metrics {
        doc.insert((*name).into(), value.clone());
    }
    Value::Object(doc).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SWEEPER: &[(&str, f64, Unit)] = &[
        ("PendingCount", 3.0, Unit::Count),
        ("OldestPendingAgeSeconds", 12.5, Unit::Seconds),
    ];
    const PUBLISHED: &[(&str, f64, Unit)] = &[("Published", 1.0, Unit::Count)];

    /// The document [`emf_line_of`] writes for stack `orders`.
    fn doc(function: &str, metrics: &[(&str, f64, Unit)], declared: Declared) -> Value {
        serde_json::from_str(&emf_line_of("orders", function, metrics, declared)).unwrap()
    }

    fn latency(values: &[u64]) -> Distribution<'_> {
        let (name, unit) = ("CommitToPublishLatency", Unit::Milliseconds);
        Distribution { name, values, unit }
    }

    #[test]
    fn emf_has_the_documented_shape() {
        let v = doc("sweeper", SWEEPER, Declared::All);
        let cw = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(cw["Namespace"], NAMESPACE);
        assert_eq!(cw["Dimensions"], json!([["Stack", "Function"]]));
        assert_eq!(cw["Metrics"][1]["Name"], "OldestPendingAgeSeconds");
        assert_eq!(v["Stack"], "orders");
        assert_eq!(v["Function"], "sweeper");
        assert_eq!(v["PendingCount"], 3.0);
        assert_eq!(v["OldestPendingAgeSeconds"], 12.5);
        assert!(v["_aws"]["Timestamp"].as_u64().unwrap() > 0);
    }

    #[test]
    fn documents_carry_a_level_the_log_filter_passes_and_a_timestamp() {
        assert_eq!(level_of(Some("warn")), "WARN");
        assert_eq!(level_of(Some("FATAL")), "FATAL");
        assert_eq!(level_of(None), "INFO");
        assert_eq!(level_of(Some("loud")), "INFO");
        let v = doc("publisher", PUBLISHED, Declared::All);
        assert!(["TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"]
            .contains(&v["level"].as_str().unwrap()));
        let timestamp = v["timestamp"].as_str().unwrap();
        let parsed =
            time::OffsetDateTime::parse(timestamp, &time::format_description::well_known::Rfc3339)
                .unwrap();
        assert_eq!(
            parsed.unix_timestamp_nanos() / 1_000_000,
            v["_aws"]["Timestamp"].as_i64().unwrap() as i128
        );
    }

    #[test]
    fn a_distribution_goes_out_100_values_a_document() {
        let values: Vec<u64> = (0..250).collect();
        let lines = emf_lines_of(
            "orders",
            "publisher",
            &[("Published", 250.0, Unit::Count)],
            latency(&values),
            Declared::All,
        );
        assert_eq!(lines.len(), 3);
        let docs: Vec<Value> = lines
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(docs[0]["Published"], 250.0);
        let values_in = |d: &Value| d["CommitToPublishLatency"].as_array().unwrap().len();
        assert_eq!((values_in(&docs[0]), values_in(&docs[2])), (100, 50));
        assert_eq!(
            docs[0]["_aws"]["CloudWatchMetrics"][0]["Metrics"][1],
            json!({"Name": "CommitToPublishLatency", "Unit": "Milliseconds"})
        );
        assert!(docs[2]["Published"].is_null());
        let none = emf_lines_of(
            "orders",
            "publisher",
            &[("Published", 0.0, Unit::Count)],
            latency(&[]),
            Declared::All,
        );
        assert_eq!(none.len(), 1);
        assert!(!none[0].contains("CommitToPublishLatency"));
    }

    #[test]
    fn by_default_only_the_core_metrics_are_declared_and_every_value_stays() {
        let v = doc("sweeper", SWEEPER, Declared::Core);
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Metrics"],
            json!([{"Name": "OldestPendingAgeSeconds", "Unit": "Seconds"}])
        );
        assert_eq!(v["PendingCount"], 3.0, "a log field still");
        // Nothing to declare: a plain log line, no empty directive.
        let v = doc("publisher", PUBLISHED, Declared::Core);
        assert!(v.get("_aws").is_none(), "{v}");
        assert_eq!(v["Published"], 1.0);
        assert_eq!(v["Function"], "publisher");
        for (value, parsed) in [
            (None, Ok(Declared::Core)),
            (Some(""), Ok(Declared::Core)),
            (Some("false"), Ok(Declared::Core)),
            (Some("true"), Ok(Declared::All)),
            (Some("yes"), Err("yes".to_owned())),
        ] {
            assert_eq!(Declared::parse(value), parsed, "{value:?}");
        }
    }

    #[test]
    fn a_missing_or_empty_stack_name_falls_back_to_unnamed() {
        assert_eq!(stack_name_from(None), UNNAMED_STACK);
        assert_eq!(stack_name_from(Some(String::new())), UNNAMED_STACK);
        assert_eq!(stack_name_from(Some("  ".into())), UNNAMED_STACK);
        assert_eq!(stack_name_from(Some("orders".into())), "orders");
    }

    #[test]
    fn emf_line_names_this_processs_stack() {
        let v: Value = serde_json::from_str(&emf_line("publisher", &[])).unwrap();
        assert_eq!(v["Stack"], stack_name());
        assert_eq!(v["Function"], "publisher");
    }
}
