//! Event filtering as Lambda applies it to stream records: the patterns of
//! an event source mapping's `FilterCriteria` (EventBridge pattern syntax),
//! matched against the record's JSON. A record that matches no pattern is
//! discarded by the mapping: never delivered, never retried.
//!
//! Supported: literal values (strings, numbers, booleans, null), nested
//! objects, and the operators `prefix`, `suffix`, `equals-ignore-case`,
//! `anything-but` (value, list, or `prefix`), `exists` and `numeric`. An
//! operator this module does not know makes the pattern invalid rather than
//! silently matching.

use serde_json::{Map, Value};

/// A pattern that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid filter pattern: {0}")]
pub struct PatternError(pub String);

/// One filter pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct FilterPattern(Map<String, Value>);

/// A mapping's filters: a record passes if any pattern matches (or if there
/// is no pattern at all).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FilterCriteria(pub Vec<FilterPattern>);

impl FilterCriteria {
    /// Parses the mapping's filter patterns (JSON text each).
    pub fn parse<S: AsRef<str>>(patterns: &[S]) -> Result<Self, PatternError> {
        patterns
            .iter()
            .map(|p| FilterPattern::parse(p.as_ref()))
            .collect::<Result<_, _>>()
            .map(Self)
    }

    /// Whether any pattern keeps `record` (no pattern: every record).
    pub fn matches(&self, record: &Value) -> bool {
        self.0.is_empty() || self.0.iter().any(|p| p.matches(record))
    }
}

impl FilterPattern {
    pub fn parse(json: &str) -> Result<Self, PatternError> {
        match serde_json::from_str::<Value>(json) {
            Ok(Value::Object(map)) => {
                validate(&map)?;
                Ok(Self(map))
            }
            Ok(_) => Err(PatternError("a pattern is a JSON object".into())),
            Err(e) => Err(PatternError(e.to_string())),
        }
    }

    /// Whether `record` (the stream record as Lambda would deliver it)
    /// matches.
    pub fn matches(&self, record: &Value) -> bool {
        object_matches(&self.0, record)
    }
}

fn validate(pattern: &Map<String, Value>) -> Result<(), PatternError> {
    for (key, value) in pattern {
        match value {
            Value::Object(nested) => validate(nested)?,
            Value::Array(rules) => {
                for rule in rules {
                    if let Value::Object(op) = rule {
                        let name = op.keys().next().map(String::as_str).unwrap_or("");
                        if op.len() != 1
                            || !matches!(
                                name,
                                "prefix"
                                    | "suffix"
                                    | "equals-ignore-case"
                                    | "anything-but"
                                    | "exists"
                                    | "numeric"
                            )
                        {
                            return Err(PatternError(format!(
                                "unsupported operator {rule} under {key}"
                            )));
                        }
                    }
                }
            }
            other => {
                return Err(PatternError(format!(
                    "{key}: expected an array or an object, got {other}"
                )))
            }
        }
    }
    Ok(())
}

fn object_matches(pattern: &Map<String, Value>, event: &Value) -> bool {
    pattern.iter().all(|(key, rule)| {
        let field = event.get(key);
        match (rule, field) {
            (Value::Object(nested), Some(f)) => object_matches(nested, f),
            // A missing object: only `{"exists": false}` rules below it hold
            // (a REMOVE has no NewImage, so NewImage.x does not exist).
            (Value::Object(nested), None) => absent_matches(nested),
            (Value::Array(rules), _) => rules.iter().any(|r| rule_matches(r, field)),
            _ => false,
        }
    })
}

/// Whether a pattern matches where its whole object is absent: every leaf
/// must accept a missing field, which only `{"exists": false}` does.
fn absent_matches(pattern: &Map<String, Value>) -> bool {
    pattern.values().all(|rule| match rule {
        Value::Object(nested) => absent_matches(nested),
        Value::Array(rules) => rules.iter().any(|r| rule_matches(r, None)),
        _ => false,
    })
}

/// One rule against a field that may be absent or an array (any element).
fn rule_matches(rule: &Value, field: Option<&Value>) -> bool {
    if let Value::Object(op) = rule {
        if let Some(Value::Bool(want)) = op.get("exists") {
            return field.is_some_and(|f| !f.is_null() && !f.is_object()) == *want
                || (*want && field.is_some_and(Value::is_object));
        }
    }
    match field {
        None => false,
        Some(Value::Array(values)) => values.iter().any(|v| value_matches(rule, v)),
        Some(value) => value_matches(rule, value),
    }
}

fn value_matches(rule: &Value, value: &Value) -> bool {
    match rule {
        Value::Object(op) => {
            let Some((name, arg)) = op.iter().next() else {
                return false;
            };
            match (name.as_str(), arg, value) {
                ("prefix", Value::String(p), Value::String(v)) => v.starts_with(p.as_str()),
                ("suffix", Value::String(p), Value::String(v)) => v.ends_with(p.as_str()),
                ("equals-ignore-case", Value::String(p), Value::String(v)) => {
                    v.eq_ignore_ascii_case(p)
                }
                ("anything-but", Value::Array(items), v) => {
                    !items.iter().any(|i| value_matches(i, v))
                }
                ("anything-but", Value::Object(_), v) => !value_matches(arg, v),
                ("anything-but", single, v) => !value_matches(single, v),
                ("numeric", Value::Array(conds), Value::Number(n)) => numeric(conds, n.as_f64()),
                _ => false,
            }
        }
        Value::Number(want) => value.as_f64().is_some_and(|v| Some(v) == want.as_f64()),
        literal => literal == value,
    }
}

fn numeric(conditions: &[Value], value: Option<f64>) -> bool {
    let Some(value) = value else { return false };
    conditions.chunks(2).all(|pair| {
        match (
            pair.first().and_then(Value::as_str),
            pair.get(1).and_then(Value::as_f64),
        ) {
            (Some("="), Some(x)) => value == x,
            (Some("<"), Some(x)) => value < x,
            (Some("<="), Some(x)) => value <= x,
            (Some(">"), Some(x)) => value > x,
            (Some(">="), Some(x)) => value >= x,
            _ => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The template's pattern: only the `dynamodb` key, as DynamoDB mappings
    /// support.
    const OUTBOX: &str = r#"{"dynamodb":{"Keys":{"SK":{"S":[{"prefix":"OUTBOX#"}]}},"NewImage":{"envelope":{"S":[{"exists":true}]},"lastError":{"S":[{"exists":false}]},"deadLetteredAt":{"S":[{"exists":false}]},"heldBehind":{"S":[{"exists":false}]},"claimedUntil":{"N":[{"exists":false}]}}}}"#;

    fn record(name: &str, sk: &str, image: Option<Value>) -> Value {
        let mut r = json!({"eventName": name, "dynamodb": {"Keys": {"PK": {"S": "ORDER#1"}, "SK": {"S": sk}}, "SequenceNumber": "1"}});
        if let Some(image) = image {
            r["dynamodb"]["NewImage"] = image;
        }
        r
    }

    #[test]
    fn the_outbox_pattern() {
        let p = FilterPattern::parse(OUTBOX).unwrap();
        let fresh =
            json!({"SK": {"S": "OUTBOX#01J"}, "envelope": {"S": "{}"}, "attempts": {"N": "0"}});
        assert!(p.matches(&record("INSERT", "OUTBOX#01J", Some(fresh.clone()))));
        let paid = json!({"status": {"S": "PAID"}});
        assert!(!p.matches(&record("INSERT", "META", Some(paid))));
        assert!(
            !p.matches(&record("REMOVE", "OUTBOX#01J", None)),
            "a delete has no NewImage"
        );
        // Retried, dead-lettered, held, claimed: not for the stream.
        for (name, value) in [
            ("lastError", json!({"S": "ThrottlingException"})),
            ("deadLetteredAt", json!({"S": "2026-11-30T00:00:00Z"})),
            ("heldBehind", json!({"S": "OUTBOX#01H"})),
            ("claimedUntil", json!({"N": "1800000000"})),
        ] {
            let mut image = fresh.clone();
            image[name] = value;
            let modified = record("MODIFY", "OUTBOX#01J", Some(image));
            assert!(!p.matches(&modified), "{name}");
        }
        assert!(!p.matches(&json!({"eventName": "INSERT"})));
    }

    fn m(pattern: &str, value: Value) -> bool {
        FilterPattern::parse(pattern).unwrap().matches(&value)
    }

    #[test]
    fn exists_false_holds_where_the_whole_object_is_missing() {
        assert!(m(r#"{"a":{"b":[{"exists":false}]}}"#, json!({})));
        assert!(m(
            r#"{"a":{"b":{"c":[{"exists":false}]}}}"#,
            json!({"a": {}})
        ));
        assert!(!m(r#"{"a":{"b":[{"exists":true}]}}"#, json!({})));
        assert!(!m(r#"{"a":{"b":["x"]}}"#, json!({})));
        assert!(!m(r#"{"a":{"b":[{"anything-but":"x"}]}}"#, json!({})));
    }

    #[test]
    fn operators() {
        assert!(m(r#"{"a":["x","y"]}"#, json!({"a": "y"})));
        assert!(m(r#"{"a":[3]}"#, json!({"a": 3.0})));
        assert!(m(r#"{"a":[{"suffix":".png"}]}"#, json!({"a": "f.png"})));
        assert!(m(r#"{"a":[{"anything-but":["x"]}]}"#, json!({"a": "y"})));
        assert!(!m(r#"{"a":[{"anything-but":"x"}]}"#, json!({"a": "x"})));
        assert!(m(
            r#"{"a":[{"anything-but":{"prefix":"OUT"}}]}"#,
            json!({"a": "META"})
        ));
        assert!(m(r#"{"a":[{"exists":false}]}"#, json!({"b": 1})));
        assert!(m(r#"{"a":[{"exists":true}]}"#, json!({"a": 1})));
        assert!(m(r#"{"a":[{"numeric":[">",1,"<=",5]}]}"#, json!({"a": 5})));
        assert!(!m(r#"{"a":[{"numeric":[">",1,"<=",5]}]}"#, json!({"a": 6})));
        assert!(m(r#"{"a":["x"]}"#, json!({"a": ["z", "x"]})));
        assert!(m(
            r#"{"a":[{"equals-ignore-case":"ABC"}]}"#,
            json!({"a": "abc"})
        ));
    }

    #[test]
    fn unknown_operators_and_shapes_are_errors() {
        assert!(FilterPattern::parse(r#"{"a":[{"wildcard":"x*"}]}"#).is_err());
        assert!(FilterPattern::parse(r#"{"a":"x"}"#).is_err());
        assert!(FilterPattern::parse(r#"["a"]"#).is_err());
        assert!(FilterPattern::parse("{").is_err());
    }

    #[test]
    fn filters_are_ored_and_empty_passes() {
        let f = FilterCriteria::parse(&[r#"{"a":["x"]}"#, r#"{"b":["y"]}"#]).unwrap();
        assert!(f.matches(&json!({"b": "y"})));
        assert!(!f.matches(&json!({"c": "y"})));
        assert!(FilterCriteria::default().matches(&json!({})));
    }
}
