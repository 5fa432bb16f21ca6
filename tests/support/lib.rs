//! Test harness shared by the workspace's integration tests.
//!
//! # Layout
//! - `stack.rs`: [`Stack`], one test's uniquely named resources on the local
//!   AWS API (table and, on demand, bus, subscriber queue, SNS FIFO topic),
//!   so tests run in parallel, with one method per action on them: write
//!   events, read items, pump the stream, drain the subscriber.
//! - this file: [`CallCounter`] (an SDK interceptor that counts calls per
//!   operation), [`InProcessPublisher`] (the publisher in-process behind the
//!   mapping emulator), API Gateway sample events ([`api_request`]), and
//!   small helpers (deadlines, retry policies, contexts).
//! - [`proxy`]: [`proxy::FaultProxy`], faults on the wire between the SDK
//!   clients and the local API (throttles, 5xx, partial `PutEvents`, hangs,
//!   resets).
//! - [`lambda`]: the real binaries under a local Lambda Runtime API.
//! - [`chaos`]: the chaos run (workload, faults, verdict).
//! - [`contract`]: responses checked against `docs/openapi.yaml`.
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
use devkit::StreamCursor;
use devkit::{self, Subscriber};
use devkit::{Invoker, OnFailure, Pump};
use outbox_core::OutboxItem;
use outbox_engine::PublishStore;
use outbox_engine::{Deadline, RetryPolicy};
use outbox_engine::{EventSink, FailureKind, PublishFailure};
use outbox_runtime::Config;
use outbox_runtime::DynamoStore;
use outbox_runtime::EventBridgeSink;

pub mod chaos;
pub mod contract;
pub mod lambda;
mod operator;
pub mod proxy;
pub mod rig;
pub mod scenario;
mod stack;

pub use operator::{failed_json, ok_json, Operator, Said};
pub use stack::{create_fifo_topic, Stack};

/// A DynamoDB item, as the SDK holds it.
pub type Item = HashMap<String, AttributeValue>;

/// A persisted backoff of a millisecond: a failed attempt is due again at
/// once (tests that sweep again right after a failure).
pub fn instant_backoff() -> outbox_engine::Backoff {
    outbox_engine::Backoff {
        base: std::time::Duration::from_millis(1),
        cap: std::time::Duration::from_millis(1),
        jitter: outbox_engine::Jitter::Full,
    }
}

/// The key schema the variables `names` (name, value) set, the others at
/// their defaults.
pub fn schema_named(names: &[(&str, &str)]) -> outbox_core::KeySchema {
    let value = |k: &str| {
        names
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| (*v).to_owned())
    };
    outbox_core::KeySchema::from_lookup(value).expect("a valid key schema")
}

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

    /// Forgets the calls counted so far.
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

/// Receives every message from a queue until it stays empty, deleting them
/// ([`devkit::receive_until_empty`]); each as [`message_value`] gives it.
pub async fn drain_queue(sdk: &SdkConfig, queue_url: &str) -> Vec<serde_json::Value> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let mut bodies = Vec::new();
    devkit::receive_until_empty(&sqs, queue_url, || false, |m| bodies.push(message_value(m)))
        .await
        .expect("receive and delete every message");
    bodies
}

/// A received message as JSON: its body (a string when not JSON), with
/// its system attributes under `__sqs`.
pub fn message_value(m: &aws_sdk_sqs::types::Message) -> serde_json::Value {
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
    value
}

/// The workspace root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Runs the `outboxctl` binary with `args` from the workspace root:
/// whether it succeeded, its stdout and its stderr.
pub fn outboxctl(args: &[&str]) -> (bool, String, String) {
    outboxctl_with(args, &[])
}

/// [`outboxctl()`] with `env` added to this process's environment.
pub fn outboxctl_with(args: &[&str], env: &[(&str, &str)]) -> (bool, String, String) {
    let binary = lambda::binary("outboxctl").expect("outboxctl binary");
    let out = std::process::Command::new(binary)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(root())
        .output()
        .expect("run outboxctl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
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
    writer::Caller::iam(TEST_CALLER_ARN, None).expect("a valid principal")
}

/// Who API Gateway says sent a request.
#[derive(Debug, Clone, Copy)]
pub enum Principal<'a> {
    /// `requestContext.authorizer.iam.userArn`
    Iam(&'a str),
    /// `requestContext.authorizer.jwt.claims.sub`
    Jwt(&'a str),
    /// Cognito identity-pool credentials: the pool's shared role session
    /// ([`COGNITO_SESSION_ARN`]) and `cognitoIdentity.identityId`.
    Cognito(&'a str),
    /// No authorizer.
    Anonymous,
}

/// The role session every user of a Cognito identity pool signs with.
pub const COGNITO_SESSION_ARN: &str =
    "arn:aws:sts::123456789012:assumed-role/AuthRole/CognitoIdentityCredentials";

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
    let event = api_event(principal, method, path, headers, body);
    lambda_http::request::from_str(&event.to_string()).expect("valid API Gateway event")
}

/// The API Gateway (HTTP API, payload 2.0) event of [`request_from`], as a
/// function receives it.
pub fn api_event(
    principal: Principal<'_>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
) -> serde_json::Value {
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
        Principal::Cognito(identity) => {
            event["requestContext"]["authorizer"] = serde_json::json!({"iam": {
                "accountId": "123456789012", "userArn": COGNITO_SESSION_ARN,
                "userId": "AROAEXAMPLE:CognitoIdentityCredentials",
                "cognitoIdentity": {"amr": ["authenticated"], "identityId": identity,
                                    "identityPoolId": "us-east-1:pool"}}});
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
    event
}

/// A transient failure as a throttled sink reports it.
pub fn throttled() -> PublishFailure {
    PublishFailure::new(FailureKind::Transient, "ThrottlingException", "injected")
}

/// A deadline far enough away for any test.
pub fn far_deadline() -> Deadline {
    Deadline::after(Duration::from_secs(120))
}

/// A retry policy with tiny delays for tests.
pub fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 3,
        backoff: outbox_engine::Backoff {
            base: Duration::from_millis(1),
            cap: Duration::from_millis(5),
            jitter: outbox_engine::Jitter::Full,
        },
    }
}

/// Invokes the publisher in-process, as the pump's function.
pub struct InProcessPublisher<S: EventSink, T: PublishStore> {
    /// The publisher (its retry policy set to [`fast_retry`]).
    pub publisher: publisher::Publisher<S, T>,
    /// Every record the function was given, in order.
    pub seen: Mutex<Vec<aws_lambda_events::event::dynamodb::EventRecord>>,
}

impl<S: EventSink, T: PublishStore> InProcessPublisher<S, T> {
    /// The publisher on `sink` and `store`, with [`fast_retry`] and the
    /// stack's key schema `keys` (as the templates configure it).
    pub fn new(sink: S, store: T, keys: &outbox_core::KeySchema) -> Self {
        let mut publisher = publisher::Publisher::new(sink, store).with_keys(keys.clone());
        publisher.retry = fast_retry();
        Self {
            publisher,
            seen: Mutex::new(Vec::new()),
        }
    }
}

/// A Lambda context whose deadline is a minute away.
pub fn context() -> lambda_runtime::Context {
    context_with_deadline(Duration::from_secs(60))
}

impl<S: EventSink, T: PublishStore> Invoker for InProcessPublisher<S, T> {
    async fn invoke(
        &self,
        event: aws_lambda_events::event::dynamodb::Event,
    ) -> Result<aws_lambda_events::event::streams::DynamoDbEventResponse, devkit::InvokeError> {
        self.seen
            .lock()
            .unwrap()
            .extend(event.records.iter().cloned());
        publisher::handler(
            &self.publisher,
            lambda_runtime::LambdaEvent::new(
                publisher::StreamEvent::from(event.records),
                context(),
            ),
        )
        .await
        .map_err(|e| devkit::InvokeError::Failed(e.to_string()))
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
    let messages = outbox_runtime::receive_batch(&sqs, queue_url, 0)
        .await
        .expect("receive");
    outbox_runtime::batch_event(&messages)
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

/// Whether a stream record is the insert of an outbox item of a table
/// keyed as `keys` names it.
pub fn is_outbox_insert(
    keys: &outbox_core::KeySchema,
    record: &aws_lambda_events::event::dynamodb::EventRecord,
) -> bool {
    record.event_name == "INSERT"
        && record
            .change
            .keys
            .get(&keys.sort_key)
            .and_then(|v| serde_json::to_value(v).ok())
            .and_then(|v| v["S"].as_str().map(|s| s.starts_with(&keys.outbox_prefix)))
            .unwrap_or(false)
}

/// A new standard queue (its name from `prefix`) holding `bodies`, one
/// message each; its URL.
pub async fn queue_with(sdk: &SdkConfig, prefix: &str, bodies: &[String]) -> String {
    let url = devkit::create_queue(sdk, &unique(prefix), false)
        .await
        .expect("queue created")
        .queue_url;
    let sqs = aws_sdk_sqs::Client::new(sdk);
    for body in bodies {
        sqs.send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .expect("message sent");
    }
    url
}
