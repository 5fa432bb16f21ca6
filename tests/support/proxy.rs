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
//!
//! # Layout
//! - this file: [`FaultProxy`] (start, rules, chooser, sabotage, what it
//!   saw) and the types of its API: [`Fault`], [`Sabotage`], [`Call`],
//!   [`Chooser`].
//! - `proxy/state.rs`: the shared state (the fault plan and what was
//!   recorded) and the choice of a call's fault.
//! - `proxy/classify.rs`: what a request is (operation, IAM actions and
//!   resources, event ids it carries).
//! - `proxy/server.rs`: the server loop, the routing to the local servers
//!   and the journaling of each call.
//! - `proxy/answer.rs`: a call answered under its fault (forwarded, refused,
//!   answered in part, or faked).
//! - `proxy/gate.rs`: [`SinkGate`], the sink calls sent on to moto held to
//!   what one moto process serves (the chaos run's).

use std::sync::{Arc, Mutex};

use tokio::net::TcpListener;

mod answer;
mod cbor;
mod classify;
mod gate;
mod server;
mod state;

pub use gate::SinkGate;

use state::{Rule, State};

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
    /// Each sink call is forwarded twice, both answered: a sender that
    /// sends an event twice in one invocation (the sweeper's proxy only).
    SendTwice,
    /// A sink call carrying an aggregate's first event is answered as
    /// published at once and forwarded 3 s later: the aggregate's next
    /// event, sent on that answer, overtakes it (a sender that reorders an
    /// aggregate).
    AcknowledgeEarly,
    /// Not on the wire: the first answer to each batch reports the batch's
    /// first record failed, whatever the invocation published (the harness
    /// rewrites the answer the mapping gets; Lambda then delivers the whole
    /// batch again).
    ReportFirstRecord,
    /// Deletes of outbox items are answered as done at once and forwarded
    /// only when the invocation ends with an answer (a killed or failed
    /// one's are dropped): a publisher that keeps every delete to the end
    /// of its batch, so a kill repeats everything it published. The
    /// sabotaged publisher is also killed once (a [`Fault::Crash`] before
    /// the call), at its first sink call after an invocation of it has
    /// published [`DEFER_DELETES_KILL_AFTER`] events.
    DeferDeletes,
    /// Not on the wire: every invocation of the sweeper by the OnFailure
    /// queue's mapping is answered as handled without running it (an
    /// OnFailure handler that does nothing).
    IgnoreOnFailure,
}

impl Sabotage {
    /// Whether the sabotage applies to `function`'s proxy.
    pub fn applies_to(self, function: &str) -> bool {
        match self {
            Self::SendTwice | Self::IgnoreOnFailure => function == "sweeper",
            Self::ReportFirstRecord | Self::DeferDeletes => function == "publisher",
            Self::DropDeletes | Self::SwallowSinkCalls | Self::AcknowledgeEarly => true,
        }
    }
}

/// [`Sabotage::DeferDeletes`]: events one invocation publishes before
/// the kill.
pub const DEFER_DELETES_KILL_AFTER: usize = 50;

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
    /// The event id of the outbox item an `UpdateItem` hands to the
    /// scheduled sweep (it sets the item's pending sort key to the
    /// redriven `!<ulid>`: a failed attempt, a hold, a publisher's
    /// hand-over of an event it could not publish or delete); such a call
    /// is journaled whether it met a fault or not.
    pub hands_over: Vec<String>,
    /// When it was journaled: once its upstream answered (or it was
    /// answered without one), so a slow call can stand after a later one;
    /// for a call given up at the [`SinkGate`], when its caller gave up.
    pub at: std::time::SystemTime,
    /// Whether the answer was (or would have been) a success: the local
    /// API's 2xx, or the proxy's own "done" for a sabotage that answers
    /// without forwarding. A delete that succeeded lists every item it
    /// asked for in `deleted`, unless a sabotage kept it from the table.
    pub succeeded: bool,
    /// Whether the caller was still there for the answer (false: it gave
    /// up, by an attempt timeout or its deadline, after the call took
    /// effect, or while the [`SinkGate`] held it).
    pub answered: bool,
    /// Whether the call went on to the local API or was answered by the
    /// proxy (false: its caller gave up while the [`SinkGate`] held it,
    /// and nothing reached the sink).
    pub reached: bool,
}

/// Chooses a fault for a call that no rule matches, from its operation and
/// the current tag.
pub type Chooser = Box<dyn FnMut(&str, u64) -> Option<Fault> + Send>;

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
        Self::serve(server::Upstreams::local()).await
    }

    /// [`FaultProxy::start`] in front of the local Custom Event Bus at
    /// `bus` too (a function reaches it through the proxy with
    /// [`FaultProxy::bus_env`]).
    pub async fn start_with_bus(bus: &str) -> Self {
        Self::serve(server::Upstreams::local().with_bus(bus)).await
    }

    /// The variable that sends a function's Custom Event Bus calls through
    /// this proxy.
    pub fn bus_env(&self) -> (&'static str, &str) {
        (devkit::BUS_ENDPOINT_ENV, &self.endpoint)
    }

    async fn serve(upstream: server::Upstreams) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State::default()));
        let task = tokio::spawn(server::serve(listener, state.clone(), upstream));
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

    /// Waits until no call answered ahead of its forward is left to
    /// forward ([`Sabotage::AcknowledgeEarly`]).
    pub async fn settled(&self) {
        while self.state.lock().unwrap().delayed > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// [`Sabotage::DeferDeletes`]: forwards (and journals, as taking effect
    /// now) the deletes invocation `tag` made, when it ended with an answer;
    /// drops them otherwise.
    pub async fn end_deferred(&self, tag: u64, answered: bool) {
        let deferred: Vec<server::Deferred> = {
            let mut state = self.state.lock().unwrap();
            let (mine, others) = std::mem::take(&mut state.deferred)
                .into_iter()
                .partition(|d| d.tag == tag);
            state.deferred = others;
            mine
        };
        if answered {
            for call in deferred {
                server::forward_deferred(&self.state, call).await;
            }
        }
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

    /// The sabotage set on this proxy, if any.
    pub fn sabotaged(&self) -> Option<Sabotage> {
        self.state.lock().unwrap().sabotage
    }

    /// Sends unfaulted sink calls on to moto only as `gate` lets them
    /// through ([`SinkGate`]).
    pub fn set_sink_gate(&self, gate: Arc<SinkGate>) {
        self.state.lock().unwrap().gate = Some(gate);
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
