//! Reads the publisher's event source mapping from the reusable stack's
//! template (`infra/outbox.yaml`, nested by `template.yaml`), so that the
//! template is the single source of truth for the filter and the mapping's
//! settings, in tests and in the local pipeline alike. Parameters resolve
//! to their defaults: the filter is the default key schema's.

use std::collections::BTreeMap;
use std::path::Path;

use serde_yaml_ng::Value;

use crate::filter::{FilterCriteria, PatternError};

/// The reusable stack's template, relative to the repository's root: the
/// publisher, its stream mapping and the sweeper (`template.yaml`, the
/// orders example, nests it).
pub const OUTBOX_TEMPLATE: &str = "infra/outbox.yaml";

/// The orders example (`template.yaml`), which nests [`OUTBOX_TEMPLATE`] as
/// its application `Outbox`.
pub const EXAMPLE_TEMPLATE: &str = "template.yaml";

/// The highest `ParallelizationFactor` Lambda accepts for a stream.
pub const MAX_PARALLELIZATION_FACTOR: usize = 10;

/// `AWS::AccountId` in a local run (moto's default account).
pub const LOCAL_ACCOUNT: &str = "123456789012";

/// The template cannot be read or has no usable mapping.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("cannot read {0}: {1}")]
    /// The template could not be read: path and error.
    Read(String, String),
    #[error("template: {0}")]
    /// The mapping is not shaped as expected.
    Shape(String),
    #[error(transparent)]
    /// A filter pattern does not parse.
    Pattern(#[from] PatternError),
}

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
        let text = std::fs::read_to_string(path)
            .map_err(|e| TemplateError::Read(path.display().to_string(), e.to_string()))?;
        let doc: Value = serde_yaml_ng::from_str(&text)
            .map_err(|e| TemplateError::Read(path.display().to_string(), e.to_string()))?;
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

/// What a template's intrinsic functions evaluate against in a local run:
/// the parameters given (the others at their defaults), the pseudo
/// parameters of the local region and stack, and the physical ids of the
/// resources the local stack stands in for.
#[derive(Debug, Clone, Default)]
pub struct Resolver {
    /// Parameter values that replace the defaults.
    pub parameters: BTreeMap<String, String>,
    /// `AWS::Region`.
    pub region: String,
    /// `AWS::StackName`.
    pub stack_name: String,
    /// `!Ref Name` and `!GetAtt Name.Attribute` (keyed `Name.Attribute`)
    /// of the template's resources.
    pub resources: BTreeMap<String, String>,
}

/// A template read once, evaluated with a [`Resolver`].
pub struct Resolved {
    doc: Value,
    with: Resolver,
}

impl Resolved {
    /// Reads `path`.
    pub fn read(path: &Path, with: Resolver) -> Result<Self, TemplateError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| TemplateError::Read(path.display().to_string(), e.to_string()))?;
        let doc: Value = serde_yaml_ng::from_str(&text)
            .map_err(|e| TemplateError::Read(path.display().to_string(), e.to_string()))?;
        Ok(Self { doc, with })
    }

    /// The environment `function` (a logical id) runs with: the template's
    /// `Globals.Function` variables, the function's own on top, each
    /// evaluated; a variable whose value is `AWS::NoValue` is absent. And
    /// the two Lambda sets from the function's `LoggingConfig`:
    /// `AWS_LAMBDA_LOG_FORMAT` and, in the JSON format, `AWS_LAMBDA_LOG_LEVEL`
    /// (its `ApplicationLogLevel`), which the functions' logging and metric
    /// documents read.
    pub(crate) fn function_environment(
        &self,
        function: &str,
    ) -> Result<BTreeMap<String, String>, TemplateError> {
        let resource = self
            .doc
            .get("Resources")
            .and_then(|r| r.get(function))
            .ok_or_else(|| TemplateError::Shape(format!("no resource {function}")))?;
        let globals = self
            .doc
            .get("Globals")
            .and_then(|g| g.get("Function"))
            .and_then(|f| f.get("Environment"))
            .and_then(|e| e.get("Variables"));
        let own = resource
            .get("Properties")
            .and_then(|p| p.get("Environment"))
            .and_then(|e| e.get("Variables"));
        let mut env = BTreeMap::new();
        for variables in [globals, own].into_iter().flatten() {
            let Some(variables) = variables.as_mapping() else {
                return Err(TemplateError::Shape(format!(
                    "{function}'s variables are not a mapping"
                )));
            };
            for (name, value) in variables {
                let name = name.as_str().unwrap_or_default().to_owned();
                match self
                    .eval(value)
                    .map_err(|e| TemplateError::Shape(format!("{function}: {name}: {e}")))?
                {
                    Some(value) => env.insert(name, value),
                    None => env.remove(&name),
                };
            }
        }
        let logging = |from: Option<&Value>, key: &str| {
            from.and_then(|f| f.get("LoggingConfig"))
                .and_then(|l| l.get(key))
                .map(|v| {
                    self.eval(v)
                        .map_err(|e| TemplateError::Shape(format!("{function}: {key}: {e}")))
                })
                .transpose()
                .map(Option::flatten)
        };
        let global = self.doc.get("Globals").and_then(|g| g.get("Function"));
        let properties = resource.get("Properties");
        let setting = |key: &str| -> Result<Option<String>, TemplateError> {
            Ok(logging(properties, key)?.or(logging(global, key)?))
        };
        if let Some(format) = setting("LogFormat")? {
            if format == "JSON" {
                if let Some(level) = setting("ApplicationLogLevel")? {
                    env.insert("AWS_LAMBDA_LOG_LEVEL".into(), level);
                }
            }
            env.insert("AWS_LAMBDA_LOG_FORMAT".into(), format);
        }
        Ok(env)
    }

    /// The parameters a nested application (`AWS::Serverless::Application`)
    /// passes to its template, evaluated; a `AWS::NoValue` one is absent.
    pub(crate) fn application_parameters(
        &self,
        application: &str,
    ) -> Result<BTreeMap<String, String>, TemplateError> {
        let parameters = self
            .doc
            .get("Resources")
            .and_then(|r| r.get(application))
            .and_then(|a| a.get("Properties"))
            .and_then(|p| p.get("Parameters"))
            .and_then(Value::as_mapping)
            .ok_or_else(|| TemplateError::Shape(format!("{application} has no Parameters")))?;
        let mut out = BTreeMap::new();
        for (name, value) in parameters {
            let name = name.as_str().unwrap_or_default().to_owned();
            if let Some(value) = self
                .eval(value)
                .map_err(|e| TemplateError::Shape(format!("{application}: {name}: {e}")))?
            {
                out.insert(name, value);
            }
        }
        Ok(out)
    }

    /// The template's document, to find values in.
    pub fn document(&self) -> &Value {
        &self.doc
    }

    /// `value` (a part of [`Resolved::document`]) evaluated; `None` for
    /// `AWS::NoValue`.
    pub fn evaluate(&self, value: &Value) -> Result<Option<String>, TemplateError> {
        self.eval(value).map_err(TemplateError::Shape)
    }

    /// `value`, or the branch its `!If` chooses (`None` for
    /// `AWS::NoValue`).
    pub fn choose(&self, value: &Value) -> Result<Option<Value>, TemplateError> {
        let argument = match intrinsic(value) {
            Some((function, argument)) if function == "Fn::If" => argument,
            _ => return Ok(Some(value.clone())),
        };
        let branches = argument
            .as_sequence()
            .ok_or_else(|| TemplateError::Shape("!If without a list".into()))?;
        let (Some(condition), Some(yes), Some(no)) = (
            branches.first().and_then(Value::as_str),
            branches.get(1),
            branches.get(2),
        ) else {
            return Err(TemplateError::Shape(
                "!If needs a condition and two branches".into(),
            ));
        };
        let branch = if self.condition(condition).map_err(TemplateError::Shape)? {
            yes
        } else {
            no
        };
        match intrinsic(branch) {
            Some((f, a)) if f == "Ref" && a.as_str() == Some("AWS::NoValue") => Ok(None),
            _ => Ok(Some(branch.clone())),
        }
    }

    fn parameter(&self, name: &str) -> Result<Option<String>, String> {
        match name {
            "AWS::NoValue" => return Ok(None),
            "AWS::Region" => return Ok(Some(self.with.region.clone())),
            "AWS::StackName" => return Ok(Some(self.with.stack_name.clone())),
            "AWS::AccountId" => return Ok(Some(LOCAL_ACCOUNT.to_owned())),
            "AWS::Partition" => return Ok(Some("aws".to_owned())),
            "AWS::URLSuffix" => return Ok(Some("amazonaws.com".to_owned())),
            _ => {}
        }
        if let Some(value) = self.with.parameters.get(name) {
            return Ok(Some(value.clone()));
        }
        if let Some(parameter) = self.doc.get("Parameters").and_then(|p| p.get(name)) {
            return match parameter.get("Default") {
                Some(default) => scalar(default)
                    .map(Some)
                    .ok_or_else(|| format!("parameter {name}'s default is not a scalar")),
                None => Err(format!("parameter {name} has no default and none is given")),
            };
        }
        self.with
            .resources
            .get(name)
            .cloned()
            .map(Some)
            .ok_or_else(|| format!("no local value for resource {name}"))
    }

    /// A value: a scalar, or an intrinsic function of the ones this
    /// reader evaluates (`Ref`, `Fn::If`, `Fn::Sub`, `Fn::GetAtt`,
    /// `Fn::Join`). `None` for `AWS::NoValue`.
    fn eval(&self, value: &Value) -> Result<Option<String>, String> {
        let Some((function, argument)) = intrinsic(value) else {
            return scalar(value)
                .map(Some)
                .ok_or_else(|| format!("{value:?} is not a scalar"));
        };
        match function.as_str() {
            "Ref" => self.parameter(argument.as_str().ok_or("Ref of a non-string")?),
            "Fn::If" => {
                let branches = argument.as_sequence().ok_or("!If without a list")?;
                let (Some(condition), Some(yes), Some(no)) =
                    (branches.first(), branches.get(1), branches.get(2))
                else {
                    return Err("!If needs three items".into());
                };
                let condition = condition.as_str().ok_or("!If's condition is not a name")?;
                self.eval(if self.condition(condition)? { yes } else { no })
            }
            "Fn::GetAtt" => {
                let name = match argument {
                    Value::String(s) => s.clone(),
                    Value::Sequence(parts) => parts
                        .iter()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join("."),
                    _ => return Err("!GetAtt of an unknown shape".into()),
                };
                self.with
                    .resources
                    .get(&name)
                    .cloned()
                    .map(Some)
                    .ok_or_else(|| format!("no local value for {name}"))
            }
            "Fn::Join" => {
                let parts = argument.as_sequence().ok_or("!Join without a list")?;
                let separator = parts.first().and_then(Value::as_str).unwrap_or_default();
                let items = parts
                    .get(1)
                    .and_then(Value::as_sequence)
                    .ok_or("!Join without items")?;
                let mut out = Vec::new();
                for item in items {
                    out.extend(self.eval(item)?);
                }
                Ok(Some(out.join(separator)))
            }
            "Fn::Sub" => {
                let (text, names) = match argument {
                    Value::String(s) => (s.as_str(), None),
                    Value::Sequence(parts) => (
                        parts
                            .first()
                            .and_then(Value::as_str)
                            .ok_or("!Sub without text")?,
                        parts.get(1).and_then(Value::as_mapping),
                    ),
                    _ => return Err("!Sub of an unknown shape".into()),
                };
                let mut out = String::with_capacity(text.len());
                let mut rest = text;
                while let Some(start) = rest.find("${") {
                    out.push_str(&rest[..start]);
                    let end = rest[start..].find('}').ok_or("!Sub: unclosed ${")? + start;
                    let name = &rest[start + 2..end];
                    let local = names.and_then(|m| m.get(name));
                    let value = match local {
                        Some(v) => self.eval(v)?,
                        None if name.contains('.') && !name.starts_with("AWS::") => self
                            .with
                            .resources
                            .get(name)
                            .cloned()
                            .map(Some)
                            .ok_or_else(|| format!("no local value for {name}"))?,
                        None => self.parameter(name)?,
                    };
                    out.push_str(&value.unwrap_or_default());
                    rest = &rest[end + 1..];
                }
                out.push_str(rest);
                Ok(Some(out))
            }
            other => Err(format!("{other} is not evaluated here")),
        }
    }

    /// A named condition of the template.
    fn condition(&self, name: &str) -> Result<bool, String> {
        let condition = self
            .doc
            .get("Conditions")
            .and_then(|c| c.get(name))
            .ok_or_else(|| format!("no condition {name}"))?;
        self.holds(condition)
    }

    fn holds(&self, condition: &Value) -> Result<bool, String> {
        let (function, argument) = intrinsic(condition).ok_or("a condition is not a function")?;
        let items = || argument.as_sequence().ok_or("a condition without a list");
        match function.as_str() {
            "Fn::Equals" => {
                let items = items()?;
                let side = |i: usize| -> Result<Option<String>, String> {
                    self.eval(items.get(i).ok_or("!Equals needs two items")?)
                };
                Ok(side(0)? == side(1)?)
            }
            "Fn::Not" => Ok(!self.holds(items()?.first().ok_or("!Not needs an item")?)?),
            "Fn::And" => items()?
                .iter()
                .try_fold(true, |all, c| Ok(all && self.holds(c)?)),
            "Fn::Or" => items()?
                .iter()
                .try_fold(false, |any, c| Ok(any || self.holds(c)?)),
            "Condition" => self.condition(argument.as_str().ok_or("Condition of a non-string")?),
            other => Err(format!("{other} is not a condition evaluated here")),
        }
    }
}

/// The intrinsic function a value calls, in either YAML form (`!Name` or
/// `{"Fn::Name": ...}`, `Ref` and `Condition` without `Fn::`), and its
/// argument.
fn intrinsic(value: &Value) -> Option<(String, &Value)> {
    match value {
        Value::Tagged(tagged) => {
            let tag = tagged.tag.to_string();
            let name = tag.trim_start_matches('!');
            let function = match name {
                "Ref" | "Condition" => name.to_owned(),
                other => format!("Fn::{other}"),
            };
            Some((function, &tagged.value))
        }
        Value::Mapping(m) if m.len() == 1 => {
            let (key, argument) = m.iter().next()?;
            let key = key.as_str()?;
            (key == "Ref" || key == "Condition" || key.starts_with("Fn::"))
                .then(|| (key.to_owned(), argument))
        }
        _ => None,
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
