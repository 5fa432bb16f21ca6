//! One resolved configuration for every local run: the environment each
//! function gets is the one the templates give it at their defaults,
//! evaluated from `template.yaml` (the orders example) and the
//! `infra/outbox.yaml` it nests (parameters, conditions, `AWS::Region`,
//! `AWS::StackName`), with the local stack's table, stream and sink in
//! place of the resources the templates create. Nothing here restates a
//! variable: a run that needs another value overrides a template
//! parameter by name ([`LocalDeployment::with_parameter`]), visibly.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::template::{
    MappingSettings, Resolved, Resolver, TemplateError, EXAMPLE_TEMPLATE, OUTBOX_TEMPLATE,
};

/// A function of the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Function {
    /// The orders API (`template.yaml`, `WriterFunction`).
    Writer,
    /// The read model's projector (`template.yaml`, `ProjectorFunction`).
    Projector,
    /// The stream publisher (`infra/outbox.yaml`, `PublisherFunction`).
    Publisher,
    /// The sweeper (`infra/outbox.yaml`, `SweeperFunction`).
    Sweeper,
}

impl Function {
    /// Every function.
    pub const ALL: [Self; 4] = [
        Self::Writer,
        Self::Projector,
        Self::Publisher,
        Self::Sweeper,
    ];

    /// Its logical id in its template.
    pub fn logical_id(self) -> &'static str {
        match self {
            Self::Writer => "WriterFunction",
            Self::Projector => "ProjectorFunction",
            Self::Publisher => "PublisherFunction",
            Self::Sweeper => "SweeperFunction",
        }
    }

    /// Its binary's name.
    pub fn binary(self) -> &'static str {
        match self {
            Self::Writer => "writer",
            Self::Projector => "projector",
            Self::Publisher => "publisher",
            Self::Sweeper => "sweeper",
        }
    }

    /// The function of a binary's name.
    pub fn of_binary(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.binary() == name)
    }

    /// Whether the reusable stack defines it (else the example does).
    pub(crate) fn in_reusable_stack(self) -> bool {
        matches!(self, Self::Publisher | Self::Sweeper)
    }
}

/// Where the local stack's events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LocalSink {
    /// An EventBridge bus, by name.
    Bus(String),
    /// An SNS topic, by ARN (FIFO when it ends in `.fifo`).
    Topic(String),
    /// An EventBridge Custom Event Bus (the local bus, `crate::LocalBus`),
    /// by ARN: the example's `CustomEventBus` at `Sink=eventbridge-bus`.
    CustomBus(String),
}

/// A local stack as the templates would deploy it.
#[derive(Debug, Clone)]
pub struct LocalDeployment {
    /// The repository's root (where the templates are).
    pub root: PathBuf,
    /// `AWS::StackName`.
    pub stack_name: String,
    /// `AWS::Region`.
    pub region: String,
    /// The outbox table.
    pub table: String,
    /// Its stream's ARN.
    pub stream_arn: String,
    /// The sink.
    pub sink: LocalSink,
    /// The read model's table (the projector's `TABLE_NAME`).
    pub read_model: Option<String>,
    /// The stack deployed: the example nesting the reusable stack (the
    /// default), or the reusable stack alone on an existing table.
    pub reusable_only: bool,
    /// Parameters that replace the defaults, of the template deployed.
    pub parameters: BTreeMap<String, String>,
}

impl LocalDeployment {
    /// The orders example on `table`, in the local region, named after
    /// the table (which is unique per run).
    pub fn example(root: &Path, table: &str, stream_arn: &str, sink: LocalSink) -> Self {
        Self {
            root: root.to_owned(),
            stack_name: table.to_owned(),
            region: crate::REGION.to_owned(),
            table: table.to_owned(),
            stream_arn: stream_arn.to_owned(),
            sink,
            read_model: None,
            reusable_only: false,
            parameters: BTreeMap::new(),
        }
    }

    /// The reusable stack alone on an existing `table` (a team's own
    /// table, docs/adopt.md): key schema and other settings as its
    /// parameters.
    pub fn reusable(root: &Path, table: &str, stream_arn: &str, sink: LocalSink) -> Self {
        Self {
            reusable_only: true,
            ..Self::example(root, table, stream_arn, sink)
        }
    }

    /// With a parameter of the deployed template set to `value`.
    pub fn with_parameter(mut self, name: &str, value: &str) -> Self {
        self.parameters.insert(name.to_owned(), value.to_owned());
        self
    }

    /// In another region (a global table's replica).
    pub fn in_region(mut self, region: &str) -> Self {
        self.region = region.to_owned();
        self
    }

    fn resolver(&self, parameters: BTreeMap<String, String>) -> Resolver {
        let mut resources = BTreeMap::from([
            ("OutboxTable".to_owned(), self.table.clone()),
            ("OutboxTable.StreamArn".to_owned(), self.stream_arn.clone()),
            (
                "WriterFunction".to_owned(),
                format!("{}-writer", self.stack_name),
            ),
            (
                "ProjectorFunction".to_owned(),
                format!("{}-projector", self.stack_name),
            ),
            // PayloadBucket create: the bucket the stack would create.
            (
                "PayloadStore".to_owned(),
                format!("{}-payloads", self.stack_name.to_lowercase()),
            ),
        ]);
        match &self.sink {
            LocalSink::Bus(bus) => resources.insert("EventBus".into(), bus.clone()),
            LocalSink::Topic(arn) => resources.insert("EventTopic".into(), arn.clone()),
            LocalSink::CustomBus(arn) => {
                resources.insert("CustomEventBus.EventBusArn".into(), arn.clone())
            }
        };
        if let Some(read_model) = &self.read_model {
            resources.insert("ReadModelTable".into(), read_model.clone());
        }
        Resolver {
            parameters,
            region: self.region.clone(),
            stack_name: self.stack_name.clone(),
            resources,
        }
    }

    /// The example's parameters: the sink's and the overrides.
    fn example_parameters(&self) -> BTreeMap<String, String> {
        let mut parameters = BTreeMap::new();
        match &self.sink {
            LocalSink::Topic(arn) => {
                parameters.insert("Sink".to_owned(), "sns".to_owned());
                parameters.insert("SnsFifo".to_owned(), arn.ends_with(".fifo").to_string());
            }
            LocalSink::CustomBus(_) => {
                parameters.insert("Sink".to_owned(), "eventbridge-bus".to_owned());
            }
            LocalSink::Bus(_) => {}
        }
        parameters.extend(self.parameters.clone());
        parameters
    }

    /// The parameters the reusable stack is deployed with: the example's
    /// `Outbox` application's, evaluated, or the table and sink given
    /// directly (the reusable stack alone), overrides on top.
    pub fn reusable_parameters(&self) -> Result<BTreeMap<String, String>, TemplateError> {
        if self.reusable_only {
            let mut parameters = BTreeMap::from([
                ("TableName".to_owned(), self.table.clone()),
                ("TableStreamArn".to_owned(), self.stream_arn.clone()),
                ("NamePrefix".to_owned(), self.stack_name.clone()),
            ]);
            match &self.sink {
                LocalSink::Bus(bus) => parameters.insert("EventBusName".into(), bus.clone()),
                LocalSink::Topic(arn) => parameters.insert("EventTopicArn".into(), arn.clone()),
                LocalSink::CustomBus(arn) => parameters.insert("EventBusArn".into(), arn.clone()),
            };
            parameters.extend(self.parameters.clone());
            return Ok(parameters);
        }
        let example = Resolved::read(
            &self.root.join(EXAMPLE_TEMPLATE),
            self.resolver(self.example_parameters()),
        )?;
        example.application_parameters("Outbox")
    }

    /// The environment `function` runs with, as the templates give it.
    pub fn env(&self, function: Function) -> Result<BTreeMap<String, String>, TemplateError> {
        if function.in_reusable_stack() {
            let parameters = self.reusable_parameters()?;
            Resolved::read(&self.root.join(OUTBOX_TEMPLATE), self.resolver(parameters))?
                .function_environment(function.logical_id())
        } else {
            if self.reusable_only {
                return Err(TemplateError::Shape(format!(
                    "the reusable stack has no {}",
                    function.logical_id()
                )));
            }
            Resolved::read(
                &self.root.join(EXAMPLE_TEMPLATE),
                self.resolver(self.example_parameters()),
            )?
            .function_environment(function.logical_id())
        }
    }

    /// The timeout `function` runs with, as the templates give it.
    pub fn timeout(&self, function: Function) -> Result<Duration, TemplateError> {
        if function.in_reusable_stack() {
            let parameters = self.reusable_parameters()?;
            Resolved::read(&self.root.join(OUTBOX_TEMPLATE), self.resolver(parameters))?
                .function_timeout(function.logical_id())
        } else {
            Resolved::read(
                &self.root.join(EXAMPLE_TEMPLATE),
                self.resolver(self.example_parameters()),
            )?
            .function_timeout(function.logical_id())
        }
    }

    /// The publisher's stream mapping as this stack deploys it: its
    /// settings (`BatchSize`, `ParallelizationFactor`, …) and its filter
    /// patterns evaluated with the stack's parameters (its key schema's
    /// names, its region, a `PublisherParallelizationFactor` given).
    pub fn mapping(&self) -> Result<MappingSettings, TemplateError> {
        let path = self.root.join(OUTBOX_TEMPLATE);
        let mut mapping = MappingSettings::from_template_in(&path, &self.region)?;
        let template = Resolved::read(&path, self.resolver(self.reusable_parameters()?))?;
        let shape = |m: &str| TemplateError::Shape(m.to_owned());
        let properties = &template.document()["Resources"][Function::Publisher.logical_id()]
            ["Properties"]["Events"]
            .as_mapping()
            .and_then(|events| {
                events
                    .values()
                    .find(|e| e.get("Type").and_then(|t| t.as_str()) == Some("DynamoDB"))
            })
            .ok_or_else(|| shape("the publisher has no DynamoDB event"))?["Properties"];
        let number = |key: &str| -> Result<Option<i64>, TemplateError> {
            let Some(value) = properties.get(key) else {
                return Ok(None);
            };
            template
                .evaluate(value)?
                .map(|v| {
                    v.parse::<i64>()
                        .map_err(|_| TemplateError::Shape(format!("{key} is not a number: {v}")))
                })
                .transpose()
        };
        let count = |key: &str, n: i64| {
            usize::try_from(n).map_err(|_| TemplateError::Shape(format!("{key} is negative")))
        };
        if let Some(n) = number("BatchSize")? {
            mapping.batch_size = count("BatchSize", n)?;
        }
        if let Some(n) = number("MaximumBatchingWindowInSeconds")? {
            mapping.batching_window_seconds = count("MaximumBatchingWindowInSeconds", n)? as u64;
        }
        if let Some(n) = number("MaximumRetryAttempts")? {
            mapping.maximum_retry_attempts = n;
        }
        if let Some(n) = number("MaximumRecordAgeInSeconds")? {
            mapping.maximum_record_age_seconds = n;
        }
        if let Some(n) = number("ParallelizationFactor")? {
            mapping.parallelization_factor = count("ParallelizationFactor", n)?;
        }
        mapping.check()?;
        let filters = properties["FilterCriteria"]["Filters"]
            .as_sequence()
            .ok_or_else(|| shape("the publisher's mapping has no filters"))?;
        let mut patterns = Vec::new();
        for filter in filters {
            // A filter is `{Pattern: …}` or an `!If` choosing one (or none).
            let chosen = template.choose(filter)?;
            if let Some(pattern) = chosen.and_then(|f| f.get("Pattern").cloned()) {
                patterns.extend(template.evaluate(&pattern)?);
            }
        }
        mapping.patterns = patterns;
        mapping.filters()?;
        Ok(mapping)
    }

    /// [`LocalDeployment::env`] as a list, for a process's environment.
    pub fn env_vec(&self, function: Function) -> Result<Vec<(String, String)>, TemplateError> {
        Ok(self.env(function)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> LocalDeployment {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        LocalDeployment::example(
            &root,
            "orders",
            "arn:aws:dynamodb:us-east-1:123456789012:table/orders/stream/local",
            LocalSink::Bus("bus".into()),
        )
    }

    #[test]
    fn the_mapping_takes_the_stacks_parameters() {
        let defaults = example().mapping().expect("mapping");
        assert_eq!(defaults.parallelization_factor, 1);
        assert_eq!(defaults.batch_size, 100);
        let two = example()
            .with_parameter("PublisherParallelizationFactor", "2")
            .with_parameter("PublisherBatchSize", "25")
            .mapping()
            .expect("mapping");
        assert_eq!(two.parallelization_factor, 2);
        assert_eq!(two.batch_size, 25);
        assert_eq!(two.patterns, defaults.patterns);
        assert!(example()
            .with_parameter("PublisherParallelizationFactor", "11")
            .mapping()
            .is_err());
    }

    #[test]
    fn each_function_has_its_templates_timeout() {
        let timeout = |f| example().timeout(f).expect("timeout").as_secs();
        // The writer: template.yaml's Globals; the others their own.
        assert_eq!(timeout(Function::Writer), 30);
        assert_eq!(timeout(Function::Publisher), 60);
        assert_eq!(timeout(Function::Sweeper), 300);
    }
}
