//! The publisher's event source mapping, read from the reusable stack's
//! template (`infra/outbox.yaml`, nested by `template.yaml`), so that the
//! template is the single source of truth for the filter and the mapping's
//! settings, in tests and in the local pipeline alike. Parameters resolve
//! to their defaults: the filter is the default key schema's.

use std::path::Path;

use serde_yaml_ng::Value;

use super::{read, TemplateError};
use crate::filter::{FilterCriteria, PatternError};

/// The highest `ParallelizationFactor` Lambda accepts for a stream.
pub const MAX_PARALLELIZATION_FACTOR: usize = 10;

/// The settings of the DynamoDB stream mapping, parameters resolved to
/// their defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct MappingSettings {
    /// The function the mapping invokes.
    pub function: String,
    /// `StartingPosition`.
    pub starting_position: String,
    /// `BatchSize`.
    pub batch_size: usize,
    /// `MaximumBatchingWindowInSeconds`.
    pub batching_window_seconds: u64,
    /// `MaximumRetryAttempts` (-1: unbounded).
    pub maximum_retry_attempts: i64,
    /// `MaximumRecordAgeInSeconds` (-1: unbounded).
    pub maximum_record_age_seconds: i64,
    /// `BisectBatchOnFunctionError`.
    pub bisect_on_error: bool,
    /// Whether `FunctionResponseTypes` has `ReportBatchItemFailures`.
    pub report_batch_item_failures: bool,
    /// `ParallelizationFactor` (1 to 10; 1 when absent): concurrent
    /// batches per stream shard, order kept per item only.
    pub parallelization_factor: usize,
    /// The `FilterCriteria` patterns.
    pub patterns: Vec<String>,
}

impl MappingSettings {
    /// The compiled filter patterns.
    pub fn filters(&self) -> Result<FilterCriteria, PatternError> {
        FilterCriteria::parse(&self.patterns)
    }

    /// Checks what Lambda would refuse: a `ParallelizationFactor` outside
    /// 1 to 10.
    pub fn check(&self) -> Result<(), TemplateError> {
        if !(1..=MAX_PARALLELIZATION_FACTOR).contains(&self.parallelization_factor) {
            return Err(TemplateError::Shape(format!(
                "ParallelizationFactor {} is not between 1 and {MAX_PARALLELIZATION_FACTOR}",
                self.parallelization_factor
            )));
        }
        Ok(())
    }

    /// Reads the first `DynamoDB` event of a function in the template, in
    /// the local region ([`crate::REGION`]: `AWS::Region` in the filter).
    pub fn from_template(path: &Path) -> Result<Self, TemplateError> {
        Self::from_template_in(path, crate::REGION)
    }

    /// The same, as deployed in `region` (a stack in each region of a
    /// global table: its filter admits that region's items).
    pub fn from_template_in(path: &Path, region: &str) -> Result<Self, TemplateError> {
        let doc = read(path)?;
        let shape = |m: &str| TemplateError::Shape(m.to_owned());
        let resources = doc
            .get("Resources")
            .and_then(Value::as_mapping)
            .ok_or_else(|| shape("no Resources"))?;
        for (name, resource) in resources {
            let Some(events) = resource
                .get("Properties")
                .and_then(|p| p.get("Events"))
                .and_then(Value::as_mapping)
            else {
                continue;
            };
            for event in events.values() {
                if event.get("Type").and_then(Value::as_str) != Some("DynamoDB") {
                    continue;
                }
                let props = event
                    .get("Properties")
                    .ok_or_else(|| shape("DynamoDB event without Properties"))?;
                let number = |key: &str, default: i64| -> Result<i64, TemplateError> {
                    match props.get(key) {
                        None => Ok(default),
                        Some(v) => resolve(&doc, v)
                            .and_then(|v| {
                                v.as_i64()
                                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                            })
                            .ok_or_else(|| TemplateError::Shape(format!("{key} is not a number"))),
                    }
                };
                let filters: Vec<&Value> = props
                    .get("FilterCriteria")
                    .and_then(|f| f.get("Filters"))
                    .and_then(Value::as_sequence)
                    .map(|filters| filters.iter().collect())
                    .unwrap_or_default();
                let mut patterns = Vec::new();
                for filter in filters {
                    let Some(filter) = chosen(&doc, filter)
                        .ok_or_else(|| shape("a filter's !If has a condition not understood"))?
                    else {
                        continue;
                    };
                    let Some(pattern) = filter.get("Pattern") else {
                        continue;
                    };
                    patterns.push(with_defaults(&doc, pattern, region).ok_or_else(|| {
                        shape("a filter pattern is not a string or a !Sub of parameters")
                    })?);
                }
                let settings = Self {
                    function: name.as_str().unwrap_or_default().to_owned(),
                    starting_position: props
                        .get("StartingPosition")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    batch_size: number("BatchSize", 100)? as usize,
                    batching_window_seconds: number("MaximumBatchingWindowInSeconds", 0)? as u64,
                    maximum_retry_attempts: number("MaximumRetryAttempts", -1)?,
                    maximum_record_age_seconds: number("MaximumRecordAgeInSeconds", -1)?,
                    bisect_on_error: props
                        .get("BisectBatchOnFunctionError")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    report_batch_item_failures: props
                        .get("FunctionResponseTypes")
                        .and_then(Value::as_sequence)
                        .is_some_and(|t| {
                            t.iter()
                                .any(|v| v.as_str() == Some("ReportBatchItemFailures"))
                        }),
                    parallelization_factor: usize::try_from(number("ParallelizationFactor", 1)?)
                        .map_err(|_| shape("ParallelizationFactor is negative"))?,
                    patterns,
                };
                settings.check()?;
                settings.filters()?;
                return Ok(settings);
            }
        }
        Err(shape("no function has a DynamoDB event"))
    }
}

/// `value`, or the branch its `!If` chooses with the parameters' defaults;
/// `None` inside for `!Ref AWS::NoValue`. `None` outside when the
/// condition is not one this reader evaluates.
fn chosen<'a>(doc: &'a Value, value: &'a Value) -> Option<Option<&'a Value>> {
    let Value::Tagged(tagged) = value else {
        return Some(Some(value));
    };
    if tagged.tag != "!If" {
        return Some(Some(value));
    }
    let branches = tagged.value.as_sequence()?;
    let condition = doc.get("Conditions")?.get(branches.first()?.as_str()?)?;
    let branch = branches.get(if holds(doc, condition)? { 1 } else { 2 })?;
    match branch {
        Value::Tagged(t) if t.tag == "!Ref" && t.value.as_str() == Some("AWS::NoValue") => {
            Some(None)
        }
        other => Some(Some(other)),
    }
}

/// A condition `!Equals [!Ref Parameter, literal]` (or the reverse) at the
/// parameter's default.
fn holds(doc: &Value, condition: &Value) -> Option<bool> {
    let Value::Tagged(tagged) = condition else {
        return None;
    };
    if tagged.tag != "!Equals" {
        return None;
    }
    let sides = tagged.value.as_sequence()?;
    let side = |v: &Value| -> Option<String> {
        match resolve(doc, v)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    };
    Some(side(sides.first()?)? == side(sides.get(1)?)?)
}

/// A string, or `!Sub` of a string whose every `${Name}` is a parameter
/// (or `AWS::Region`, which is `region`), resolved to the parameters'
/// defaults (the reusable stack builds its filter from the key schema's
/// parameters and the stack's region).
fn with_defaults(doc: &Value, value: &Value, region: &str) -> Option<String> {
    let text = match value {
        Value::String(s) => return Some(s.clone()),
        Value::Tagged(tagged) if tagged.tag == "!Sub" => tagged.value.as_str()?,
        Value::Mapping(m) if m.len() == 1 => m.get("Fn::Sub")?.as_str()?,
        _ => return None,
    };
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find('}')? + start;
        let name = &rest[start + 2..end];
        if name == "AWS::Region" {
            out.push_str(region);
            rest = &rest[end + 1..];
            continue;
        }
        let default = doc.get("Parameters")?.get(name)?.get("Default")?;
        match default {
            Value::String(s) => out.push_str(s),
            Value::Number(n) => out.push_str(&n.to_string()),
            _ => return None,
        }
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// A literal, or `!Ref Parameter` resolved to the parameter's default.
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> Option<&'a Value> {
    match value {
        Value::Tagged(tagged) if tagged.tag == "!Ref" => {
            let name = tagged.value.as_str()?;
            doc.get("Parameters")?.get(name)?.get("Default")
        }
        Value::Mapping(m) if m.len() == 1 && m.contains_key("Ref") => {
            let name = m.get("Ref")?.as_str()?;
            doc.get("Parameters")?.get(name)?.get("Default")
        }
        other => Some(other),
    }
}
