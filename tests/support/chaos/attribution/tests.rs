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
        hands_over: Vec::new(),
        succeeded: true,
        at: at(ms),
        answered,
        reached: true,
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
        hands_over: Vec::new(),
        succeeded: true,
        at: at(ms),
        answered: true,
        reached: true,
    }
}

/// One function's journal, the times its invocations started and its
/// stream batches (tag → batch).
struct Function {
    name: &'static str,
    journal: Vec<Call>,
    started: Vec<(u64, u64)>,
    batches: Vec<(u64, Batch)>,
    /// Invocations that ran to their deadline.
    late: Vec<u64>,
}

/// A batch of `events`' records (sequence numbers `s1`, `s2`…), its answer
/// reporting the record at `reported` failed.
fn batch(events: &[&str], reported: Option<usize>) -> Batch {
    let records: Vec<(String, Option<String>)> = events
        .iter()
        .enumerate()
        .map(|(i, e)| (format!("s{}", i + 1), Some(e.to_string())))
        .collect();
    Batch {
        reported: reported.map(|i| records[i].0.clone()),
        records,
    }
}

fn judge(functions: Vec<Function>, deliveries: &[(&str, usize)]) -> Verdict {
    let generations = functions.iter().map(|_| BTreeMap::new()).collect();
    judge_in(functions, deliveries, generations, &[])
}

/// [`judge`], with the work deadline (ms) of some invocations
/// (function index, tag, ms).
fn judge_with_work(
    functions: Vec<Function>,
    deliveries: &[(&str, usize)],
    work: &[(usize, u64, u64)],
) -> Verdict {
    let generations = functions.iter().map(|_| BTreeMap::new()).collect();
    judge_in(functions, deliveries, generations, work)
}

/// [`judge`], each function's invocations run in the processes of
/// `generations` (tag → its sandbox's generation), with the work deadline
/// (ms) of some invocations (function index, tag, ms).
fn judge_in(
    functions: Vec<Function>,
    deliveries: &[(&str, usize)],
    generations: Vec<BTreeMap<u64, u64>>,
    work: &[(usize, u64, u64)],
) -> Verdict {
    let history = Histories {
        names: functions.iter().map(|f| f.name).collect(),
        errors: functions.iter().map(|_| BTreeMap::new()).collect(),
        started: functions
            .iter()
            .map(|f| f.started.iter().map(|(tag, ms)| (*tag, at(*ms))).collect())
            .collect(),
        batches: functions
            .iter()
            .map(|f| f.batches.iter().cloned().collect())
            .collect(),
        delete_deadlines: functions.iter().map(|_| BTreeMap::new()).collect(),
        work_deadlines: (0..functions.len())
            .map(|i| {
                work.iter()
                    .filter(|(f, _, _)| *f == i)
                    .map(|(_, tag, ms)| (*tag, at(*ms)))
                    .collect()
            })
            .collect(),
        // Here an invocation that ran to its deadline ran out of its
        // finishing time too.
        out_of_finishing_time: functions
            .iter()
            .map(|f| f.late.iter().copied().collect::<BTreeSet<u64>>())
            .collect(),
        out_of_time: functions
            .iter()
            .map(|f| f.late.iter().copied().collect::<BTreeSet<u64>>())
            .collect(),
        // One sink call in flight (`SEND_CONCURRENCY` 1): 10 + 25 + 9.
        windows: functions.iter().map(|_| window_of(1)).collect(),
        generations,
        journals: functions.into_iter().map(|f| f.journal).collect(),
    };
    let deliveries: HashMap<String, usize> = deliveries
        .iter()
        .map(|(id, n)| (id.to_string(), *n))
        .collect();
    let mut verdict = Verdict::default();
    attribute_from(&mut verdict, &history, &deliveries);
    misreported(&mut verdict, &history);
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
        batches: vec![],
        late: vec![],
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

/// A sweep sends an event, deletes it, the publisher sends it from the
/// stream (the sweep ran ahead of it) and deletes it, and the same sweep
/// sends it again, every call answered: the last send is that sweep's own
/// resend, judged against its own first send, and nothing explains it
/// (not "a sweep that read before the delete": that needs another
/// invocation).
#[test]
fn a_sweep_sending_again_after_the_publisher_is_its_own_resend() {
    let sweeper = |again: bool| {
        let mut journal = vec![send(1, 10, &["e1"], true), delete(1, 15, &["e1"])];
        if again {
            journal.push(send(1, 30, &["e1"], true));
        }
        Function {
            name: "sweeper",
            journal,
            started: vec![(1, 0)],
            batches: vec![],
            late: vec![],
        }
    };
    let publisher = || Function {
        name: "publisher",
        journal: vec![send(1, 20, &["e1"], true), delete(1, 25, &["e1"])],
        started: vec![(1, 18)],
        batches: vec![(1, batch(&["e1"], None))],
        late: vec![],
    };
    let once = judge(vec![sweeper(false), publisher()], &[("e1", 2)]);
    assert_eq!(once.unexplained, 0, "{:?}", once.examples);
    let twice = judge(vec![sweeper(true), publisher()], &[("e1", 3)]);
    assert_eq!(twice.unexplained, 1, "{:?}", twice.examples);
}

/// A delete answered as done that never reached the table (the proxy
/// dropped it), then a kill: the redelivered batch's new process finds the
/// item and sends it again. The kill does not explain that resend: the
/// publisher was told the item was deleted, and the design brings back no
/// deleted item. A delete that met a fault does explain it.
#[test]
fn a_delete_answered_as_done_explains_no_resend() {
    let judged = |delete_faulted: bool| {
        let mut dropped = delete(1, 20, &["e1"]);
        dropped.deleted.clear();
        if delete_faulted {
            dropped.fault = Some(Fault::ServerError);
            dropped.succeeded = false;
        }
        let killed = Call {
            fault: Some(Fault::Crash { forward: false }),
            ..send(1, 30, &[], false)
        };
        let first = Function {
            name: "publisher",
            journal: vec![send(1, 10, &["e1"], true), dropped, killed],
            started: vec![(1, 0)],
            batches: vec![(1, batch(&["e1"], None))],
            late: vec![],
        };
        let second = Function {
            name: "publisher",
            journal: vec![send(2, 50, &["e1"], true)],
            started: vec![(2, 40)],
            batches: vec![(2, batch(&["e1"], None))],
            late: vec![],
        };
        judge(vec![first, second], &[("e1", 2)]).unexplained
    };
    assert_eq!(judged(false), 1);
    assert_eq!(judged(true), 0);
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
        batches: vec![],
        late: vec![],
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
        batches: vec![],
        late: vec![],
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
        batches: vec![],
        late: vec![],
    };
    let sweeper = Function {
        name: "sweeper",
        journal: vec![send(1, 80, &["e1"], true)],
        started: vec![(1, 70)],
        batches: vec![],
        late: vec![],
    };
    let verdict = judge(vec![publisher, sweeper], &[("e1", 2)]);
    assert_eq!(verdict.unexplained, 1, "{:?}", verdict.examples);
}

/// Two publisher sandboxes: the first's invocation 1 publishes `e0` and
/// `e1` and deletes them, reporting the record at `reported` failed; the
/// redelivered batch's invocation 2 sends `e1` again, in the other sandbox
/// or in the same one.
fn redelivered(reported: Option<usize>, same_sandbox: bool) -> Verdict {
    let first = Function {
        name: "publisher",
        journal: vec![
            send(1, 10, &["e0", "e1"], true),
            delete(1, 20, &["e0", "e1"]),
        ],
        started: vec![(1, 0)],
        batches: vec![(1, batch(&["e0", "e1", "e2"], reported))],
        late: vec![],
    };
    let resend = send(2, 40, &["e1"], true);
    let functions = if same_sandbox {
        let mut first = first;
        first.journal.push(resend);
        first.started.push((2, 30));
        vec![first]
    } else {
        let second = Function {
            name: "publisher",
            journal: vec![resend],
            started: vec![(2, 30)],
            batches: vec![],
            late: vec![],
        };
        vec![first, second]
    };
    judge(functions, &[("e0", 1), ("e1", 2)])
}

/// A batch delivered again explains a resend only for a record at or
/// after the one the answer reported, and only in another sandbox (the one
/// that deleted the items checks a batch it has seen again); with no
/// report or error, nothing does.
#[test]
fn a_redelivered_batch_explains_a_resend_from_the_reported_record_in_another_sandbox() {
    // Reported e1's own record (published beside the failure that made
    // the answer name it: the misreport check below judges that).
    assert_eq!(redelivered(Some(1), false).unexplained, 0);
    // Reported e0's: every record from it comes back.
    assert_eq!(redelivered(Some(0), false).unexplained, 0);
    // Reported e2's: e1 does not come back.
    assert_eq!(redelivered(Some(2), false).unexplained, 1);
    // No report.
    assert_eq!(redelivered(None, false).unexplained, 1);
    // The same sandbox checks the batch it has seen and finds e1 gone.
    assert_eq!(redelivered(Some(0), true).unexplained, 1);
}

/// The same sandbox, but a new process (the one that served invocation 1
/// was killed after its answer). Its first invocation checks its batch,
/// whatever it is, and finds `e1` gone: a resend there is unexplained
/// (#43: a redelivered batch whose deletes were applied repeats none),
/// unless that check's read met a fault. Once warm, it checks only a batch
/// it has seen or an old one: the redelivered batch explains a resend in
/// its second invocation.
#[test]
fn a_new_process_repeats_a_deleted_event_only_when_its_check_failed_or_it_was_warm() {
    // Invocation 1 (process 1) publishes and deletes e0 and e1, reporting
    // e0's record; the batch comes back to process 2, in its invocation
    // `again`, after invocation 2 (process 2's first) when `again` is 3.
    let judged = |again: u64, check_fails: bool| {
        let mut journal = vec![
            send(1, 10, &["e0", "e1"], true),
            delete(1, 20, &["e0", "e1"]),
        ];
        if check_fails {
            let mut read = delete(again, 35, &[]);
            read.operation = "BatchGetItem".into();
            read.fault = Some(Fault::ServerError);
            journal.push(read);
        }
        journal.push(send(again, 40, &["e1"], true));
        let first = Function {
            name: "publisher",
            journal,
            started: vec![(1, 0), (2, 25), (3, 30)],
            batches: vec![(1, batch(&["e0", "e1", "e2"], Some(0)))],
            late: vec![],
        };
        let restarted = BTreeMap::from([(1, 1), (2, 2), (3, 2)]);
        judge_in(vec![first], &[("e0", 1), ("e1", 2)], vec![restarted], &[]).unexplained
    };
    assert_eq!(judged(2, false), 1, "the first invocation checks");
    assert_eq!(judged(2, true), 0, "its check failed to read");
    assert_eq!(judged(3, false), 0, "warm, an unseen batch is not checked");
}

/// An answer must report a record its invocation had not published: e2
/// (never sent) is right; e0, which an answered call carried, is counted.
#[test]
fn an_answer_reporting_a_published_record_is_misreported() {
    assert_eq!(redelivered(Some(2), false).misreported, 0);
    assert_eq!(redelivered(None, false).misreported, 0);
    let verdict = redelivered(Some(0), false);
    assert_eq!(verdict.misreported, 1, "{:?}", verdict.examples);
}

/// The publisher reports a record it published when its delete failed and
/// so did the write that hands it to the scheduled sweep (the stream then
/// delivers it again): not a misreport. A failed delete alone (the
/// hand-over worked) leaves nothing to report, and neither does a failed
/// hand-over of another record's item.
#[test]
fn a_published_record_neither_deleted_nor_handed_over_may_be_reported() {
    let publisher = |hand_over_fails: bool| publisher_handing_over("e0", hand_over_fails);
    let verdict = judge(vec![publisher(true)], &[("e0", 1), ("e1", 1)]);
    assert_eq!(verdict.misreported, 0, "{:?}", verdict.examples);
    let verdict = judge(vec![publisher(false)], &[("e0", 1), ("e1", 1)]);
    assert_eq!(verdict.misreported, 1, "{:?}", verdict.examples);
    let other = publisher_handing_over("e1", true);
    let verdict = judge(vec![other], &[("e0", 1), ("e1", 1)]);
    assert_eq!(verdict.misreported, 1, "{:?}", verdict.examples);
    // No hand-over call at all: its deadline refused it (the invocation
    // ran out of its finishing time), or nothing did.
    let unwritten = |late: bool| {
        let mut publisher = publisher_handing_over("e0", false);
        publisher.journal.pop();
        if late {
            publisher.late = vec![1];
        }
        publisher
    };
    let verdict = judge(vec![unwritten(true)], &[("e0", 1), ("e1", 1)]);
    assert_eq!(verdict.misreported, 0, "{:?}", verdict.examples);
    let verdict = judge(vec![unwritten(false)], &[("e0", 1), ("e1", 1)]);
    assert_eq!(verdict.misreported, 1, "{:?}", verdict.examples);
}

/// A publisher invocation that publishes `e0` and `e1`, fails to delete
/// `e0`, writes the hand-over of `handed`'s item (failing or not), and
/// reports `e0`'s record.
fn publisher_handing_over(handed: &str, hand_over_fails: bool) -> Function {
    let mut failed_delete = delete(1, 20, &["e0"]);
    failed_delete.fault = Some(Fault::Status(500, "InternalServerError".into()));
    failed_delete.deleted.clear();
    let mut hand_over = send(1, 30, &[], true);
    hand_over.operation = "UpdateItem".into();
    hand_over.hands_over = vec![handed.to_owned()];
    if hand_over_fails {
        hand_over.fault = Some(Fault::Status(500, "InternalServerError".into()));
    }
    Function {
        name: "publisher",
        journal: vec![send(1, 10, &["e0", "e1"], true), failed_delete, hand_over],
        started: vec![(1, 0)],
        batches: vec![(1, batch(&["e0", "e1"], Some(0)))],
        late: vec![],
    }
}

/// A sweep that ran to its deadline explains an event it left undeleted
/// only when its journal shows the deadline cut a call (its delete, here,
/// never answered); running late alone, or a cut call in a sweep that kept
/// its time, explains nothing.
#[test]
fn the_deadline_explains_an_undeleted_event_only_when_it_cut_a_call() {
    let sweeps = |cut: bool, late: bool| {
        let mut journal = vec![send(1, 10, &["e1"], true)];
        if cut {
            let mut delete = delete(1, 20, &["e1"]);
            delete.deleted.clear();
            delete.answered = false;
            journal.push(delete);
        }
        journal.push(send(2, 60, &["e1"], true));
        Function {
            name: "sweeper",
            journal,
            started: vec![(1, 0), (2, 50)],
            batches: vec![],
            late: if late { vec![1] } else { vec![] },
        }
    };
    assert_eq!(judge(vec![sweeps(true, true)], &[("e1", 2)]).unexplained, 0);
    assert_eq!(
        judge(vec![sweeps(false, true)], &[("e1", 2)]).unexplained,
        1
    );
    assert_eq!(
        judge(vec![sweeps(true, false)], &[("e1", 2)]).unexplained,
        1
    );
}

/// A publisher invocation that sent `events` ten to a call, one call at a
/// time, deleted the first `deleted` of them, and was killed at its next
/// sink call; its batch then went out again from another sandbox.
fn killed_after(events: usize, deleted: usize) -> Verdict {
    let ids: Vec<String> = (0..events).map(|i| format!("e{i}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let mut journal: Vec<Call> = refs
        .chunks(10)
        .enumerate()
        .map(|(i, chunk)| send(1, 10 * i as u64, chunk, true))
        .collect();
    let after = 10 * journal.len() as u64;
    journal.extend(
        refs[..deleted]
            .chunks(25)
            .map(|chunk| delete(1, 5 + after, chunk)),
    );
    journal.push(Call {
        fault: Some(Fault::Crash { forward: false }),
        ..send(1, 1_000, &[], false)
    });
    let again = Function {
        name: "publisher",
        journal: refs
            .chunks(10)
            .map(|chunk| send(2, 2_000, chunk, true))
            .collect(),
        started: vec![(2, 1_500)],
        batches: vec![(2, batch(&refs, None))],
        late: vec![],
    };
    let killed = Function {
        name: "publisher",
        journal,
        started: vec![(1, 0)],
        batches: vec![(1, batch(&refs, None))],
        late: vec![],
    };
    let undeleted: Vec<(&str, usize)> = refs[deleted..].iter().map(|id| (*id, 2)).collect();
    let delivered: Vec<(&str, usize)> = refs[..deleted]
        .iter()
        .map(|id| (*id, 1))
        .chain(undeleted)
        .collect();
    // The deleted ones are not sent again: the redelivered batch's check
    // finds them gone.
    judge(vec![killed, again.only(&refs[deleted..])], &delivered)
}

impl Function {
    /// The function, its sink calls carrying only `events`.
    fn only(mut self, events: &[&str]) -> Self {
        for call in &mut self.journal {
            call.delivered.retain(|e| events.contains(&e.as_str()));
        }
        self.journal.retain(|c| !c.delivered.is_empty());
        self
    }
}

/// #43: a kill repeats at most what the design leaves published and not
/// deleted (one call in flight: 10 + 25 + 9 = 44). With the deletes keeping
/// up, 30 come back and the verdict holds; a publisher that kept every
/// delete to the end repeats 60, over the bound, and the verdict fails for
/// that reason.
#[test]
fn a_kill_that_repeats_more_than_the_design_allows_fails_the_run() {
    // The kill's row (duplicates, largest instance, instances over their
    // bound) and whether the verdict fails for the bound.
    let judged = |deleted| {
        let v = killed_after(60, deleted);
        assert_eq!(v.unexplained, 0, "{:?}", v.examples);
        let row = &v.faults["publisher: sink call SIGKILL before the call"];
        let over = v
            .failures()
            .iter()
            .any(|f| f.ends_with("instances repeated more than the design allows"));
        (row.duplicates, row.largest, row.over_design, over)
    };
    assert_eq!(judged(30), (30, (30, 44), 0, false));
    assert_eq!(judged(0), (60, (60, 44), 1, true));
}

/// A hung sink call is journaled when it starts, and its invocation goes
/// on sending beside it until its deadline: the calls answered after the
/// hang are what it had sent by then too. The hang's bound is everything
/// its invocation sent (within the design window), not the calls
/// journaled before the hang (a 20,000-order SNS FIFO run failed on 7
/// duplicates against a bound of 3 counted that way).
#[test]
fn a_hang_is_bounded_by_all_its_invocation_sent_until_the_deadline() {
    let mut cut = delete(1, 40, &["e1", "e2", "e3"]);
    cut.deleted.clear();
    cut.answered = false;
    let publisher = Function {
        name: "publisher",
        journal: vec![
            send(1, 10, &["e1"], true),
            Call {
                fault: Some(Fault::Hang),
                ..send(1, 15, &[], false)
            },
            send(1, 20, &["e2", "e3"], true),
            cut,
        ],
        started: vec![(1, 0)],
        batches: vec![(1, batch(&["e1", "e2", "e3"], None))],
        late: vec![1],
    };
    let sweeper = Function {
        name: "sweeper",
        journal: vec![
            send(1, 100, &["e1", "e2", "e3"], true),
            delete(1, 110, &["e1", "e2", "e3"]),
        ],
        started: vec![(1, 90)],
        batches: vec![],
        late: vec![],
    };
    let v = judge(vec![publisher, sweeper], &[("e1", 2), ("e2", 2), ("e3", 2)]);
    assert_eq!(v.unexplained, 0, "{:?}", v.examples);
    let row = &v.faults["publisher: sink call hangs past the deadline"];
    assert_eq!(
        (row.duplicates, row.largest, row.over_design),
        (3, (3, 3), 0)
    );
    let hang = v
        .failures()
        .into_iter()
        .filter(|f| f.contains("hangs past"))
        .collect::<Vec<_>>();
    assert!(hang.is_empty(), "{hang:?}");
}

/// A call the gate held until its caller gave up delivered nothing: before
/// the invocation's work deadline its caller gave up by the attempt
/// timeout (and sent again), so it is no sign the deadline cut a call; at
/// the work deadline or after, it is.
#[test]
fn a_call_given_up_at_the_gate_shows_a_cut_only_from_the_work_deadline() {
    let judged = |given_up_at: u64| {
        let held = Call {
            reached: false,
            ..send(1, given_up_at, &[], false)
        };
        let publisher = Function {
            name: "publisher",
            journal: vec![send(1, 10, &["e1"], true), held],
            started: vec![(1, 0)],
            batches: vec![(1, batch(&["e1"], None))],
            late: vec![1],
        };
        let sweeper = Function {
            name: "sweeper",
            journal: vec![send(1, 100, &["e1"], true), delete(1, 110, &["e1"])],
            started: vec![(1, 90)],
            batches: vec![],
            late: vec![],
        };
        judge_with_work(vec![publisher, sweeper], &[("e1", 2)], &[(0, 1, 50)]).unexplained
    };
    assert_eq!(
        judged(60),
        0,
        "given up at the work deadline: the deadline cut it"
    );
    assert_eq!(judged(20), 1, "given up before it: no cut shown");
}
