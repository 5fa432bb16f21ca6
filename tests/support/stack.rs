//! [`Stack`]: one test's resources on the local AWS API (a uniquely named
//! table and, on demand, bus, subscriber queue and SNS FIFO topic), so that
//! tests run in parallel, with one method per action a test takes on them
//! (zero2prod's `TestApp`).
//!
//! # Layout
//! - this file: the struct, the provisioning of its resources (table, bus
//!   and queue, topic, archive) and the settings records the templates'
//!   functions write, with the environment and configuration they get;
//! - `stack/clients.rs`: what runs on it (functions under the local
//!   Lambda runtime, stores and sinks, the mapping pump, the operator);
//! - `stack/write.rs`: what a test writes into it (orders through the
//!   writer, outbox items aged or poisoned, unrelated items);
//! - `stack/read.rs`: what a test reads back (items, the stream's outbox
//!   inserts, the subscriber queue).

use super::*;

mod clients;
mod read;
mod write;

/// One test's resources on the local AWS API.
pub struct Stack {
    /// The SDK configuration on the local servers (loopback only).
    pub sdk: SdkConfig,
    /// The table's unique name.
    pub table: String,
    /// Its stream's ARN.
    pub stream_arn: String,
    /// A DynamoDB client.
    pub ddb: aws_sdk_dynamodb::Client,
    /// DynamoDB client whose calls are counted in `calls`.
    pub counted_ddb: aws_sdk_dynamodb::Client,
    /// The calls `counted_ddb` made.
    pub calls: CallCounter,
    /// The bus and its subscriber queue, when the test added one.
    pub bus: Option<(String, Subscriber)>,
    /// The stack as the templates deploy it on these resources: the
    /// orders example (default key schema), or the reusable stack alone
    /// with the schema's names as its parameters. Every function's
    /// environment comes from it ([`Stack::env`]).
    pub deployment: devkit::LocalDeployment,
    /// The key schema the templates give the functions (the local region's
    /// keys, as in AWS).
    pub keys: outbox_core::KeySchema,
}

/// The reusable stack's parameter for each key-schema variable.
const SCHEMA_PARAMETERS: [(&str, &str); 10] = [
    ("PARTITION_KEY", "PartitionKey"),
    ("SORT_KEY", "SortKey"),
    ("OUTBOX_PREFIX", "OutboxPrefix"),
    ("PENDING_INDEX", "PendingIndex"),
    ("PENDING_INDEX_PARTITION_KEY", "PendingIndexPartitionKey"),
    ("PENDING_INDEX_SORT_KEY", "PendingIndexSortKey"),
    ("DEAD_LETTER_INDEX", "DeadLetterIndex"),
    (
        "DEAD_LETTER_INDEX_PARTITION_KEY",
        "DeadLetterIndexPartitionKey",
    ),
    ("DEAD_LETTER_INDEX_SORT_KEY", "DeadLetterIndexSortKey"),
    ("TTL_ATTRIBUTE", "TtlAttribute"),
];
impl Stack {
    /// A fresh table.
    pub async fn new() -> Self {
        Self::with_schema(&outbox_core::KeySchema::default(), &[]).await
    }

    /// A fresh table keyed and indexed as `schema` names it, plus the
    /// application's own `extra` indexes (name, partition key, sort key).
    pub async fn with_schema(
        schema: &outbox_core::KeySchema,
        extra: &[(&str, &str, &str)],
    ) -> Self {
        let stack = Self::build(schema, extra).await;
        stack.record_settings().await;
        stack
    }

    /// [`Stack::with_schema`] with nothing recorded yet.
    async fn build(schema: &outbox_core::KeySchema, extra: &[(&str, &str, &str)]) -> Self {
        let sdk = sdk().await;
        let table = unique("outbox");
        let stream_arn = devkit::create_table_with(&sdk, &table, schema, extra)
            .await
            .expect("create table");
        let calls = CallCounter::default();
        let counted_ddb = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&sdk)
                .interceptor(calls.clone())
                .build(),
        );
        let sink = devkit::LocalSink::Bus("default".into());
        let deployment = if schema == &outbox_core::KeySchema::default() {
            devkit::LocalDeployment::example(&root(), &table, &stream_arn, sink)
        } else {
            let variables = schema.variables();
            SCHEMA_PARAMETERS.iter().fold(
                devkit::LocalDeployment::reusable(&root(), &table, &stream_arn, sink),
                |d, (variable, parameter)| match variables.iter().find(|(k, _)| k == variable) {
                    Some((_, value)) => d.with_parameter(parameter, value),
                    None => d,
                },
            )
        };
        let mut stack = Self {
            ddb: aws_sdk_dynamodb::Client::new(&sdk),
            sdk,
            table,
            stream_arn,
            counted_ddb,
            calls,
            bus: None,
            keys: outbox_core::KeySchema::default(),
            deployment,
        };
        stack.keys = stack.config(&[]).keys;
        stack
    }

    /// Makes `topic_arn` the stack's sink (an SNS topic, FIFO when its
    /// name ends in `.fifo`): the templates' SNS mode.
    pub async fn use_topic(&mut self, topic_arn: &str) {
        self.deployment.sink = devkit::LocalSink::Topic(topic_arn.to_owned());
        self.record_settings().await;
    }

    /// Makes a new Custom Event Bus on the local `bus` the stack's sink
    /// (the templates' eventbridge-bus mode), with its FIFO subscriber
    /// queue; its ARN and the queue.
    pub async fn use_custom_bus(&mut self, bus: &devkit::LocalBus) -> (String, Subscriber) {
        let (arn, queue) =
            devkit::create_custom_bus(&self.sdk, &bus.client(&self.sdk), &unique("bus"), 7)
                .await
                .expect("the bus and its FIFO subscriber");
        self.deployment.sink = devkit::LocalSink::CustomBus(arn.clone());
        self.record_settings().await;
        (arn, queue)
    }

    /// The environment the templates give `function` on this stack, with
    /// the template parameters `parameters` other than their defaults.
    pub fn env(
        &self,
        function: devkit::Function,
        parameters: &[(&str, &str)],
    ) -> Vec<(String, String)> {
        parameters
            .iter()
            .fold(self.deployment.clone(), |d, (k, v)| d.with_parameter(k, v))
            .env_vec(function)
            .unwrap_or_else(|e| panic!("{} from the templates: {e}", function.logical_id()))
    }

    /// A fresh table, bus and subscriber queue (a rule on `outbox.orders`).
    pub async fn with_bus() -> Self {
        let mut stack = Self::build(&outbox_core::KeySchema::default(), &[]).await;
        stack.add_bus().await;
        stack
    }

    /// Gives the stack a bus and subscriber queue (a rule on
    /// `outbox.orders`), its sink.
    pub async fn add_bus(&mut self) {
        let bus = unique("bus");
        let subscriber = devkit::create_bus(&self.sdk, &bus, "outbox.orders")
            .await
            .expect("create bus");
        self.deployment.sink = devkit::LocalSink::Bus(bus.clone());
        self.bus = Some((bus, subscriber));
        self.record_settings().await;
    }

    /// The configuration the publisher and the sweeper read on this stack
    /// (the sweeper's environment from the templates, which holds the
    /// publisher's), with the variables `extra` on top (named by the test).
    pub fn config(&self, extra: &[(&str, &str)]) -> Config {
        let mut vars: HashMap<String, String> = self
            .env(devkit::Function::Sweeper, &[])
            .into_iter()
            .collect();
        for (k, v) in extra {
            vars.insert((*k).into(), (*v).into());
        }
        Config::from_lookup(|k| vars.get(k).cloned()).expect("test config")
    }

    /// Writes the settings records the stack's publisher and sweeper write
    /// at cold start (their environments from the templates), as a stack
    /// whose functions have run holds them. Every stack starts with them
    /// (and rewrites them when its sink changes); see
    /// [`Stack::forget_settings`] for a stack whose functions never ran.
    pub async fn record_settings(&self) {
        for function in [devkit::Function::Publisher, devkit::Function::Sweeper] {
            // Not counted in `calls`: the functions' cold start, not the test's.
            DynamoStore::new(self.ddb.clone(), &self.table, 8)
                .with_keys(self.keys.clone())
                .record_settings(
                    &self.settings_record(function),
                    &Deadline::after(Duration::from_secs(30)),
                )
                .await
                .expect("record settings");
        }
    }

    /// The settings record `function` writes at cold start (its
    /// environment from the templates), by "the test harness" at no time,
    /// so no check takes it for a live stack.
    pub fn settings_record(&self, function: devkit::Function) -> outbox_runtime::RecordedSettings {
        let env = self.env(function, &[]);
        let variables = outbox_runtime::recorded_variables(|k| {
            env.iter()
                .find(|(name, _)| name == k)
                .map(|(_, v)| v.clone())
        });
        outbox_runtime::RecordedSettings {
            region: self.deployment.region.clone(),
            stack: variables.get("STACK_NAME").cloned().unwrap_or_default(),
            function: function.binary().into(),
            by: "the test harness".into(),
            since: None,
            variables,
        }
    }

    /// Deletes the settings records: a table whose stack's functions have
    /// never run.
    pub async fn forget_settings(&self) {
        for function in [devkit::Function::Publisher, devkit::Function::Sweeper] {
            let key = self.settings_record(function).key();
            self.ddb
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(self.keys.key(&key)))
                .send()
                .await
                .expect("delete a settings record");
        }
    }

    /// An EventBridge archive of this stack's bus (every event); its name.
    pub async fn archive_of_bus(&self) -> String {
        let (bus, _) = self.bus.clone().expect("a stack with a bus");
        let events = aws_sdk_eventbridge::Client::new(&self.sdk);
        let bus_arn = events
            .describe_event_bus()
            .name(&bus)
            .send()
            .await
            .expect("DescribeEventBus")
            .arn
            .expect("the bus's ARN");
        let archive = crate::unique("archive");
        events
            .create_archive()
            .archive_name(&archive)
            .event_source_arn(&bus_arn)
            .send()
            .await
            .expect("CreateArchive");
        archive
    }
}

/// Creates an SNS FIFO topic (`<name>.fifo`) with an SQS FIFO queue
/// subscribed with raw delivery (`devkit provision` makes none: the demo
/// runs on the bus). Returns the topic ARN and the queue.
pub async fn create_fifo_topic(
    sdk: &SdkConfig,
    name: &str,
) -> Result<(String, Subscriber), devkit::StackError> {
    let fail = |what: &str, message: String| devkit::StackError {
        what: format!("{what} {name}"),
        message,
    };
    let sns = aws_sdk_sns::Client::new(sdk);
    let topic_arn = sns
        .create_topic()
        .name(format!("{name}.fifo"))
        .attributes("FifoTopic", "true")
        .send()
        .await
        .map_err(|e| fail("topic", outbox_runtime::error_line("CreateTopic", &e)))?
        .topic_arn
        .ok_or_else(|| fail("topic", "no topic ARN".into()))?;
    let queue = devkit::create_queue(sdk, &format!("{name}-subscriber.fifo"), true).await?;
    sns.subscribe()
        .topic_arn(&topic_arn)
        .protocol("sqs")
        .endpoint(&queue.queue_arn)
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .map_err(|e| fail("subscription", outbox_runtime::error_line("Subscribe", &e)))?;
    Ok((topic_arn, queue))
}
