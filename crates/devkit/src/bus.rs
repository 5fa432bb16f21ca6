//! A local EventBridge Custom Event Bus: the `eventbridgev2` API (Smithy
//! RPC v2 CBOR over HTTP, `POST /service/AWSEventsV2/operation/<name>`) on
//! 127.0.0.1, because no local server implements it (moto has none). The
//! functions reach it through the real `aws-sdk-eventbridgev2` client, with
//! `AWS_ENDPOINT_URL_EVENTBRIDGEV2` ([`ENDPOINT_ENV`]) pointing here: nothing
//! in them knows it is local.
//!
//! What it does, each rule from the source named in `bus/model.rs`:
//! - `CreateEventBus` (name, `StorageConfiguration.RetentionPeriodInDays`
//!   1–365, default 7), `DescribeEventBus`, `DeleteEventBus`;
//! - `CreateSubscriber`: a subscriber of type `FIFO` (or `UNORDERED`) whose
//!   target is an SQS queue on moto, starting at `LATEST`;
//! - `PutEvents`: the model's validation (1–100 entries, field lengths and
//!   patterns, 1 MB in all: a refused request publishes nothing);
//!   deduplication by `SystemMetadata.DeduplicationId` within 5 minutes,
//!   scoped by account and event group (`SuccessCode` `DEDUPLICATED`);
//!   accepted events are delivered to each subscriber in publish order, to
//!   an SQS FIFO queue with the event group as `MessageGroupId`.
//!
//! Where the pages are silent the stand-in is the stricter reading, and
//! refuses what it does not implement (filters, transformers, starting
//! from the past, content-based deduplication) with an
//! `InvalidInputException` naming it, so a test never relies on a rule it
//! only pretends to have:
//! - a `Detail` that is not JSON fails its entry with `MalformedDetail`
//!   (the classic bus's code; the Custom Event Bus pages name none);
//! - a deduplicated entry's result carries the first entry's `EventId`;
//! - accepted events are delivered after the answer, by one task, in
//!   publish order; [`LocalBus::settle`] waits until they are (a test's
//!   read of the subscriber queue follows it);
//! - an event a subscriber cannot deliver holds every later event of that
//!   subscriber (AWS holds its group only), tried again every 200 ms;
//! - an event without a group goes to a FIFO queue in the group
//!   [`UNGROUPED`];
//! - a delivery to a FIFO queue carries no `MessageDeduplicationId` (the
//!   pages do not say a subscriber sets one): the queue must have
//!   content-based deduplication, as `template.yaml`'s `ProjectorQueue`
//!   and the queues of [`create_custom_bus`] do, or SQS refuses it;
//! - the delivered message is the event as the classic bus delivers it
//!   (`version`, `id`, `detail-type`, `source`, `account`, `time`,
//!   `region`, `resources`, `detail`).

mod model;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ciborium::Value;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

pub use model::DEDUPLICATION_WINDOW;
use model::{Entry, Invalid};

/// The variable that points the `eventbridgev2` client at an endpoint.
pub const ENDPOINT_ENV: &str = "AWS_ENDPOINT_URL_EVENTBRIDGEV2";

/// The `MessageGroupId` of an event published without an event group.
pub const UNGROUPED: &str = "ungrouped";

/// What the bus has done, for tests and the benches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BusStats {
    /// `PutEvents` calls answered 200.
    pub put_events_calls: u64,
    /// `PutEvents` calls refused whole.
    pub refused_calls: u64,
    /// Entries accepted as new events.
    pub published: u64,
    /// Entries suppressed as repeats within the window.
    pub deduplicated: u64,
    /// Entries failed one by one (`MalformedDetail`).
    pub failed_entries: u64,
    /// Messages sent to subscriber queues.
    pub delivered: u64,
    /// Sends to a subscriber queue that failed (retried later).
    pub delivery_failures: u64,
}

/// A running local bus; stops when dropped.
pub struct LocalBus {
    endpoint: String,
    shared: Arc<Shared>,
    server: tokio::task::JoinHandle<()>,
    delivery: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for LocalBus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalBus")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Drop for LocalBus {
    fn drop(&mut self) {
        self.server.abort();
        self.delivery.abort();
    }
}

struct Shared {
    state: tokio::sync::Mutex<State>,
    sqs: aws_sdk_sqs::Client,
    account: String,
    region: String,
    /// Added to the bus's clock ([`LocalBus::advance`]).
    offset: StdMutex<Duration>,
    stats: StdMutex<BusStats>,
    /// Rung when events are accepted: the delivery task's cue.
    wake: tokio::sync::Notify,
    /// One delivery pass at a time (the task's or [`LocalBus::settle`]'s).
    delivering: tokio::sync::Mutex<()>,
}

#[derive(Default)]
struct State {
    /// By ARN.
    buses: HashMap<String, Bus>,
    /// (group, deduplication id) → the first event's id and when.
    seen: HashMap<(String, String), (String, Instant)>,
    /// Per group, the last sequence number.
    sequences: HashMap<String, u64>,
}

struct Bus {
    name: String,
    retention_days: i64,
    created: std::time::SystemTime,
    subscribers: Vec<Subscriber>,
}

struct Subscriber {
    name: String,
    fifo: bool,
    queue_url: String,
    /// Events accepted but not yet delivered, in publish order.
    backlog: Arc<StdMutex<VecDeque<Delivery>>>,
}

#[derive(Clone)]
struct Delivery {
    group: Option<String>,
    body: String,
}

impl LocalBus {
    /// Serves the bus on a free loopback port, delivering to SQS through
    /// `sdk` (moto's endpoint), in the account and region of `sdk`'s local
    /// stack.
    pub async fn start(sdk: &aws_config::SdkConfig) -> std::io::Result<Self> {
        Self::start_on(sdk, 0).await
    }

    /// The same on `port` (0: a free one).
    pub async fn start_on(sdk: &aws_config::SdkConfig, port: u16) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared {
            state: tokio::sync::Mutex::new(State::default()),
            sqs: aws_sdk_sqs::Client::new(sdk),
            account: crate::template::LOCAL_ACCOUNT.to_owned(),
            region: sdk
                .region()
                .map_or(crate::REGION, |r| r.as_ref())
                .to_owned(),
            offset: StdMutex::new(Duration::ZERO),
            stats: StdMutex::new(BusStats::default()),
            wake: tokio::sync::Notify::new(),
            delivering: tokio::sync::Mutex::new(()),
        });
        let server = tokio::spawn(serve(listener, shared.clone()));
        let delivery = tokio::spawn(deliver_in_background(shared.clone()));
        Ok(Self {
            endpoint,
            shared,
            server,
            delivery,
        })
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The variable a function needs to reach this bus.
    pub fn endpoint_env(&self) -> (String, String) {
        (ENDPOINT_ENV.to_owned(), self.endpoint.clone())
    }

    /// A client of this bus: `sdk`'s settings, this endpoint.
    pub fn client(&self, sdk: &aws_config::SdkConfig) -> aws_sdk_eventbridgev2::Client {
        aws_sdk_eventbridgev2::Client::from_conf(
            aws_sdk_eventbridgev2::config::Builder::from(sdk)
                .endpoint_url(&self.endpoint)
                .build(),
        )
    }

    /// Moves the bus's clock forward (the deduplication window's end).
    pub fn advance(&self, by: Duration) {
        *lock(&self.shared.offset) += by;
    }

    /// What it has done so far.
    pub fn stats(&self) -> BusStats {
        lock(&self.shared.stats).clone()
    }

    /// Waits until every event accepted so far is delivered to its
    /// subscribers (as a consumer waits for its queue), trying a failed
    /// send again; `false` when some is still undelivered.
    pub async fn settle(&self) -> bool {
        deliver(&self.shared).await
    }
}

fn lock<T>(m: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    fn now(&self) -> Instant {
        Instant::now() + *lock(&self.offset)
    }
    fn count(&self, f: impl FnOnce(&mut BusStats)) {
        f(&mut lock(&self.stats));
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((stream, _)) = listener.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| handle(shared.clone(), request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// A failed call: its HTTP status and the model's error shape.
#[derive(Debug)]
struct Failure {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl Failure {
    fn invalid(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            code: "InvalidInputException",
            message: message.into(),
        }
    }
    fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            code: "ResourceNotFoundException",
            message: message.into(),
        }
    }
    fn exists(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::CONFLICT,
            code: "ResourceAlreadyExistsException",
            message: message.into(),
        }
    }
}

impl From<Invalid> for Failure {
    fn from(e: Invalid) -> Self {
        Self::invalid(e.0)
    }
}

const PREFIX: &str = "/service/AWSEventsV2/operation/";

async fn handle(
    shared: Arc<Shared>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let (parts, body) = request.into_parts();
    let answer = match body.collect().await {
        Ok(body) => call(&shared, &parts, &body.to_bytes()).await,
        Err(e) => Err(Failure::invalid(format!("body unreadable: {e}"))),
    };
    let (status, value) = match answer {
        Ok(value) => (StatusCode::OK, value),
        Err(f) => (
            f.status,
            map(vec![
                ("__type", text(f.code)),
                ("message", text(&f.message)),
            ]),
        ),
    };
    let mut bytes = Vec::new();
    // Writing a `Value` into a Vec cannot fail.
    let _ = ciborium::ser::into_writer(&value, &mut bytes);
    let mut response = Response::new(Full::new(Bytes::from(bytes)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/cbor"),
    );
    headers.insert(
        "smithy-protocol",
        hyper::header::HeaderValue::from_static("rpc-v2-cbor"),
    );
    Ok(response)
}

async fn call(
    shared: &Shared,
    parts: &hyper::http::request::Parts,
    body: &[u8],
) -> Result<Value, Failure> {
    if parts.method != hyper::Method::POST {
        return Err(Failure::invalid("the RPC v2 CBOR protocol is POST only"));
    }
    if parts.headers.get("smithy-protocol").map(|v| v.as_bytes()) != Some(b"rpc-v2-cbor") {
        return Err(Failure::invalid("missing `smithy-protocol: rpc-v2-cbor`"));
    }
    let operation = parts.uri.path().strip_prefix(PREFIX).unwrap_or("");
    let input: Value = if body.is_empty() {
        Value::Map(Vec::new())
    } else {
        ciborium::de::from_reader(body)
            .map_err(|e| Failure::invalid(format!("the body is not CBOR: {e}")))?
    };
    let input = Input(match input {
        Value::Map(m) => m,
        _ => return Err(Failure::invalid("the body is not a CBOR map")),
    });
    let mut state = shared.state.lock().await;
    match operation {
        "CreateEventBus" => create_event_bus(shared, &mut state, &input),
        "DescribeEventBus" => describe_event_bus(&state, &input),
        "DeleteEventBus" => {
            let arn = input.bus_arn()?;
            state
                .buses
                .remove(&arn)
                .map(|_| map(vec![]))
                .ok_or_else(|| Failure::not_found(format!("event bus {arn} not found")))
        }
        "CreateSubscriber" => create_subscriber(shared, &mut state, &input).await,
        "PutEvents" => {
            let result = put_events(shared, &mut state, &input).await;
            shared.count(|s| match &result {
                Ok(_) => s.put_events_calls += 1,
                Err(_) => s.refused_calls += 1,
            });
            result
        }
        other => Err(Failure {
            status: StatusCode::NOT_FOUND,
            code: "UnknownOperationException",
            message: format!("the local bus does not implement {other:?}"),
        }),
    }
}

/// A decoded request's members.
struct Input(Vec<(Value, Value)>);

impl Input {
    fn get(&self, key: &str) -> Option<&Value> {
        member(&self.0, key)
    }
    fn string(&self, key: &str) -> Result<Option<String>, Failure> {
        string(self.get(key), key)
    }
    fn required(&self, key: &str) -> Result<String, Failure> {
        self.string(key)?
            .ok_or_else(|| Failure::invalid(format!("{key} is required")))
    }
    fn bus_arn(&self) -> Result<String, Failure> {
        let arn = self.required("EventBusArn")?;
        model::check_bus_arn(&arn)?;
        Ok(arn)
    }
    /// Refuses members the local bus does not implement.
    fn refuse(&self, unsupported: &[&str]) -> Result<(), Failure> {
        match unsupported.iter().find(|k| self.get(k).is_some()) {
            Some(k) => Err(Failure::invalid(format!(
                "{k} is not implemented by the local bus"
            ))),
            None => Ok(()),
        }
    }
}

fn member<'a>(members: &'a [(Value, Value)], key: &str) -> Option<&'a Value> {
    members
        .iter()
        .find(|(k, _)| k.as_text() == Some(key))
        .map(|(_, v)| v)
        .filter(|v| !v.is_null())
}

fn string(value: Option<&Value>, key: &str) -> Result<Option<String>, Failure> {
    match value {
        None => Ok(None),
        Some(Value::Text(s)) => Ok(Some(s.clone())),
        Some(_) => Err(Failure::invalid(format!("{key} is not a string"))),
    }
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

fn map(members: Vec<(&str, Value)>) -> Value {
    Value::Map(members.into_iter().map(|(k, v)| (text(k), v)).collect())
}

fn timestamp(at: std::time::SystemTime) -> Value {
    let secs = at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    Value::Tag(1, Box::new(Value::Float(secs)))
}

/// A 25-character lower-case id, as the ARNs of the model end.
fn resource_id() -> String {
    ulid::Ulid::new().to_string().to_ascii_lowercase()[1..].to_owned()
}

fn bus_description(arn: &str, bus: &Bus) -> Value {
    map(vec![
        ("EventBusArn", text(arn)),
        ("Name", text(&bus.name)),
        ("State", text("ACTIVE")),
        (
            "StorageConfiguration",
            map(vec![(
                "RetentionPeriodInDays",
                Value::Integer(bus.retention_days.into()),
            )]),
        ),
        ("CreationTime", timestamp(bus.created)),
        ("LastModifiedTime", timestamp(bus.created)),
    ])
}

fn create_event_bus(shared: &Shared, state: &mut State, input: &Input) -> Result<Value, Failure> {
    input.refuse(&["EncryptionConfiguration"])?;
    let name = input.required("Name")?;
    model::check_name("Name", &name)?;
    let retention_days = match input
        .get("StorageConfiguration")
        .and_then(|v| v.as_map())
        .and_then(|m| member(m, "RetentionPeriodInDays"))
    {
        None => 7,
        Some(v) => v
            .as_integer()
            .and_then(|i| i64::try_from(i).ok())
            .filter(|d| model::RETENTION_DAYS.contains(d))
            .ok_or_else(|| Failure::invalid("RetentionPeriodInDays must be 1 to 365"))?,
    };
    if state.buses.values().any(|b| b.name == name) {
        return Err(Failure::exists(format!("event bus {name} already exists")));
    }
    let arn = format!(
        "arn:aws:events:{}:{}:event-busv2/{name}/{}",
        shared.region,
        shared.account,
        resource_id()
    );
    let bus = Bus {
        name,
        retention_days,
        created: std::time::SystemTime::now(),
        subscribers: Vec::new(),
    };
    let answer = bus_description(&arn, &bus);
    state.buses.insert(arn, bus);
    Ok(answer)
}

fn describe_event_bus(state: &State, input: &Input) -> Result<Value, Failure> {
    let arn = input.bus_arn()?;
    let bus = state
        .buses
        .get(&arn)
        .ok_or_else(|| Failure::not_found(format!("event bus {arn} not found")))?;
    Ok(bus_description(&arn, bus))
}

async fn create_subscriber(
    shared: &Shared,
    state: &mut State,
    input: &Input,
) -> Result<Value, Failure> {
    input.refuse(&[
        "FilterConfiguration",
        "PointInTimeConfiguration",
        "BatchConfiguration",
        "Transformer",
        "OnFailureConfiguration",
    ])?;
    let name = input.required("Name")?;
    model::check_name("Name", &name)?;
    let arn = input.bus_arn()?;
    let fifo = match input.string("Type")?.as_deref() {
        None | Some("UNORDERED") => false,
        Some("FIFO") => true,
        Some(other) => {
            return Err(Failure::invalid(format!(
                "Type {other:?}: FIFO or UNORDERED"
            )))
        }
    };
    match input.string("StartingPosition")?.as_deref() {
        None | Some("LATEST") => {}
        Some(other) => {
            return Err(Failure::invalid(format!(
                "StartingPosition {other:?} is not implemented by the local bus"
            )))
        }
    }
    let invoke = input
        .get("InvokeConfiguration")
        .and_then(Value::as_map)
        .ok_or_else(|| Failure::invalid("InvokeConfiguration is required"))?;
    let target = string(member(invoke, "TargetArn"), "TargetArn")?
        .ok_or_else(|| Failure::invalid("TargetArn is required"))?;
    string(member(invoke, "RoleArn"), "RoleArn")?
        .ok_or_else(|| Failure::invalid("RoleArn is required"))?;
    // arn:aws:sqs:<region>:<account>:<queue>
    let queue = match target.split(':').collect::<Vec<_>>()[..] {
        ["arn", _, "sqs", _, account, queue] => (account.to_owned(), queue.to_owned()),
        _ => {
            return Err(Failure::invalid(format!(
                "TargetArn {target}: the local bus delivers to SQS queues only"
            )))
        }
    };
    if fifo != queue.1.ends_with(".fifo") {
        return Err(Failure::invalid(
            "a FIFO subscriber needs a FIFO queue, and an UNORDERED one a standard queue",
        ));
    }
    let bus = state
        .buses
        .get_mut(&arn)
        .ok_or_else(|| Failure::not_found(format!("event bus {arn} not found")))?;
    if bus.subscribers.iter().any(|s| s.name == name) {
        return Err(Failure::exists(format!("subscriber {name} already exists")));
    }
    let queue_url = shared
        .sqs
        .get_queue_url()
        .queue_name(&queue.1)
        .queue_owner_aws_account_id(&queue.0)
        .send()
        .await
        .ok()
        .and_then(|o| o.queue_url)
        .ok_or_else(|| Failure::not_found(format!("queue {target} not found")))?;
    bus.subscribers.push(Subscriber {
        name: name.clone(),
        fifo,
        queue_url,
        backlog: Arc::default(),
    });
    let subscriber_arn = format!(
        "arn:aws:events:{}:{}:subscriber/{name}/{}",
        shared.region,
        shared.account,
        resource_id()
    );
    Ok(map(vec![
        ("SubscriberArn", text(&subscriber_arn)),
        ("Name", text(&name)),
        ("EventBusArn", text(&arn)),
        ("Type", text(if fifo { "FIFO" } else { "UNORDERED" })),
        ("StartingPosition", text("LATEST")),
        ("State", text("RUNNING")),
        ("CreationTime", timestamp(std::time::SystemTime::now())),
    ]))
}

fn entries(input: &Input) -> Result<Vec<Entry>, Failure> {
    let list = match input.get("Entries") {
        Some(Value::Array(list)) => list,
        _ => return Err(Failure::invalid("Entries is required")),
    };
    list.iter()
        .map(|value| {
            let m = value
                .as_map()
                .ok_or_else(|| Failure::invalid("an entry is not a structure"))?;
            let get = |k: &str| string(member(m, k), k);
            let system = member(m, "SystemMetadata").and_then(Value::as_map);
            let system_get = |k: &str| string(system.and_then(|s| member(s, k)), k);
            let resources = match member(m, "Resources") {
                None => Vec::new(),
                Some(Value::Array(r)) => r
                    .iter()
                    .map(|v| string(Some(v), "Resources").map(Option::unwrap_or_default))
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(Failure::invalid("Resources is not a list")),
            };
            Ok(Entry {
                source: get("Source")?.ok_or_else(|| Failure::invalid("Source is required"))?,
                detail_type: get("DetailType")?
                    .ok_or_else(|| Failure::invalid("DetailType is required"))?,
                detail: get("Detail")?,
                resources,
                time: member(m, "Time").is_some(),
                group: system_get("EventGroupId")?,
                deduplication_id: system_get("DeduplicationId")?,
            })
        })
        .collect()
}

async fn put_events(shared: &Shared, state: &mut State, input: &Input) -> Result<Value, Failure> {
    input.refuse(&["DeduplicationConfiguration"])?;
    let arn = input.bus_arn()?;
    let entries = entries(input)?;
    model::check_put_events(&entries)?;
    if !state.buses.contains_key(&arn) {
        return Err(Failure::not_found(format!("event bus {arn} not found")));
    }
    let now = shared.now();
    state
        .seen
        .retain(|_, (_, at)| now.duration_since(*at) < model::DEDUPLICATION_WINDOW);
    let mut results = Vec::with_capacity(entries.len());
    let mut failed = 0i64;
    let mut accepted = Vec::new();
    for entry in &entries {
        let detail: serde_json::Value = match entry.detail.as_deref() {
            None => serde_json::json!({}),
            Some(d) => match serde_json::from_str(d) {
                Ok(v) => v,
                Err(_) => {
                    failed += 1;
                    shared.count(|s| s.failed_entries += 1);
                    results.push(map(vec![
                        ("ErrorCode", text("MalformedDetail")),
                        ("ErrorMessage", text("Detail is not valid JSON")),
                    ]));
                    continue;
                }
            },
        };
        let key = model::deduplication_key(entry);
        if let Some((first, _)) = key.as_ref().and_then(|k| state.seen.get(k)) {
            shared.count(|s| s.deduplicated += 1);
            results.push(map(vec![
                ("EventId", text(first)),
                ("SuccessCode", text("DEDUPLICATED")),
            ]));
            continue;
        }
        let event_id = ulid::Ulid::new().to_string();
        let group_key = entry.group.clone().unwrap_or_default();
        let sequence = state.sequences.entry(group_key).or_default();
        *sequence += 1;
        let sequence = *sequence;
        if let Some(key) = key {
            state.seen.insert(key, (event_id.clone(), now));
        }
        shared.count(|s| s.published += 1);
        let body = serde_json::json!({
            "version": "0",
            "id": event_id,
            "detail-type": entry.detail_type,
            "source": entry.source,
            "account": shared.account,
            "time": time::OffsetDateTime::now_utc()
                .replace_nanosecond(0)
                .ok()
                .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok()),
            "region": shared.region,
            "resources": entry.resources,
            "detail": detail,
        });
        accepted.push(Delivery {
            group: entry.group.clone(),
            body: body.to_string(),
        });
        results.push(map(vec![
            ("EventId", text(&event_id)),
            ("SequenceNumber", text(&sequence.to_string())),
            ("SuccessCode", text("PUBLISHED")),
        ]));
    }
    if let Some(bus) = state.buses.get(&arn) {
        for subscriber in &bus.subscribers {
            lock(&subscriber.backlog).extend(accepted.iter().cloned());
        }
    }
    // Delivered after the answer, as the service does.
    shared.wake.notify_one();
    Ok(map(vec![
        ("FailedEntryCount", Value::Integer(failed.into())),
        ("Entries", Value::Array(results)),
    ]))
}

/// The delivery task: a pass whenever events are accepted, again every
/// 200 ms while a send fails.
async fn deliver_in_background(shared: Arc<Shared>) {
    loop {
        shared.wake.notified().await;
        while !deliver(&shared).await {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// One delivery pass: each subscriber's backlog sent in order, a
/// subscriber stopped at its first failed send (the event kept); `true`
/// when every backlog is empty.
async fn deliver(shared: &Shared) -> bool {
    let _one = shared.delivering.lock().await;
    let subscribers: Vec<_> = {
        let state = shared.state.lock().await;
        state
            .buses
            .values()
            .flat_map(|bus| &bus.subscribers)
            .map(|s| {
                (
                    s.name.clone(),
                    s.fifo,
                    s.queue_url.clone(),
                    s.backlog.clone(),
                )
            })
            .collect()
    };
    let mut all = true;
    for (name, fifo, queue_url, backlog) in subscribers {
        loop {
            let Some(next) = lock(&backlog).front().cloned() else {
                break;
            };
            let mut send = shared
                .sqs
                .send_message()
                .queue_url(&queue_url)
                .message_body(&next.body);
            // No MessageDeduplicationId: the pages do not say a subscriber
            // sets one, so the queue must derive it (content-based
            // deduplication, as template.yaml's ProjectorQueue has it); a
            // FIFO queue without it refuses the send, as SQS does.
            if fifo {
                send = send.message_group_id(next.group.as_deref().unwrap_or(UNGROUPED));
            }
            match send.send().await {
                Ok(_) => {
                    shared.count(|s| s.delivered += 1);
                    lock(&backlog).pop_front();
                }
                Err(e) => {
                    shared.count(|s| s.delivery_failures += 1);
                    tracing::warn!(
                        subscriber = %name,
                        error = %outbox_runtime::error_line("SendMessage", &e),
                        "local bus: delivery failed, kept"
                    );
                    all = false;
                    break;
                }
            }
        }
    }
    all
}

/// Creates a Custom Event Bus through `events` (retention
/// `retention_days`), an SQS FIFO queue `<name>-subscriber.fifo` through
/// `sdk`, and a FIFO subscriber from one to the other: the example app's
/// subscriber. Returns the bus ARN and the queue.
pub async fn create_custom_bus(
    sdk: &aws_config::SdkConfig,
    events: &aws_sdk_eventbridgev2::Client,
    name: &str,
    retention_days: i32,
) -> Result<(String, crate::Subscriber), crate::StackError> {
    let fail = |what: &str| {
        let what = what.to_owned();
        move |message: String| crate::StackError { what, message }
    };
    let bus = events
        .create_event_bus()
        .name(name)
        .storage_configuration(
            aws_sdk_eventbridgev2::types::StorageConfiguration::builder()
                .retention_period_in_days(retention_days)
                .build(),
        )
        .send()
        .await
        .map_err(|e| fail(name)(outbox_runtime::error_line("CreateEventBus", &e)))?;
    let bus_arn = bus
        .event_bus_arn
        .ok_or_else(|| fail(name)("no bus ARN".into()))?;
    let queue =
        crate::stack::create_bus_fifo_queue(sdk, &format!("{name}-subscriber.fifo"), &[]).await?;
    subscribe_fifo(
        events,
        &bus_arn,
        &format!("{name}-subscriber"),
        &queue.queue_arn,
    )
    .await?;
    Ok((bus_arn, queue))
}

/// A FIFO subscriber `name` of the bus `bus_arn`, delivering to the SQS
/// FIFO queue `queue_arn` from now on (`LATEST`).
pub(crate) async fn subscribe_fifo(
    events: &aws_sdk_eventbridgev2::Client,
    bus_arn: &str,
    name: &str,
    queue_arn: &str,
) -> Result<(), crate::StackError> {
    let fail = |message: String| crate::StackError {
        what: format!("subscriber {name}"),
        message,
    };
    let invoke = aws_sdk_eventbridgev2::types::InvokeConfiguration::builder()
        .role_arn(format!(
            "arn:aws:iam::{}:role/{name}",
            crate::template::LOCAL_ACCOUNT
        ))
        .target_arn(queue_arn)
        .build()
        .map_err(|e| fail(e.to_string()))?;
    events
        .create_subscriber()
        .name(name)
        .event_bus_arn(bus_arn)
        .r#type(aws_sdk_eventbridgev2::types::OrderingType::Fifo)
        .invoke_configuration(invoke)
        .send()
        .await
        .map_err(|e| fail(outbox_runtime::error_line("CreateSubscriber", &e)))?;
    Ok(())
}

#[cfg(test)]
mod tests;
