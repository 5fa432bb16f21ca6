//! The verdict of a chaos run, from the subscriber queue, the table and
//! the proxies' journals (never from the functions' logs).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use aws_sdk_dynamodb::types::AttributeValue;
use outbox_core::keys::attr as keys;
use serde_json::Value;

use crate::lambda::FunctionError;
use crate::proxy::{Call, Fault};
use crate::Stack;

use super::faults::{label, severity, Tagged};
use super::{ChaosConfig, SinkKind};

/// A fault that met an invocation, and how many events that invocation had
/// sent to the sink by then (the most it can duplicate).
#[derive(Debug, Clone, Default)]
pub struct FaultRow {
    /// Calls the fault was injected into.
    pub injected: usize,
    /// Events the invocations it met had sent to the sink by then.
    pub exposed: usize,
    /// Duplicates charged to this fault.
    pub duplicates: usize,
}

/// What a run shows.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// The run's seed.
    pub seed: u64,
    /// The sink's name ([`SinkKind::name`]).
    pub sink: &'static str,
    /// Orders written, coverage waves included.
    pub orders: usize,
    /// Events committed: every version of every order in the table.
    pub committed: usize,
    /// Committed events the subscriber received at least once.
    pub delivered_distinct: usize,
    /// Messages the subscriber received.
    pub deliveries: usize,
    /// Committed events never delivered and not dead-lettered.
    pub lost: usize,
    /// Events delivered that were never committed.
    pub ghosts: usize,
    /// Events delivered under two different `eventId`s.
    pub identity_changes: usize,
    /// Deliveries beyond the first of an event.
    pub duplicates: usize,
    /// Duplicates no fault in the journals explains.
    pub unexplained: usize,
    /// Outbox items still pending at the end.
    pub left_pending: usize,
    /// Outbox items dead-lettered at the end.
    pub dead_letters: usize,
    /// Dead letters that record no reason.
    pub dead_letters_without_reason: usize,
    /// Dead letters `outboxctl dead-letters list` does not show.
    pub dead_letters_unlisted: usize,
    /// Undecodable items the run wrote (each must end a dead letter).
    pub poison: usize,
    /// Per aggregate, a first delivery of a version below one already
    /// delivered: in the FIFO queue's order, or on EventBridge in the
    /// order the bus's rule put the messages on the subscriber queue. A
    /// broken promise with strict ordering only.
    pub inversions: usize,
    /// The run's ordering (`strict` or `relaxed`), as the functions resolve
    /// it from the templates' environment.
    pub ordering: &'static str,
    /// The mapping's `ParallelizationFactor` (publisher sandboxes).
    pub parallelization: usize,
    /// Publisher invocations that ran while another one ran: above 0
    /// whenever the factor is (the lanes did run at once).
    pub publisher_overlaps: usize,
    /// From the end of the sink outage to the last delivery of an event
    /// created before it.
    pub recovery: Option<Duration>,
    /// Requests the workload sent to the writer.
    pub writer_requests: usize,
    /// Creates (201) and payments (200) the API acknowledged that the table
    /// does not hold.
    pub unacknowledged_writes: usize,
    /// Writer calls repeated after a 5xx, a 429 or a function error.
    pub writer_retries: usize,
    /// Publisher invocations, over every lane.
    pub publisher_invocations: u64,
    /// Publisher invocations that failed (a kill, a timeout).
    pub publisher_errors: usize,
    /// Sweeper invocations (scheduled and OnFailure).
    pub sweeper_invocations: u64,
    /// Sweeper invocations that failed.
    pub sweeper_errors: usize,
    /// Function processes started (the first and every one after a kill).
    pub cold_starts: u64,
    /// OnFailure messages the sweeper handled.
    pub on_failure_messages: usize,
    /// The run's outage outlasted the mapping's retries: the OnFailure
    /// path must have run.
    pub expect_on_failure: bool,
    /// Requests that never got a final answer.
    pub requests_unanswered: usize,
    /// Final refusals (statuses) of requests that are all valid.
    pub requests_refused: Vec<u16>,
    /// Orders in the table that no acknowledged create made.
    pub orders_unacknowledged: usize,
    /// The scripted fault kinds: each must have been injected.
    pub expected_kinds: Vec<String>,
    /// Per fault kind ([`FaultRow`]).
    pub faults: BTreeMap<String, FaultRow>,
    /// (phase, time): the writes, the drain under faults, the final sweep.
    pub phases: Vec<(&'static str, Duration)>,
    /// The whole run's time.
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
        // Strict ordering promises order per aggregate on every sink;
        // relaxed promises none once the mapping gives a batch up or runs
        // lanes at once (docs/ordering.md): reported, not judged.
        check(
            self.inversions == 0 || self.ordering != "strict",
            format!(
                "{} per-aggregate inversions with strict ordering",
                self.inversions
            ),
        );
        check(
            self.parallelization <= 1 || self.publisher_overlaps > 0,
            format!(
                "ParallelizationFactor {}, yet no two publisher invocations ran at once",
                self.parallelization
            ),
        );
        check(self.committed > 0, "nothing committed".into());
        check(
            self.requests_unanswered == 0,
            format!("{} requests never answered", self.requests_unanswered),
        );
        check(
            self.requests_refused.is_empty(),
            format!("requests refused: {:?}", self.requests_refused),
        );
        check(
            self.orders_unacknowledged == 0,
            format!(
                "{} orders in the table that no request was acknowledged for",
                self.orders_unacknowledged
            ),
        );
        check(
            !self.expect_on_failure || self.on_failure_messages > 0,
            "the outage outlasted the mapping's retries, yet no OnFailure message".into(),
        );
        for kind in &self.expected_kinds {
            check(
                self.faults.get(kind).is_some_and(|r| r.injected > 0),
                format!("scripted fault never injected: {kind}"),
            );
        }
        for (kind, row) in &self.faults {
            check(
                row.duplicates <= row.exposed,
                format!(
                    "{kind}: {} duplicates over its bound of {}",
                    row.duplicates, row.exposed
                ),
            );
        }
        out
    }

    /// One row of the summary table.
    pub fn row(&self) -> String {
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} / {} | {:.0} s | {} | {} |",
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
            if self.ordering == "strict" {
                self.inversions.to_string()
            } else {
                format!("{} (not judged)", self.inversions)
            },
            self.recovery
                .map_or("n/a".into(), |d| format!("{:.1} s", d.as_secs_f64())),
            self.on_failure_messages,
            self.publisher_errors,
            self.publisher_invocations,
            self.elapsed.as_secs_f64(),
            self.ordering,
            self.parallelization,
        )
    }

    /// The summary table's header. `infra/local/chaos.sh` totals columns by
    /// position (orders to left pending, OnFailure): new columns go last.
    pub const HEADER: &'static str = "| seed | sink | orders | events committed | delivered | lost | duplicates | unexplained | left pending | dead letters / poison | inversions | recovery | OnFailure | publisher errors / invocations | run | ordering | ParallelizationFactor |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

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
            "ORDERING {}, ParallelizationFactor {} ({} publisher sandbox{}, {} invocations ran alongside another); {} writer requests ({} retried), {} sweeper invocations ({} failed), {} cold starts; {}\n",
            self.ordering,
            self.parallelization,
            self.parallelization,
            if self.parallelization == 1 { "" } else { "es" },
            self.publisher_overlaps,
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
pub(super) async fn order_versions(stack: &Stack) -> HashMap<String, u64> {
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

/// The outbox items still pending, and when the last of them becomes
/// eligible for a sweep: its claim (a sweeper killed after claiming it)
/// expires and its backoff ends (Unix seconds; `None` when each is
/// eligible now).
pub(super) struct Pending {
    /// Items pending.
    pub count: usize,
    /// When the last of them is eligible (Unix seconds).
    pub eligible_at: Option<i64>,
}

pub(super) async fn pending_outbox(stack: &Stack) -> Pending {
    let items = stack.items().await;
    let pending: Vec<_> = items
        .iter()
        .filter(|i| is_outbox(i) && !i.contains_key(keys::DEAD_LETTERED_AT))
        .collect();
    let eligible_at = pending
        .iter()
        .flat_map(|i| [keys::CLAIMED_UNTIL, keys::NEXT_ATTEMPT_AT].map(|a| attr(i, a)))
        .filter_map(|v| v?.parse::<i64>().ok())
        .max();
    Pending {
        count: pending.len(),
        eligible_at,
    }
}

/// What a pending item carries that decides when a sweep takes it.
fn pending_state(item: &HashMap<String, AttributeValue>) -> String {
    let mut state = attr(item, "SK").unwrap_or("?").to_owned();
    for name in [
        keys::ATTEMPTS,
        keys::NEXT_ATTEMPT_AT,
        keys::CLAIMED_UNTIL,
        keys::HELD_BEHIND,
    ] {
        if let Some(value) = attr(item, name) {
            let _ = write!(state, " {name}={value}");
        }
    }
    state
}

/// An event as the subscriber received it.
struct Received {
    event_id: String,
    aggregate: String,
    version: u64,
}

/// When the queue accepted `message` (its `SentTimestamp`, ms).
fn sent_at(message: &Value) -> Option<u64> {
    message["__sqs"]["SentTimestamp"].as_str()?.parse().ok()
}

/// The subscriber's messages (as received) in the order the sink delivered
/// them: the FIFO queue's own (it keeps each group's order). EventBridge's
/// is a standard queue, which promises none, so its messages are put in
/// the order the bus's rule sent them to it (`SentTimestamp`, in ms, set as
/// moto's rule delivers within `PutEvents`; equal times keep the order
/// received, which for moto's queue is the order sent). Strict ordering
/// sends an aggregate's next event only after the call that carried the one
/// before it has returned. `Err` for a message without its time.
pub fn in_delivery_order(sink: SinkKind, mut messages: Vec<Value>) -> Result<Vec<Value>, String> {
    if sink == SinkKind::EventBridge {
        if let Some(m) = messages.iter().find(|m| sent_at(m).is_none()) {
            return Err(format!("a message without its SentTimestamp: {m}"));
        }
        messages.sort_by_key(sent_at);
    }
    Ok(messages)
}

/// Per aggregate, each first delivery of a version below one already
/// delivered, in the order of `messages` (duplicates are not judged: a
/// duplicate comes after the event it repeats); one line each.
pub fn inversions(sink: SinkKind, messages: &[Value]) -> Vec<String> {
    let mut seen: HashSet<String> = HashSet::new();
    let mut highest: HashMap<String, u64> = HashMap::new();
    let mut out = Vec::new();
    for r in messages.iter().filter_map(|m| received(sink, m)) {
        if !seen.insert(r.event_id.clone()) {
            continue;
        }
        let top = highest.entry(r.aggregate.clone()).or_default();
        if r.version < *top {
            out.push(format!(
                "inversion: {} v{} first delivered after v{} ({})",
                r.aggregate, r.version, *top, r.event_id
            ));
        }
        *top = (*top).max(r.version);
    }
    out
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

/// The verdict, from the table and the subscriber queue's `messages` (in
/// arrival order); duplicates are
/// attributed from the proxies' journals.
pub(super) async fn judge(
    config: &ChaosConfig,
    stack: &Stack,
    messages: Vec<Value>,
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
                verdict
                    .examples
                    .push(format!("left pending: {}", pending_state(item)));
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

    // Delivered, in the order the sink delivered them.
    let messages = in_delivery_order(config.sink, messages)?;
    let inverted = inversions(config.sink, &messages);
    verdict.inversions = inverted.len();
    verdict.examples.extend(inverted);
    let mut deliveries: HashMap<String, usize> = HashMap::new();
    let mut ids_of: HashMap<(String, u64), HashSet<String>> = HashMap::new();
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
        *deliveries.entry(r.event_id.clone()).or_default() += 1;
        ids_of
            .entry((r.aggregate.clone(), r.version))
            .or_default()
            .insert(r.event_id.clone());
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

    // Attribution (docs/reliability.md, "How each duplicate is
    // explained"): every extra delivery needs a cause, in the journals, that
    // could have produced it; one cause explains one extra delivery of an
    // event at most.
    let journals: Vec<Vec<Call>> = functions.iter().map(|f| f.proxy.journal()).collect();
    let history = Histories {
        names: functions.iter().map(|f| f.function.name()).collect(),
        errors: functions
            .iter()
            .map(|f| f.errors.lock().unwrap().clone())
            .collect(),
        started: functions
            .iter()
            .map(|f| f.started.lock().unwrap().clone())
            .collect(),
        reported: functions
            .iter()
            .map(|f| f.reported.lock().unwrap().clone())
            .collect(),
        out_of_time: functions.iter().map(|f| out_of_time(f)).collect(),
        journals,
    };
    let mut forwards: HashMap<&str, Vec<Forward>> = HashMap::new();
    for (function, journal) in history.journals.iter().enumerate() {
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
    // Faults injected, and the events their invocation had sent by then
    // (the most they can duplicate).
    for (function, journal) in history.journals.iter().enumerate() {
        for (index, call) in journal.iter().enumerate() {
            let Some(fault) = &call.fault else { continue };
            if *fault == Fault::Pass {
                continue;
            }
            let row = verdict
                .faults
                .entry(history.kind_of(function, call))
                .or_default();
            row.injected += 1;
            row.exposed += history.sent(function, call.tag, Some(index));
        }
    }
    let mut used: HashSet<(Cause, String)> = HashSet::new();
    let mut counted: HashSet<Cause> = HashSet::new();
    for (id, n) in &deliveries {
        let extra = n - 1;
        if extra == 0 {
            continue;
        }
        let mut list = forwards.remove(id.as_str()).unwrap_or_default();
        list.sort_by_key(|f| f.at);
        let mut explained = 0;
        for pair in list.windows(2) {
            let Some(cause) = history.explain(id, &pair[0], &pair[1]) else {
                continue;
            };
            if !used.insert((cause.clone(), id.clone())) {
                continue;
            }
            let row = verdict.faults.entry(cause.kind.clone()).or_default();
            if cause.fault_call.is_none() && counted.insert(cause.clone()) {
                // A cause that is not an injected fault (a lost answer, a
                // failed invocation, an overlap): counted once, with the
                // events its invocation had sent.
                row.injected += 1;
                row.exposed += history.sent(cause.function, cause.tag, cause.upto);
            }
            row.duplicates += 1;
            explained += 1;
        }
        if explained < extra {
            verdict.unexplained += extra - explained;
            let path: Vec<String> = list
                .iter()
                .map(|f| format!("{}#{}", history.names[f.function], f.tag))
                .collect();
            verdict.examples.push(format!(
                "unexplained: {id} delivered {n}×, forwarded by {path:?}"
            ));
        }
    }
    Ok(verdict)
}

/// One forward of an event to the sink: the call that carried it.
struct Forward {
    function: usize,
    tag: u64,
    index: usize,
    at: SystemTime,
}

/// What explains one extra delivery: a kind (the tables' row) and the
/// instance (the function, its invocation and, for an injected fault, the
/// call that got it).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Cause {
    kind: String,
    function: usize,
    tag: u64,
    /// The faulted call, for an injected fault.
    fault_call: Option<usize>,
    /// The last call whose events it exposes (`None`: the whole invocation).
    upto: Option<usize>,
}

/// The functions' journals, errors, start times and reported failures.
struct Histories<'a> {
    names: Vec<&'a str>,
    journals: Vec<Vec<Call>>,
    errors: Vec<BTreeMap<u64, FunctionError>>,
    started: Vec<BTreeMap<u64, SystemTime>>,
    reported: Vec<BTreeSet<u64>>,
    /// Invocations that ran to their own deadline (the Lambda deadline less
    /// the function's margin): what was left then was left undone.
    out_of_time: Vec<BTreeSet<u64>>,
}

/// The invocations of `function` that ended at or after the deadline it
/// keeps to (the Lambda deadline less its `DEADLINE_MARGIN`).
fn out_of_time(function: &Tagged) -> BTreeSet<u64> {
    let margin = match function.function.name() {
        "publisher" => publisher::DEADLINE_MARGIN,
        "sweeper" => sweeper::DEADLINE_MARGIN,
        _ => return BTreeSet::new(),
    };
    function
        .ends
        .lock()
        .unwrap()
        .iter()
        .filter(|(_, (deadline, end))| *end + margin >= *deadline)
        .map(|(tag, _)| *tag)
        .collect()
}

impl Histories<'_> {
    fn kind_of(&self, function: usize, call: &Call) -> String {
        label(
            self.names[function],
            &call.operation,
            call.fault.as_ref().unwrap_or(&Fault::Pass),
        )
    }

    /// Events the invocation `tag` sent, up to call `upto` (all: `None`).
    fn sent(&self, function: usize, tag: u64, upto: Option<usize>) -> usize {
        self.journals[function]
            .iter()
            .enumerate()
            .filter(|(i, c)| c.tag == tag && upto.is_none_or(|u| *i <= u))
            .map(|(_, c)| c.delivered.len())
            .sum()
    }

    fn fault(&self, function: usize, index: usize) -> Cause {
        let call = &self.journals[function][index];
        Cause {
            kind: self.kind_of(function, call),
            function,
            tag: call.tag,
            fault_call: Some(index),
            upto: Some(index),
        }
    }

    fn other(&self, kind: String, function: usize, tag: u64, upto: Option<usize>) -> Cause {
        Cause {
            kind,
            function,
            tag,
            fault_call: None,
            upto,
        }
    }

    /// Why `event`, forwarded by `first`, was forwarded again by `next`;
    /// `None` when nothing in the journals could have caused it.
    fn explain(&self, event: &str, first: &Forward, next: &Forward) -> Option<Cause> {
        let (f, tag) = (first.function, first.tag);
        let journal = &self.journals[f];
        let name = self.names[f];
        let later = || {
            journal
                .iter()
                .enumerate()
                .skip(first.index + 1)
                .filter(move |(_, c)| c.tag == tag)
        };
        let faulted = |c: &Call| c.fault.as_ref().is_some_and(|x| *x != Fault::Pass);
        // 1. The sink call took effect and its caller never heard (an
        //    attempt timeout, the deadline, a SIGKILL after the call): the
        //    call is sent again, or its records come back.
        let call = &journal[first.index];
        if !call.answered {
            return Some(if faulted(call) {
                self.fault(f, first.index)
            } else {
                self.other(
                    format!(
                        "{name}: sink answer lost (the caller's timeout or deadline came first)"
                    ),
                    f,
                    tag,
                    Some(first.index),
                )
            });
        }
        let deleted = later().find(|(_, c)| c.deleted.iter().any(|d| d == event));
        let Some((_, delete)) = deleted else {
            // The item was never deleted by that invocation: something
            // after the sink call stopped it.
            // 2. A SIGKILL later in the invocation.
            if let Some((i, _)) =
                later().find(|(_, c)| matches!(c.fault, Some(Fault::Crash { .. })))
            {
                return Some(self.fault(f, i));
            }
            // 3. The delete of this very item failed (its faults outlasted
            //    the SDK's retries, or it hung).
            if let Some((i, _)) =
                later().find(|(_, c)| faulted(c) && c.deletes.iter().any(|d| d == event))
            {
                return Some(self.fault(f, i));
            }
            // 4. The invocation ran to its deadline before this delete took
            //    effect: the delete was cut, or never started (the
            //    functions stop at their deadline and leave the rest to
            //    the sweeper).
            // 5. The invocation failed before its deletes (a call that hung
            //    past the deadline, a function error).
            // Either way a hung call is named when there is one.
            let stopped = match self.errors[f].get(&tag) {
                Some(error) => Some(format!(
                    "{name}: invocation failed before its deletes ({})",
                    error.kind()
                )),
                None if self.out_of_time[f].contains(&tag) => {
                    Some(format!("{name}: deadline reached before its deletes"))
                }
                None => None,
            };
            if let Some(kind) = stopped {
                let hang = journal
                    .iter()
                    .position(|c| c.tag == tag && c.fault == Some(Fault::Hang));
                return Some(match hang {
                    Some(i) => self.fault(f, i),
                    None => self.other(kind, f, tag, None),
                });
            }
            return None;
        };
        // The item was deleted after it was published: the next forward
        // came from something that did not need the item.
        let next_name = self.names[next.function];
        // 6. Lambda delivered the record again: the invocation reported a
        //    record at or before it as failed, or failed as a whole.
        if name == "publisher"
            && next_name == "publisher"
            && next.tag > tag
            && (self.reported[f].contains(&tag) || self.errors[f].contains_key(&tag))
        {
            let reason = journal
                .iter()
                .enumerate()
                .filter(|(_, c)| c.tag == tag && faulted(c))
                .max_by_key(|(_, c)| c.fault.as_ref().map_or(0, severity))
                .map(|(_, c)| self.kind_of(f, c))
                .unwrap_or_else(|| "a reported failure".to_owned());
            return Some(self.other(
                format!("publisher: batch delivered again after {reason}"),
                f,
                tag,
                None,
            ));
        }
        // 7. The sweeper published it before the stream delivered its
        //    insert (STRANDED_AFTER_SECONDS=0 in this run): the mapping
        //    delivers every record, whatever the table holds.
        if name == "sweeper" && next_name == "publisher" {
            return Some(self.other(
                "sweeper published ahead of the stream (STRANDED_AFTER_SECONDS=0)".to_owned(),
                f,
                tag,
                None,
            ));
        }
        // 8. The sweep that sent it again had started (and read its page)
        //    before the delete reached the table.
        if next_name == "sweeper"
            && self.started[next.function]
                .get(&next.tag)
                .is_some_and(|start| *start < delete.at)
        {
            return Some(self.other(
                "sweeper read the item before its delete reached the table".to_owned(),
                next.function,
                next.tag,
                None,
            ));
        }
        None
    }
}

/// From the end of the outage (the first publisher call after it) to the
/// last first delivery of an event created before that moment.
pub(super) fn recovery(journal: &[Call], healed_tag: u64, _verdict: &Verdict) -> Option<Duration> {
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
