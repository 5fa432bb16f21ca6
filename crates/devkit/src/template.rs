//! The templates (`template.yaml`, `infra/outbox.yaml`) read: the one
//! reader of their YAML, short-form tags (`!Ref`, `!Sub`, `!GetAtt`, …)
//! kept as tagged values ([`read`], [`parse`]), and their JSON with each
//! short form in its long form ([`to_json`]). What is made of them is in
//! the submodules:
//! - `resolve.rs`: the templates evaluated for a local run ([`Resolved`]
//!   with a [`Resolver`]: `Ref`, `Fn::If`, `Fn::Sub`, `Fn::GetAtt`,
//!   `Fn::Join`, conditions, pseudo parameters);
//! - `mapping.rs`: the publisher's stream mapping read from the reusable
//!   stack's template ([`MappingSettings`]).

use std::path::Path;

use serde_yaml_ng::Value;

use crate::filter::PatternError;

mod mapping;
mod resolve;

pub use mapping::{MappingSettings, MAX_PARALLELIZATION_FACTOR};
pub use resolve::{Resolved, Resolver, LOCAL_ACCOUNT};

/// The reusable stack's template, relative to the repository's root: the
/// publisher, its stream mapping and the sweeper (`template.yaml`, the
/// orders example, nests it).
pub const OUTBOX_TEMPLATE: &str = "infra/outbox.yaml";

/// The orders example (`template.yaml`), which nests [`OUTBOX_TEMPLATE`] as
/// its application `Outbox`.
pub const EXAMPLE_TEMPLATE: &str = "template.yaml";

/// The template cannot be read or has no usable mapping.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("cannot read {0}: {1}")]
    /// The template could not be read: path and error.
    Read(String, String),
    #[error("not a template: {0}")]
    /// A text given to [`parse`] is not YAML.
    Parse(String),
    #[error("template: {0}")]
    /// The mapping is not shaped as expected.
    Shape(String),
    #[error(transparent)]
    /// A filter pattern does not parse.
    Pattern(#[from] PatternError),
}

/// The template at `path`, its short-form tags as tagged values.
pub fn read(path: &Path) -> Result<Value, TemplateError> {
    let failed = |e: String| TemplateError::Read(path.display().to_string(), e);
    let text = std::fs::read_to_string(path).map_err(|e| failed(e.to_string()))?;
    serde_yaml_ng::from_str(&text).map_err(|e| failed(e.to_string()))
}

/// A template's text (a synthetic one, or a copy edited), read as [`read`]
/// reads a file.
pub fn parse(text: &str) -> Result<Value, TemplateError> {
    serde_yaml_ng::from_str(text).map_err(|e| TemplateError::Parse(e.to_string()))
}

/// `value` as JSON, each short-form intrinsic in its long form (`!Ref X`
/// is `{"Ref": "X"}`, `!GetAtt A.B` is `{"Fn::GetAtt": "A.B"}`); a key
/// that is not a string is its scalar's text.
pub fn to_json(value: &Value) -> serde_json::Value {
    match value {
        Value::Tagged(tagged) => {
            let mut object = serde_json::Map::new();
            object.insert(long_form(&tagged.tag.to_string()), to_json(&tagged.value));
            serde_json::Value::Object(object)
        }
        Value::Mapping(map) => serde_json::Value::Object(
            map.iter()
                .map(|(k, v)| (scalar(k).unwrap_or_default(), to_json(v)))
                .collect(),
        ),
        Value::Sequence(items) => serde_json::Value::Array(items.iter().map(to_json).collect()),
        other => serde_json::to_value(other).unwrap_or(serde_json::Value::Null),
    }
}

/// The long-form name of a short-form tag: `!Ref` and `!Condition` without
/// `Fn::`, `!Sub` as `Fn::Sub`, and so on.
fn long_form(tag: &str) -> String {
    match tag.trim_start_matches('!') {
        name @ ("Ref" | "Condition") => name.to_owned(),
        other => format!("Fn::{other}"),
    }
}

/// A scalar as the string CloudFormation passes.
fn scalar(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}
