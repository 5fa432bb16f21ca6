//! A fault proxy on the wire: an HTTP/1.1 server on 127.0.0.1 that sits
//! between the SDK clients and the local servers (DynamoDB and DynamoDB
//! Streams calls go on to DynamoDB Local, every other call to moto) and, per
//! operation, answers
//! with a throttle or a 5xx, refuses some entries of a `PutEvents` in a 200
//! answer, never answers, or drops the connection. Everything else is
//! forwarded unchanged. The clients are the real SDK clients with the
//! functions' retry and timeout settings, so what is tested is what runs.
//!
//! ```no_run
//! # async fn demo() {
//! let proxy = testkit::proxy::FaultProxy::start().await;
//! proxy.inject("UpdateItem", testkit::proxy::Fault::Throttle, None);
//! let sdk = proxy.sdk().await; // clients built from it go through the proxy
//! # }
//! ```

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What the proxy does to a matching call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// 400 `ThrottlingException` (JSON protocols) or `Throttling` (query).
    Throttle,
    /// 500 `InternalFailure`.
    ServerError,
    /// 400 with this error code (e.g. `ExpiredIteratorException`).
    Refuse(String),
    /// This HTTP status with this error code (e.g. a 429 whose code no
    /// classifier knows).
    Status(u16, String),
    /// Never answers (until the client gives up).
    Hang,
    /// Forwards the call (it takes effect) and answers only after this
    /// long: past the SDK's attempt timeout, the caller has given up and
    /// sends it again.
    Late(std::time::Duration),
    /// Drops the connection without an answer.
    Reset,
    /// `PutEvents` or `PublishBatch`: answered as accepted after this long,
    /// nothing forwarded: a sink of fixed latency, the benches' model of an
    /// in-region sink (the local servers' own time left out).
    Stub(std::time::Duration),
    /// Forwards the call untouched (a rule that only counts, or that lets
    /// the first calls through before the next rule applies).
    Pass,
    /// `PutEvents` or `PublishBatch`: the entries at these positions are not
    /// forwarded and come back failed (`InternalFailure`) in a 200 answer;
    /// the others really go out.
    FailEntries(Vec<usize>),
    /// `PutEvents` or `PublishBatch`: the entries whose `Detail` (or
    /// `Message`) contains any of these texts (every entry, for `""`) come
    /// back failed with `code` in a 200 answer; the others really go out.
    RefuseEntries {
        /// The texts that select the refused entries.
        containing: Vec<String>,
        /// The error code of each refused entry.
        code: String,
    },
    /// Kills the calling process (the crash hook, `SIGKILL`) and drops the
    /// connection; with `forward`, only after the call reached the local API
    /// (it took effect, the caller never learns it).
    Crash {
        /// Whether the call reaches the local API before the kill.
        forward: bool,
    },
}

impl Fault {
    /// Every entry of a `PutEvents` refused with `code` (a sink outage that
    /// the SDK does not retry by itself: a 200 answer).
    pub fn refuse_all(code: &str) -> Self {
        Self::RefuseEntries {
            containing: vec![String::new()],
            code: code.to_owned(),
        }
    }

    /// The entries whose `Detail` contains one of `texts`, refused with `code`.
    pub fn refuse(texts: &[String], code: &str) -> Self {
        Self::RefuseEntries {
            containing: texts.to_vec(),
            code: code.to_owned(),
        }
    }
}

/// Wire sabotage the chaos verdict must catch: never a [`Fault`] (the
/// journal shows no fault for it), only what reached the local API.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sabotage {
    /// Deletes of outbox items are answered as done and never forwarded.
    DropDeletes,
    /// Sink calls are answered as published and never forwarded.
    SwallowSinkCalls,
}

#[derive(Debug)]
struct Rule {
    operation: String,
    fault: Fault,
    /// Calls it still applies to (`None`: every call).
    remaining: Option<usize>,
}

/// One call in the journal: every sink call (`PutEvents`, `PublishBatch`),
/// every delete of outbox items, and every call that got a fault.
#[derive(Debug, Clone)]
pub struct Call {
    /// The tag set with [`FaultProxy::set_tag`] when the call arrived.
    pub tag: u64,
    /// The API operation (`PutEvents`, `BatchWriteItem`, …).
    pub operation: String,
    /// The fault it got, if any.
    pub fault: Option<Fault>,
    /// The `eventId`s of the entries that reached the local API.
    pub delivered: Vec<String>,
    /// The event ids of the outbox items a delete call asked to delete
    /// (`BatchWriteItem` delete requests, `DeleteItem`; `OUTBOX#<id>`).
    pub deletes: Vec<String>,
    /// Those whose delete reached the local API.
    pub deleted: Vec<String>,
    /// When it arrived.
    pub at: std::time::SystemTime,
    /// Whether the caller was still there for the answer (false: it gave
    /// up, by an attempt timeout or its deadline, after the call took
    /// effect).
    pub answered: bool,
}

/// Chooses a fault for a call that no rule matches, from its operation and
/// the current tag.
pub type Chooser = Box<dyn FnMut(&str, u64) -> Option<Fault> + Send>;

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    chooser: Option<Chooser>,
    crash: Option<Arc<dyn Fn() + Send + Sync>>,
    tag: u64,
    journal: Vec<Call>,
    /// Operations seen, in order.
    seen: Vec<String>,
    /// Operations a fault was applied to.
    faulted: Vec<String>,
    /// IAM actions of the calls seen, each with the resource it names.
    actions: Vec<(String, String)>,
    /// The stream of the latest shard iterator taken (a `GetRecords`
    /// names only an opaque iterator).
    last_stream: Option<String>,
    sabotage: Option<Sabotage>,
}

/// A running proxy; it stops when dropped.
pub struct FaultProxy {
    /// Its address (`http://127.0.0.1:<port>`): the clients' endpoint.
    pub endpoint: String,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FaultProxy {
    /// A proxy in front of the local servers: DynamoDB Local
    /// (`AWS_ENDPOINT_URL_DYNAMODB`, `..._STREAMS`) and moto
    /// (`AWS_ENDPOINT_URL`).
    pub async fn start() -> Self {
        let host = |url: String| {
            url.trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned()
        };
        let upstream = Upstreams {
            others: host(devkit::endpoint().expect("a loopback AWS_ENDPOINT_URL")),
            dynamodb: host(devkit::dynamodb_endpoint().expect("a loopback DynamoDB endpoint")),
            streams: host(devkit::streams_endpoint().expect("a loopback streams endpoint")),
        };
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let shared = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = shared.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let service =
                        service_fn(move |request| handle(state.clone(), upstream.clone(), request));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Self {
            endpoint,
            state,
            task,
        }
    }

    /// Applies `fault` to the next `times` calls of `operation` (every call
    /// when `None`). Rules apply in the order they were added.
    pub fn inject(&self, operation: &str, fault: Fault, times: Option<usize>) {
        self.state.lock().unwrap().rules.push(Rule {
            operation: operation.to_owned(),
            fault,
            remaining: times,
        });
    }

    /// Removes every rule and the chooser: from now on everything is
    /// forwarded.
    pub fn heal(&self) {
        let mut state = self.state.lock().unwrap();
        state.rules.clear();
        state.chooser = None;
    }

    /// How many calls of `operation` reached the proxy.
    pub fn seen(&self, operation: &str) -> usize {
        let state = self.state.lock().unwrap();
        state.seen.iter().filter(|o| *o == operation).count()
    }

    /// Every call seen, as the IAM actions that authorize it, read from the
    /// request (`dynamodb:UpdateItem`, `events:PutEvents`, `sns:Publish`,
    /// each item of a transaction, ...).
    pub fn actions(&self) -> std::collections::BTreeSet<String> {
        let state = self.state.lock().unwrap();
        state.actions.iter().map(|(a, _)| a.clone()).collect()
    }

    /// Every call seen, as (IAM action, resource) pairs read from the
    /// request: `table/<name>`, `table/<name>/index/<index>`,
    /// `table/<name>/stream`, `event-bus/<name>`, `topic/<name>`,
    /// `queue/<name>`, or `*` for an action without a resource.
    pub fn grants_used(&self) -> std::collections::BTreeSet<(String, String)> {
        let state = self.state.lock().unwrap();
        state.actions.iter().cloned().collect()
    }

    /// How many calls each IAM action authorized (a `TransactWriteItems`
    /// counts once per item kind it carries).
    pub fn action_counts(&self) -> std::collections::BTreeMap<String, usize> {
        let state = self.state.lock().unwrap();
        let mut counts = std::collections::BTreeMap::new();
        for (action, _) in &state.actions {
            *counts.entry(action.clone()).or_default() += 1;
        }
        counts
    }

    /// Every call seen, by operation, in order.
    pub fn operations(&self) -> Vec<String> {
        self.state.lock().unwrap().seen.clone()
    }

    /// How many calls of `operation` got a fault.
    pub fn faulted(&self, operation: &str) -> usize {
        let state = self.state.lock().unwrap();
        state.faulted.iter().filter(|o| *o == operation).count()
    }

    /// Consulted for every call no rule matches (`None`: forward it).
    pub fn set_chooser(&self, chooser: Chooser) {
        self.state.lock().unwrap().chooser = Some(chooser);
    }

    /// Sabotages the wire from now on (see [`Sabotage`]).
    pub fn sabotage(&self, sabotage: Sabotage) {
        self.state.lock().unwrap().sabotage = Some(sabotage);
    }

    /// What [`Fault::Crash`] calls: kills the caller's process.
    pub fn set_crash_hook(&self, hook: Arc<dyn Fn() + Send + Sync>) {
        self.state.lock().unwrap().crash = Some(hook);
    }

    /// Tags the calls from now on (an invocation number, say).
    pub fn set_tag(&self, tag: u64) {
        self.state.lock().unwrap().tag = tag;
    }

    /// The journal so far: sink calls and faulted calls, in arrival order.
    pub fn journal(&self) -> Vec<Call> {
        self.state.lock().unwrap().journal.clone()
    }

    /// An SDK configuration whose clients go through this proxy.
    pub async fn sdk(&self) -> aws_config::SdkConfig {
        devkit::sdk_config_at(&self.endpoint)
            .await
            .expect("loopback proxy")
    }
}

/// Where calls go on to, by service.
#[derive(Clone)]
struct Upstreams {
    dynamodb: String,
    streams: String,
    others: String,
}

impl Upstreams {
    /// The server of a request's service (its `X-Amz-Target` prefix).
    fn of(&self, request: &hyper::http::request::Parts) -> &str {
        let target = request
            .headers
            .get("x-amz-target")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if target.starts_with("DynamoDBStreams_") {
            &self.streams
        } else if target.starts_with("DynamoDB_") {
            &self.dynamodb
        } else {
            &self.others
        }
    }
}

/// The operation of a request: `X-Amz-Target` for the JSON protocols,
/// `Action` of the form body for the query protocol (SNS).
fn operation(request: &hyper::http::request::Parts, body: &[u8]) -> String {
    if let Some(target) = request
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
    {
        return target.rsplit('.').next().unwrap_or(target).to_owned();
    }
    form_urlencoded::parse(body)
        .find(|(k, _)| k == "Action")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| "Unknown".to_owned())
}

/// The IAM action that authorizes a call: the service prefix from the
/// target (or the SigV4 scope) and the operation, with the few operations
/// IAM authorizes under another name.
fn iam_action(request: &hyper::http::request::Parts, operation: &str) -> String {
    let target = request
        .headers
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let scope = request
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.split("Credential=").nth(1))
        .and_then(|c| c.split('/').nth(3))
        .unwrap_or("");
    let service = if target.starts_with("DynamoDB") {
        "dynamodb"
    } else if target.starts_with("AWSEvents") {
        "events"
    } else if target.starts_with("AmazonSQS") {
        "sqs"
    } else {
        scope
    };
    let operation = match (service, operation) {
        ("sns", "PublishBatch") => "Publish",
        (_, op) => op,
    };
    format!("{service}:{operation}")
}

/// The IAM actions that authorize a call and the resource each applies to,
/// read from the request: a `TransactWriteItems` is authorized by the
/// action of each of its items (`Put`, `Update`, `Delete`,
/// `ConditionCheck`) on that item's table, a `TransactGetItems` by
/// `GetItem`; any other call by [`iam_action`]. Resources are named as
/// [`resource_names`] says.
fn iam_requests(
    request: &hyper::http::request::Parts,
    operation: &str,
    body: &[u8],
    last_stream: &mut Option<String>,
) -> Vec<(String, String)> {
    let json = serde_json::from_slice::<serde_json::Value>(body).unwrap_or_default();
    let action = iam_action(request, operation);
    let table = |name: &serde_json::Value| format!("table/{}", name.as_str().unwrap_or("?"));
    let stream_of = |arn: &str| {
        // arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>
        arn.split_once(":table/")
            .map(|(_, rest)| format!("table/{}/stream", rest.split('/').next().unwrap_or("?")))
            .unwrap_or_else(|| "?".to_owned())
    };
    match (action.split(':').next().unwrap_or(""), operation) {
        ("dynamodb", "TransactWriteItems" | "TransactGetItems") => json["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                let (kind, inner) = item.as_object()?.iter().next()?;
                let action = match kind.as_str() {
                    "Put" => "PutItem",
                    "Update" => "UpdateItem",
                    "Delete" => "DeleteItem",
                    "ConditionCheck" => "ConditionCheckItem",
                    "Get" => "GetItem",
                    other => other,
                };
                Some((format!("dynamodb:{action}"), table(&inner["TableName"])))
            })
            .collect(),
        ("dynamodb", "BatchWriteItem" | "BatchGetItem") => json["RequestItems"]
            .as_object()
            .into_iter()
            .flat_map(|tables| tables.keys())
            .map(|name| (action.clone(), format!("table/{name}")))
            .collect(),
        ("dynamodb", "Query" | "Scan") => {
            let mut resource = table(&json["TableName"]);
            if let Some(index) = json["IndexName"].as_str() {
                resource = format!("{resource}/index/{index}");
            }
            vec![(action, resource)]
        }
        ("dynamodb", "DescribeStream" | "GetShardIterator") => {
            let stream = stream_of(json["StreamArn"].as_str().unwrap_or(""));
            *last_stream = Some(stream.clone());
            vec![(action, stream)]
        }
        // A shard iterator is opaque: the stream whose iterator was taken.
        ("dynamodb", "GetRecords") => {
            vec![(
                action,
                last_stream.clone().unwrap_or_else(|| "?".to_owned()),
            )]
        }
        ("dynamodb", "ListStreams") => {
            vec![(action, format!("{}/stream", table(&json["TableName"])))]
        }
        ("dynamodb", _) => vec![(action, table(&json["TableName"]))],
        ("events", "PutEvents") => {
            let mut buses: Vec<(String, String)> = json["Entries"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    (
                        action.clone(),
                        bus(e["EventBusName"].as_str().unwrap_or("default")),
                    )
                })
                .collect();
            buses.dedup();
            buses
        }
        ("events", _) => vec![(action, bus(json["Name"].as_str().unwrap_or("default")))],
        ("sqs", _) => vec![(
            action,
            format!(
                "queue/{}",
                json["QueueUrl"]
                    .as_str()
                    .unwrap_or("?")
                    .rsplit('/')
                    .next()
                    .unwrap_or("?")
            ),
        )],
        ("sns", _) => {
            let topic = form_urlencoded::parse(body)
                .find(|(k, _)| k == "TopicArn")
                .map(|(_, v)| v.rsplit(':').next().unwrap_or("?").to_owned())
                .unwrap_or_else(|| "?".to_owned());
            vec![(action, format!("topic/{topic}"))]
        }
        _ => vec![(action, "*".to_owned())],
    }
}

/// An event bus by name or ARN, as `event-bus/<name>`.
fn bus(name_or_arn: &str) -> String {
    let name = name_or_arn
        .rsplit_once("event-bus/")
        .map_or(name_or_arn, |(_, name)| name);
    format!("event-bus/{name}")
}

/// What the chooser is asked about: the operation, or for a write of the
/// settings item (`PK=OUTBOX_SETTINGS`, made once per cold start)
/// `UpdateItem(settings)`, so that a chaos schedule's `UpdateItem` faults,
/// meant for the dead-letter and backoff writes, are not spent on it.
fn subject(operation: &str, body: &[u8]) -> String {
    let settings = operation == "UpdateItem"
        && serde_json::from_slice::<serde_json::Value>(body)
            .is_ok_and(|b| b["Key"]["PK"]["S"] == outbox_core::keys::SETTINGS_PK);
    if settings {
        format!("{operation}(settings)")
    } else {
        operation.to_owned()
    }
}

fn fault_for(state: &Mutex<State>, operation: &str, subject: &str) -> (u64, Option<Fault>) {
    let mut state = state.lock().unwrap();
    state.seen.push(operation.to_owned());
    let tag = state.tag;
    let ruled = state
        .rules
        .iter_mut()
        .find(|r| r.operation == operation && r.remaining != Some(0))
        .map(|rule| {
            if let Some(n) = &mut rule.remaining {
                *n -= 1;
            }
            rule.fault.clone()
        });
    let fault = match ruled {
        Some(fault) => Some(fault),
        None => state
            .chooser
            .as_mut()
            .and_then(|choose| choose(subject, tag)),
    };
    if fault.as_ref().is_some_and(|f| *f != Fault::Pass) {
        state.faulted.push(operation.to_owned());
    }
    (tag, fault)
}

fn is_sink_call(operation: &str) -> bool {
    matches!(operation, "PutEvents" | "PublishBatch")
}

/// The `eventId` of an entry's `Detail` (or an SNS `Message`): the envelope.
fn event_id(text: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()?
        .get("eventId")?
        .as_str()
        .map(str::to_owned)
}

/// The event ids of the outbox items a `BatchWriteItem` or `DeleteItem`
/// deletes (their sort keys, `OUTBOX#<id>`).
fn deleted_event_ids(operation: &str, body: &[u8]) -> Vec<String> {
    let Ok(request) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let sk = |key: &serde_json::Value| {
        key["SK"]["S"]
            .as_str()
            .and_then(|sk| sk.strip_prefix("OUTBOX#"))
            .map(str::to_owned)
    };
    match operation {
        "BatchWriteItem" => request["RequestItems"]
            .as_object()
            .into_iter()
            .flat_map(|tables| tables.values())
            .filter_map(|writes| writes.as_array())
            .flatten()
            .filter_map(|write| sk(&write["DeleteRequest"]["Key"]))
            .collect(),
        "DeleteItem" => sk(&request["Key"]).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// A success answer for a call that was never forwarded ([`Sabotage`]).
fn fake_success(operation: &str, body: &[u8]) -> Response<Full<Bytes>> {
    let (content_type, text) = match operation {
        "PutEvents" => {
            let entries = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v["Entries"].as_array().map(Vec::len))
                .unwrap_or(0);
            let answers: Vec<serde_json::Value> = (0..entries)
                .map(|i| serde_json::json!({"EventId": format!("sabotaged-{i}")}))
                .collect();
            (
                "application/x-amz-json-1.1",
                serde_json::json!({"FailedEntryCount": 0, "Entries": answers}).to_string(),
            )
        }
        "PublishBatch" => {
            let members: String = form_urlencoded::parse(body)
                .filter(|(k, _)| k.ends_with(".Id"))
                .map(|(_, id)| {
                    format!("<member><Id>{id}</Id><MessageId>sabotaged-{id}</MessageId><SequenceNumber>1</SequenceNumber></member>")
                })
                .collect();
            (
                "text/xml",
                format!("<PublishBatchResponse xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\"><PublishBatchResult><Successful>{members}</Successful><Failed></Failed></PublishBatchResult><ResponseMetadata><RequestId>sabotaged</RequestId></ResponseMetadata></PublishBatchResponse>"),
            )
        }
        "BatchWriteItem" => (
            "application/x-amz-json-1.0",
            r#"{"UnprocessedItems":{}}"#.to_owned(),
        ),
        _ => ("application/x-amz-json-1.0", "{}".to_owned()),
    };
    let mut response = Response::new(Full::new(Bytes::from(text)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// The event ids a sink call carries, in request order.
fn sink_event_ids(operation: &str, body: &[u8]) -> Vec<String> {
    match operation {
        "PutEvents" => serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v["Entries"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|e| e["Detail"].as_str().and_then(event_id))
            .collect(),
        "PublishBatch" => form_urlencoded::parse(body)
            .filter(|(k, _)| k.ends_with(".Message"))
            .filter_map(|(_, v)| event_id(&v))
            .collect(),
        _ => Vec::new(),
    }
}

async fn handle(
    state: Arc<Mutex<State>>,
    upstream: Upstreams,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    // Finished in its own task: a client that gives up (an attempt timeout)
    // drops this future, but a call that reached the local API must still
    // be journaled, as it took effect.
    let (result, entry) = tokio::spawn(handle_call(state.clone(), upstream, parts, body)).await?;
    if let Some(entry) = entry {
        if let Some(call) = state.lock().unwrap().journal.get_mut(entry) {
            call.answered = true;
        }
    }
    result
}

async fn handle_call(
    state: Arc<Mutex<State>>,
    upstreams: Upstreams,
    parts: hyper::http::request::Parts,
    body: Bytes,
) -> (Result<Response<Full<Bytes>>, BoxError>, Option<usize>) {
    let upstream = upstreams.of(&parts).to_owned();
    let operation = operation(&parts, &body);
    {
        let mut state = state.lock().unwrap();
        let mut last_stream = state.last_stream.take();
        let requests = iam_requests(&parts, &operation, &body, &mut last_stream);
        state.last_stream = last_stream;
        state.actions.extend(requests);
    }
    let (tag, fault) = fault_for(&state, &operation, &subject(&operation, &body));
    let deletes = deleted_event_ids(&operation, &body);
    let journal = |fault: &Option<Fault>, reached: Vec<String>| {
        if is_sink_call(&operation)
            || !deletes.is_empty()
            || fault.as_ref().is_some_and(|f| *f != Fault::Pass)
        {
            let (delivered, deleted) = if is_sink_call(&operation) {
                (reached, Vec::new())
            } else {
                (Vec::new(), reached)
            };
            let mut state = state.lock().unwrap();
            state.journal.push(Call {
                tag,
                operation: operation.clone(),
                fault: fault.clone(),
                delivered,
                deletes: deletes.clone(),
                deleted,
                at: std::time::SystemTime::now(),
                answered: false,
            });
            Some(state.journal.len() - 1)
        } else {
            None
        }
    };
    let crash = || {
        let hook = state.lock().unwrap().crash.clone();
        if let Some(hook) = hook {
            hook();
        }
    };
    let all = if is_sink_call(&operation) {
        sink_event_ids(&operation, &body)
    } else {
        deletes.clone()
    };
    if fault == Some(Fault::Hang) {
        // Journaled now: the call never ends.
        let _ = journal(&fault, Vec::new());
    }
    let sabotage = state.lock().unwrap().sabotage;
    let sabotaged = match sabotage {
        Some(Sabotage::DropDeletes) => !deletes.is_empty(),
        Some(Sabotage::SwallowSinkCalls) => is_sink_call(&operation),
        None => false,
    };
    if sabotaged && fault.as_ref().is_none_or(|f| *f == Fault::Pass) {
        // Answered as done; nothing reached the local API.
        let entry = journal(&None, Vec::new());
        return (Ok(fake_success(&operation, &body)), entry);
    }
    let (result, delivered) = apply(&upstream, parts, body, &operation, &fault, &crash, all).await;
    let entry = journal(&fault, delivered);
    (result, entry)
}

/// Applies `fault` to the call; returns the answer and the event ids that
/// reached the local API.
async fn apply(
    upstream: &str,
    parts: hyper::http::request::Parts,
    body: Bytes,
    operation: &str,
    fault: &Option<Fault>,
    crash: &(dyn Fn() + Sync),
    all: Vec<String>,
) -> (Result<Response<Full<Bytes>>, BoxError>, Vec<String>) {
    let json = parts.headers.contains_key("x-amz-target");
    let delivered_if_ok = |result: Result<Response<Full<Bytes>>, BoxError>, ids: Vec<String>| {
        let ok = result.as_ref().is_ok_and(|r| r.status().is_success());
        (result, if ok { ids } else { Vec::new() })
    };
    match fault {
        None | Some(Fault::Pass) => delivered_if_ok(forward(upstream, parts, body).await, all),
        Some(Fault::Throttle) => (
            Ok(error(json, StatusCode::BAD_REQUEST, "Throttling")),
            Vec::new(),
        ),
        Some(Fault::ServerError) => (
            Ok(error(
                json,
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalFailure",
            )),
            Vec::new(),
        ),
        Some(Fault::Refuse(code)) => (Ok(error(json, StatusCode::BAD_REQUEST, code)), Vec::new()),
        Some(Fault::Status(status, code)) => (
            Ok(error(
                json,
                StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
                code,
            )),
            Vec::new(),
        ),
        Some(Fault::Hang) => {
            std::future::pending::<()>().await;
            unreachable!()
        }
        Some(Fault::Reset) => (Err("injected connection reset".into()), Vec::new()),
        Some(Fault::Late(after)) => {
            let answer = delivered_if_ok(forward(upstream, parts, body).await, all);
            tokio::time::sleep(*after).await;
            answer
        }
        Some(Fault::Stub(after)) => {
            tokio::time::sleep(*after).await;
            (Ok(fake_success(operation, &body)), all)
        }
        Some(Fault::Crash { forward: false }) => {
            crash();
            (Err("injected crash".into()), Vec::new())
        }
        Some(Fault::Crash { forward: true }) => {
            let (result, delivered) = delivered_if_ok(forward(upstream, parts, body).await, all);
            crash();
            drop(result);
            (Err("injected crash".into()), delivered)
        }
        Some(Fault::FailEntries(positions)) if operation == "PublishBatch" => {
            let mut delivered = Vec::new();
            let result = partial_publish_batch(
                upstream,
                parts,
                body,
                "InternalError",
                |i, _| positions.contains(&i),
                &mut delivered,
            )
            .await;
            (result, delivered)
        }
        Some(Fault::FailEntries(positions)) => {
            let mut delivered = Vec::new();
            let result = partial_put_events(
                upstream,
                parts,
                body,
                "InternalFailure",
                |i, _| positions.contains(&i),
                &mut delivered,
            )
            .await;
            (result, delivered)
        }
        Some(Fault::RefuseEntries { containing, code }) if operation == "PublishBatch" => {
            let mut delivered = Vec::new();
            let result = partial_publish_batch(
                upstream,
                parts,
                body,
                code,
                |_, message| {
                    containing
                        .iter()
                        .any(|text| message.contains(text.as_str()))
                },
                &mut delivered,
            )
            .await;
            (result, delivered)
        }
        Some(Fault::RefuseEntries { containing, code }) => {
            let mut delivered = Vec::new();
            let result = partial_put_events(
                upstream,
                parts,
                body,
                code,
                |_, entry| {
                    let detail = entry["Detail"].as_str().unwrap_or("");
                    containing.iter().any(|text| detail.contains(text.as_str()))
                },
                &mut delivered,
            )
            .await;
            (result, delivered)
        }
    }
}

fn error(json: bool, status: StatusCode, code: &str) -> Response<Full<Bytes>> {
    let (content_type, body) = if json {
        let code = if code == "Throttling" {
            "ThrottlingException"
        } else {
            code
        };
        (
            "application/x-amz-json-1.1",
            format!(r#"{{"__type":"{code}","message":"injected by the fault proxy"}}"#),
        )
    } else {
        (
            "text/xml",
            format!(
                "<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>injected by the fault proxy</Message></Error><RequestId>fault-proxy</RequestId></ErrorResponse>"
            ),
        )
    };
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

async fn forward(
    upstream: &str,
    mut parts: hyper::http::request::Parts,
    body: Bytes,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let stream = TcpStream::connect(upstream).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    parts.headers.remove(TRANSFER_ENCODING);
    parts.headers.insert(CONTENT_LENGTH, body.len().into());
    let response = sender
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await?;
    let (mut parts, body) = response.into_parts();
    let body = body.collect().await?.to_bytes();
    parts.headers.remove(TRANSFER_ENCODING);
    parts.headers.insert(CONTENT_LENGTH, body.len().into());
    Ok(Response::from_parts(parts, Full::new(body)))
}

/// Forwards the `PutEvents` entries that `refuse` spares and answers for all
/// of them, the refused ones failed with `code`, in request order.
async fn partial_put_events(
    upstream: &str,
    parts: hyper::http::request::Parts,
    body: Bytes,
    code: &str,
    refuse: impl Fn(usize, &serde_json::Value) -> bool,
    delivered: &mut Vec<String>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let mut request: serde_json::Value = serde_json::from_slice(&body)?;
    let entries = request["Entries"].as_array().cloned().unwrap_or_default();
    let refused: Vec<bool> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| refuse(i, e))
        .collect();
    let kept: Vec<serde_json::Value> = entries
        .iter()
        .zip(&refused)
        .filter(|(_, r)| !**r)
        .map(|(e, _)| e.clone())
        .collect();
    let mut answers: Vec<serde_json::Value> = Vec::new();
    if !kept.is_empty() {
        let ids: Vec<String> = kept
            .iter()
            .filter_map(|e| e["Detail"].as_str().and_then(event_id))
            .collect();
        request["Entries"] = serde_json::Value::Array(kept);
        let forwarded = forward(upstream, parts, Bytes::from(request.to_string())).await?;
        if !forwarded.status().is_success() {
            return Ok(forwarded);
        }
        *delivered = ids;
        let body = forwarded.into_body().collect().await?.to_bytes();
        let answer: serde_json::Value = serde_json::from_slice(&body)?;
        answers = answer["Entries"].as_array().cloned().unwrap_or_default();
    }
    let mut answers = answers.into_iter();
    let mut failed = 0;
    let merged: Vec<serde_json::Value> = refused
        .iter()
        .map(|r| {
            if *r {
                failed += 1;
                serde_json::json!({"ErrorCode": code, "ErrorMessage": "injected by the fault proxy"})
            } else {
                answers.next().unwrap_or_default()
            }
        })
        .collect();
    let body = serde_json::json!({"FailedEntryCount": failed, "Entries": merged}).to_string();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/x-amz-json-1.1"),
    );
    Ok(response)
}

/// Forwards the SNS `PublishBatch` members whose `Message` `refuse` spares
/// (renumbered) and answers for all of them: the refused ones in `Failed`
/// with `code`. The query protocol: a form body, an XML answer.
async fn partial_publish_batch(
    upstream: &str,
    parts: hyper::http::request::Parts,
    body: Bytes,
    code: &str,
    refuse: impl Fn(usize, &str) -> bool,
    delivered: &mut Vec<String>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    const PREFIX: &str = "PublishBatchRequestEntries.member.";
    let pairs: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    let mut members: std::collections::BTreeMap<usize, Vec<(String, String)>> = Default::default();
    let mut others = Vec::new();
    for (key, value) in pairs {
        let member = key
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(n, field)| n.parse::<usize>().ok().map(|n| (n, field.to_owned())));
        match member {
            Some((n, field)) => members.entry(n).or_default().push((field, value)),
            None => others.push((key, value)),
        }
    }
    let field = |member: &[(String, String)], name: &str| {
        member
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let (refused, kept): (Vec<_>, Vec<_>) = members
        .into_values()
        .enumerate()
        .partition(|(i, member)| refuse(*i, &field(member, "Message")));
    let refused: Vec<_> = refused.into_iter().map(|(_, m)| m).collect();
    let kept: Vec<_> = kept.into_iter().map(|(_, m)| m).collect();
    let mut successful = String::new();
    if !kept.is_empty() {
        // The serializer is not Send: finish it before the next await.
        let form = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            for (key, value) in &others {
                form.append_pair(key, value);
            }
            for (i, member) in kept.iter().enumerate() {
                for (name, value) in member {
                    form.append_pair(&format!("{PREFIX}{}.{name}", i + 1), value);
                }
            }
            form.finish()
        };
        let ids: Vec<String> = kept
            .iter()
            .filter_map(|member| event_id(&field(member, "Message")))
            .collect();
        let forwarded = forward(upstream, parts, Bytes::from(form)).await?;
        if !forwarded.status().is_success() {
            return Ok(forwarded);
        }
        *delivered = ids;
        let bytes = forwarded.into_body().collect().await?.to_bytes();
        let xml = String::from_utf8_lossy(&bytes).into_owned();
        if let (Some(start), Some(end)) = (xml.find("<Successful>"), xml.find("</Successful>")) {
            successful = xml[start + "<Successful>".len()..end].to_owned();
        }
    }
    let failed: String = refused
        .iter()
        .map(|member| {
            format!(
                "<member><Id>{}</Id><Code>{code}</Code><Message>injected by the fault proxy</Message><SenderFault>{}</SenderFault></member>",
                field(member, "Id"),
                // The caller's fault for the codes SNS uses for a bad entry.
                code.starts_with("Invalid") || code.starts_with("Validation")
            )
        })
        .collect();
    let body = format!(
        "<PublishBatchResponse xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\"><PublishBatchResult><Successful>{successful}</Successful><Failed>{failed}</Failed></PublishBatchResult><ResponseMetadata><RequestId>fault-proxy</RequestId></ResponseMetadata></PublishBatchResponse>"
    );
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("text/xml"));
    Ok(response)
}
