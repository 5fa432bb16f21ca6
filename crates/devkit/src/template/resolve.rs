//! The templates evaluated for a local run: a [`Resolver`] (the parameters
//! given, the local region and stack, the local resources' ids) and a
//! template read once ([`Resolved`]), whose intrinsic functions (`Ref`,
//! `Fn::If`, `Fn::Sub`, `Fn::GetAtt`, `Fn::Join`) and conditions it
//! evaluates: each function's environment, a nested application's
//! parameters.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use serde_yaml_ng::Value;

use super::{long_form, read, scalar, TemplateError};

/// `AWS::AccountId` in a local run (moto's default account).
pub const LOCAL_ACCOUNT: &str = "123456789012";

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
        Ok(Self {
            doc: read(path)?,
            with,
        })
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

    /// The timeout `function` (a logical id) runs with: its own
    /// `Timeout`, else the template's `Globals.Function` one, else
    /// Lambda's default (3 s).
    pub(crate) fn function_timeout(&self, function: &str) -> Result<Duration, TemplateError> {
        let resource = self
            .doc
            .get("Resources")
            .and_then(|r| r.get(function))
            .ok_or_else(|| TemplateError::Shape(format!("no resource {function}")))?;
        let own = resource.get("Properties").and_then(|p| p.get("Timeout"));
        let global = self
            .doc
            .get("Globals")
            .and_then(|g| g.get("Function"))
            .and_then(|f| f.get("Timeout"));
        let Some(value) = own.or(global) else {
            return Ok(Duration::from_secs(3));
        };
        let seconds = self
            .eval(value)
            .map_err(|e| TemplateError::Shape(format!("{function}: Timeout: {e}")))?
            .ok_or_else(|| TemplateError::Shape(format!("{function}: Timeout has no value")))?;
        seconds
            .parse::<u64>()
            .map(Duration::from_secs)
            .map_err(|_| {
                TemplateError::Shape(format!(
                    "{function}: Timeout {seconds} is not whole seconds"
                ))
            })
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

    /// Whether the template's condition `name` holds.
    pub fn condition_holds(&self, name: &str) -> Result<bool, TemplateError> {
        self.condition(name).map_err(TemplateError::Shape)
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
            // One per local stack name, as CloudFormation's is one per stack.
            "AWS::StackId" => {
                return Ok(Some(format!(
                    "arn:aws:cloudformation:{}:{LOCAL_ACCOUNT}:stack/{}/local",
                    self.with.region, self.with.stack_name
                )))
            }
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
        Value::Tagged(tagged) => Some((long_form(&tagged.tag.to_string()), &tagged.value)),
        Value::Mapping(m) if m.len() == 1 => {
            let (key, argument) = m.iter().next()?;
            let key = key.as_str()?;
            (key == "Ref" || key == "Condition" || key.starts_with("Fn::"))
                .then(|| (key.to_owned(), argument))
        }
        _ => None,
    }
}
