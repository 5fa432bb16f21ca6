//! Test harness shared by the workspace's integration tests.
//!
//! # Layout
//! - [`Stack`]: a uniquely named table (and, on demand, bus, subscriber
//!   queue and SNS FIFO topic) on the local AWS API, so tests run in parallel.
//! - [`CallCounter`]: an SDK interceptor that counts calls per operation.
//! - [`proxy::FaultProxy`]: faults on the wire between the SDK clients and
//!   the local API (throttles, 5xx, partial `PutEvents`, hangs, resets).
//! - [`InProcessPublisher`] and [`Stack::pump`]: the mapping emulator feeding
//!   the publisher in-process.
//! - [`api_request`]: an API Gateway sample event from `events/` as a
//!   `lambda_http::Request`.
//!
//! Everything goes through `devkit::sdk_config`, which refuses any
//! endpoint outside 127.0.0.0/8.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::AttributeValue;
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;
use devkit::MappingSettings;
use devkit::StreamCursor;
use devkit::{self, Subscriber};
use devkit::{Invoker, OnFailure, Pump};
use outbox_core::publish::eventbridge::EventBridgeSink;
use outbox_core::publish::{EventSink, FailureKind, PublishFailure};
use outbox_core::retry::{Deadline, RetryPolicy};
use outbox_core::store::{DynamoStore, OutboxStore};
use outbox_core::{Config, OutboxItem};

pub mod chaos;
pub mod contract;
pub mod lambda;
pub mod proxy;

pub type Item = HashMap<String, AttributeValue>;

/// A name no other test uses.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", ulid::Ulid::new().to_string().to_lowercase())
}

/// The local SDK configuration (loopback only).
pub async fn sdk() -> SdkConfig {
    match devkit::sdk_config().await {
        Ok(sdk) => sdk,
        Err(e) => panic!("{e} (run the tests through `make test`)"),
    }
}

/// Counts SDK calls (HTTP attempts) per operation name.
#[derive(Debug, Clone, Default)]
pub struct CallCounter(Arc<Mutex<Vec<String>>>);

impl CallCounter {
    /// How many calls of `operation` were sent.
    pub fn count(&self, operation: &str) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|o| *o == operation)
            .count()
    }

    /// Every call, in order.
    pub fn calls(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    pub fn reset(&self) {
        self.0.lock().unwrap().clear();
    }
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "CallCounter"
    }

    fn read_before_transmit(
        &self,
        _context: &BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let name = cfg
            .load::<Metadata>()
            .map(|m| m.name().to_owned())
            .unwrap_or_else(|| "unknown".into());
        self.0.lock().unwrap().push(name);
        Ok(())
    }
}

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
        let sdk = sdk().await;
        let table = unique("outbox");
        let stream_arn = devkit::create_table(&sdk, &table)
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

    /// A DynamoDB client for writers that send many transactions to the
    /// local API under load. moto copies the whole table per
    /// `TransactWriteItems`, so one call can outlast the 5-second attempt
    /// timeout after it took effect; moto ignores `ClientRequestToken`, so
    /// the SDK's retry would then fail its own conditions (docs/local.md,
    /// deviations). Long attempts avoid that retry.
    pub fn patient_ddb(&self) -> aws_sdk_dynamodb::Client {
        aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&self.sdk)
                .retry_config(
                    aws_sdk_dynamodb::config::retry::RetryConfig::standard().with_max_attempts(10),
                )
                .timeout_config(
                    aws_smithy_types::timeout::TimeoutConfig::builder()
                        .operation_attempt_timeout(Duration::from_secs(60))
                        .operation_timeout(Duration::from_secs(300))
                        .build(),
                )
                .build(),
        )
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

    /// Every item in the table.
    pub async fn items(&self) -> Vec<Item> {
        devkit::scan_all(&self.ddb, &self.table)
            .await
            .expect("scan")
    }

    /// Every outbox item, decoded.
    pub async fn outbox_items(&self) -> Vec<OutboxItem> {
        let mut out: Vec<OutboxItem> = self
            .items()
            .await
            .into_iter()
            .filter(|i| {
                i.get("SK")
                    .and_then(|v| v.as_s().ok())
                    .is_some_and(|s| s.starts_with("OUTBOX#"))
            })
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
}

/// Receives every message from a queue until it stays empty, deleting them.
pub async fn drain_queue(sdk: &SdkConfig, queue_url: &str) -> Vec<serde_json::Value> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let mut bodies = Vec::new();
    let mut empty_polls = 0;
    while empty_polls < 2 {
        let out = sqs
            .receive_message()
            .queue_url(queue_url)
            .max_number_of_messages(10)
            .message_system_attribute_names(aws_sdk_sqs::types::MessageSystemAttributeName::All)
            .wait_time_seconds(0)
            .send()
            .await
            .expect("receive");
        let messages = out.messages.unwrap_or_default();
        if messages.is_empty() {
            empty_polls += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        for m in messages {
            let body = m.body().unwrap_or_default();
            let mut value: serde_json::Value =
                serde_json::from_str(body).unwrap_or(serde_json::Value::String(body.to_owned()));
            if let Some(attrs) = m.attributes() {
                let system: serde_json::Map<String, serde_json::Value> = attrs
                    .iter()
                    .map(|(k, v)| (k.as_str().to_owned(), serde_json::Value::String(v.clone())))
                    .collect();
                if let serde_json::Value::Object(map) = &mut value {
                    map.insert("__sqs".into(), serde_json::Value::Object(system));
                }
            }
            bodies.push(value);
            if let Some(handle) = m.receipt_handle() {
                sqs.delete_message()
                    .queue_url(queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await
                    .expect("delete message");
            }
        }
    }
    bodies
}

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A sample file from `events/`.
pub fn sample(name: &str) -> String {
    let path = root().join("events").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// An API Gateway (HTTP API, payload v2) sample as a `lambda_http::Request`.
pub fn api_request(name: &str) -> lambda_http::Request {
    lambda_http::request::from_str(&sample(name)).expect("sample is an API Gateway event")
}

/// The IAM principal of [`request`]'s requests.
pub const TEST_CALLER_ARN: &str = "arn:aws:iam::123456789012:user/tests";

/// The caller of [`request`]'s requests, for calls to the service itself.
pub fn test_caller() -> writer::Caller {
    writer::Caller::iam(TEST_CALLER_ARN).expect("a valid principal")
}

/// Who API Gateway says sent a request.
#[derive(Debug, Clone, Copy)]
pub enum Principal<'a> {
    /// `requestContext.authorizer.iam.userArn`
    Iam(&'a str),
    /// `requestContext.authorizer.jwt.claims.sub`
    Jwt(&'a str),
    /// No authorizer.
    Anonymous,
}

/// An API Gateway request built in code: `method`, `path`, headers, body,
/// from the IAM principal [`TEST_CALLER_ARN`].
pub fn request(
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> lambda_http::Request {
    request_from(Principal::Iam(TEST_CALLER_ARN), method, path, headers, body)
}

/// [`request`] from `principal`.
pub fn request_from(
    principal: Principal<'_>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> lambda_http::Request {
    let mut event = serde_json::json!({
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": "",
        "headers": {},
        "requestContext": {
            "accountId": "123456789012",
            "apiId": "local",
            "domainName": "local.execute-api.us-east-1.amazonaws.com",
            "domainPrefix": "local",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "127.0.0.1", "userAgent": "tests"},
            "requestId": "test",
            "routeKey": "$default",
            "stage": "$default",
            "time": "29/Nov/2026:12:00:00 +0000",
            "timeEpoch": 1_796_040_000_000u64
        },
        "isBase64Encoded": false
    });
    match principal {
        Principal::Iam(arn) => {
            event["requestContext"]["authorizer"] =
                serde_json::json!({"iam": {"accountId": "123456789012", "userArn": arn}});
        }
        Principal::Jwt(sub) => {
            event["requestContext"]["authorizer"] = serde_json::json!({"jwt": {"claims": {"sub": sub, "iss": "https://issuer.example"}, "scopes": null}});
        }
        Principal::Anonymous => {}
    }
    for (k, v) in headers {
        event["headers"][k.to_lowercase()] = serde_json::json!(v);
    }
    if let Some(body) = body {
        event["body"] = serde_json::json!(body);
    }
    lambda_http::request::from_str(&event.to_string()).expect("valid API Gateway event")
}

/// A transient failure as a throttled sink reports it.
pub fn throttled() -> PublishFailure {
    PublishFailure::new(FailureKind::Transient, "ThrottlingException", "injected")
}

impl Stack {
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
    pub async fn create_orders(&self, n: usize) -> Vec<writer::orders::Order> {
        let service = writer::OrderService::from_config(self.ddb.clone(), &self.config(&[]));
        let mut orders = Vec::new();
        for i in 0..n {
            let new = writer::orders::NewOrder::try_from(
                serde_json::from_value::<writer::orders::CreateOrderRequest>(serde_json::json!({
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
}

/// A deadline far enough away for any test.
pub fn far_deadline() -> Deadline {
    Deadline::after(Duration::from_secs(120))
}

/// A retry policy with tiny delays for tests.
pub fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        backoff: outbox_core::retry::Backoff {
            base: Duration::from_millis(1),
            cap: Duration::from_millis(5),
            jitter: outbox_core::retry::Jitter::Full,
        },
    }
}

/// Invokes the publisher in-process, as the pump's function.
pub struct InProcessPublisher<S: EventSink, T: OutboxStore> {
    pub publisher: publisher::Publisher<S, T>,
    /// Every record the function was given, in order.
    pub seen: Mutex<Vec<aws_lambda_events::event::dynamodb::EventRecord>>,
}

impl<S: EventSink, T: OutboxStore> InProcessPublisher<S, T> {
    pub fn new(sink: S, store: T) -> Self {
        let mut publisher = publisher::Publisher::new(sink, store);
        publisher.retry = fast_retry();
        Self {
            publisher,
            seen: Mutex::new(Vec::new()),
        }
    }
}

/// A Lambda context whose deadline is a minute away.
pub fn context() -> lambda_runtime::Context {
    let mut context = lambda_runtime::Context::default();
    context.deadline = (std::time::SystemTime::now() + Duration::from_secs(60))
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    context
}

impl<S: EventSink, T: OutboxStore> Invoker for InProcessPublisher<S, T> {
    async fn invoke(
        &self,
        event: aws_lambda_events::event::dynamodb::Event,
    ) -> Result<aws_lambda_events::event::streams::DynamoDbEventResponse, String> {
        self.seen
            .lock()
            .unwrap()
            .extend(event.records.iter().cloned());
        publisher::handler(
            &self.publisher,
            lambda_runtime::LambdaEvent::new(event, context()),
        )
        .await
        .map_err(|e| e.to_string())
    }
}

impl Stack {
    /// The mapping of `template.yaml`, fed by this stack's stream into `invoker`.
    pub fn pump<I: Invoker>(&self, invoker: I, on_failure: Option<&str>) -> Pump<I> {
        let mapping = MappingSettings::from_template(&root().join("template.yaml"))
            .expect("template mapping");
        let on_failure = on_failure.map(|url| OnFailure {
            sqs: aws_sdk_sqs::Client::new(&self.sdk),
            queue_url: url.to_owned(),
        });
        Pump::new(self.stream(), mapping, invoker, on_failure).expect("filters compile")
    }
}

/// Receives up to 10 messages from a queue as the SQS event Lambda's SQS
/// mapping would pass (the messages stay in the queue, invisible for the
/// queue's visibility timeout, as with a real mapping).
pub async fn sqs_event(
    sdk: &SdkConfig,
    queue_url: &str,
) -> aws_lambda_events::event::sqs::SqsEvent {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let messages = devkit::receive_batch(&sqs, queue_url)
        .await
        .expect("receive");
    devkit::batch_event(&messages)
}

/// A Lambda context whose deadline is `after` from now.
pub fn context_with_deadline(after: Duration) -> lambda_runtime::Context {
    let mut context = lambda_runtime::Context::default();
    context.deadline = (std::time::SystemTime::now() + after)
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    context
}

impl Stack {
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
        envelope.occurred_at = outbox_core::envelope::ulid_time(envelope.event_id);
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
}

/// Whether a stream record is the insert of an outbox item.
pub fn is_outbox_insert(record: &aws_lambda_events::event::dynamodb::EventRecord) -> bool {
    record.event_name == "INSERT"
        && record
            .change
            .keys
            .get("SK")
            .and_then(|v| serde_json::to_value(v).ok())
            .and_then(|v| v["S"].as_str().map(|s| s.starts_with("OUTBOX#")))
            .unwrap_or(false)
}

impl Stack {
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
