//! How a chaos run's duplicates are explained (docs/reliability.md, "How
//! each duplicate is explained"): every extra delivery of an event needs a
//! cause in the proxies' journals (an injected fault, a lost answer, a
//! failed invocation, a redelivery, a sweep's race) that could have
//! produced it, and each fault kind is charged with its duplicates against
//! the events it exposed.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::time::SystemTime;

use crate::lambda::FunctionError;
use crate::proxy::{Call, Fault};

use super::faults::{faulted, kind, severity, snapshot, Batch, Tagged};
use super::verdict::Verdict;

impl<'a> Histories<'a> {
    /// What `functions` recorded, copied once the run is over.
    pub(super) fn of(functions: &[&'a Tagged]) -> Self {
        let of = functions.iter().map(|f| History {
            name: f.function.name(),
            journal: f.proxy.journal(),
            errors: snapshot(&f.errors),
            started: snapshot(&f.started),
            batches: snapshot(&f.batches),
            on_failure: snapshot(&f.on_failure),
            deadlines: deadlines(f),
            window: design_window(f),
            generations: snapshot(&f.generations),
        });
        Self { of: of.collect() }
    }

    /// Each event's forwards to the sink, earliest first.
    pub(super) fn forwards(&self) -> HashMap<&str, Vec<Forward>> {
        let mut forwards: HashMap<&str, Vec<Forward>> = HashMap::new();
        for (function, of) in self.of.iter().enumerate() {
            for (index, call) in of.journal.iter().enumerate() {
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
        for list in forwards.values_mut() {
            list.sort_by_key(|f| f.at);
        }
        forwards
    }
}

/// Fills the verdict's fault table from the journals of `history`: each
/// fault injected, the events its invocation exposed, and the duplicates
/// among `deliveries` (event id → messages received) it explains; what
/// nothing explains counts as unexplained. Then judges the publisher's
/// answers ([`misreported`]).
pub(super) fn attribute(
    verdict: &mut Verdict,
    history: &Histories<'_>,
    deliveries: &HashMap<String, usize>,
) {
    let mut forwards = history.forwards();
    // Faults injected, and the events their invocation had sent by then
    // (the most they can duplicate; for one that stopped it, all it sent).
    for (function, of) in history.of.iter().enumerate() {
        for (index, call) in of.journal.iter().enumerate().filter(|(_, c)| faulted(c)) {
            let row = verdict.faults.entry(kind(of.name, call)).or_default();
            row.injected += 1;
            // A kill or a hang stops the invocation: the calls in flight
            // beside it, journaled when answered, were sent by then too.
            let stopped = matches!(call.fault, Some(Fault::Hang | Fault::Crash { .. }));
            let upto = (!stopped).then_some(index);
            row.exposed += history.sent(function, call.tag, upto);
        }
    }
    let mut used: HashSet<(Cause, String)> = HashSet::new();
    let mut counted: HashSet<Cause> = HashSet::new();
    // Duplicates charged to each cause instance, against its design bound.
    let mut charged: HashMap<Cause, usize> = HashMap::new();
    // Pair by pair: every forward after an event's first needs a cause of
    // its own, delivered or not (an SNS FIFO topic drops a resend within
    // its deduplication window, and an unexplained resend must not hide
    // behind a dropped one); every delivery after the first needs a forward.
    let events: BTreeSet<&str> = deliveries
        .keys()
        .map(String::as_str)
        .chain(forwards.keys().copied())
        .collect();
    for id in events {
        let n = deliveries.get(id).copied().unwrap_or(0);
        let extra = n.saturating_sub(1);
        let list = forwards.remove(id).unwrap_or_default();
        if extra == 0 && list.len() < 2 {
            continue;
        }
        let mut explained = 0;
        let mut unexplained = 0;
        for k in 1..list.len() {
            let next = &list[k];
            // A forward by an invocation that had forwarded the event
            // before is judged against its own earlier forward, whatever
            // came between (a sweep that sends an event, sees the
            // publisher send it too, and sends it again is its own
            // resend); any other against the forward just before it.
            let prior = list[..k]
                .iter()
                .rev()
                .find(|f| {
                    history.of[f.function].name == history.of[next.function].name
                        && f.tag == next.tag
                })
                .unwrap_or(&list[k - 1]);
            let cause = history
                .explain(id, prior, next)
                .filter(|cause| used.insert((cause.clone(), id.to_owned())));
            let Some(cause) = cause else {
                unexplained += 1;
                continue;
            };
            let row = verdict.faults.entry(cause.kind.clone()).or_default();
            if cause.fault_call.is_none() && counted.insert(cause.clone()) {
                // A cause that is not an injected fault (a lost answer, a
                // failed invocation, an overlap): counted once, with the
                // events its invocation had sent.
                row.injected += 1;
                row.exposed += history.sent(cause.function, cause.tag, cause.upto);
            }
            // The table charges the deliveries: a resend the sink dropped
            // is explained but repeats nothing.
            if explained < extra {
                row.duplicates += 1;
                *charged.entry(cause).or_default() += 1;
            }
            explained += 1;
        }
        // A delivery beyond the forwards (none explains it).
        let unforwarded = extra.saturating_sub(list.len().saturating_sub(1));
        if unexplained + unforwarded > 0 {
            verdict.unexplained += unexplained + unforwarded;
            let path: Vec<String> = list
                .iter()
                .map(|f| format!("{}#{}", history.of[f.function].name, f.tag))
                .collect();
            verdict.examples.push(format!(
                "unexplained: {id} delivered {n}×, forwarded by {path:?}"
            ));
            if std::env::var("CHAOS_DEBUG").is_ok() {
                for fwd in &list {
                    let f = fwd.function;
                    let ended = history.of[f].deadlines.out_of_time.contains(&fwd.tag);
                    let err = history.of[f].errors.get(&fwd.tag).map(|e| e.kind());
                    eprintln!(
                        "DEBUG {id} {}#{} late={ended} error={err:?}",
                        history.of[f].name, fwd.tag
                    );
                    for c in history.of[f].journal.iter().filter(|c| c.tag == fwd.tag) {
                        eprintln!(
                            "DEBUG   {:?} {} fault={:?} answered={} carries={} deletes={} deleted={}",
                            c.at, c.operation, c.fault, c.answered,
                            c.delivered.iter().any(|d| d == id),
                            c.deletes.iter().any(|d| d == id),
                            c.deleted.iter().any(|d| d == id),
                        );
                    }
                }
            }
        }
    }
    check_design_bounds(verdict, history, &charged);
    misreported(verdict, history);
}

/// Every publisher answer that reported a failed record must name a record
/// its invocation had not published (Lambda delivers the reported record
/// and every one after it again): an answer naming a record whose event an
/// answered sink call of that invocation carried is counted, with an
/// example. One exception, the publisher's own rule: a record it
/// published but could neither delete nor hand to the scheduled sweep is
/// reported, so that the stream delivers it again; its journal must show
/// both for that very record (a delete asked for its event that never
/// reached the table, and a bookkeeping write (`UpdateItem`) of its item
/// that met a fault or was answered after the invocation's last moment to
/// start one ([`Call::hands_over`]), or none answered in time by an
/// invocation that ran out of that time: its deadline refused the write
/// before it was sent). The record judged is the one the mapping restarts
/// from: the lowest the answer named ([`Batch::reported_at`]).
fn misreported(verdict: &mut Verdict, history: &Histories<'_>) {
    for function in &history.of {
        for (tag, batch) in &function.batches {
            let Some(q) = batch.reported_at() else {
                continue;
            };
            let Some(event) = batch.records[q].1.as_deref() else {
                continue;
            };
            let journal = || function.journal.iter().filter(|c| c.tag == *tag);
            let published = journal().any(|c| c.answered && c.delivered.iter().any(|d| d == event));
            let never_deleted = journal().any(|c| c.deletes.iter().any(|d| d == event))
                && !journal().any(|c| c.deleted.iter().any(|d| d == event));
            let finish = function.deadlines.delete.get(tag);
            let hand_overs = || {
                journal().filter(|c| {
                    c.operation == "UpdateItem" && c.hands_over.iter().any(|u| u == event)
                })
            };
            let hand_over_failed = hand_overs()
                .any(|c| faulted(c) || finish.is_some_and(|finish| c.at >= *finish))
                || (function.deadlines.out_of_finishing_time.contains(tag)
                    && !hand_overs()
                        .any(|c| c.succeeded && finish.is_none_or(|finish| c.at < *finish)));
            if published && !(never_deleted && hand_over_failed) {
                verdict.misreported += 1;
                verdict.examples.push(format!(
                    "misreported: {}#{tag} reported record {q} ({event}) failed, which it had published",
                    function.name
                ));
            }
        }
    }
}

/// Each cause instance's duplicates against what the design lets it
/// repeat ([`Histories::design_bound`]): the fault table's largest
/// instance per kind, and every instance over its bound counted (the
/// verdict fails), with an example.
fn check_design_bounds(
    verdict: &mut Verdict,
    history: &Histories<'_>,
    charged: &HashMap<Cause, usize>,
) {
    let mut instances: Vec<(&Cause, usize)> = charged.iter().map(|(c, n)| (c, *n)).collect();
    instances.sort_by(|a, b| {
        (&a.0.kind, a.0.function, a.0.tag).cmp(&(&b.0.kind, b.0.function, b.0.tag))
    });
    for (cause, duplicates) in instances {
        let bound = history.design_bound(cause);
        let row = verdict.faults.entry(cause.kind.clone()).or_default();
        if duplicates > row.largest.0 {
            row.largest = (duplicates, bound);
        }
        if duplicates > bound {
            row.over_design += 1;
            verdict.examples.push(format!(
                "over the design bound: {} in {}#{}: {duplicates} duplicates, the design allows {bound}",
                cause.kind, history.of[cause.function].name, cause.tag
            ));
        }
    }
}

/// One forward of an event to the sink: the call that carried it.
pub(super) struct Forward {
    pub(super) function: usize,
    pub(super) tag: u64,
    index: usize,
    pub(super) at: SystemTime,
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
    /// What the design lets it repeat.
    bound: Bound,
}

/// A cause that is not an injected fault, exposing its whole invocation.
fn other(kind: impl Into<String>, function: usize, tag: u64, bound: Bound) -> Cause {
    Cause {
        kind: kind.into(),
        function,
        tag,
        fault_call: None,
        upto: None,
        bound,
    }
}

/// What the design lets one cause repeat (its instance's bound, checked
/// against the duplicates charged to it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Bound {
    /// The events of one call: a sink call whose answer was lost, or a
    /// delete that failed.
    Call,
    /// An invocation stopped before its deletes (a kill, the deadline, a
    /// failure): every event it sent (nothing is sent after the stop),
    /// and never more than its function's [`design_window`].
    Stopped,
    /// A batch delivered again: the records from the reported one on
    /// (every record, when the invocation failed) that it published.
    Batch,
    /// A sweep that raced the stream or a delete: the events it sent.
    Invocation,
}

/// Each function's [`History`].
pub(super) struct Histories<'a> {
    pub(super) of: Vec<History<'a>>,
}

/// One function's journal, errors and start times (tag → each), the
/// publisher's batches with the record each answer reported failed, the
/// sweeper's invocations by the OnFailure queue, and its deadlines.
pub(super) struct History<'a> {
    pub(super) name: &'a str,
    pub(super) journal: Vec<Call>,
    pub(super) errors: BTreeMap<u64, FunctionError>,
    pub(super) started: BTreeMap<u64, SystemTime>,
    pub(super) batches: BTreeMap<u64, Batch>,
    pub(super) on_failure: BTreeSet<u64>,
    deadlines: Deadlines,
    /// The most events one invocation can have published and not deleted
    /// at any moment, by design ([`design_window`]).
    window: usize,
    /// The process each invocation ran in (tag → its sandbox's
    /// generation).
    generations: BTreeMap<u64, u64>,
}

/// The most events one invocation of `function` can have published and
/// not yet deleted at any moment, by the relay's design (docs/publisher.md,
/// "deletes keep up with the sends"): the calls of a wave in flight
/// (`SEND_CONCURRENCY` calls of 10 events), the delete batches beside them
/// (what earlier waves published: fewer than 25 left over and a wave) and
/// fewer than 25 more; the sweeper runs that per shard, every shard at
/// once. A kill, a deadline or a failed invocation can repeat no more.
fn design_window(function: &Tagged) -> usize {
    let f = &function.function;
    let number = |name: &str, default: usize| {
        f.env(name)
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(default)
    };
    let calls = number("SEND_CONCURRENCY", outbox_engine::DEFAULT_SEND_CONCURRENCY);
    let lanes = match f.name() {
        "sweeper" => number(
            "OUTBOX_SHARDS",
            usize::from(outbox_runtime::DEFAULT_OUTBOX_SHARDS),
        ),
        _ => 1,
    };
    lanes * window_of(calls)
}

/// [`design_window`] of one relay with `calls` sink calls in flight.
fn window_of(calls: usize) -> usize {
    let wave = calls * outbox_core::size::MAX_EVENTBRIDGE_ENTRIES;
    let leftover = outbox_engine::MAX_BATCH_WRITE - 1;
    // A wave in flight, and what earlier waves left: in the delete
    // batches beside it, or fewer than 25 waiting to fill one.
    wave + (leftover + wave)
}

/// One function's deadlines, per invocation (tag).
#[derive(Default)]
struct Deadlines {
    /// The work deadline, as `outbox_engine::Deadline` computes it: the
    /// Lambda deadline less the function's `DEADLINE_MARGIN`, at most a
    /// quarter of the time the invocation had.
    work: BTreeMap<u64, SystemTime>,
    /// The last moment to start a delete: the work deadline plus the
    /// relay's `FINISH_GRACE`, never past 200 ms before the Lambda deadline.
    delete: BTreeMap<u64, SystemTime>,
    /// Invocations that ended at or after their work deadline: what was
    /// left then was left undone.
    out_of_time: BTreeSet<u64>,
    /// Invocations that ended at or after their last moment to start a
    /// delete: a delete or a hand-over they had still to make was refused
    /// by their deadline before it was sent (`DeadlineReached`, no call in
    /// the journal).
    out_of_finishing_time: BTreeSet<u64>,
}

fn deadlines(function: &Tagged) -> Deadlines {
    let mut out = Deadlines::default();
    let margin = match function.function.name() {
        "publisher" => publisher::DEADLINE_MARGIN,
        "sweeper" => sweeper::DEADLINE_MARGIN,
        _ => return out,
    };
    let started = snapshot(&function.started);
    for (tag, (deadline, end)) in snapshot(&function.ends) {
        let Some(left) = started
            .get(&tag)
            .and_then(|s| deadline.duration_since(*s).ok())
        else {
            continue;
        };
        let work = deadline - margin.min(left / 4);
        let hard = deadline - std::time::Duration::from_millis(200);
        let delete = (work + outbox_engine::FINISH_GRACE).min(hard);
        if end >= work {
            out.out_of_time.insert(tag);
        }
        if end >= delete {
            out.out_of_finishing_time.insert(tag);
        }
        out.work.insert(tag, work);
        out.delete.insert(tag, delete);
    }
    out
}

impl Histories<'_> {
    /// Events the invocation `tag` sent, up to call `upto` (all: `None`).
    fn sent(&self, function: usize, tag: u64, upto: Option<usize>) -> usize {
        self.of[function]
            .journal
            .iter()
            .enumerate()
            .filter(|(i, c)| c.tag == tag && upto.is_none_or(|u| *i <= u))
            .map(|(_, c)| c.delivered.len())
            .sum()
    }

    /// Whether the answer of invocation `tag` of `function` reported
    /// `event`'s record, or one before it in the batch, as failed.
    fn redelivers(&self, function: usize, tag: u64, event: &str) -> bool {
        self.of[function].batches.get(&tag).is_some_and(|batch| {
            matches!((batch.reported_at(), batch.position(event)), (Some(q), Some(p)) if q <= p)
        })
    }

    /// Whether invocation `tag` of `function` was the first its process
    /// served (by its sandbox's generations; unknown: no).
    fn first_of_its_process(&self, function: usize, tag: u64) -> bool {
        let generations = &self.of[function].generations;
        generations.get(&tag).is_some_and(|generation| {
            generations
                .range(..tag)
                .all(|(_, earlier)| earlier != generation)
        })
    }

    fn fault(&self, function: usize, index: usize, bound: Bound) -> Cause {
        let call = &self.of[function].journal[index];
        Cause {
            kind: kind(self.of[function].name, call),
            function,
            tag: call.tag,
            fault_call: Some(index),
            // A stopped invocation exposes all it sent: the proxy journals
            // a call when its answer arrives (a hang when it starts), so
            // the calls in flight beside a kill, and those sent beside a
            // hang until the deadline, stand after the faulted call.
            upto: (bound != Bound::Stopped).then_some(index),
            bound,
        }
    }

    /// Call `index` of `function` took effect and its caller never heard:
    /// its injected fault, or else the caller's own timeout or deadline.
    fn lost_answer(&self, function: usize, index: usize) -> Cause {
        let call = &self.of[function].journal[index];
        if faulted(call) {
            return self.fault(function, index, Bound::Call);
        }
        let kind = format!(
            "{}: sink answer lost (the caller's timeout or deadline came first)",
            self.of[function].name
        );
        Cause {
            upto: Some(index),
            ..other(kind, function, call.tag, Bound::Call)
        }
    }

    /// The most duplicates the design lets `cause` repeat, from its
    /// invocation's journal and batch.
    fn design_bound(&self, cause: &Cause) -> usize {
        let (f, tag) = (cause.function, cause.tag);
        match (cause.bound, cause.upto) {
            (Bound::Call, Some(i)) => {
                let call = &self.of[f].journal[i];
                call.delivered.len().max(call.deletes.len())
            }
            (Bound::Stopped, upto) => self.sent(f, tag, upto).min(self.of[f].window),
            (Bound::Batch, _) => {
                let published: HashSet<&str> = self.of[f]
                    .journal
                    .iter()
                    .filter(|c| c.tag == tag && c.answered)
                    .flat_map(|c| c.delivered.iter().map(String::as_str))
                    .collect();
                self.of[f].batches.get(&tag).map_or(0, |batch| {
                    let from = if self.of[f].errors.contains_key(&tag) {
                        0
                    } else {
                        batch.reported_at().unwrap_or(batch.records.len())
                    };
                    batch.records[from..]
                        .iter()
                        .filter(|(_, id)| id.as_deref().is_some_and(|id| published.contains(id)))
                        .count()
                })
            }
            (_, upto) => self.sent(f, tag, upto),
        }
    }

    /// Why `event`, forwarded by `first`, was forwarded again by `next`;
    /// `None` when nothing in the journals could have caused it.
    fn explain(&self, event: &str, first: &Forward, next: &Forward) -> Option<Cause> {
        let (f, tag) = (first.function, first.tag);
        // The functions of the two forwards.
        let (of, next_of) = (&self.of[f], &self.of[next.function]);
        let (journal, name, next_name) = (&of.journal, of.name, next_of.name);
        let later = || {
            journal
                .iter()
                .enumerate()
                .skip(first.index + 1)
                .filter(move |(_, c)| c.tag == tag)
        };
        // 1. The sink call took effect and its caller never heard (an
        //    attempt timeout, the deadline, a SIGKILL after the call): the
        //    call is sent again, or its records come back.
        if !journal[first.index].answered {
            return Some(self.lost_answer(f, first.index));
        }
        // Every other cause ends the first invocation's part: the resend
        // must come from another invocation. An invocation that sends an
        // event again after an answered call is never the design's (a
        // failed entry is not delivered, so its retry is no resend).
        // The journal stamps a call when it took effect, so an SDK resend
        // can stand before the slow original it repeats: a pair in one
        // invocation is explained by whichever of its two calls lost its
        // answer.
        if next_name == name && next.tag == tag {
            let resend = &next_of.journal[next.index];
            return (!resend.answered).then(|| self.lost_answer(next.function, next.index));
        }
        let deleted = later().find(|(_, c)| c.deleted.iter().any(|d| d == event));
        let Some((_, delete)) = deleted else {
            // The item was never deleted by that invocation. If a delete
            // call carrying it was answered as a success, the function was
            // told it was done (a delete that reached the table lists it):
            // nothing the design does brings the event back, whatever
            // stopped the invocation later.
            if later()
                .any(|(_, c)| c.answered && c.succeeded && c.deletes.iter().any(|d| d == event))
            {
                return None;
            }
            // Otherwise something after the sink call stopped it.
            // 3. The delete of this very item failed (its faults outlasted
            //    the SDK's retries, or it hung): the item goes to the
            //    sweeper whatever happens next, so this comes before a kill.
            if let Some((i, _)) =
                later().find(|(_, c)| faulted(c) && c.deletes.iter().any(|d| d == event))
            {
                return Some(self.fault(f, i, Bound::Call));
            }
            // 2. A SIGKILL later in the invocation.
            if let Some((i, _)) =
                later().find(|(_, c)| matches!(c.fault, Some(Fault::Crash { .. })))
            {
                return Some(self.fault(f, i, Bound::Stopped));
            }
            // 4. The invocation ran to its deadline, and its own journal
            //    shows the deadline cut a call after the send: a call of
            //    that invocation, with no fault, that was never answered
            //    (the functions stop at their deadline and leave the rest
            //    to the sweeper); a call the gate held and its caller gave
            //    up counts only from the work deadline on (before it, the
            //    caller gave up by its attempt timeout, and sent again).
            //    Running late alone explains nothing.
            // 5. The invocation failed before its deletes (a call that hung
            //    past the deadline, a function error).
            // Either way a hung call is named when there is one.
            // Or the invocation's last call from the send on took effect
            // after the last moment a delete could start: the relay starts
            // none then.
            let cut = || {
                let latest = later().map(|(_, c)| c.at).fold(first.at, SystemTime::max);
                let work = of.deadlines.work.get(&tag);
                later().any(|(_, c)| {
                    !c.answered
                        && !faulted(c)
                        && (c.reached || work.is_some_and(|work| c.at >= *work))
                }) || of
                    .deadlines
                    .delete
                    .get(&tag)
                    .is_some_and(|last| latest >= *last)
            };
            let stopped = match of.errors.get(&tag) {
                Some(error) => Some(format!(
                    "{name}: invocation failed before its deletes ({})",
                    error.kind()
                )),
                None if of.deadlines.out_of_time.contains(&tag) && cut() => Some(format!(
                    "{name}: the deadline cut a call before its deletes"
                )),
                None => None,
            };
            if let Some(kind) = stopped {
                let hang = journal
                    .iter()
                    .position(|c| c.tag == tag && c.fault == Some(Fault::Hang));
                return Some(match hang {
                    Some(i) => self.fault(f, i, Bound::Stopped),
                    None => other(kind, f, tag, Bound::Stopped),
                });
            }
            return None;
        };
        // The item was deleted after it was published: the next forward
        // came from something that did not need the item.
        // 6. Lambda delivered the record again: the invocation reported
        //    this record, or one before it in its batch, as failed (or
        //    failed as a whole), and the redelivered batch went to another
        //    process (another sandbox, or the one that replaced a killed
        //    process), whose check had not seen it (the process that
        //    deleted the item checks a batch it has seen and finds it
        //    gone; a new one checks its first batch). A new process's first
        //    invocation checks its batch whatever it is, and finds a
        //    deleted item gone: its resend is explained only when its
        //    journal shows that check's read met a fault.
        let other_process =
            next.function != f || of.generations.get(&tag) != of.generations.get(&next.tag);
        let checked = self.first_of_its_process(next.function, next.tag)
            && !next_of.journal.iter().any(|c| {
                c.tag == next.tag
                    && matches!(c.operation.as_str(), "BatchGetItem" | "Query")
                    && faulted(c)
            });
        if name == "publisher"
            && next_name == "publisher"
            && next.tag > tag
            && other_process
            && !checked
            && (of.errors.contains_key(&tag) || self.redelivers(f, tag, event))
        {
            let reason = journal
                .iter()
                .filter(|c| c.tag == tag && faulted(c))
                .max_by_key(|c| c.fault.as_ref().map_or(0, severity))
                .map(|c| kind(name, c))
                .unwrap_or_else(|| "a reported failure".to_owned());
            let kind = format!("publisher: batch delivered again after {reason}");
            return Some(other(kind, f, tag, Bound::Batch));
        }
        // 7. The sweeper published it before the stream delivered its
        //    insert (an event handed to it: held, or a failed delete): the mapping
        //    delivers every record, whatever the table holds.
        if name == "sweeper" && next_name == "publisher" {
            let kind = "sweeper published ahead of the stream";
            return Some(other(kind, f, tag, Bound::Invocation));
        }
        // 8. The sweep that sent it again had started (and read its page)
        //    before the delete reached the table.
        if next_name == "sweeper"
            && next_of
                .started
                .get(&next.tag)
                .is_some_and(|start| *start < delete.at)
        {
            let kind = "sweeper read the item before its delete reached the table";
            return Some(other(kind, next.function, next.tag, Bound::Invocation));
        }
        None
    }
}

#[cfg(test)]
mod tests;
