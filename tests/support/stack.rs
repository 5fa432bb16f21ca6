//! [`Stack`]: one test's resources on the local AWS API (a uniquely named
//! table and, on demand, bus, subscriber queue and SNS FIFO topic), so that
//! tests run in parallel, with one method per action a test takes on them
//! (zero2prod's `TestApp`).

use super::*;

/// One test's resources on the local AWS API.
pub struct Stack {
    pub sdk: SdkConfig,
    pub table: String,
    pub stream_arn: String,
    pub ddb: aws_sdk_dynamodb::Client,
    /// DynamoDB client whose calls are counted in `calls`.
    pub counted_ddb: aws_sdk_dynamodb::Client,
    pub calls: CallCounter,
    pub bus: Option<(String, Subscriber)>,
}

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
        Self {
            ddb: aws_sdk_dynamodb::Client::new(&sdk),
            sdk,
            table,
            stream_arn,
            counted_ddb,
            calls,
            bus: None,
        }
    }

    /// A fresh table, bus and subscriber queue (a rule on `outbox.orders`).
    pub async fn with_bus() -> Self {
        let mut stack = Self::new().await;
        let bus = unique("bus");
        let subscriber = devkit::create_bus(&stack.sdk, &bus, "outbox.orders")
            .await
            .expect("create bus");
        stack.bus = Some((bus, subscriber));
        stack
    }

    /// The configuration the functions would read, for this stack.
    pub fn config(&self, extra: &[(&str, &str)]) -> Config {
        let mut vars: HashMap<String, String> =
            HashMap::from([("TABLE_NAME".into(), self.table.clone())]);
        if let Some((bus, _)) = &self.bus {
            vars.insert("EVENT_BUS_NAME".into(), bus.clone());
        }
        for (k, v) in extra {
            vars.insert((*k).into(), (*v).into());
        }
        Config::from_lookup(|k| vars.get(k).cloned()).expect("test config")
    }

    /// The operator's operations (`outboxctl`) on this stack's table.
    pub fn operations(&self) -> outboxctl::Operations<DynamoStore> {
        outboxctl::Operations::new(DynamoStore::new(self.ddb.clone(), &self.table, 8))
    }

    /// Every item in the table. The harness's own read, with a patient
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
        devkit::scan_all(&patient, &self.table).await.expect("scan")
    }

    /// Every outbox item as stored (a poison item too).
    pub async fn outbox_raw(&self) -> Vec<HashMap<String, AttributeValue>> {
        self.items()
            .await
            .into_iter()
            .filter(|i| {
                i.get("SK")
                    .and_then(|v| v.as_s().ok())
                    .is_some_and(|s| s.starts_with("OUTBOX#"))
            })
            .collect()
    }

    /// Every outbox item, decoded.
    pub async fn outbox_items(&self) -> Vec<OutboxItem> {
        let mut out: Vec<OutboxItem> = self
            .outbox_raw()
            .await
            .into_iter()
            .map(|i| OutboxItem::from_attributes(i).expect("outbox item decodes"))
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
        DynamoStore::new(self.counted_ddb.clone(), &self.table, 8)
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
        let item = OutboxItem::new(
            &format!("ORDER#{order}"),
            &envelope,
            &outbox_core::size::EventLimits::eventbridge("outbox.orders"),
            8,
        )
        .expect("outbox item");
        self.put_raw(item.to_attributes().expect("attributes"))
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
        let mut mapping = MappingSettings::from_template(&root().join(devkit::OUTBOX_TEMPLATE))
            .expect("template mapping");
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
        let item = OutboxItem::new(
            &format!("ORDER#{aggregate}"),
            &envelope,
            &outbox_core::size::EventLimits::eventbridge("outbox.orders"),
            shards,
        )
        .expect("outbox item");
        self.put_raw(item.to_attributes().expect("attributes"))
            .await;
        item
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
            DynamoStore::new(aws_sdk_dynamodb::Client::new(&sdk), &self.table, shards),
        )
    }

    /// Every outbox insert in the table's stream so far.
    pub async fn outbox_inserts(&self) -> Vec<aws_lambda_events::event::dynamodb::EventRecord> {
        self.stream()
            .read()
            .await
            .expect("stream")
            .into_iter()
            .filter(is_outbox_insert)
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
        let mut item = OutboxItem::new(
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
        self.put_raw(item).await;
    }
}
