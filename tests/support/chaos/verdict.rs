//! The verdict of a chaos run, from the subscriber queue, the table and
//! the proxies' journals (never from the functions' logs).

use std::collections::{BTreeMap, HashMap, HashSet};
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

pub(super) async fn pending_outbox(stack: &Stack) -> usize {
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
pub(super) async fn judge(
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
