//! The fault side of a chaos run: each proxy's seeded schedule, the
//! labels and severity of fault kinds, and invocations tagged on their
//! proxy so that the journal says which invocation made a call.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use aws_lambda_events::event::dynamodb::Event as StreamEvent;
use aws_lambda_events::event::sqs::SqsEvent;
use aws_lambda_events::event::streams::{DynamoDbBatchItemFailure, DynamoDbEventResponse};
use devkit::Invoker;

use crate::lambda::{FunctionError, LambdaFunction};
use crate::proxy::{Call, Fault, FaultProxy, Sabotage};

/// Whether `call` met a fault (one that did something).
pub(super) fn faulted(call: &Call) -> bool {
    call.fault.as_ref().is_some_and(|f| *f != Fault::Pass)
}

/// The fault kind of a journaled call of `function`.
pub(super) fn kind(function: &str, call: &Call) -> String {
    label(
        function,
        &call.operation,
        call.fault.as_ref().unwrap_or(&Fault::Pass),
    )
}

fn is_sink(operation: &str) -> bool {
    matches!(operation, "PutEvents" | "PublishBatch")
}

/// The event id of an outbox record's keys (`SK` `OUTBOX#<id>`).
pub(super) fn event_id(keys: &serde_dynamo::Item) -> Option<String> {
    match keys.get("SK") {
        Some(serde_dynamo::AttributeValue::S(sk)) => sk.strip_prefix("OUTBOX#").map(str::to_owned),
        _ => None,
    }
}

/// A fault kind, as the tables name it.
fn label(function: &str, operation: &str, fault: &Fault) -> String {
    let sink = is_sink(operation);
    let what = match fault {
        Fault::Throttle => "throttled",
        Fault::ServerError => "5xx",
        Fault::Refuse(_) => "refused (400)",
        Fault::Status(..) => "refused (status)",
        Fault::Reset => "connection reset",
        Fault::Hang => "hangs past the deadline",
        Fault::Late(_) => "answered after the attempt timeout",
        Fault::Stub(_) => "answered by a stub",
        Fault::FailEntries(_) => "some entries refused in a 200",
        Fault::RefuseEntries { .. } => "outage (every entry refused)",
        Fault::Crash { forward: false } => "SIGKILL before the call",
        Fault::Crash { forward: true } => "SIGKILL after the call, before its answer",
        Fault::Pass => "none",
    };
    let call = match (sink, operation) {
        (true, _) => "sink call",
        (_, "BatchWriteItem" | "DeleteItem") => "deletes",
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
pub(super) fn severity(fault: &Fault) -> u8 {
    match fault {
        Fault::Crash { .. } => 5,
        Fault::Hang => 4,
        Fault::Late(_) => 3,
        Fault::RefuseEntries { .. } | Fault::FailEntries(_) => 3,
        Fault::ServerError | Fault::Refuse(_) | Fault::Status(..) => 2,
        Fault::Throttle | Fault::Reset => 1,
        Fault::Pass | Fault::Stub(_) => 0,
    }
}

/// The fault schedule of one proxy: a seeded generator, per-call odds, and
/// bursts (a fault repeated over the SDK's retries, so that it is seen).
pub(super) struct Schedule {
    pub(super) rng: fastrand::Rng,
    pub(super) rate: f64,
    /// Faults applied first, one every `script_every` calls of their
    /// operation (`"sink"` for the sink calls, `"deletes"` for the deletes,
    /// `BatchWriteItem` or `DeleteItem`), so that a short run meets
    /// every kind.
    pub(super) script: HashMap<&'static str, VecDeque<Fault>>,
    pub(super) calls: HashMap<String, u32>,
    /// (operation, fault, calls left, the invocation it belongs to): only
    /// that invocation's calls continue it (the SDK's retries of its call;
    /// with several publisher sandboxes sharing this schedule, another
    /// sandbox's call of the same operation must not take it).
    pub(super) burst: Option<(String, Fault, u32, u64)>,
    /// The invocation whose call is being chosen for.
    pub(super) tag: u64,
    /// Tag range of the sink outage.
    pub(super) outage: Option<(u64, u64)>,
    pub(super) hangs: u32,
    /// The sweeper's read fault for the current invocation: (tag, reads
    /// before it, the fault).
    pub(super) read_plan: Option<(u64, u32, Option<Fault>)>,
    /// A scripted fault applies to one call in this many of its operation.
    pub(super) script_every: u32,
}

impl Schedule {
    pub(super) fn choose_publishing(
        &mut self,
        operation: &str,
        tag: u64,
        sweeper: bool,
    ) -> Option<Fault> {
        self.tag = tag;
        let sink = is_sink(operation);
        if sink {
            if let Some((from, to)) = self.outage {
                if (from..to).contains(&tag) {
                    return Some(Fault::refuse_all("ServiceUnavailable"));
                }
            }
        }
        // One script each for the sink calls and the deletes, whichever
        // call carries them (`DeleteItem` for a lone key).
        let key = match operation {
            _ if sink => "sink",
            "BatchWriteItem" | "DeleteItem" => "deletes",
            other => other,
        };
        if let Some(fault) = self.planned(operation, key) {
            return Some(fault);
        }
        if sweeper && operation == "Query" {
            return self.sweep_read(tag);
        }
        if !self.rng.f64().lt(&self.rate) {
            return None;
        }
        let fault = match operation {
            _ if sink => match self.rng.u32(0..7) {
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
            "BatchWriteItem" | "DeleteItem" => match self.rng.u32(0..4) {
                0 => self.burst(operation, Fault::ServerError),
                1 => self.burst(operation, Fault::Throttle),
                2 => Fault::Crash { forward: false },
                _ => Fault::Crash { forward: true },
            },
            "UpdateItem" => self.burst(operation, Fault::ServerError),
            _ => return None,
        };
        Some(fault)
    }

    pub(super) fn choose_writer(&mut self, operation: &str) -> Option<Fault> {
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

    /// A sweep reads many pages (each shard's pending index, the
    /// statistics): a fault on each read at `rate` would kill nearly every
    /// sweep (a small run once had 1,314 of 1,316 sweeps killed). So one
    /// invocation in `rate` meets one read fault (a throttle, or a
    /// `SIGKILL` twice as often), on one of its first eight reads.
    fn sweep_read(&mut self, tag: u64) -> Option<Fault> {
        if self.read_plan.as_ref().is_none_or(|(t, _, _)| *t != tag) {
            let fault = self.rng.f64().lt(&self.rate).then(|| {
                if self.rng.u32(0..3) == 0 {
                    Fault::Throttle
                } else {
                    Fault::Crash { forward: false }
                }
            });
            let at = self.rng.u32(0..8);
            self.read_plan = Some((tag, at, fault));
        }
        let (_, before, fault) = self.read_plan.as_mut()?;
        if *before > 0 {
            *before -= 1;
            return None;
        }
        fault.take()
    }

    /// The rest of a burst, or the next scripted fault (every other call).
    pub(super) fn planned(&mut self, operation: &str, key: &str) -> Option<Fault> {
        if let Some((op, fault, left, tag)) = &mut self.burst {
            if op == operation && *left > 0 && *tag == self.tag {
                *left -= 1;
                return Some(fault.clone());
            }
        }
        let n = {
            let n = self.calls.entry(operation.to_owned()).or_default();
            *n += 1;
            *n
        };
        // Deletes are few (one call per invocation that published
        // something; with strict ordering the sweeper publishes more of the
        // held events): their script applies to the first calls.
        let every = if key == "deletes" {
            1
        } else {
            self.script_every.max(1)
        };
        if n % every == 0 {
            if let Some(fault) = self.script.get_mut(key).and_then(|s| s.pop_front()) {
                return Some(match fault {
                    Fault::ServerError | Fault::Throttle => self.burst(operation, fault),
                    other => other,
                });
            }
        }
        None
    }

    pub(super) fn new(seed: u64, rate: f64) -> Self {
        Self {
            rng: fastrand::Rng::with_seed(seed),
            rate,
            script: HashMap::new(),
            calls: HashMap::new(),
            burst: None,
            tag: 0,
            outage: None,
            hangs: 0,
            read_plan: None,
            script_every: 2,
        }
    }

    /// Every fault kind once, early, on `function`'s calls (`on`; else
    /// only the rate's faults). A writer's transactions: committed then
    /// killed, killed before, throttled, 5xx.
    pub(super) fn scripted(mut self, function: &str, on: bool) -> Self {
        let crash = |forward| Fault::Crash { forward };
        match function {
            _ if !on => {}
            "writer" => {
                let faults = [
                    crash(true),
                    crash(false),
                    Fault::Throttle,
                    Fault::ServerError,
                ];
                self.script.insert("TransactWriteItems", faults.into());
            }
            "sweeper" => {
                // The sweeper makes few calls: its faults apply to the first.
                self.script_every = 1;
                self.script.insert("Query", [crash(false)].into());
                self.script.insert("sink", [crash(true)].into());
            }
            _ => {
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
                    "deletes",
                    [crash(false), Fault::ServerError, crash(true)].into(),
                );
                self.script
                    .insert("UpdateItem", [Fault::ServerError].into());
            }
        }
        self
    }

    /// The labels of the scripted faults of `function`: every one must run
    /// in a run (the verdict checks it).
    pub(super) fn kinds(&self, function: &str) -> Vec<String> {
        let mut kinds: Vec<String> = self
            .script
            .iter()
            .flat_map(|(key, faults)| {
                let operation = match *key {
                    "sink" => "PutEvents",
                    "deletes" => "BatchWriteItem",
                    other => other,
                };
                faults.iter().map(move |f| label(function, operation, f))
            })
            .collect();
        kinds.sort();
        kinds.dedup();
        kinds
    }

    /// The fault now and for the SDK's two retries of the same call.
    pub(super) fn burst(&mut self, operation: &str, fault: Fault) -> Fault {
        self.burst = Some((operation.to_owned(), fault.clone(), 2, self.tag));
        fault
    }
}

/// A function behind its proxy, invoked one call at a time, each invocation
/// tagged on the proxy so that the journal says which invocation made a call.
pub(super) struct Tagged {
    pub(super) function: Arc<LambdaFunction>,
    pub(super) proxy: Arc<FaultProxy>,
    /// The next invocation's tag; shared by the sandboxes of one function
    /// ([`Sandboxes`]), so that a tag names one invocation of the function
    /// and tags compare in invocation order.
    pub(super) next_tag: Arc<AtomicU64>,
    /// Invocations that ended in a function error (tag → error).
    pub(super) errors: Mutex<BTreeMap<u64, FunctionError>>,
    /// When each invocation started (tag → time).
    pub(super) started: Mutex<BTreeMap<u64, SystemTime>>,
    /// The stream batch each publisher invocation was given, and the
    /// record its answer reported failed (`batchItemFailures`): Lambda
    /// delivers that record and every one after it again (tag → batch).
    pub(super) batches: Mutex<BTreeMap<u64, Batch>>,
    /// [`Sabotage::ReportFirstRecord`]: the batches (by their first
    /// sequence number) whose answer it rewrote, once each.
    rewritten: Mutex<HashSet<String>>,
    /// Each invocation's deadline and when its answer (or failure) came
    /// (tag → (deadline, end)).
    pub(super) ends: Mutex<BTreeMap<u64, (SystemTime, SystemTime)>>,
    /// The process each invocation ran in, by the sandbox's cold-start
    /// count (tag → generation): a killed process's successor in the same
    /// sandbox has seen none of its batches.
    pub(super) generations: Mutex<BTreeMap<u64, u64>>,
    /// The sweeper's invocations by the OnFailure queue (an SQS event), as
    /// against its scheduled ones: what "handled by the OnFailure path"
    /// is judged on.
    pub(super) on_failure: Mutex<BTreeSet<u64>>,
}

/// A copy of what `record` holds (one of [`Tagged`]'s records).
pub(super) fn snapshot<T: Clone>(record: &Mutex<T>) -> T {
    record.lock().unwrap().clone()
}

impl Tagged {
    /// Its invocations tagged from `next_tag` (1 for the first), which
    /// other sandboxes of the function may share.
    pub(super) fn new(
        function: LambdaFunction,
        proxy: Arc<FaultProxy>,
        next_tag: Arc<AtomicU64>,
    ) -> Self {
        let function = Arc::new(function);
        let killer = function.killer();
        proxy.set_crash_hook(Arc::new(move || killer.kill()));
        Self {
            function,
            proxy,
            next_tag,
            errors: Mutex::default(),
            started: Mutex::default(),
            batches: Mutex::default(),
            rewritten: Mutex::default(),
            ends: Mutex::default(),
            generations: Mutex::default(),
            on_failure: Mutex::default(),
        }
    }

    pub(super) fn tag(&self) -> u64 {
        self.next_tag.load(Ordering::SeqCst)
    }

    pub(super) async fn call(&self, payload: &[u8]) -> Result<Vec<u8>, FunctionError> {
        let tag = self.next_tag.fetch_add(1, Ordering::SeqCst);
        self.started.lock().unwrap().insert(tag, SystemTime::now());
        let batch = Batch::of(payload);
        let sqs = serde_json::from_slice::<SqsEvent>(payload).is_ok_and(|e| {
            !e.records.is_empty()
                && e.records
                    .iter()
                    .all(|r| r.event_source.as_deref() == Some("aws:sqs"))
        });
        if sqs {
            self.on_failure.lock().unwrap().insert(tag);
        }
        if sqs && self.proxy.sabotaged() == Some(Sabotage::IgnoreOnFailure) {
            return Ok(br#"{"batchItemFailures":[]}"#.to_vec());
        }
        self.proxy.set_tag(tag);
        let mut outcome = self.function.invoke(payload).await;
        if self.proxy.sabotaged() == Some(Sabotage::DeferDeletes) {
            self.proxy.end_deferred(tag, outcome.is_ok()).await;
        }
        self.ends
            .lock()
            .unwrap()
            .insert(tag, (self.function.last_deadline(), SystemTime::now()));
        self.generations
            .lock()
            .unwrap()
            .insert(tag, self.function.cold_starts.load(Ordering::SeqCst));
        match &mut outcome {
            Err(e) => {
                self.errors.lock().unwrap().insert(tag, e.clone());
            }
            Ok(body) => {
                if let Some(mut batch) = batch {
                    let answer = serde_json::from_slice::<DynamoDbEventResponse>(body).ok();
                    batch.reported = answer.as_ref().and_then(|a| batch.restart_from(a));
                    let first = batch.records.first().map(|(s, _)| s.clone());
                    let sabotage = self.proxy.sabotaged() == Some(Sabotage::ReportFirstRecord)
                        && first.is_some_and(|s| self.rewritten.lock().unwrap().insert(s));
                    if sabotage {
                        if let Some(rewritten) = batch.report_first(answer) {
                            *body = rewritten;
                        }
                    }
                    self.batches.lock().unwrap().insert(tag, batch);
                }
            }
        }
        outcome
    }
}

/// One publisher invocation's stream batch: its records in order (sequence
/// number, and the event id of an outbox record) and the record its answer
/// reported failed.
#[derive(Debug, Clone, Default)]
pub(super) struct Batch {
    pub(super) records: Vec<(String, Option<String>)>,
    pub(super) reported: Option<String>,
}

impl Batch {
    /// The batch of a stream event (`None` for any other payload).
    fn of(payload: &[u8]) -> Option<Self> {
        let event = serde_json::from_slice::<StreamEvent>(payload).ok()?;
        let records: Vec<(String, Option<String>)> = event
            .records
            .iter()
            .filter_map(|r| Some((r.change.sequence_number.clone()?, event_id(&r.change.keys))))
            .collect();
        (!records.is_empty()).then_some(Self {
            records,
            reported: None,
        })
    }

    /// The record the mapping delivers the batch again from, as Lambda reads
    /// `answer` (and as devkit's pump does): the lowest reported sequence
    /// number, or the batch's first record when an identifier is empty or
    /// names no record of it (Lambda then retries the whole batch); `None`
    /// when the answer reports nothing. Every identifier counts, not only
    /// the first: a publisher that reports a published record behind a
    /// genuine failure is judged by the published one.
    fn restart_from(&self, answer: &DynamoDbEventResponse) -> Option<String> {
        let positions = answer.batch_item_failures.iter().map(|failure| {
            failure
                .item_identifier
                .as_deref()
                .and_then(|id| self.records.iter().position(|(s, _)| s == id))
                .unwrap_or(0)
        });
        let lowest = positions.min()?;
        self.records.get(lowest).map(|(s, _)| s.clone())
    }

    /// Position of the reported record in the batch.
    pub(super) fn reported_at(&self) -> Option<usize> {
        let reported = self.reported.as_deref()?;
        self.records.iter().position(|(s, _)| s == reported)
    }

    /// Position of `event`'s record in the batch.
    pub(super) fn position(&self, event: &str) -> Option<usize> {
        self.records
            .iter()
            .position(|(_, id)| id.as_deref() == Some(event))
    }

    /// [`Sabotage::ReportFirstRecord`]: the answer also reports the
    /// batch's first record failed, after whatever it reported (the
    /// mapping then delivers the whole batch again), as a publisher
    /// reporting records it had published would. Appended, not put first:
    /// the verdict must read every identifier, not the first.
    fn report_first(&mut self, answer: Option<DynamoDbEventResponse>) -> Option<Vec<u8>> {
        let mut answer = answer?;
        let first = self.records.first()?.0.clone();
        let mut failure = DynamoDbBatchItemFailure::default();
        failure.item_identifier = Some(first);
        answer.batch_item_failures.push(failure);
        self.reported = self.restart_from(&answer);
        serde_json::to_vec(&answer).ok()
    }
}

/// The execution environments of one function that Lambda runs at once: at
/// a `ParallelizationFactor` of N, up to N invocations for the lanes of one
/// stream shard. A [`LambdaFunction`] serves one invocation at a time, and a
/// proxy tags (and kills) one process, so each sandbox is a [`Tagged`] of
/// its own, its own process behind its own proxy; the sandboxes share one
/// tag counter, so tags name the function's invocations across them. An
/// invocation takes whichever sandbox is free, as in Lambda.
pub(super) struct Sandboxes {
    pub(super) all: Vec<Tagged>,
    free: Mutex<Vec<usize>>,
    permits: tokio::sync::Semaphore,
}

impl Sandboxes {
    pub(super) fn new(all: Vec<Tagged>) -> Self {
        let free = Mutex::new((0..all.len()).rev().collect());
        let permits = tokio::sync::Semaphore::new(all.len());
        Self { all, free, permits }
    }

    /// The next invocation's tag (the count of invocations so far, plus one).
    pub(super) fn tag(&self) -> u64 {
        self.all.first().map_or(1, Tagged::tag)
    }

    /// Every sandbox's proxy journal, merged in arrival order.
    pub(super) fn journal(&self) -> Vec<Call> {
        let mut calls: Vec<Call> = self.all.iter().flat_map(|t| t.proxy.journal()).collect();
        calls.sort_by_key(|c| c.at);
        calls
    }

    /// The event ids of the stream batches given to the invocations with
    /// tags in `tags`, in any sandbox.
    pub(super) fn events_of(&self, tags: std::ops::Range<u64>) -> HashSet<String> {
        self.all
            .iter()
            .flat_map(|t| {
                let batches = t.batches.lock().unwrap();
                batches
                    .range(tags.clone())
                    .flat_map(|(_, b)| b.records.iter().filter_map(|(_, id)| id.clone()))
                    .collect::<Vec<String>>()
            })
            .collect()
    }

    /// Invocations that ran while another one of the function ran (in
    /// another sandbox): the lanes of a shard at work at once.
    pub(super) fn overlapping(&self) -> usize {
        let mut runs: Vec<(SystemTime, SystemTime)> = Vec::new();
        for sandbox in &self.all {
            let ends = sandbox.ends.lock().unwrap();
            for (tag, start) in sandbox.started.lock().unwrap().iter() {
                if let Some((_, end)) = ends.get(tag) {
                    runs.push((*start, *end));
                }
            }
        }
        runs.sort();
        let mut overlapped = vec![false; runs.len()];
        for i in 0..runs.len() {
            for j in i + 1..runs.len() {
                if runs[j].0 >= runs[i].1 {
                    break;
                }
                overlapped[i] = true;
                overlapped[j] = true;
            }
        }
        overlapped.into_iter().filter(|o| *o).count()
    }

    async fn call(&self, payload: &[u8]) -> Result<Vec<u8>, FunctionError> {
        // As many permits as sandboxes: a permit means one is free.
        let Ok(_permit) = self.permits.acquire().await else {
            return Err(FunctionError::Spawn("no sandbox".into()));
        };
        let Some(index) = self.free.lock().unwrap().pop() else {
            return Err(FunctionError::Spawn("no free sandbox".into()));
        };
        let outcome = self.all[index].call(payload).await;
        self.free.lock().unwrap().push(index);
        outcome
    }
}

/// The stream mapping's [`Invoker`] for a type with `async fn call(&self,
/// payload: &[u8]) -> Result<Vec<u8>, FunctionError>`: the event's round
/// trip through one call ([`crate::lambda::invoke_stream`]).
macro_rules! invoke_through_call {
    ($($function:ty),+) => {$(
        impl Invoker for &$function {
            async fn invoke(
                &self,
                event: StreamEvent,
            ) -> Result<DynamoDbEventResponse, devkit::InvokeError> {
                crate::lambda::invoke_stream(&event, |payload| async move {
                    self.call(&payload).await
                })
                .await
            }
        }
    )+};
}

invoke_through_call!(Tagged, Sandboxes);

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(ids: &[&str]) -> DynamoDbEventResponse {
        let mut answer = DynamoDbEventResponse::default();
        answer.batch_item_failures = ids
            .iter()
            .map(|id| {
                let mut failure = DynamoDbBatchItemFailure::default();
                failure.item_identifier = Some((*id).to_owned());
                failure
            })
            .collect();
        answer
    }

    /// The record judged is the one Lambda restarts from: the lowest the
    /// answer names, whatever their order (a published record reported
    /// behind a genuine failure is the one judged); the first record when
    /// an identifier names none of the batch; nothing when nothing is
    /// reported.
    #[test]
    fn the_record_judged_is_the_one_the_mapping_restarts_from() {
        let batch = Batch {
            records: ["s1", "s2", "s3"]
                .iter()
                .map(|s| ((*s).to_owned(), Some(format!("e-{s}"))))
                .collect(),
            reported: None,
        };
        let from = |ids: &[&str]| batch.restart_from(&answer(ids));
        assert_eq!(from(&["s2"]).as_deref(), Some("s2"));
        assert_eq!(from(&["s3", "s1"]).as_deref(), Some("s1"));
        assert_eq!(from(&["s3", "nope"]).as_deref(), Some("s1"));
        assert_eq!(from(&[""]).as_deref(), Some("s1"));
        assert_eq!(from(&[]), None);
    }
}
