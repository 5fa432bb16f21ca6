//! The attribution rules on made-up journals: each rule explains the resend
//! its design allows and no other (issue #43: a rule names the invocation
//! and the record it relies on, pair by pair). No server, no process.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, SystemTime};

use super::*;

fn at(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(1_000_000 + ms)
}

/// A sink call of invocation `tag` that delivered `events`.
fn send(tag: u64, ms: u64, events: &[&str], answered: bool) -> Call {
    Call {
        tag,
        operation: "PutEvents".into(),
        fault: None,
        delivered: events.iter().map(|e| e.to_string()).collect(),
        deletes: Vec::new(),
        deleted: Vec::new(),
        at: at(ms),
        answered,
    }
}

/// A delete call of invocation `tag` that deleted `events`.
fn delete(tag: u64, ms: u64, events: &[&str]) -> Call {
    Call {
        tag,
        operation: "BatchWriteItem".into(),
        fault: None,
        delivered: Vec::new(),
        deletes: events.iter().map(|e| e.to_string()).collect(),
        deleted: events.iter().map(|e| e.to_string()).collect(),
        at: at(ms),
        answered: true,
    }
}

/// One function's journal and the times its invocations started.
struct Function {
    name: &'static str,
    journal: Vec<Call>,
    started: Vec<(u64, u64)>,
    reported: Vec<u64>,
}

fn judge(functions: Vec<Function>, deliveries: &[(&str, usize)]) -> Verdict {
    let history = Histories {
        names: functions.iter().map(|f| f.name).collect(),
        errors: functions.iter().map(|_| BTreeMap::new()).collect(),
        started: functions
            .iter()
            .map(|f| f.started.iter().map(|(tag, ms)| (*tag, at(*ms))).collect())
            .collect(),
        reported: functions
            .iter()
            .map(|f| f.reported.iter().copied().collect::<BTreeSet<u64>>())
            .collect(),
        out_of_time: functions.iter().map(|_| BTreeSet::new()).collect(),
        journals: functions.into_iter().map(|f| f.journal).collect(),
    };
    let deliveries: HashMap<String, usize> = deliveries
        .iter()
        .map(|(id, n)| (id.to_string(), *n))
        .collect();
    let mut verdict = Verdict::default();
    attribute_from(&mut verdict, &history, &deliveries);
    verdict
}

/// A sweeper invocation that sends one event twice, its first call
/// answered or not, then deletes it.
fn sweeper_sending_twice(first_answered: bool) -> Function {
    Function {
        name: "sweeper",
        journal: vec![
            send(1, 10, &["e1"], first_answered),
            send(1, 20, &["e1"], true),
            delete(1, 30, &["e1"]),
        ],
        started: vec![(1, 0)],
        reported: vec![],
    }
}

/// A second send in one sweeper invocation, its first call answered: no
/// cause explains it, though the invocation started before the delete
/// (the second sweep's rule needs another invocation).
#[test]
fn a_second_send_in_one_sweeper_invocation_is_unexplained() {
    let verdict = judge(vec![sweeper_sending_twice(true)], &[("e1", 2)]);
    assert_eq!(verdict.unexplained, 1, "{:?}", verdict.examples);
}

/// The same resend after a call whose answer never came (the SDK sends it
/// again): explained by the lost answer.
#[test]
fn a_resend_after_a_lost_answer_is_explained() {
    let verdict = judge(vec![sweeper_sending_twice(false)], &[("e1", 2)]);
    assert_eq!(verdict.unexplained, 0, "{:?}", verdict.examples);
}

/// The original call took effect after its resend (a slow upstream: the
/// journal stamps a call when it took effect): the unanswered one explains
/// the pair whichever comes first.
#[test]
fn a_resend_stamped_before_its_slow_original_is_explained() {
    let sweeper = Function {
        name: "sweeper",
        journal: vec![
            send(1, 10, &["e1"], true),
            send(1, 20, &["e1"], false),
            delete(1, 30, &["e1"]),
        ],
        started: vec![(1, 0)],
        reported: vec![],
    };
    let verdict = judge(vec![sweeper], &[("e1", 2)]);
    assert_eq!(verdict.unexplained, 0, "{:?}", verdict.examples);
}

/// A second sweep that read its page before the first one's delete reached
/// the table explains its resend; one that started after it does not.
#[test]
fn a_second_sweep_explains_a_resend_only_when_it_read_before_the_delete() {
    let sweeps = |second_started: u64| Function {
        name: "sweeper",
        journal: vec![
            send(1, 10, &["e1"], true),
            delete(1, 50, &["e1"]),
            send(2, 60, &["e1"], true),
        ],
        started: vec![(1, 0), (2, second_started)],
        reported: vec![],
    };
    assert_eq!(judge(vec![sweeps(40)], &[("e1", 2)]).unexplained, 0);
    assert_eq!(judge(vec![sweeps(55)], &[("e1", 2)]).unexplained, 1);
}

/// Three forwards, two deliveries (an SNS FIFO topic dropped one resend):
/// the lost answer explains one resend, nothing explains the other, and it
/// counts although the deliveries alone would balance.
#[test]
fn an_unexplained_resend_cannot_hide_behind_one_the_sink_dropped() {
    let publisher = Function {
        name: "publisher",
        journal: vec![
            send(1, 10, &["e1"], false),
            send(1, 20, &["e1"], true),
            delete(1, 30, &["e1"]),
        ],
        started: vec![(1, 0)],
        reported: vec![],
    };
    let sweeper = Function {
        name: "sweeper",
        journal: vec![send(1, 80, &["e1"], true)],
        started: vec![(1, 70)],
        reported: vec![],
    };
    let verdict = judge(vec![publisher, sweeper], &[("e1", 2)]);
    assert_eq!(verdict.unexplained, 1, "{:?}", verdict.examples);
}

/// A batch delivered again after its invocation reported a failure
/// explains the later invocation's resend; without a report or an error,
/// nothing does.
#[test]
fn a_redelivered_batch_needs_a_reported_failure_or_an_error() {
    let publisher = |reported: Vec<u64>| Function {
        name: "publisher",
        journal: vec![
            send(1, 10, &["e1"], true),
            delete(1, 20, &["e1"]),
            send(2, 40, &["e1"], true),
        ],
        started: vec![(1, 0), (2, 30)],
        reported,
    };
    assert_eq!(judge(vec![publisher(vec![1])], &[("e1", 2)]).unexplained, 0);
    assert_eq!(judge(vec![publisher(vec![])], &[("e1", 2)]).unexplained, 1);
}
