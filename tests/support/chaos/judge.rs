//! Judging a chaos run: its [`Verdict`] computed from the table, the
//! subscriber's messages and the proxies' journals (never from the
//! functions' logs), the writers' acknowledgements checked against the
//! table, and the recovery after the sink outage.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use outbox_core::keys::attr as keys;
use serde_json::Value;

use crate::proxy::{Call, Fault};
use crate::Stack;

use super::attribution::attribute;
use super::delivery::{in_delivery_order, inversions, received};
use super::faults::{label, Tagged};
use super::table::{attr, is_outbox, order_versions, pending_state};
use super::verdict::Verdict;
use super::workload::Outcome;
use super::ChaosConfig;

/// OnFailure handled means handled: every event of a batch the mapping gave
/// up on (`given_up`) that had not gone out before the give-up must first
/// go out in an invocation of the sweeper by the OnFailure queue (its SQS
/// message, [`Tagged::on_failure`]), or end dead-lettered, or go out in a
/// scheduled sweep after its journal shows the event handed to the
/// schedule ([`Call::hands_over`], a write that took effect) by an
/// OnFailure invocation (a failed attempt, a hold: the design's "left to
/// the scheduled sweep") or by a publisher invocation that started before
/// the give-up; or, with strict ordering (`strict`), go out in a scheduled
/// sweep that released it (sent it, or handed it over after a failed
/// attempt) behind an older event of its aggregate it had sent
/// ([`released_behind`]: the release of the events behind a published
/// one); never left for the day-long threshold, and never published by a
/// scheduled sweep that nothing handed it to. Counts the events that did not into
/// `verdict.on_failure_missed`, with examples. A batch's events are known
/// by its records' sequence numbers, from the publisher's batches (the
/// mapping gives up on a batch after invoking it).
pub(super) async fn judge_on_failure(
    verdict: &mut Verdict,
    stack: &Stack,
    functions: &[&Tagged],
    given_up: &[devkit::GivenUp],
    events: &HashMap<String, (String, u64)>,
    strict: bool,
) {
    verdict.on_failure_given_up = given_up.len();
    let mut ids: HashMap<String, String> = HashMap::new();
    for function in functions {
        for batch in function.batches.lock().unwrap().values() {
            for (sequence, id) in &batch.records {
                if let Some(id) = id {
                    ids.insert(sequence.clone(), id.clone());
                }
            }
        }
    }
    // Each event's first forward: when, and by which invocation.
    let mut first: HashMap<String, (SystemTime, usize, u64)> = HashMap::new();
    for (f, function) in functions.iter().enumerate() {
        for call in function.proxy.journal() {
            for id in call.delivered {
                let entry = first.entry(id).or_insert((call.at, f, call.tag));
                if call.at < entry.0 {
                    *entry = (call.at, f, call.tag);
                }
            }
        }
    }
    // Each sweeper invocation's sends, in journal order: each event's
    // first.
    let mut sweeper_sends: HashMap<u64, Vec<(SystemTime, String)>> = HashMap::new();
    let mut sent_in: HashSet<(u64, String)> = HashSet::new();
    for function in functions.iter().filter(|f| f.function.name() == "sweeper") {
        for call in function.proxy.journal() {
            for id in call.delivered {
                if sent_in.insert((call.tag, id.clone())) {
                    sweeper_sends
                        .entry(call.tag)
                        .or_default()
                        .push((call.at, id));
                }
            }
        }
    }
    let dead: HashSet<String> = stack
        .items()
        .await
        .iter()
        .filter(|i| is_outbox(i) && i.contains_key(keys::DEAD_LETTERED_AT))
        .filter_map(|i| {
            attr(i, "SK")
                .and_then(|sk| sk.strip_prefix("OUTBOX#"))
                .map(str::to_owned)
        })
        .collect();
    // Each event's hand-overs to the schedule that took effect: when, and
    // who wrote it (an OnFailure invocation, the publisher, a scheduled
    // sweep).
    let mut handed: HashMap<String, Vec<(SystemTime, Handed)>> = HashMap::new();
    for function in functions {
        let name = function.function.name();
        let by_queue = function.on_failure.lock().unwrap().clone();
        let started = function.started.lock().unwrap().clone();
        for call in function.proxy.journal() {
            let by = match name {
                // When its invocation started: a call is journaled when its
                // answer comes, which for an invocation cut at its deadline
                // (or killed) while the call was in flight can be after the
                // pump gave the batch up.
                "publisher" => Handed::Publisher {
                    started: started.get(&call.tag).copied().unwrap_or(call.at),
                },
                "sweeper" if by_queue.contains(&call.tag) => Handed::OnFailure,
                "sweeper" => Handed::Schedule { tag: call.tag },
                _ => continue,
            };
            if !took_effect(&call) {
                continue;
            }
            for id in call.hands_over {
                handed.entry(id).or_default().push((call.at, by));
            }
        }
    }
    for window in given_up {
        // Each record's event id: from the batch the publisher got, or from
        // the record's own key (a record the publisher never got).
        let from_keys = window.keys.iter().map(|keys| match keys.get("SK") {
            Some(serde_dynamo::AttributeValue::S(sk)) => {
                sk.strip_prefix("OUTBOX#").map(str::to_owned)
            }
            _ => None,
        });
        let records: Vec<Option<String>> = window
            .sequence_numbers
            .iter()
            .zip(from_keys)
            .map(|(sequence, key)| ids.get(sequence).cloned().or(key))
            .collect();
        for id in records.iter().flatten() {
            let first_send = first.get(id).map(|(at, f, tag)| FirstSend {
                at: *at,
                function: functions[*f].function.name(),
                tag: *tag,
                by_queue: functions[*f].on_failure.lock().unwrap().contains(tag),
            });
            let hand_overs = handed.get(id).map_or(&[][..], Vec::as_slice);
            let Some(by) = missed_by(first_send, dead.contains(id), hand_overs, window.at) else {
                continue;
            };
            // Strict ordering: a scheduled sweep's first send is handled
            // when a scheduled sweep released the event behind an older one
            // of its aggregate it had sent: the sweep of that first send,
            // or one that handed it over (a failed attempt) before it.
            if let (true, Some(&(at, f, tag))) = (strict, first.get(id)) {
                let sends_of = |tag: u64| -> Vec<(SystemTime, &str)> {
                    sweeper_sends
                        .get(&tag)
                        .map_or(&[][..], Vec::as_slice)
                        .iter()
                        .map(|(at, id)| (*at, id.as_str()))
                        .collect()
                };
                let handed_at = |event: &str| -> Vec<SystemTime> {
                    handed
                        .get(event)
                        .map(|h| h.iter().map(|(at, _)| *at).collect())
                        .unwrap_or_default()
                };
                let mut moments = vec![(at, tag)];
                moments.extend(hand_overs.iter().filter_map(|(h, by)| match by {
                    Handed::Schedule { tag } if *h <= at => Some((*h, *tag)),
                    _ => None,
                }));
                let released = functions[f].function.name() == "sweeper"
                    && moments.into_iter().any(|(moment, tag)| {
                        released_behind(id, moment, &sends_of(tag), events, &handed_at).is_some()
                    });
                if released {
                    continue;
                }
            }
            // What the journal shows, for whoever reads the failure.
            let offset = |t: SystemTime| match t.duration_since(window.at) {
                Ok(d) => format!("+{:.1} s", d.as_secs_f64()),
                Err(e) => format!("-{:.1} s", e.duration().as_secs_f64()),
            };
            let about = events
                .get(id)
                .map(|(aggregate, version)| format!("aggregate {aggregate} v{version}"))
                .unwrap_or_else(|| "never delivered".to_owned());
            let shown: Vec<String> = hand_overs
                .iter()
                .map(|(t, by)| {
                    let who = match by {
                        Handed::OnFailure => "an OnFailure invocation".to_owned(),
                        Handed::Publisher { started } => {
                            format!("the publisher (invocation started {})", offset(*started))
                        }
                        Handed::Schedule { tag } => format!("the scheduled sweep sweeper#{tag}"),
                    };
                    format!("{who} {}", offset(*t))
                })
                .collect();
            let sent = first.get(id).map_or(String::new(), |(t, _, _)| offset(*t));
            verdict.on_failure_missed += 1;
            verdict.examples.push(format!(
                "OnFailure: {id} ({about}) of a given-up batch was first sent by {by} {sent}; its hand-overs (times from the give-up): [{}]",
                shown.join(", ")
            ));
        }
    }
}

/// Who handed an event to the scheduled sweep ([`judge_on_failure`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handed {
    OnFailure,
    /// The publisher, in an invocation that `started` then.
    Publisher {
        started: SystemTime,
    },
    /// A scheduled sweep, invocation `tag` (a failed attempt, a hold): it
    /// hands over only what it already had, so it never explains a sweep's
    /// send by itself ([`released_behind`] reads it).
    Schedule {
        tag: u64,
    },
}

/// An event's first send ([`missed_by`]): when, by which function and
/// invocation, and whether that was the sweeper's invocation by the
/// OnFailure queue.
struct FirstSend<'a> {
    at: SystemTime,
    function: &'a str,
    tag: u64,
    by_queue: bool,
}

/// What did the OnFailure path's work for an event of a window given up at
/// `given_up_at`, when the path did not (`None`: handled). Handled: it went
/// out before the give-up; or first in a sweeper invocation by the
/// OnFailure queue; or never, and it is `dead` (dead-lettered); or first in
/// a scheduled sweep after one of its `hand_overs` to the schedule (which
/// took effect before that send) by an OnFailure invocation, or by a
/// publisher invocation that started before the give-up (the only ones
/// that had its record). A scheduled sweep that nothing handed the
/// event to did the OnFailure path's work: with the template's day-long
/// `STRANDED_AFTER_SECONDS` it cannot, and with a short one (the harness's
/// setting before #43) a broken handler would pass.
fn missed_by(
    first: Option<FirstSend<'_>>,
    dead: bool,
    hand_overs: &[(SystemTime, Handed)],
    given_up_at: SystemTime,
) -> Option<String> {
    let Some(first) = first else {
        return (!dead).then(|| "nothing".to_owned());
    };
    if first.at < given_up_at || (first.function == "sweeper" && first.by_queue) {
        return None;
    }
    if first.function != "sweeper" {
        return Some(format!("{}#{}", first.function, first.tag));
    }
    let handed = hand_overs.iter().any(|(at, by)| {
        *at <= first.at
            && match by {
                Handed::OnFailure => true,
                Handed::Publisher { started } => *started < given_up_at,
                Handed::Schedule { .. } => false,
            }
    });
    (!handed).then(|| {
        format!(
            "the scheduled sweep sweeper#{}, which nothing had handed it to",
            first.tag
        )
    })
}

/// Strict ordering's release ([`judge_on_failure`]): a sweep that publishes
/// an event reads the pending events behind it in its aggregate and sends
/// them in the same invocation, so a scheduled sweep may send `event` (sent
/// first at `at`) that nothing handed to it. Returns the older event of its
/// aggregate (`events`: id → aggregate, version) that the same invocation
/// sent before `at` (`sends`: that invocation's sends, journal order) and
/// that was itself handed to the schedule before that send (`handed_at`:
/// an event's hand-overs that took effect, by anyone) or released in turn;
/// `None` when there is no such event.
fn released_behind<'a>(
    event: &str,
    at: SystemTime,
    sends: &[(SystemTime, &'a str)],
    events: &HashMap<String, (String, u64)>,
    handed_at: &dyn Fn(&str) -> Vec<SystemTime>,
) -> Option<&'a str> {
    let (aggregate, version) = events.get(event)?;
    sends.iter().find_map(|&(sent, older)| {
        let (a, v) = events.get(older)?;
        if a != aggregate || v >= version || sent >= at {
            return None;
        }
        let handed = handed_at(older).iter().any(|h| *h <= sent);
        (handed || released_behind(older, sent, sends, events, handed_at).is_some())
            .then_some(older)
    })
}

/// Whether a journaled write took effect: forwarded and answered as a
/// success (its condition held), or forwarded before a kill.
fn took_effect(call: &Call) -> bool {
    match call.fault {
        None | Some(Fault::Pass | Fault::Late(_)) => call.succeeded,
        Some(Fault::Crash { forward }) => forward,
        _ => false,
    }
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
    let mut in_table: HashSet<(String, u64)> = HashSet::new();
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
            // Still in the table (pending or dead-lettered): an event not
            // delivered must be one of these.
            if let (Some(aggregate), Some(version)) = (
                attr(item, "PK").and_then(|p| p.strip_prefix("ORDER#")),
                attr(item, keys::AGGREGATE_VERSION).and_then(|v| v.parse::<u64>().ok()),
            ) {
                in_table.insert((aggregate.to_owned(), version));
            }
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
    // An event not delivered is either still in the table (pending: the
    // run did not finish its work) or gone from it: deleted, never
    // delivered, the loss the outbox exists to prevent.
    let undelivered: Vec<&(String, u64)> = committed
        .iter()
        .filter(|k| !ids_of.contains_key(*k))
        .collect();
    verdict.lost_and_gone = undelivered
        .iter()
        .filter(|k| !in_table.contains(**k))
        .count();
    for key in undelivered
        .iter()
        .filter(|k| !in_table.contains(**k))
        .take(20)
    {
        verdict
            .examples
            .push(format!("lost and gone from the table: {key:?}"));
    }
    for key in undelivered.iter().take(5) {
        verdict.examples.push(format!("lost: {key:?}"));
    }
    verdict.identity_changes = ids_of.values().filter(|ids| ids.len() > 1).count();
    verdict.duplicates = deliveries.values().map(|n| n - 1).sum();

    attribute(&mut verdict, functions, &deliveries);
    Ok(verdict)
}

/// The writers' part of the verdict: the faults injected into their calls
/// (`writer_faults`, their proxies' journals), and what the API answered
/// (`requested`) against the table: what it acknowledged must be there,
/// and the table holds no order it did not acknowledge (a retried create
/// that wrote a second order, say).
pub(super) async fn judge_writes(
    verdict: &mut Verdict,
    stack: &Stack,
    requested: &Outcome,
    writer_faults: &[Call],
) {
    for call in writer_faults.iter().filter(|c| c.fault.is_some()) {
        let fault = call.fault.as_ref().unwrap_or(&Fault::Pass);
        verdict
            .faults
            .entry(label("writer", &call.operation, fault))
            .or_default()
            .injected += 1;
    }
    let versions = order_versions(stack).await;
    let created: HashSet<&str> = requested
        .acknowledged
        .iter()
        .filter(|(_, v)| *v == 1)
        .map(|(o, _)| o.as_str())
        .collect();
    for order in versions.keys().filter(|o| !created.contains(o.as_str())) {
        verdict.orders_unacknowledged += 1;
        verdict
            .examples
            .push(format!("in the table, never acknowledged: {order}"));
    }
    for (order, version) in &requested.acknowledged {
        if versions.get(order).copied().unwrap_or(0) < *version {
            verdict.unacknowledged_writes += 1;
            verdict.examples.push(format!(
                "acknowledged but not in the table: {order} v{version}"
            ));
        }
    }
}

/// Recovery from the sink outage: from its end (the first publisher call
/// after it) to the end of the backlog it caused, the last first delivery
/// of an event whose record an invocation during the outage was given
/// (`outage`: those events).
pub(super) fn recovery(
    journal: &[Call],
    healed_tag: u64,
    outage: &HashSet<String>,
) -> Option<Duration> {
    let healed = journal.iter().find(|c| c.tag >= healed_tag)?.at;
    let mut seen = HashSet::new();
    let mut last = None;
    for call in journal {
        for id in &call.delivered {
            if seen.insert(id.clone()) && outage.contains(id) && call.at >= healed {
                last = Some(call.at);
            }
        }
    }
    last.and_then(|l| l.duration_since(healed).ok())
        .or(Some(Duration::ZERO))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 + s)
    }

    fn send(s: u64, function: &str, by_queue: bool) -> Option<FirstSend<'_>> {
        Some(FirstSend {
            at: at(s),
            function,
            tag: 7,
            by_queue,
        })
    }

    /// #43, "OnFailure handled means handled": an event of a window given
    /// up at 10 s counts as handled only by the OnFailure path's own
    /// invocation, a dead letter, a send before the give-up, or a scheduled
    /// sweep's send of an event the journal shows handed to the schedule
    /// (by an OnFailure invocation, or by the publisher before the
    /// give-up); anything else is named.
    #[test]
    fn only_the_on_failure_path_or_what_it_handed_over_handles_a_window() {
        let given_up = at(10);
        let handled = |first, dead, hand_overs: &[(SystemTime, Handed)]| {
            missed_by(first, dead, hand_overs, given_up)
        };
        // The OnFailure invocation sent it; it went out before the give-up;
        // it was dead-lettered.
        assert_eq!(handled(send(20, "sweeper", true), false, &[]), None);
        assert_eq!(handled(send(5, "publisher", false), false, &[]), None);
        assert_eq!(handled(None, true, &[]), None);
        // Nothing sent it, or the publisher did after the give-up.
        assert_eq!(handled(None, false, &[]).as_deref(), Some("nothing"));
        assert_eq!(
            handled(send(20, "publisher", false), false, &[]).as_deref(),
            Some("publisher#7")
        );
        // A scheduled sweep: after an OnFailure invocation's hand-over, or
        // the publisher's before the give-up; not after none, not after
        // the publisher's after the give-up, not before the hand-over.
        let scheduled = send(30, "sweeper", false);
        let named = Some("the scheduled sweep sweeper#7, which nothing had handed it to");
        assert_eq!(handled(scheduled, false, &[]).as_deref(), named);
        let scheduled = || send(30, "sweeper", false);
        assert_eq!(
            handled(scheduled(), false, &[(at(20), Handed::OnFailure)]),
            None
        );
        let publisher = |s| Handed::Publisher { started: at(s) };
        assert_eq!(handled(scheduled(), false, &[(at(5), publisher(4))]), None);
        // Journaled after the give-up by an invocation that started before
        // it (cut while the call was in flight): the publisher's.
        assert_eq!(handled(scheduled(), false, &[(at(12), publisher(8))]), None);
        assert_eq!(
            handled(scheduled(), false, &[(at(20), publisher(20))]).as_deref(),
            named
        );
        // A scheduled sweep hands over only what it already had.
        assert_eq!(
            handled(scheduled(), false, &[(at(20), Handed::Schedule { tag: 3 })]).as_deref(),
            named
        );
        assert_eq!(
            handled(scheduled(), false, &[(at(40), Handed::OnFailure)]).as_deref(),
            named
        );
    }

    /// Strict ordering's release: a scheduled sweep that publishes an event
    /// handed to it sends the pending events behind it in the same
    /// invocation; those count as handed over, and only those.
    #[test]
    fn a_sweep_releases_only_what_stands_behind_a_handed_over_event() {
        let events: HashMap<String, (String, u64)> = [
            ("e1", ("a", 1)),
            ("e2", ("a", 2)),
            ("e3", ("a", 3)),
            ("f1", ("b", 1)),
        ]
        .into_iter()
        .map(|(id, (a, v))| (id.to_owned(), (a.to_owned(), v)))
        .collect();
        let handed = |handed: &'static [(&'static str, u64)]| {
            move |event: &str| -> Vec<SystemTime> {
                handed
                    .iter()
                    .filter(|(e, _)| *e == event)
                    .map(|(_, s)| at(*s))
                    .collect()
            }
        };
        let sends = [
            (at(10), "e1"),
            (at(11), "e2"),
            (at(12), "e3"),
            (at(12), "f1"),
        ];
        // e1 handed over before its send: e2 behind it, e3 behind e2.
        let e1_handed = handed(&[("e1", 5)]);
        assert_eq!(
            released_behind("e2", at(11), &sends, &events, &e1_handed),
            Some("e1")
        );
        assert_eq!(
            released_behind("e3", at(12), &sends, &events, &e1_handed),
            Some("e1")
        );
        // Another aggregate's handed-over event releases nothing.
        assert_eq!(
            released_behind("f1", at(12), &sends, &events, &e1_handed),
            None
        );
        // Nothing handed over, or handed over after the send: no release.
        assert_eq!(
            released_behind("e2", at(11), &sends, &events, &handed(&[])),
            None
        );
        let late = handed(&[("e1", 10), ("x", 1)]);
        assert_eq!(
            released_behind("e2", at(11), &sends, &events, &late),
            Some("e1")
        );
        let after = handed(&[("e1", 11)]);
        assert_eq!(released_behind("e2", at(11), &sends, &events, &after), None);
        // A newer event sent before does not release an older one; the
        // sends of the same moment do not release each other.
        let e2_handed = handed(&[("e2", 1)]);
        assert_eq!(
            released_behind("e1", at(10), &sends, &events, &e2_handed),
            None
        );
        let same = [(at(10), "e1"), (at(10), "e2")];
        assert_eq!(
            released_behind("e2", at(10), &same, &events, &e1_handed),
            None
        );
    }
}
