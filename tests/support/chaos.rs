//! The chaos run: the real `writer`, `publisher` and `sweeper` binaries
//! under a local Lambda Runtime API ([`crate::lambda`]), the mapping
//! emulator with the template's settings, and each function's AWS calls
//! through its own fault proxy ([`crate::proxy`]) in front of moto.
//!
//! # Layout
//! - [`ChaosConfig`]: seed, size, sink and fault rate of one run.
//! - [`run`]: provisions a fresh stack, creates and pays orders
//!   concurrently through the writer (faults and writer crashes on its
//!   transactions; clients retry with their `Idempotency-Key`), drains the
//!   stream through the publisher (wire faults, a sink outage, `SIGKILL`s
//!   around the sink call and the deletes), runs the scheduled sweeper and
//!   feeds it the OnFailure queue (killed mid-sweep too), then heals every
//!   fault, drains again and sweeps until nothing is pending.
//! - [`Verdict`]: computed from the subscriber queue and the table, never
//!   from the functions' logs, with every duplicate attributed to the fault
//!   that caused it ([`Verdict::failures`] lists what breaks a promise).
//!
//! Every fault decision comes from one seeded generator per proxy, in call
//! order: the same seed gives the same faults at the same call positions.
//! The writers run concurrently, so the stream's order (which event sits
//! where in a batch) is up to the scheduler.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use aws_lambda_events::event::streams::DynamoDbEventResponse;
use aws_sdk_dynamodb::types::AttributeValue;
use devkit::Invoker;
use outbox_core::keys::attr as keys;
use serde_json::{json, Value};

use crate::lambda::{binary, FunctionError, FunctionSpec, LambdaFunction};
use crate::proxy::{Call, Fault, FaultProxy};
use crate::Stack;

/// The sink a run publishes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkKind {
    /// EventBridge bus → rule → SQS queue.
    EventBridge,
    /// SNS FIFO topic → SQS FIFO queue (order per aggregate is checked).
    SnsFifo,
}

impl SinkKind {
    pub fn name(self) -> &'static str {
        match self {
            Self::EventBridge => "eventbridge",
            Self::SnsFifo => "sns-fifo",
        }
    }
}

/// One run.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    pub seed: u64,
    pub orders: usize,
    pub sink: SinkKind,
    /// Undecodable outbox items written straight to the table: each must
    /// end dead-lettered with a reason, and nothing else may.
    pub poison: usize,
    /// Probability that a publisher or sweeper call meets a fault.
    pub fault_rate: f64,
    /// Probability that a writer transaction meets a fault.
    pub writer_fault_rate: f64,
    /// Concurrent writer sandboxes.
    pub writers: usize,
    /// Publisher invocations the sink outage lasts (kept below the
    /// mapping's `MaximumRetryAttempts`).
    pub outage_invocations: u64,
    /// Calls that hang until the deadline (each costs a timeout).
    pub hangs: u32,
    /// The functions' timeout (the template's are longer; a hang costs this).
    pub timeout: Duration,
    /// Where the functions' logs go.
    pub log_dir: std::path::PathBuf,
}

impl ChaosConfig {
    /// The configuration `make test` runs: small, every fault kind.
    pub fn small(seed: u64, sink: SinkKind) -> Self {
        Self {
            seed,
            orders: 40,
            sink,
            poison: 2,
            fault_rate: 0.25,
            writer_fault_rate: 0.15,
            writers: 3,
            outage_invocations: 4,
            hangs: 1,
            timeout: Duration::from_secs(6),
            log_dir: crate::root().join("target").join("chaos"),
        }
    }
}

/// A fault kind, as the tables name it.
fn label(function: &str, operation: &str, fault: &Fault) -> String {
    let sink = matches!(operation, "PutEvents" | "PublishBatch");
    let what = match fault {
        Fault::Throttle => "throttled",
        Fault::ServerError => "5xx",
        Fault::Reset => "connection reset",
        Fault::Hang => "hangs past the deadline",
        Fault::FailEntries(_) => "some entries refused in a 200",
        Fault::RefuseEntries { .. } => "outage (every entry refused)",
        Fault::Crash { forward: false } => "SIGKILL before the call",
        Fault::Crash { forward: true } => "SIGKILL after the call, before its answer",
        Fault::Pass => "none",
    };
    let call = match (sink, operation) {
        (true, _) => "sink call",
        (_, "BatchWriteItem") => "deletes",
        (_, "UpdateItem") => "dead-letter/backoff write",
        (_, "Query") => "sweep read",
        (_, "TransactWriteItems") => "transaction",
        (_, other) => other,
    };
    format!("{function}: {call} {what}")
}

/// How surely a fault makes an invocation's work come back: a kill or a
/// timeout always, refused entries for what follows them, a fault repeated
/// over the SDK's retries (a burst) when it outlasts them, a single
/// throttle or reset hardly ever (the SDK retries it).
fn severity(fault: &Fault) -> u8 {
    match fault {
        Fault::Crash { .. } => 5,
        Fault::Hang => 4,
        Fault::RefuseEntries { .. } | Fault::FailEntries(_) => 3,
        Fault::ServerError => 2,
        Fault::Throttle | Fault::Reset => 1,
        Fault::Pass => 0,
    }
}

/// The fault schedule of one proxy: a seeded generator, per-call odds, and
/// bursts (a fault repeated over the SDK's retries, so that it is seen).
struct Schedule {
    rng: fastrand::Rng,
    rate: f64,
    /// Faults applied first, one every other call of their operation
    /// (`"sink"` for the sink calls), so that a short run meets every kind.
    script: HashMap<&'static str, std::collections::VecDeque<Fault>>,
    calls: HashMap<String, u32>,
    /// (operation, fault, calls left).
    burst: Option<(String, Fault, u32)>,
    /// Tag range of the sink outage.
    outage: Option<(u64, u64)>,
    hangs: u32,
}

impl Schedule {
    fn choose_publishing(&mut self, operation: &str, tag: u64, sweeper: bool) -> Option<Fault> {
        let sink = matches!(operation, "PutEvents" | "PublishBatch");
        if sink {
            if let Some((from, to)) = self.outage {
                if (from..to).contains(&tag) {
                    return Some(Fault::refuse_all("ServiceUnavailable"));
                }
            }
        }
        let key = if sink { "sink" } else { operation };
        if let Some(fault) = self.planned(operation, key) {
            return Some(fault);
        }
        if !self.rng.f64().lt(&self.rate) {
            return None;
        }
        let fault = match operation {
            "PutEvents" | "PublishBatch" => match self.rng.u32(0..7) {
                0 => Fault::Throttle,
                1 => self.burst(operation, Fault::ServerError),
                2 => Fault::Reset,
                3 => {
                    let n = self.rng.usize(1..4);
                    Fault::FailEntries((0..n).map(|_| self.rng.usize(0..10)).collect())
                }
                4 => Fault::Crash { forward: false },
                5 => Fault::Crash { forward: true },
                _ if self.hangs > 0 => {
                    self.hangs -= 1;
                    Fault::Hang
                }
                _ => Fault::Throttle,
            },
            "BatchWriteItem" => match self.rng.u32(0..4) {
                0 => self.burst(operation, Fault::ServerError),
                1 => self.burst(operation, Fault::Throttle),
                2 => Fault::Crash { forward: false },
                _ => Fault::Crash { forward: true },
            },
            "UpdateItem" => self.burst(operation, Fault::ServerError),
            "Query" if sweeper => match self.rng.u32(0..3) {
                0 => Fault::Throttle,
                _ => Fault::Crash { forward: false },
            },
            _ => return None,
        };
        Some(fault)
    }

    fn choose_writer(&mut self, operation: &str) -> Option<Fault> {
        if operation != "TransactWriteItems" {
            return None;
        }
        if let Some(fault) = self.planned(operation, operation) {
            return Some(fault);
        }
        if !self.rng.f64().lt(&self.rate) {
            return None;
        }
        Some(match self.rng.u32(0..4) {
            0 => self.burst(operation, Fault::Throttle),
            1 => self.burst(operation, Fault::ServerError),
            // Committed, and the client never hears of it: the retry with
            // the same Idempotency-Key must replay, not write twice.
            2 => Fault::Crash { forward: true },
            _ => Fault::Crash { forward: false },
        })
    }

    /// The rest of a burst, or the next scripted fault (every other call).
    fn planned(&mut self, operation: &str, key: &str) -> Option<Fault> {
        if let Some((op, fault, left)) = &mut self.burst {
            if op == operation && *left > 0 {
                *left -= 1;
                return Some(fault.clone());
            }
        }
        let n = {
            let n = self.calls.entry(operation.to_owned()).or_default();
            *n += 1;
            *n
        };
        if n % 2 == 0 {
            if let Some(fault) = self.script.get_mut(key).and_then(|s| s.pop_front()) {
                return Some(match fault {
                    Fault::ServerError | Fault::Throttle => self.burst(operation, fault),
                    other => other,
                });
            }
        }
        None
    }

    fn new(seed: u64, rate: f64) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
            rate,
            script: HashMap::new(),
            calls: HashMap::new(),
            burst: None,
            outage: None,
            hangs: 0,
        }
    }

    /// A writer's transactions: committed then killed, killed before,
    /// throttled, 5xx.
    fn scripted_writer(mut self) -> Self {
        self.script.insert(
            "TransactWriteItems",
            [
                Fault::Crash { forward: true },
                Fault::Crash { forward: false },
                Fault::Throttle,
                Fault::ServerError,
            ]
            .into(),
        );
        self
    }

    /// Every fault kind once, early.
    fn scripted(mut self, sweeper: bool) -> Self {
        let crash = |forward| Fault::Crash { forward };
        if sweeper {
            self.script.insert("Query", [crash(false)].into());
            self.script.insert("sink", [crash(true)].into());
        } else {
            self.script.insert(
                "sink",
                [
                    Fault::FailEntries(vec![0, 2]),
                    crash(false),
                    Fault::Hang,
                    crash(true),
                    Fault::ServerError,
                    Fault::Reset,
                    Fault::Throttle,
                ]
                .into(),
            );
            self.script.insert(
                "BatchWriteItem",
                [crash(false), Fault::ServerError, crash(true)].into(),
            );
            self.script
                .insert("UpdateItem", [Fault::ServerError].into());
        }
        self
    }

    /// The fault now and for the SDK's two retries of the same call.
    fn burst(&mut self, operation: &str, fault: Fault) -> Fault {
        self.burst = Some((operation.to_owned(), fault.clone(), 2));
        fault
    }
}

/// A function behind its proxy, invoked one call at a time, each invocation
/// tagged on the proxy so that the journal says which invocation made a call.
struct Tagged {
    function: Arc<LambdaFunction>,
    proxy: Arc<FaultProxy>,
    next_tag: AtomicU64,
    /// Invocations that ended in a function error (tag → error).
    errors: Mutex<BTreeMap<u64, FunctionError>>,
}

impl Tagged {
    fn new(function: LambdaFunction, proxy: Arc<FaultProxy>) -> Self {
        let function = Arc::new(function);
        let killer = function.killer();
        proxy.set_crash_hook(Arc::new(move || killer.kill()));
        Self {
            function,
            proxy,
            next_tag: AtomicU64::new(1),
            errors: Mutex::default(),
        }
    }

    fn tag(&self) -> u64 {
        self.next_tag.load(Ordering::SeqCst)
    }

    async fn call(&self, payload: &[u8]) -> Result<Vec<u8>, FunctionError> {
        let tag = self.next_tag.fetch_add(1, Ordering::SeqCst);
        self.proxy.set_tag(tag);
        let outcome = self.function.invoke(payload).await;
        if let Err(e) = &outcome {
            self.errors.lock().unwrap().insert(tag, e.clone());
        }
        outcome
    }
}

impl Invoker for &Tagged {
    async fn invoke(&self, event: StreamEvent) -> Result<DynamoDbEventResponse, String> {
        let payload = serde_json::to_vec(&event).map_err(|e| e.to_string())?;
        let body = self.call(&payload).await.map_err(|e| e.to_string())?;
        serde_json::from_slice(&body).map_err(|e| format!("invalid response: {e}"))
    }
}

/// A fault that met an invocation, and how many events that invocation had
/// sent to the sink by then (the most it can duplicate).
#[derive(Debug, Clone, Default)]
pub struct FaultRow {
    pub injected: usize,
    pub exposed: usize,
    pub duplicates: usize,
}

/// What a run shows.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    pub seed: u64,
    pub sink: &'static str,
    pub orders: usize,
    pub committed: usize,
    pub delivered_distinct: usize,
    pub deliveries: usize,
    pub lost: usize,
    pub ghosts: usize,
    /// Events delivered under two different `eventId`s.
    pub identity_changes: usize,
    pub duplicates: usize,
    pub unexplained: usize,
    pub left_pending: usize,
    pub dead_letters: usize,
    pub dead_letters_without_reason: usize,
    /// Dead letters `outboxctl dead-letters list` does not show.
    pub dead_letters_unlisted: usize,
    pub poison: usize,
    /// Per aggregate, a first delivery of a version below one already
    /// delivered (FIFO sink only).
    pub inversions: usize,
    /// From the end of the sink outage to the last delivery of an event
    /// created before it.
    pub recovery: Option<Duration>,
    pub writer_requests: usize,
    /// Creates (201) and payments (200) the API acknowledged that the table
    /// does not hold.
    pub unacknowledged_writes: usize,
    pub writer_retries: usize,
    pub publisher_invocations: u64,
    pub publisher_errors: usize,
    pub sweeper_invocations: u64,
    pub sweeper_errors: usize,
    pub cold_starts: u64,
    pub on_failure_messages: usize,
    pub faults: BTreeMap<String, FaultRow>,
    /// (phase, time): the writes, the drain under faults, the final sweep.
    pub phases: Vec<(&'static str, Duration)>,
    pub elapsed: Duration,
    /// A few ghosts, losses and unexplained duplicates, for the diagnosis.
    pub examples: Vec<String>,
}

impl Verdict {
    /// The broken promises, empty when the run holds.
    pub fn failures(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                out.push(what);
            }
        };
        check(self.lost == 0, format!("{} events lost", self.lost));
        check(
            self.unacknowledged_writes == 0,
            format!(
                "{} acknowledged writes missing from the table",
                self.unacknowledged_writes
            ),
        );
        check(self.ghosts == 0, format!("{} ghost events", self.ghosts));
        check(
            self.identity_changes == 0,
            format!("{} events changed eventId", self.identity_changes),
        );
        check(
            self.unexplained == 0,
            format!("{} unexplained duplicates", self.unexplained),
        );
        check(
            self.left_pending == 0,
            format!("{} outbox items still pending", self.left_pending),
        );
        check(
            self.dead_letters == self.poison,
            format!(
                "{} dead letters for {} poison items",
                self.dead_letters, self.poison
            ),
        );
        check(
            self.dead_letters_without_reason == 0,
            format!(
                "{} dead letters without a reason",
                self.dead_letters_without_reason
            ),
        );
        check(
            self.dead_letters_unlisted == 0,
            format!(
                "{} dead letters outboxctl does not list",
                self.dead_letters_unlisted
            ),
        );
        check(
            self.inversions == 0,
            format!("{} per-aggregate inversions", self.inversions),
        );
        check(self.committed > 0, "nothing committed".into());
        out
    }

    /// One row of the summary table.
    pub fn row(&self) -> String {
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} / {} | {:.0} s |",
            self.seed,
            self.sink,
            self.orders,
            self.committed,
            self.delivered_distinct,
            self.lost,
            self.duplicates,
            self.unexplained,
            self.left_pending,
            self.dead_letters,
            self.poison,
            if self.sink == "sns-fifo" {
                self.inversions.to_string()
            } else {
                "n/a".into()
            },
            self.recovery
                .map_or("n/a".into(), |d| format!("{:.1} s", d.as_secs_f64())),
            self.on_failure_messages,
            self.publisher_errors,
            self.publisher_invocations,
            self.elapsed.as_secs_f64(),
        )
    }

    pub const HEADER: &'static str = "| seed | sink | orders | events committed | delivered | lost | duplicates | unexplained | left pending | dead letters / poison | inversions | recovery | OnFailure | publisher errors / invocations | run |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

    /// The per-fault table.
    pub fn fault_table(&self) -> String {
        let mut out = String::new();
        let phases: Vec<String> = self
            .phases
            .iter()
            .map(|(name, d)| format!("{name} {:.0} s", d.as_secs_f64()))
            .collect();
        let _ = writeln!(
            out,
            "{} writer requests ({} retried), {} sweeper invocations ({} failed), {} cold starts; {}\n",
            self.writer_requests,
            self.writer_retries,
            self.sweeper_invocations,
            self.sweeper_errors,
            self.cold_starts,
            phases.join(", ")
        );
        out.push_str(
            "| fault | injected | events exposed (bound) | duplicates it caused |\n|---|---|---|---|\n",
        );
        for (kind, row) in &self.faults {
            let _ = writeln!(
                out,
                "| {kind} | {} | {} | {} |",
                row.injected, row.exposed, row.duplicates
            );
        }
        out
    }
}

fn api_event(template: &str, path: &str, key: &str, body: Option<String>) -> Vec<u8> {
    let mut event: Value = serde_json::from_str(&crate::sample(template)).unwrap_or_default();
    event["rawPath"] = json!(path);
    event["requestContext"]["http"]["path"] = json!(path);
    event["requestContext"]["requestId"] = json!(ulid::Ulid::new().to_string());
    event["headers"]["idempotency-key"] = json!(key);
    if let Some(id) = path.split('/').nth(2) {
        if path.ends_with("/payment") {
            event["pathParameters"] = json!({ "id": id });
        }
    }
    if let Some(body) = body {
        event["body"] = json!(body);
    }
    serde_json::to_vec(&event).unwrap_or_default()
}

/// Calls the writer until it answers with a final status (not 5xx, not a
/// function error), as an API client with an Idempotency-Key would.
async fn until_final(writer: &Tagged, payload: &[u8], retries: &AtomicU64) -> Option<(u16, Value)> {
    for attempt in 0..12u32 {
        if attempt > 0 {
            retries.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20 * u64::from(attempt))).await;
        }
        let Ok(body) = writer.call(payload).await else {
            continue;
        };
        let response: Value = serde_json::from_slice(&body).unwrap_or_default();
        let status = response["statusCode"].as_u64().unwrap_or(0) as u16;
        if status >= 500 || status == 429 || status == 0 {
            continue;
        }
        let body: Value = response["body"]
            .as_str()
            .and_then(|b| serde_json::from_str(b).ok())
            .unwrap_or_default();
        return Some((status, body));
    }
    None
}

/// Creates and pays `orders` orders through `writers`, concurrently.
async fn workload(config: &ChaosConfig, writers: &[Tagged]) -> (usize, usize, Vec<(String, u64)>) {
    let next = AtomicU64::new(0);
    let acknowledged: Mutex<Vec<(String, u64)>> = Mutex::default();
    let retries = AtomicU64::new(0);
    let requests = AtomicU64::new(0);
    let work = writers.iter().map(|writer| async {
        loop {
            let i = next.fetch_add(1, Ordering::SeqCst) as usize;
            if i >= config.orders {
                break;
            }
            let mut rng = fastrand::Rng::with_seed(config.seed ^ (i as u64).wrapping_mul(0x9e37));
            let body = json!({
                "customerId": format!("cust-{}", rng.u32(0..50)),
                "currency": "EUR",
                "items": (0..rng.usize(1..4)).map(|n| json!({
                    "sku": format!("SKU-{n}"),
                    "quantity": rng.u32(1..5),
                    "unitPriceCents": rng.u32(100..10_000),
                })).collect::<Vec<_>>(),
            })
            .to_string();
            let create = api_event(
                "writer-create-order.json",
                "/orders",
                &format!("chaos-{}-{i}-create", config.seed),
                Some(body),
            );
            requests.fetch_add(1, Ordering::SeqCst);
            let Some((201, order)) = until_final(writer, &create, &retries).await else {
                continue;
            };
            let Some(id) = order["orderId"].as_str() else {
                continue;
            };
            acknowledged.lock().unwrap().push((id.to_owned(), 1));
            let pay = api_event(
                "writer-pay-order.json",
                &format!("/orders/{id}/payment"),
                &format!("chaos-{}-{i}-pay", config.seed),
                None,
            );
            requests.fetch_add(1, Ordering::SeqCst);
            if let Some((200, _)) = until_final(writer, &pay, &retries).await {
                acknowledged.lock().unwrap().push((id.to_owned(), 2));
            }
        }
    });
    futures::future::join_all(work).await;
    (
        requests.load(Ordering::SeqCst) as usize,
        retries.load(Ordering::SeqCst) as usize,
        acknowledged.into_inner().unwrap_or_default(),
    )
}

/// Feeds the OnFailure queue to the sweeper the way an SQS mapping does;
/// returns how many messages it handled.
async fn deliver_on_failure(stack: &Stack, queue_url: &str, sweeper: &Tagged) -> usize {
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    let mut handled = 0;
    for _ in 0..20 {
        let Ok(messages) = devkit::receive_batch(&sqs, queue_url).await else {
            break;
        };
        if messages.is_empty() {
            break;
        }
        let event = devkit::batch_event(&messages);
        let payload = serde_json::to_vec(&event).unwrap_or_default();
        let failed: HashSet<String> = match sweeper.call(&payload).await {
            Ok(body) => serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["batchItemFailures"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|f| f["itemIdentifier"].as_str().map(str::to_owned))
                .collect(),
            Err(_) => messages
                .iter()
                .filter_map(|m| m.message_id.clone())
                .collect(),
        };
        for m in &messages {
            if m.message_id.as_ref().is_some_and(|id| failed.contains(id)) {
                // Back after the visibility timeout, as in SQS.
                if let Some(handle) = m.receipt_handle() {
                    let _ = sqs
                        .change_message_visibility()
                        .queue_url(queue_url)
                        .receipt_handle(handle)
                        .visibility_timeout(0)
                        .send()
                        .await;
                }
                continue;
            }
            if let Some(handle) = m.receipt_handle() {
                let _ = sqs
                    .delete_message()
                    .queue_url(queue_url)
                    .receipt_handle(handle)
                    .send()
                    .await;
                handled += 1;
            }
        }
    }
    handled
}

fn function(
    config: &ChaosConfig,
    name: &str,
    binary_path: &std::path::Path,
    proxy: &FaultProxy,
    env: &[(String, String)],
) -> LambdaFunction {
    let mut all = crate::lambda::loopback_env();
    all.extend(env.iter().cloned());
    all.push(("AWS_ENDPOINT_URL".into(), proxy.endpoint.clone()));
    LambdaFunction::new(FunctionSpec {
        name: name.to_owned(),
        binary: binary_path.to_owned(),
        env: all,
        timeout: config.timeout,
        log: config
            .log_dir
            .join(format!("{}-{}-{name}.log", config.seed, config.sink.name())),
    })
}

/// One chaos run. `Err` only when the harness itself cannot run.
pub async fn run(config: &ChaosConfig) -> Result<Verdict, String> {
    let started = Instant::now();
    std::fs::create_dir_all(&config.log_dir).map_err(|e| e.to_string())?;
    let binaries = (binary("writer")?, binary("publisher")?, binary("sweeper")?);
    let mut stack = Stack::new().await;
    let (sink_env, subscriber) = match config.sink {
        SinkKind::EventBridge => {
            let bus = crate::unique("chaos-bus");
            let subscriber = devkit::create_bus(&stack.sdk, &bus, "outbox.orders")
                .await
                .map_err(|e| e.to_string())?;
            stack.bus = Some((bus.clone(), subscriber.clone()));
            (
                vec![
                    ("SINK".to_owned(), "eventbridge".to_owned()),
                    ("EVENT_BUS_NAME".to_owned(), bus),
                ],
                subscriber,
            )
        }
        SinkKind::SnsFifo => {
            let (topic, subscriber) =
                devkit::create_fifo_topic(&stack.sdk, &crate::unique("chaos-events"))
                    .await
                    .map_err(|e| e.to_string())?;
            (
                vec![
                    ("SINK".to_owned(), "sns".to_owned()),
                    ("SNS_TOPIC_ARN".to_owned(), topic),
                ],
                subscriber,
            )
        }
    };
    let on_failure = devkit::create_queue(&stack.sdk, &crate::unique("chaos-on-failure"), false)
        .await
        .map_err(|e| e.to_string())?
        .queue_url;
    let mut env = sink_env.clone();
    env.extend([
        ("TABLE_NAME".to_owned(), stack.table.clone()),
        ("EVENT_SOURCE".to_owned(), "outbox.orders".to_owned()),
        ("RETRY_BASE_SECONDS".to_owned(), "1".to_owned()),
    ]);

    // Writers: each its own proxy (a crash kills the writer that called).
    let mut writers = Vec::new();
    let transactions = Arc::new(tokio::sync::Mutex::new(()));
    for w in 0..config.writers {
        let proxy = Arc::new(FaultProxy::start().await);
        proxy.serialize("TransactWriteItems", transactions.clone());
        let schedule = Mutex::new(
            Schedule::new(
                config.seed.wrapping_add(1000 + w as u64),
                config.writer_fault_rate,
            )
            .scripted_writer(),
        );
        proxy.set_chooser(Box::new(move |op, _| {
            schedule.lock().ok()?.choose_writer(op)
        }));
        let f = function(config, &format!("writer{w}"), &binaries.0, &proxy, &env);
        writers.push(Tagged::new(f, proxy));
    }
    for (i, _) in (0..config.poison).enumerate() {
        stack
            .put_poison(&format!("poison-{}-{i}", config.seed), Some("not json"))
            .await;
    }
    let mut phases = Vec::new();
    let mut mark = Instant::now();
    let (writer_requests, writer_retries, acknowledged) = workload(config, &writers).await;
    let writer_faults: Vec<Call> = writers.iter().flat_map(|w| w.proxy.journal()).collect();
    phases.push(("writes", mark.elapsed()));
    mark = Instant::now();
    drop(writers);

    // Publisher and sweeper, each behind its proxy.
    let mut rng = fastrand::Rng::with_seed(config.seed);
    let outage_start = rng.u64(2..6);
    let publisher_proxy = Arc::new(FaultProxy::start().await);
    let schedule = Mutex::new(Schedule {
        outage: Some((outage_start, outage_start + config.outage_invocations)),
        hangs: config.hangs,
        ..Schedule::new(config.seed.wrapping_add(1), config.fault_rate).scripted(false)
    });
    publisher_proxy.set_chooser(Box::new(move |op, tag| {
        schedule.lock().ok()?.choose_publishing(op, tag, false)
    }));
    let publisher = Tagged::new(
        function(config, "publisher", &binaries.1, &publisher_proxy, &env),
        publisher_proxy.clone(),
    );
    let sweeper_proxy = Arc::new(FaultProxy::start().await);
    let schedule =
        Mutex::new(Schedule::new(config.seed.wrapping_add(2), config.fault_rate).scripted(true));
    sweeper_proxy.set_chooser(Box::new(move |op, _| {
        schedule.lock().ok()?.choose_publishing(op, 0, true)
    }));
    // The sweeper runs between the pump's passes, never alongside one, so
    // it takes every pending item at once (STRANDED_AFTER_SECONDS=0): those
    // whose delete failed, whose dead-letter write failed, or that the
    // mapping gave up on. (Deployed, it waits for the stream's retention.)
    let mut sweeper_env = env.clone();
    sweeper_env.push(("STRANDED_AFTER_SECONDS".into(), "0".into()));
    let sweeper = Tagged::new(
        function(config, "sweeper", &binaries.2, &sweeper_proxy, &sweeper_env),
        sweeper_proxy.clone(),
    );

    // Drain the stream under faults, sweeping between passes.
    let scheduled = crate::sample("sweeper-scheduled.json").into_bytes();
    let mut on_failure_messages = 0;
    let mut pump = stack.pump(&publisher, Some(&on_failure));
    for pass in 0.. {
        let read = pump.pass().await.map_err(|e| e.to_string())?;
        let _ = sweeper.call(&scheduled).await;
        on_failure_messages += deliver_on_failure(&stack, &on_failure, &sweeper).await;
        if read == 0 && pass > 0 {
            break;
        }
    }

    phases.push(("drain under faults", mark.elapsed()));
    mark = Instant::now();
    // Heal; drain what is left; then a fresh sweeper that takes every
    // pending item, until nothing is pending.
    publisher_proxy.heal();
    sweeper_proxy.heal();
    pump.run_until_idle().await.map_err(|e| e.to_string())?;
    let pump_stats = pump.stats.clone();
    drop(pump);
    on_failure_messages += deliver_on_failure(&stack, &on_failure, &sweeper).await;
    for _ in 0..15 {
        let _ = sweeper.call(&scheduled).await;
        if pending_outbox(&stack).await == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1_100)).await;
    }

    phases.push(("heal, drain, final sweep", mark.elapsed()));
    let mut verdict = judge(
        config,
        &stack,
        &subscriber.queue_url,
        &[&publisher, &sweeper],
    )
    .await?;
    verdict.writer_requests = writer_requests;
    for call in writer_faults.iter().filter(|c| c.fault.is_some()) {
        let fault = call.fault.as_ref().unwrap_or(&Fault::Pass);
        verdict
            .faults
            .entry(label("writer", &call.operation, fault))
            .or_default()
            .injected += 1;
    }
    // What the API acknowledged must be in the table.
    let versions = order_versions(&stack).await;
    for (order, version) in &acknowledged {
        if versions.get(order).copied().unwrap_or(0) < *version {
            verdict.unacknowledged_writes += 1;
            verdict.examples.push(format!(
                "acknowledged but not in the table: {order} v{version}"
            ));
        }
    }
    verdict.writer_retries = writer_retries;
    verdict.publisher_invocations = publisher.tag() - 1;
    verdict.publisher_errors = publisher.errors.lock().unwrap().len();
    verdict.sweeper_invocations = sweeper.tag() - 1;
    verdict.sweeper_errors = sweeper.errors.lock().unwrap().len();
    verdict.cold_starts = [&publisher, &sweeper]
        .iter()
        .map(|t| t.function.cold_starts.load(Ordering::SeqCst))
        .sum();
    verdict.on_failure_messages = on_failure_messages.max(pump_stats.on_failure_messages);
    verdict.recovery = recovery(
        &publisher_proxy.journal(),
        outage_start + config.outage_invocations,
        &verdict,
    );
    verdict.phases = phases;
    verdict.elapsed = started.elapsed();
    cleanup(&stack, &subscriber.queue_url, &on_failure).await;
    Ok(verdict)
}

fn attr<'a>(item: &'a HashMap<String, AttributeValue>, name: &str) -> Option<&'a str> {
    item.get(name).and_then(|v| match v {
        AttributeValue::S(s) | AttributeValue::N(s) => Some(s.as_str()),
        _ => None,
    })
}

fn is_outbox(item: &HashMap<String, AttributeValue>) -> bool {
    attr(item, "SK").is_some_and(|sk| sk.starts_with("OUTBOX#"))
}

/// Every order's `version`, from its `META` item.
async fn order_versions(stack: &Stack) -> HashMap<String, u64> {
    stack
        .items()
        .await
        .iter()
        .filter(|i| attr(i, "SK") == Some("META"))
        .filter_map(|i| {
            let id = attr(i, "PK")?.strip_prefix("ORDER#")?.to_owned();
            Some((id, attr(i, "version")?.parse().ok()?))
        })
        .collect()
}

async fn pending_outbox(stack: &Stack) -> usize {
    stack
        .items()
        .await
        .iter()
        .filter(|i| is_outbox(i) && !i.contains_key(keys::DEAD_LETTERED_AT))
        .count()
}

/// An event as the subscriber received it.
struct Received {
    event_id: String,
    aggregate: String,
    version: u64,
}

fn received(sink: SinkKind, message: &Value) -> Option<Received> {
    let envelope = match sink {
        SinkKind::EventBridge => message.get("detail")?.clone(),
        SinkKind::SnsFifo => {
            let mut body = message.clone();
            body.as_object_mut()?.remove("__sqs");
            body
        }
    };
    Some(Received {
        event_id: envelope["eventId"].as_str()?.to_owned(),
        aggregate: envelope["aggregateId"].as_str()?.to_owned(),
        version: envelope["aggregateVersion"].as_u64()?,
    })
}

/// The verdict, from the table and the subscriber queue; duplicates are
/// attributed from the proxies' journals.
async fn judge(
    config: &ChaosConfig,
    stack: &Stack,
    queue_url: &str,
    functions: &[&Tagged],
) -> Result<Verdict, String> {
    let mut verdict = Verdict {
        seed: config.seed,
        sink: config.sink.name(),
        orders: config.orders,
        poison: config.poison,
        ..Verdict::default()
    };
    // Committed: every version of every order in the table.
    let items = stack.items().await;
    let mut committed: HashSet<(String, u64)> = HashSet::new();
    for item in &items {
        if attr(item, "SK") == Some("META")
            && attr(item, "PK").is_some_and(|p| p.starts_with("ORDER#"))
        {
            let id = attr(item, "PK")
                .unwrap_or("")
                .trim_start_matches("ORDER#")
                .to_owned();
            let version: u64 = attr(item, "version")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            for v in 1..=version {
                committed.insert((id.clone(), v));
            }
        }
        if is_outbox(item) {
            if item.contains_key(keys::DEAD_LETTERED_AT) {
                verdict.dead_letters += 1;
                if attr(item, keys::DEAD_LETTER_REASON).is_none_or(|r| r.is_empty()) {
                    verdict.dead_letters_without_reason += 1;
                }
            } else {
                verdict.left_pending += 1;
            }
        }
    }
    verdict.committed = committed.len();
    // The operator's view agrees with the table: `outboxctl dead-letters
    // list` finds every dead letter the functions made.
    let listed = stack
        .operations()
        .dead_letters(&outboxctl::DeadLetterFilter::default())
        .await
        .map_err(|e| e.to_string())?;
    verdict.dead_letters_unlisted = verdict.dead_letters.saturating_sub(listed.len());

    // Delivered, in queue order.
    let messages = crate::drain_queue(&stack.sdk, queue_url).await;
    let mut deliveries: HashMap<String, usize> = HashMap::new();
    let mut ids_of: HashMap<(String, u64), HashSet<String>> = HashMap::new();
    let mut highest: HashMap<String, u64> = HashMap::new();
    for message in &messages {
        let Some(r) = received(config.sink, message) else {
            verdict.ghosts += 1;
            verdict.examples.push(format!(
                "not an event: {}",
                message.to_string().chars().take(300).collect::<String>()
            ));
            continue;
        };
        verdict.deliveries += 1;
        let first = {
            let n = deliveries.entry(r.event_id.clone()).or_default();
            *n += 1;
            *n == 1
        };
        ids_of
            .entry((r.aggregate.clone(), r.version))
            .or_default()
            .insert(r.event_id.clone());
        if first {
            let top = highest.entry(r.aggregate.clone()).or_default();
            if r.version < *top {
                verdict.inversions += 1;
            }
            *top = (*top).max(r.version);
        }
    }
    if config.sink == SinkKind::EventBridge {
        // A standard queue does not keep order: nothing to judge.
        verdict.inversions = 0;
    }
    verdict.delivered_distinct = deliveries.len();
    verdict.lost = committed
        .iter()
        .filter(|k| !ids_of.contains_key(*k))
        .count();
    for (key, ids) in &ids_of {
        if !committed.contains(key) {
            verdict.ghosts += 1;
            verdict.examples.push(format!("ghost: {key:?} {ids:?}"));
        }
    }
    for key in committed
        .iter()
        .filter(|k| !ids_of.contains_key(*k))
        .take(5)
    {
        verdict.examples.push(format!("lost: {key:?}"));
    }
    verdict.identity_changes = ids_of.values().filter(|ids| ids.len() > 1).count();
    verdict.duplicates = deliveries.values().map(|n| n - 1).sum();

    // Attribution. Each function's journal, by invocation.
    struct Forward {
        function: usize,
        tag: u64,
        index: usize,
        at: SystemTime,
    }
    let journals: Vec<Vec<Call>> = functions.iter().map(|f| f.proxy.journal()).collect();
    let errors: Vec<BTreeMap<u64, FunctionError>> = functions
        .iter()
        .map(|f| f.errors.lock().unwrap().clone())
        .collect();
    let mut forwards: HashMap<&str, Vec<Forward>> = HashMap::new();
    for (function, journal) in journals.iter().enumerate() {
        for (index, call) in journal.iter().enumerate() {
            for id in &call.delivered {
                forwards.entry(id.as_str()).or_default().push(Forward {
                    function,
                    tag: call.tag,
                    index,
                    at: call.at,
                });
            }
        }
    }
    let names: Vec<&str> = functions.iter().map(|f| f.function.name()).collect();
    let kind_of = |function: usize, call: &Call| {
        label(
            names[function],
            &call.operation,
            call.fault.as_ref().unwrap_or(&Fault::Pass),
        )
    };
    // Faults injected, and the events their invocation had sent by then.
    for (function, journal) in journals.iter().enumerate() {
        for call in journal
            .iter()
            .filter(|c| c.fault.is_none() && !c.answered && !c.delivered.is_empty())
        {
            let row = verdict
                .faults
                .entry(format!(
                    "{}: sink answer lost (the caller's timeout or deadline came first)",
                    names[function]
                ))
                .or_default();
            row.injected += 1;
            row.exposed += call.delivered.len();
        }
        for (index, call) in journal.iter().enumerate() {
            let Some(fault) = &call.fault else { continue };
            if *fault == Fault::Pass {
                continue;
            }
            let exposed: usize = journal[..=index]
                .iter()
                .filter(|c| c.tag == call.tag)
                .map(|c| c.delivered.len())
                .sum();
            let row = verdict.faults.entry(kind_of(function, call)).or_default();
            row.injected += 1;
            row.exposed += exposed;
        }
    }
    for (id, n) in &deliveries {
        let extra = n - 1;
        if extra == 0 {
            continue;
        }
        let mut list = forwards.remove(id.as_str()).unwrap_or_default();
        list.sort_by_key(|f| f.at);
        let mut explained = 0;
        for pair in list.windows(2) {
            if explained == extra {
                break;
            }
            let before = &pair[0];
            // The fault that undid that forward: the most severe one at or
            // after it in its invocation (a throttle the SDK absorbed does
            // not make the batch come back; a SIGKILL does).
            let cause = journals[before.function][before.index..]
                .iter()
                .filter(|c| c.tag == before.tag)
                .filter_map(|c| c.fault.as_ref().map(|f| (severity(f), c)))
                .filter(|(rank, _)| *rank > 0)
                .max_by_key(|(rank, _)| *rank)
                .map(|(_, c)| kind_of(before.function, c))
                .or_else(|| {
                    errors[before.function]
                        .get(&before.tag)
                        .map(|e| format!("{}: function error ({e})", names[before.function]))
                })
                .or_else(|| {
                    // The call took effect but its caller never heard: an
                    // attempt timeout (the SDK retried it) or the deadline
                    // cut it (the record was reported and redelivered).
                    (!journals[before.function][before.index].answered).then(|| {
                        format!(
                            "{}: sink answer lost (the caller's timeout or deadline came first)",
                            names[before.function]
                        )
                    })
                })
                .or_else(|| {
                    (pair[1].function != before.function)
                        .then(|| "publisher and sweeper overlap".to_owned())
                });
            if let Some(cause) = cause {
                verdict.faults.entry(cause).or_default().duplicates += 1;
                explained += 1;
            }
        }
        if explained < extra {
            verdict.unexplained += extra - explained;
            let history: Vec<String> = list
                .iter()
                .map(|f| format!("{}#{}", names[f.function], f.tag))
                .collect();
            verdict.examples.push(format!(
                "unexplained: {id} delivered {n}×, forwarded by {history:?}"
            ));
        }
    }
    Ok(verdict)
}

/// From the end of the outage (the first publisher call after it) to the
/// last first delivery of an event created before that moment.
fn recovery(journal: &[Call], healed_tag: u64, _verdict: &Verdict) -> Option<Duration> {
    let healed = journal.iter().find(|c| c.tag >= healed_tag)?.at;
    let healed_ms = healed
        .duration_since(SystemTime::UNIX_EPOCH)
        .ok()?
        .as_millis() as u64;
    let mut seen = HashSet::new();
    let mut last = None;
    for call in journal {
        for id in &call.delivered {
            if !seen.insert(id.clone()) {
                continue;
            }
            let created = ulid::Ulid::from_string(id).ok()?.timestamp_ms();
            if created <= healed_ms && call.at >= healed {
                last = Some(call.at);
            }
        }
    }
    last.and_then(|l| l.duration_since(healed).ok())
        .or(Some(Duration::ZERO))
}

/// Deletes the run's table and queues so that the local API's memory stays
/// bounded over many runs.
async fn cleanup(stack: &Stack, subscriber: &str, on_failure: &str) {
    let _ = stack
        .ddb
        .delete_table()
        .table_name(&stack.table)
        .send()
        .await;
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    for queue in [subscriber, on_failure] {
        let _ = sqs.delete_queue().queue_url(queue).send().await;
    }
}
