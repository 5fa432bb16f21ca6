//! Judging a chaos run: its [`Verdict`] computed from the table, the
//! subscriber's messages and the proxies' journals (never from the
//! functions' logs), the writers' acknowledgements checked against the
//! table, and the recovery after the sink outage.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime};

use outbox_core::keys::attr as keys;
use serde_json::Value;

use crate::proxy::{Call, Fault};
use crate::{Item, Stack};

use super::attribution::{attribute, Histories};
use super::delivery::{in_delivery_order, inversions, received};
use super::faults::{event_id, kind};
use super::table::{attr, is_outbox, order_versions, pending_state};
use super::verdict::Verdict;
use super::workload::Outcome;
use super::ChaosConfig;

/// OnFailure handled means handled: every event of a batch the mapping gave
/// up on (`given_up`) must be handled by the OnFailure path ([`missed_by`]
/// states what counts), or, with strict ordering (`strict`), go out in a
/// scheduled sweep that released it behind an older event of its aggregate
/// ([`released_behind`]). Counts the events that were not into
/// `verdict.on_failure_missed`, with examples. A batch's events are known
/// by its records' sequence numbers, from the publisher's batches (the
/// mapping gives up on a batch after invoking it).
pub(super) fn judge_on_failure(
    verdict: &mut Verdict,
    items: &[Item],
    history: &Histories<'_>,
    given_up: &[devkit::GivenUp],
    events: &HashMap<String, (String, u64)>,
    strict: bool,
) {
    verdict.on_failure_given_up = given_up.len();
    let ids: HashMap<&str, &str> = history
        .of
        .iter()
        .flat_map(|h| h.batches.values().flat_map(|b| &b.records))
        .filter_map(|(sequence, id)| Some((sequence.as_str(), id.as_deref()?)))
        .collect();
    let forwards = history.forwards();
    // Each sweeper invocation's sends, in journal order (each event's
    // first); and each event's hand-overs to the schedule that took effect
    // (when, and who wrote it: an OnFailure invocation, the publisher, a
    // scheduled sweep).
    let mut sweeper_sends: HashMap<u64, Vec<(SystemTime, &str)>> = HashMap::new();
    let mut sent_in: HashSet<(u64, &str)> = HashSet::new();
    let mut handed: HashMap<&str, Vec<(SystemTime, Handed)>> = HashMap::new();
    for function in &history.of {
        for call in &function.journal {
            for id in call.delivered.iter().filter(|_| function.name == "sweeper") {
                if sent_in.insert((call.tag, id.as_str())) {
                    let sends = sweeper_sends.entry(call.tag).or_default();
                    sends.push((call.at, id.as_str()));
                }
            }
            let by = match function.name {
                // When its invocation started: a call is journaled when its
                // answer comes, which for an invocation cut at its deadline
                // (or killed) while the call was in flight can be after the
                // pump gave the batch up.
                "publisher" => Handed::Publisher {
                    started: function.started.get(&call.tag).copied().unwrap_or(call.at),
                },
                "sweeper" if function.on_failure.contains(&call.tag) => Handed::OnFailure,
                "sweeper" => Handed::Schedule { tag: call.tag },
                _ => continue,
            };
            if took_effect(call) {
                for id in &call.hands_over {
                    handed.entry(id.as_str()).or_default().push((call.at, by));
                }
            }
        }
    }
    let dead: HashSet<String> = items
        .iter()
        .filter(|i| is_outbox(i) && i.contains_key(keys::DEAD_LETTERED_AT))
        .filter_map(|i| {
            attr(i, "SK")
                .and_then(|sk| sk.strip_prefix("OUTBOX#"))
                .map(str::to_owned)
        })
        .collect();
    for window in given_up {
        // Each record's event id: from the batch the publisher got, or from
        // the record's own key (a record the publisher never got).
        let records: Vec<Option<String>> = window
            .sequence_numbers
            .iter()
            .zip(window.keys.iter().map(event_id))
            .map(|(sequence, key)| ids.get(sequence.as_str()).map(|id| id.to_string()).or(key))
            .collect();
        for id in records.iter().flatten() {
            let first = forwards.get(id.as_str()).map(|list| &list[0]);
            let first_send = first.map(|f| FirstSend {
                at: f.at,
                function: history.of[f.function].name,
                tag: f.tag,
                by_queue: history.of[f.function].on_failure.contains(&f.tag),
            });
            let hand_overs = handed.get(id.as_str()).map_or(&[][..], Vec::as_slice);
            let Some(by) = missed_by(first_send, dead.contains(id), hand_overs, window.at) else {
                continue;
            };
            // Strict ordering: a scheduled sweep's first send is handled
            // when a scheduled sweep released the event behind an older one
            // of its aggregate it had sent: the sweep of that first send,
            // or one that handed it over (a failed attempt) before it.
            if let (true, Some(first)) = (strict, first) {
                let handed_at = |event: &str| -> Vec<SystemTime> {
                    handed
                        .get(event)
                        .map(|h| h.iter().map(|(at, _)| *at).collect())
                        .unwrap_or_default()
                };
                let mut moments = vec![(first.at, first.tag)];
                moments.extend(hand_overs.iter().filter_map(|(h, by)| match by {
                    Handed::Schedule { tag } if *h <= first.at => Some((*h, *tag)),
                    _ => None,
                }));
                let released = history.of[first.function].name == "sweeper"
                    && moments.into_iter().any(|(moment, tag)| {
                        let sends = sweeper_sends.get(&tag).map_or(&[][..], Vec::as_slice);
                        released_behind(id, moment, sends, events, &handed_at).is_some()
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
            let sent = first.map_or(String::new(), |f| offset(f.at));
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
/// OnFailure queue (its SQS message, `Tagged::on_failure`); or never, and
/// it is `dead` (dead-lettered); or first in a scheduled sweep after one of
/// its `hand_overs` to the schedule ([`Call::hands_over`], a write that
/// took effect before that send) by an OnFailure invocation (a failed
/// attempt, a hold: the design's "left to the scheduled sweep"), or by a
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
/// arrival order); duplicates are attributed from the proxies' journals.
pub(super) async fn judge(
    config: &ChaosConfig,
    stack: &Stack,
    items: &[Item],
    messages: Vec<Value>,
    history: &Histories<'_>,
) -> Result<Verdict, String> {
    let mut verdict = Verdict {
        seed: config.seed,
        sink: config.sink.name(),
        orders: config.orders,
        poison: config.poison,
        ..Verdict::default()
    };
    // Committed: every version of every order in the table.
    let committed: HashSet<(String, u64)> = order_versions(items)
        .into_iter()
        .flat_map(|(id, version)| (1..=version).map(move |v| (id.clone(), v)))
        .collect();
    // Still in the table (pending or dead-lettered): an event not delivered
    // must be one of these.
    let mut in_table: HashSet<(String, u64)> = HashSet::new();
    for item in items.iter().filter(|i| is_outbox(i)) {
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
    let gone: Vec<&&(String, u64)> = undelivered
        .iter()
        .filter(|k| !in_table.contains(**k))
        .collect();
    verdict.lost = undelivered.len();
    verdict.lost_and_gone = gone.len();
    for key in gone.iter().take(20) {
        verdict
            .examples
            .push(format!("lost and gone from the table: {key:?}"));
    }
    for key in undelivered.iter().take(5) {
        verdict.examples.push(format!("lost: {key:?}"));
    }
    verdict.identity_changes = ids_of.values().filter(|ids| ids.len() > 1).count();
    verdict.duplicates = deliveries.values().map(|n| n - 1).sum();

    attribute(&mut verdict, history, &deliveries);
    Ok(verdict)
}

/// The writers' part of the verdict: the faults injected into their calls
/// (`writer_faults`, their proxies' journals), and what the API answered
/// (`requested`) against the table: what it acknowledged must be there,
/// and the table holds no order it did not acknowledge (a retried create
/// that wrote a second order, say).
pub(super) fn judge_writes(
    verdict: &mut Verdict,
    items: &[Item],
    requested: &Outcome,
    writer_faults: &[Call],
) {
    for call in writer_faults.iter().filter(|c| c.fault.is_some()) {
        verdict
            .faults
            .entry(kind("writer", call))
            .or_default()
            .injected += 1;
    }
    let versions = order_versions(items);
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
        let publisher = |s| Handed::Publisher { started: at(s) };
        let scheduled = || send(30, "sweeper", false);
        let named = Some("the scheduled sweep sweeper#7, which nothing had handed it to");
        let cases = [
            // The OnFailure invocation sent it; it went out before the
            // give-up; it was dead-lettered.
            (send(20, "sweeper", true), false, vec![], None),
            (send(5, "publisher", false), false, vec![], None),
            (None, true, vec![], None),
            // Nothing sent it, or the publisher did after the give-up.
            (None, false, vec![], Some("nothing")),
            (
                send(20, "publisher", false),
                false,
                vec![],
                Some("publisher#7"),
            ),
            // A scheduled sweep: after an OnFailure invocation's hand-over,
            // or the publisher's before the give-up; not after none, not
            // after the publisher's after the give-up, not before the
            // hand-over.
            (scheduled(), false, vec![], named),
            (scheduled(), false, vec![(at(20), Handed::OnFailure)], None),
            (scheduled(), false, vec![(at(5), publisher(4))], None),
            // Journaled after the give-up by an invocation that started
            // before it (cut while the call was in flight): the publisher's.
            (scheduled(), false, vec![(at(12), publisher(8))], None),
            (scheduled(), false, vec![(at(20), publisher(20))], named),
            // A scheduled sweep hands over only what it already had.
            (
                scheduled(),
                false,
                vec![(at(20), Handed::Schedule { tag: 3 })],
                named,
            ),
            (scheduled(), false, vec![(at(40), Handed::OnFailure)], named),
        ];
        for (i, (first, dead, hand_overs, missed)) in cases.into_iter().enumerate() {
            let by = missed_by(first, dead, &hand_overs, at(10));
            assert_eq!(by.as_deref(), missed, "case {i}: {hand_overs:?}");
        }
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
        let sends: &[_] = &[
            (at(10), "e1"),
            (at(11), "e2"),
            (at(12), "e3"),
            (at(12), "f1"),
        ];
        let same: &[_] = &[(at(10), "e1"), (at(10), "e2")];
        let e1_handed: &[(&str, u64)] = &[("e1", 5)];
        // (event, its send, the hand-overs (event, s), the invocation's
        // sends, the event it is released behind).
        let cases = [
            // e1 handed over before its send: e2 behind it, e3 behind e2.
            ("e2", 11, e1_handed, sends, Some("e1")),
            ("e3", 12, e1_handed, sends, Some("e1")),
            // Another aggregate's handed-over event releases nothing.
            ("f1", 12, e1_handed, sends, None),
            // Nothing handed over, or handed over after the send: no release.
            ("e2", 11, &[], sends, None),
            ("e2", 11, &[("e1", 10), ("x", 1)], sends, Some("e1")),
            ("e2", 11, &[("e1", 11)], sends, None),
            // A newer event sent before does not release an older one; the
            // sends of the same moment do not release each other.
            ("e1", 10, &[("e2", 1)], sends, None),
            ("e2", 10, e1_handed, same, None),
        ];
        for (event, s, handed, sends, behind) in cases {
            let handed_at = |event: &str| -> Vec<SystemTime> {
                handed
                    .iter()
                    .filter(|(e, _)| *e == event)
                    .map(|(_, s)| at(*s))
                    .collect()
            };
            assert_eq!(
                released_behind(event, at(s), sends, &events, &handed_at),
                behind,
                "{event} at {s}, handed over {handed:?}"
            );
        }
    }
}
