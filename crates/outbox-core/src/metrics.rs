//! CloudWatch Embedded Metric Format: one JSON line on stdout per flush,
//! turned into metrics by CloudWatch Logs without an API call.

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

/// Builds one EMF document: all `metrics` under the single dimension
/// `Function` = `function`.
pub fn emf_line(function: &str, metrics: &[(&str, f64, Unit)]) -> String {
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
                "Dimensions": [["Function"]],
                "Metrics": definitions,
            }]
        }),
    );
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
        let line = emf_line(
            "sweeper",
            &[
                ("PendingCount", 3.0, Unit::Count),
                ("OldestPendingAgeSeconds", 12.5, Unit::Seconds),
            ],
        );
        let v: Value = serde_json::from_str(&line).unwrap();
        let cw = &v["_aws"]["CloudWatchMetrics"][0];
        assert_eq!(cw["Namespace"], NAMESPACE);
        assert_eq!(cw["Dimensions"][0][0], "Function");
        assert_eq!(cw["Metrics"][1]["Name"], "OldestPendingAgeSeconds");
        assert_eq!(v["Function"], "sweeper");
        assert_eq!(v["PendingCount"], 3.0);
        assert_eq!(v["OldestPendingAgeSeconds"], 12.5);
        assert!(v["_aws"]["Timestamp"].as_u64().unwrap() > 0);
    }
}
