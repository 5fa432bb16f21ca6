//! CloudWatch Embedded Metric Format: one JSON line on stdout per flush,
//! turned into metrics by CloudWatch Logs without an API call.
//!
//! Every metric has two dimensions, `Stack` and `Function`: the stack's name
//! (the `STACK_NAME` variable the templates set, the prefix of the
//! functions' names) and the function that emitted it. Two outbox stacks in
//! one account (another service, a staging copy) therefore never share a
//! metric, and each stack's alarms and dashboard read only its own.

use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

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
}

impl Unit {
    fn as_str(self) -> &'static str {
        match self {
            Self::Count => "Count",
            Self::Seconds => "Seconds",
        }
    }
}

/// The environment variable that names the stack: set by the templates
/// (`infra/outbox.yaml` and `template.yaml`, their `Globals`) to the prefix
/// of the functions' names.
pub const STACK_NAME_VAR: &str = "STACK_NAME";

/// The `Stack` dimension's value when `STACK_NAME` is unset or empty (a
/// function deployed without the templates): its metrics are still
/// emitted, under this name, where no alarm of a stack reads them.
pub const UNNAMED_STACK: &str = "unnamed";

/// The `Stack` dimension's value: `STACK_NAME`, read once per process, or
/// [`UNNAMED_STACK`] (with one warning) when it is unset or empty.
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

/// Builds one EMF document of this process's stack ([`stack_name`]): all
/// `metrics` under the dimensions `Stack` and `Function` = `function`.
pub fn emf_line(function: &str, metrics: &[(&str, f64, Unit)]) -> String {
    emf_line_of(stack_name(), function, metrics)
}

/// [`emf_line`] for the stack named `stack`.
pub fn emf_line_of(stack: &str, function: &str, metrics: &[(&str, f64, Unit)]) -> String {
    let timestamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let definitions: Vec<Value> = metrics
        .iter()
        .map(|(name, _, unit)| json!({"Name": name, "Unit": unit.as_str()}))
        .collect();
    let mut doc = Map::new();
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
    doc.insert("Stack".into(), json!(stack));
    doc.insert("Function".into(), json!(function));
    for (name, value, _) in metrics {
        doc.insert((*name).into(), json!(value));
    }
    Value::Object(doc).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emf_has_the_documented_shape() {
        let line = emf_line_of(
            "orders-staging",
            "sweeper",
            &[
                ("PendingCount", 3.0, Unit::Count),
                ("OldestPendingAgeSeconds", 12.5, Unit::Seconds),
            ],
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        let cw = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(cw["Namespace"], NAMESPACE);
        assert_eq!(cw["Dimensions"], json!([["Stack", "Function"]]));
        assert_eq!(cw["Metrics"][1]["Name"], "OldestPendingAgeSeconds");
        assert_eq!(v["Stack"], "orders-staging");
        assert_eq!(v["Function"], "sweeper");
        assert_eq!(v["PendingCount"], 3.0);
        assert_eq!(v["OldestPendingAgeSeconds"], 12.5);
        assert!(v["_aws"]["Timestamp"].as_u64().unwrap() > 0);
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
