//! The verdict of a chaos run ([`Verdict`]): what it counts, the numbers
//! that break a promise ([`Verdict::failures`]), and its rows of the
//! summary and per-fault tables. `judge.rs` computes it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// One row of the per-fault table: a fault kind, or another cause of
/// duplicates.
#[derive(Debug, Clone, Default)]
pub struct FaultRow {
    /// Calls the fault was injected into.
    pub injected: usize,
    /// Events the invocations it met had sent to the sink by then (in all,
    /// for a kill or a hang): the most it can duplicate.
    pub exposed: usize,
    /// Duplicates charged to this fault.
    pub duplicates: usize,
    /// The instance (one fault, one stopped invocation, one lost answer)
    /// that caused the most duplicates: (its duplicates, what the design
    /// lets it repeat).
    pub largest: (usize, usize),
    /// Instances that caused more duplicates than the design lets them.
    pub over_design: usize,
}

/// What a run shows.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// The run's seed.
    pub seed: u64,
    /// The sink's name ([`SinkKind::name`](super::SinkKind::name)).
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
    /// Of those, the ones no longer in the table (deleted, never
    /// delivered); the rest are still in it.
    pub lost_and_gone: usize,
    /// Events delivered that were never committed.
    pub ghosts: usize,
    /// Events delivered under two different `eventId`s.
    pub identity_changes: usize,
    /// Deliveries beyond the first of an event.
    pub duplicates: usize,
    /// Duplicates no fault in the journals explains.
    pub unexplained: usize,
    /// Publisher answers that reported a failed record their invocation
    /// had published (Lambda then delivers it again).
    pub misreported: usize,
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
    /// Per aggregate, first deliveries of a version below one already
    /// delivered ([`inversions`](super::inversions)).
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
    /// Batches the mapping gave up on (each an OnFailure message).
    pub on_failure_given_up: usize,
    /// Events of given-up batches the OnFailure path did not handle
    /// (`judge::missed_by`).
    pub on_failure_missed: usize,
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
    /// Entries the Custom Event Bus answered `DEDUPLICATED` (a resend
    /// within its 5-minute window, dropped before any subscriber), on that
    /// sink only.
    pub bus_deduplicated: Option<u64>,
    /// A few ghosts, losses and unexplained duplicates, for the diagnosis.
    pub examples: Vec<String>,
}

impl Verdict {
    /// The broken promises, empty when the run holds.
    pub fn failures(&self) -> Vec<String> {
        let none = |n: usize, what: &str| (n == 0, format!("{n} {what}"));
        let mut rules = vec![
            (
                self.lost == 0,
                format!(
                    "{} events lost ({} of them gone from the table, the rest still in it)",
                    self.lost, self.lost_and_gone
                ),
            ),
            none(
                self.lost_and_gone,
                "events deleted from the table without being delivered",
            ),
            none(
                self.unacknowledged_writes,
                "acknowledged writes missing from the table",
            ),
            none(self.ghosts, "ghost events"),
            none(self.identity_changes, "events changed eventId"),
            none(self.unexplained, "unexplained duplicates"),
            none(
                self.misreported,
                "publisher answers reported a record their invocation had published",
            ),
            none(self.left_pending, "outbox items still pending"),
            (
                self.dead_letters == self.poison,
                format!(
                    "{} dead letters for {} poison items",
                    self.dead_letters, self.poison
                ),
            ),
            none(
                self.dead_letters_without_reason,
                "dead letters without a reason",
            ),
            none(
                self.dead_letters_unlisted,
                "dead letters outboxctl does not list",
            ),
            // Strict ordering promises order per aggregate on every sink;
            // relaxed promises none once the mapping gives a batch up or
            // runs lanes at once (docs/ordering.md): reported, not judged.
            (
                self.inversions == 0 || self.ordering != "strict",
                format!(
                    "{} per-aggregate inversions with strict ordering",
                    self.inversions
                ),
            ),
            (
                self.parallelization <= 1 || self.publisher_overlaps > 0,
                format!(
                    "ParallelizationFactor {}, yet no two publisher invocations ran at once",
                    self.parallelization
                ),
            ),
            (self.committed > 0, "nothing committed".into()),
            none(self.requests_unanswered, "requests never answered"),
            (
                self.requests_refused.is_empty(),
                format!("requests refused: {:?}", self.requests_refused),
            ),
            none(
                self.orders_unacknowledged,
                "orders in the table that no request was acknowledged for",
            ),
            (
                !self.expect_on_failure || self.on_failure_given_up > 0,
                "the outage outlasted the mapping's retries, yet no batch was given up".into(),
            ),
            (
                self.on_failure_messages >= self.on_failure_given_up,
                format!(
                    "{} batches given up, {} OnFailure messages handled by the sweeper",
                    self.on_failure_given_up, self.on_failure_messages
                ),
            ),
            none(
                self.on_failure_missed,
                "events of given-up batches not published by the OnFailure path",
            ),
        ];
        for kind in &self.expected_kinds {
            rules.push((
                self.faults.get(kind).is_some_and(|r| r.injected > 0),
                format!("scripted fault never injected: {kind}"),
            ));
        }
        for (kind, row) in &self.faults {
            rules.push((
                row.duplicates <= row.exposed,
                format!(
                    "{kind}: {} duplicates over the {} events it exposed",
                    row.duplicates, row.exposed
                ),
            ));
            let (ok, over) = none(
                row.over_design,
                "instances repeated more than the design allows",
            );
            rules.push((ok, format!("{kind}: {over}")));
        }
        rules
            .into_iter()
            .filter_map(|(ok, what)| (!ok).then_some(what))
            .collect()
    }

    /// One row of the summary table.
    pub fn row(&self) -> String {
        format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} / {} | {} | {} | {} | {} / {} | {:.0} s | {} | {} | {:.1} |",
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
            self.duplicates_per_thousand(),
        )
    }

    /// Duplicates the subscriber received per 1,000 events committed.
    pub fn duplicates_per_thousand(&self) -> f64 {
        if self.committed == 0 {
            0.0
        } else {
            self.duplicates as f64 * 1000.0 / self.committed as f64
        }
    }

    /// The summary table's header. `infra/local/chaos.sh` totals columns by
    /// position (orders to left pending, OnFailure): new columns go last.
    pub const HEADER: &'static str = "| seed | sink | orders | events committed | delivered | lost | duplicates | unexplained | left pending | dead letters / poison | inversions | recovery (outage end → its backlog out) | OnFailure | publisher errors / invocations | run | ordering | ParallelizationFactor | duplicates per 1,000 events |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|";

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
        if let Some(n) = self.bus_deduplicated {
            let _ = writeln!(
                out,
                "The Custom Event Bus answered {n} entries DEDUPLICATED (resends of an event id within its 5-minute window, never delivered).\n"
            );
        }
        out.push_str(
            "| fault | injected | events exposed | duplicates it caused | most from one instance / its design bound |\n|---|---|---|---|---|\n",
        );
        for (kind, row) in &self.faults {
            let largest = if row.largest.0 == 0 {
                "–".to_owned()
            } else {
                format!("{} / {}", row.largest.0, row.largest.1)
            };
            let _ = writeln!(
                out,
                "| {kind} | {} | {} | {} | {largest} |",
                row.injected, row.exposed, row.duplicates
            );
        }
        out
    }
}
