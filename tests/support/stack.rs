//! [`Stack`]: one test's resources on the local AWS API (a uniquely named
//! table and, on demand, bus, subscriber queue and SNS FIFO topic), so that
//! tests run in parallel, with one method per action a test takes on them
//! (zero2prod's `TestApp`).

use super::*;

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

    /// `function`'s binary under the local Lambda runtime, with the
    /// environment the templates give it on this stack (the template
    /// parameters `parameters` other than their defaults), the loopback
    /// endpoints, and the variables `extra` on top: each named by the test
    /// that needs it, with its reason beside it.
    pub fn function(
        &self,
        function: devkit::Function,
        parameters: &[(&str, &str)],
        extra: &[(&str, &str)],
    ) -> crate::lambda::LambdaFunction {
        self.function_through(function, None, parameters, extra)
    }

    /// [`Stack::function`] with every AWS call of the process sent to
    /// `endpoint` (a fault proxy's) when one is given.
    pub fn function_through(
        &self,
        function: devkit::Function,
        endpoint: Option<&str>,
        parameters: &[(&str, &str)],
        extra: &[(&str, &str)],
    ) -> crate::lambda::LambdaFunction {
        let mut env: Vec<(String, String)> = crate::lambda::loopback_env();
        if let Some(endpoint) = endpoint {
            env.extend(devkit::endpoint_env_at(endpoint));
        }
        env.extend(self.env(function, parameters));
        env.extend(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        );
        crate::lambda::LambdaFunction::new(crate::lambda::FunctionSpec {
            name: function.binary().into(),
            binary: crate::lambda::binary(function.binary()).expect("function binary"),
            env,
            timeout: Duration::from_secs(60),
            log: std::env::temp_dir().join(format!(
                "{}-{}.log",
                crate::unique(&self.table),
                function.binary()
            )),
        })
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
            let variables = outbox_runtime::RecordedSettings::variables_of(|k| {
                self.env(function, &[])
                    .into_iter()
                    .find(|(name, _)| name == k)
                    .map(|(_, v)| v)
            });
            // Not counted in `calls`: the functions' cold start, not the test's.
            DynamoStore::new(self.ddb.clone(), &self.table, 8)
                .with_keys(self.keys.clone())
                .record_settings(
                    &outbox_runtime::RecordedSettings {
                        region: self.deployment.region.clone(),
                        function: function.binary().into(),
                        by: "the test harness".into(),
                        variables,
                    },
                    &Deadline::after(Duration::from_secs(30)),
                )
                .await
                .expect("record settings");
        }
    }

    /// Deletes the settings records: a table whose stack's functions have
    /// never run.
    pub async fn forget_settings(&self) {
        for function in [devkit::Function::Publisher, devkit::Function::Sweeper] {
            let key =
                outbox_core::keys::stack_settings_key(&self.deployment.region, function.binary());
            self.ddb
                .delete_item()
                .table_name(&self.table)
                .set_key(Some(self.keys.key(&key)))
                .send()
                .await
                .expect("delete a settings record");
        }
    }

    /// The operator's operations (`outboxctl`) on this stack's table.
    pub fn operations(&self) -> outboxctl::Operations<DynamoStore> {
        outboxctl::Operations::new(
            DynamoStore::new(self.ddb.clone(), &self.table, 8).with_keys(self.keys.clone()),
        )
    }

    /// The `outboxctl` binary pointed at this stack's table: a method per
    /// command.
    pub fn operator(&self) -> crate::Operator {
        crate::Operator::new(&self.table)
    }

    /// Every item in the table but the stack's settings records. The
    /// harness's own read, with a patient
    /// client: a page of a 20,000-order table on a loaded machine can take
    /// longer than the functions' 12 s operation timeout (two 20,000-order
    /// chaos runs died on it, after their faults and sweeps, before their
    /// verdicts).
    pub async fn items(&self) -> Vec<Item> {
        let patient = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&self.sdk)
                .timeout_config(
                    aws_config::timeout::TimeoutConfig::builder()
                        .operation_attempt_timeout(std::time::Duration::from_secs(120))
                        .operation_timeout(std::time::Duration::from_secs(600))
                        .build(),
                )
                .build(),
        );
        devkit::scan_all(&patient, &self.table)
            .await
            .expect("scan")
            .into_iter()
            .filter(|item| !self.is_settings_record(item))
            .collect()
    }

    /// Whether `item` is one of the stack's settings records (the functions'
    /// cold-start record, not a test's data).
    pub fn is_settings_record(&self, item: &Item) -> bool {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok());
        text(&self.keys.partition_key).map(String::as_str) == Some(outbox_core::keys::SETTINGS_PK)
            && text(&self.keys.sort_key)
                .is_some_and(|sk| sk.starts_with(outbox_core::keys::STACK_SETTINGS_PREFIX))
    }

    /// Every outbox item as stored (a poison item too).
    pub async fn outbox_raw(&self) -> Vec<HashMap<String, AttributeValue>> {
        self.items()
            .await
            .into_iter()
            .filter(|i| {
                i.get(&self.keys.sort_key)
                    .and_then(|v| v.as_s().ok())
                    .is_some_and(|s| s.starts_with(&self.keys.outbox_prefix))
            })
            .collect()
    }

    /// Every outbox item, decoded.
    pub async fn outbox_items(&self) -> Vec<OutboxItem> {
        let mut out: Vec<OutboxItem> = self
            .outbox_raw()
            .await
            .into_iter()
            .map(|i| {
                OutboxItem::from_attributes(self.keys.from_table(i)).expect("outbox item decodes")
            })
            .collect();
        out.sort_by_key(|i| i.event_id);
        out
    }

    /// One item by key.
    pub async fn get(&self, pk: &str, sk: &str) -> Option<Item> {
        self.ddb
            .get_item()
            .table_name(&self.table)
            .key("PK", AttributeValue::S(pk.into()))
            .key("SK", AttributeValue::S(sk.into()))
            .consistent_read(true)
            .send()
            .await
            .expect("get item")
            .item
    }

    /// Receives everything currently in the subscriber queue (bodies).
    pub async fn drain_subscriber(&self) -> Vec<serde_json::Value> {
        let (_, subscriber) = self.bus.as_ref().expect("stack has a bus");
        drain_queue(&self.sdk, &subscriber.queue_url).await
    }

    /// [`Stack::drain_subscriber`] for tests whose events come from the
    /// writer: each event is checked against its schema in `schemas/`
    /// (other tests publish made-up events of their own).
    pub async fn drain_subscriber_checked(&self) -> Vec<serde_json::Value> {
        let messages = self.drain_subscriber().await;
        for message in &messages {
            let envelope =
                contract::envelope_of(message).unwrap_or_else(|| panic!("not an event: {message}"));
            if let Err(e) = contract::check_envelope(&envelope) {
                panic!("an event off its schema: {e}");
            }
        }
        messages
    }

    /// An EventBridge sink on this stack's bus, its calls counted in the
    /// returned counter.
    pub fn eventbridge_sink(&self) -> (EventBridgeSink, CallCounter) {
        let (bus, _) = self.bus.as_ref().expect("stack has a bus");
        let calls = CallCounter::default();
        let client = aws_sdk_eventbridge::Client::from_conf(
            aws_sdk_eventbridge::config::Builder::from(&self.sdk)
                .interceptor(calls.clone())
                .build(),
        );
        (
            EventBridgeSink::new(client, bus.clone(), "outbox.orders".into()),
            calls,
        )
    }

    /// The DynamoDB store of this stack, its calls counted in `self.calls`.
    pub fn store(&self) -> DynamoStore {
        DynamoStore::new(self.counted_ddb.clone(), &self.table, 8).with_keys(self.keys.clone())
    }

    /// A cursor at the start of this table's stream.
    pub fn stream(&self) -> StreamCursor {
        StreamCursor::new(&self.sdk, &self.stream_arn)
    }

    /// Writes `n` orders through the writer library (one `OrderCreated` each).
    pub async fn create_orders(&self, n: usize) -> Vec<writer::Order> {
        let service = writer::OrderService::from_config(self.ddb.clone(), &self.config(&[]));
        let mut orders = Vec::new();
        for i in 0..n {
            let new = writer::NewOrder::try_from(
                serde_json::from_value::<writer::CreateOrderRequest>(serde_json::json!({
                    "customerId": format!("c-{i}"),
                    "currency": "EUR",
                    "items": [{"sku": "A-1", "quantity": i + 1, "unitPriceCents": 100}]
                }))
                .expect("request"),
            )
            .expect("valid order");
            match service
                .create(&test_caller(), new, None, None)
                .await
                .expect("order created")
            {
                writer::Reply::Done(order) => orders.push(order),
                other => panic!("unexpected {other:?}"),
            }
        }
        orders
    }

    /// Pays `orders` through the writer library (one `OrderPaid`, the
    /// aggregate's version 2, each).
    pub async fn pay_orders(&self, orders: &[writer::Order]) {
        let service = writer::OrderService::from_config(self.ddb.clone(), &self.config(&[]));
        for order in orders {
            service
                .pay(&test_caller(), &order.order_id, None, None)
                .await
                .expect("order paid");
        }
    }

    /// Writes `n` items that are not outbox items (`PK=<prefix>#<i>`,
    /// `SK=META`), 25 per `BatchWriteItem`.
    pub async fn fill_unrelated(&self, prefix: &str, n: usize) {
        use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
        let requests: Vec<WriteRequest> = (0..n)
            .map(|i| {
                let item = HashMap::from([
                    ("PK".to_owned(), AttributeValue::S(format!("{prefix}#{i}"))),
                    ("SK".to_owned(), AttributeValue::S("META".into())),
                    ("status".to_owned(), AttributeValue::S("ACTIVE".into())),
                ]);
                let put = PutRequest::builder()
                    .set_item(Some(item))
                    .build()
                    .expect("put request");
                WriteRequest::builder().put_request(put).build()
            })
            .collect();
        for chunk in requests.chunks(25) {
            self.ddb
                .batch_write_item()
                .request_items(&self.table, chunk.to_vec())
                .send()
                .await
                .expect("batch write");
        }
    }

    /// Puts an outbox item created `age` ago (its ULID and `occurredAt` carry
    /// that time), without a transaction.
    pub async fn put_event_aged(&self, age: Duration) -> OutboxItem {
        let order = ulid::Ulid::new().to_string();
        let mut envelope = outbox_core::EventEnvelope::new(
            "OrderCreated",
            "Order",
            &order,
            1,
            serde_json::json!({"orderId": order}),
        )
        .expect("envelope");
        let at = time::OffsetDateTime::now_utc() - age;
        envelope.occurred_at = at
            .replace_nanosecond(at.nanosecond() / 1_000_000 * 1_000_000)
            .expect("millisecond");
        envelope.event_id = ulid::Ulid::from_parts(
            (at.unix_timestamp_nanos() / 1_000_000) as u64,
            fastrand::u128(..),
        );
        let item = OutboxItem::in_table(
            &self.keys,
            &format!("ORDER#{order}"),
            &envelope,
            &outbox_core::size::EventLimits::eventbridge("outbox.orders"),
            8,
        )
        .expect("outbox item");
        self.put_item(item).await
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

    /// Writes `item` under this stack's key names; returns it.
    async fn put_item(&self, item: OutboxItem) -> OutboxItem {
        self.put_raw(
            self.keys
                .to_table(item.to_attributes().expect("attributes")),
        )
        .await;
        item
    }

    /// Puts a raw item (for poison and hand-made records).
    pub async fn put_raw(&self, item: Item) {
        self.ddb
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .expect("put item");
    }

    /// The mapping of `infra/outbox.yaml`, fed by this stack's stream into `invoker`.
    pub fn pump<I: Invoker>(&self, invoker: I, on_failure: Option<&str>) -> Pump<I> {
        self.pump_filtered(invoker, on_failure, None)
    }

    /// The same, with the filter `pattern` instead of the template's (the
    /// mapping of a table with another key schema).
    pub fn pump_filtered<I: Invoker>(
        &self,
        invoker: I,
        on_failure: Option<&str>,
        pattern: Option<String>,
    ) -> Pump<I> {
        // The mapping as this stack deploys it (its filter from its key
        // schema's names and its region).
        let mut mapping = self.deployment.mapping().expect("template mapping");
        if let Some(pattern) = pattern {
            mapping.patterns = vec![pattern];
        }
        let on_failure = on_failure.map(|url| OnFailure {
            sqs: aws_sdk_sqs::Client::new(&self.sdk),
            queue_url: url.to_owned(),
        });
        Pump::new(self.stream(), mapping, invoker, on_failure).expect("filters compile")
    }

    /// Puts an outbox event of `aggregate` (version `version`) created `age`
    /// ago plus `offset_ms`, written with `shards` pending-index shards.
    pub async fn put_aggregate_event(
        &self,
        aggregate: &str,
        version: u64,
        age: Duration,
        offset_ms: u64,
        shards: u16,
    ) -> OutboxItem {
        let mut envelope = outbox_core::EventEnvelope::new(
            "OrderUpdated",
            "Order",
            aggregate,
            version,
            serde_json::json!({"orderId": aggregate, "version": version}),
        )
        .expect("envelope");
        let at = time::OffsetDateTime::now_utc() - age;
        let ms = (at.unix_timestamp_nanos() / 1_000_000) as u64 + offset_ms;
        envelope.event_id = ulid::Ulid::from_parts(ms, fastrand::u128(..));
        envelope.occurred_at = outbox_core::ulid_time(envelope.event_id);
        let item = OutboxItem::in_table(
            &self.keys,
            &format!("ORDER#{aggregate}"),
            &envelope,
            &outbox_core::size::EventLimits::eventbridge("outbox.orders"),
            shards,
        )
        .expect("outbox item");
        self.put_item(item).await
    }

    /// The bus sink and the store of this stack, their clients going
    /// through `proxy`.
    pub async fn through(
        &self,
        proxy: &proxy::FaultProxy,
        shards: u16,
    ) -> (EventBridgeSink, DynamoStore) {
        let sdk = proxy.sdk().await;
        let (bus, _) = self.bus.as_ref().expect("stack has a bus");
        (
            EventBridgeSink::new(
                aws_sdk_eventbridge::Client::new(&sdk),
                bus.clone(),
                "outbox.orders".into(),
            ),
            DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), &self.table, shards)
                .with_keys(self.keys.clone()),
        )
    }

    /// Every outbox insert in the table's stream so far.
    pub async fn outbox_inserts(&self) -> Vec<aws_lambda_events::event::dynamodb::EventRecord> {
        self.stream()
            .read()
            .await
            .expect("stream")
            .into_iter()
            .filter(|r| is_outbox_insert(&self.keys, r))
            .collect()
    }

    /// Puts a poison outbox item of aggregate `order`: its envelope replaced
    /// by `envelope` (not JSON, say), or removed when `None`.
    pub async fn put_poison(&self, order: &str, envelope: Option<&str>) {
        let event = outbox_core::EventEnvelope::new(
            "OrderCreated",
            "Order",
            order,
            1,
            serde_json::json!({}),
        )
        .expect("envelope");
        let mut item = OutboxItem::in_table(
            &self.keys,
            &format!("ORDER#{order}"),
            &event,
            &outbox_core::size::EventLimits::eventbridge("outbox.orders"),
            8,
        )
        .expect("outbox item")
        .to_attributes()
        .expect("attributes");
        match envelope {
            Some(text) => item.insert("envelope".into(), AttributeValue::S(text.into())),
            None => item.remove("envelope"),
        };
        self.put_raw(self.keys.to_table(item)).await;
    }
}
