//! `outboxctl status`.

use aws_config::SdkConfig;
use clap::Args;
use serde::Serialize;
use time::OffsetDateTime;

use crate::context::{JsonArg, TableArg};
use crate::error::Error;
use crate::output::{print_json, table};
use crate::stack::{Origin, OtherKeys, Stack, Unsweepable};
use crate::{Released, Status};

/// `status --json`: the status, where the settings came from, and outbox
/// items under other key shapes than the stack's.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Report<'a> {
    #[serde(flatten)]
    status: &'a Status,
    settings: &'a Origin,
    other_keys: &'a [OtherKeys],
    #[serde(skip_serializing_if = "Option::is_none")]
    unsweepable: Option<&'a Unsweepable>,
}

/// `outboxctl status`.
#[derive(Debug, Args)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub(crate) table: TableArg,
    /// Also scan the whole table for pending outbox items under keys no
    /// stack's sweeper reads (no index keys, other names, a region without
    /// a stack, a shard out of range): one paginated `Scan`, so it reads
    /// the whole table.
    #[arg(long)]
    scan: bool,
    #[command(flatten)]
    json: JsonArg,
}

/// `outboxctl release`.
#[derive(Debug, Args)]
pub(crate) struct ReleaseArgs {
    #[command(flatten)]
    table: TableArg,
    /// The aggregate id.
    aggregate_id: String,
    #[command(flatten)]
    json: JsonArg,
}

#[derive(Debug, Args)]
pub(crate) struct MakeDueArgs {
    #[command(flatten)]
    table: TableArg,
    /// An event to make due (repeatable).
    #[arg(long = "event-id", value_name = "ULID")]
    event_ids: Vec<ulid::Ulid>,
    /// The events of this aggregate.
    #[arg(long, value_name = "AGGREGATE_ID")]
    aggregate: Option<String>,
    /// Events created more than this many seconds ago.
    #[arg(long, value_name = "SECONDS")]
    older_than: Option<u64>,
    #[command(flatten)]
    json: JsonArg,
}

pub(crate) async fn status(sdk: &SdkConfig, args: StatusArgs) -> Result<(), Error> {
    run(&args.table.stack(sdk).await?, args.scan, args.json.json).await
}

pub(crate) async fn release_cmd(sdk: &SdkConfig, args: ReleaseArgs) -> Result<(), Error> {
    release(
        &args.table.stack(sdk).await?,
        &args.aggregate_id,
        args.json.json,
    )
    .await
}

pub(crate) async fn make_due_cmd(sdk: &SdkConfig, args: MakeDueArgs) -> Result<(), Error> {
    let which = crate::operations::DueSelector {
        event_ids: args.event_ids,
        aggregate: args.aggregate,
        older_than: args
            .older_than
            .map(|s| time::Duration::seconds(i64::try_from(s).unwrap_or(i64::MAX))),
    };
    if which.is_empty() {
        return Err(Error::Usage(
            "name the events: --event-id ULID (repeatable), --aggregate ID, or --older-than SECONDS"
                .into(),
        ));
    }
    let stack = args.table.stack(sdk).await?;
    let made = stack
        .operations()
        .make_due(&which, OffsetDateTime::now_utc())
        .await?;
    audit(&stack, "pending event made due", None, &made);
    if args.json.json {
        return print_json(&serde_json::json!({ "madeDue": made }));
    }
    for r in &made {
        println!("{}  {}", r.event_id, r.outcome);
    }
    println!(
        "{} event(s); the next scheduled sweep publishes those due now (within {} s, the sweep period)",
        made.len(),
        stack.config().sweep_period.as_secs()
    );
    Ok(())
}

/// One JSON audit line on stderr per event an operator command changed.
fn audit(stack: &Stack, what: &str, aggregate: Option<&str>, done: &[Released]) {
    for r in done {
        eprintln!(
            "{}",
            serde_json::json!({
                "audit": what,
                "table": stack.table(),
                "aggregateId": aggregate,
                "eventId": r.event_id,
                "outcome": r.outcome,
                "by": std::env::var("USER").unwrap_or_else(|_| "unknown".into()),
            })
        );
    }
}

async fn run(stack: &Stack, scan: bool, json: bool) -> Result<(), Error> {
    let now = OffsetDateTime::now_utc();
    let status = stack.operations().status(now).await?;
    let other_keys = stack.other_keys(now).await?;
    let unsweepable = if scan {
        Some(stack.unsweepable().await?)
    } else {
        None
    };
    let refused = unsweepable.as_ref().is_some_and(|u| u.count > 0);
    if json {
        print_json(&Report {
            status: &status,
            settings: stack.origin(),
            other_keys: &other_keys,
            unsweepable: unsweepable.as_ref(),
        })?;
        return unsweepable_error(unsweepable.as_ref().filter(|_| refused));
    }
    if let Some(u) = unsweepable.as_ref().filter(|_| refused) {
        println!(
            "warning: {} of {} outbox items are pending under keys no stack's sweeper reads (no index keys, other names, a region without a stack, a shard out of range): {}{}\n",
            u.count,
            u.scanned,
            u.examples.join(", "),
            if u.count > u.examples.len() { ", …" } else { "" }
        );
    }
    match stack.origin() {
        Origin::Recorded { region, stack, by } => {
            println!("settings: the record of stack {stack} for {region} (by {by})\n")
        }
        Origin::Environment => println!(
            "settings: this environment's (nothing is recorded in {}); the keys may not be the stack's\n",
            stack.table()
        ),
    }
    for other in &other_keys {
        println!(
            "note: {} in this table, not counted below{}",
            other.describe(),
            if other.home_region.is_none() {
                " (written before the home-region rule: the sweeper moves them to this region's keys on its next run)"
            } else {
                " (another region's stack handles them)"
            }
        );
    }
    if !other_keys.is_empty() {
        println!();
    }
    let bound = if status.capped { " (at least)" } else { "" };
    let age = |a: Option<i64>| a.map_or("-".into(), |s| format!("{s} s"));
    let mut summary = table(&["", ""], &[]);
    summary.add_row(vec!["pending".into(), format!("{}{bound}", status.pending)]);
    summary.add_row(vec![
        "oldest pending age".into(),
        age(status.oldest_pending_age_seconds),
    ]);
    summary.add_row(vec![
        "backing off".into(),
        format!(
            "{} (next attempt due {})",
            status.backing_off,
            status.next_attempt_due.as_deref().unwrap_or("-")
        ),
    ]);
    summary.add_row(vec![
        "dead letters".into(),
        format!("{}{bound}", status.dead_letters),
    ]);
    summary.add_row(vec![
        "held (strict ordering)".into(),
        format!("{}{bound}", status.held),
    ]);
    println!("{summary}\n");
    if !status.parked.is_empty() {
        let mut parked = table(&["parked aggregate", "behind", "since", "waiting"], &[3]);
        for p in &status.parked {
            let (behind, since) = match (&p.dead_letter, &p.held_behind) {
                (Some(letter), _) => (format!("dead letter {letter}"), "-".to_owned()),
                (None, behind) => (
                    format!(
                        "{} (held; `outboxctl release` hands it to the next sweep)",
                        behind.as_deref().unwrap_or("an older event")
                    ),
                    p.held_since.clone().unwrap_or_else(|| "-".into()),
                ),
            };
            parked.add_row(vec![
                p.aggregate_id.clone(),
                behind,
                since,
                p.waiting.to_string(),
            ]);
        }
        println!("{parked}\n");
    }
    let mut shards = table(
        &[
            "shard",
            "pending",
            "backing-off",
            "dead-letters",
            "oldest-age",
        ],
        &[0, 1, 2, 3],
    );
    for s in &status.shards {
        shards.add_row(vec![
            s.shard.to_string(),
            s.pending.to_string(),
            s.backing_off.to_string(),
            s.dead_letters.to_string(),
            age(s.oldest_pending_age_seconds),
        ]);
    }
    println!("{shards}");
    unsweepable_error(unsweepable.as_ref().filter(|_| refused))
}

/// `outboxctl release AGGREGATE`: an audit line per event on stderr, the
/// outcomes on stdout.
async fn release(stack: &Stack, aggregate_id: &str, json: bool) -> Result<(), Error> {
    let now = OffsetDateTime::now_utc();
    let released = stack.operations().release(aggregate_id, now).await?;
    audit(
        stack,
        "parked aggregate released",
        Some(aggregate_id),
        &released,
    );
    if json {
        return print_json(&serde_json::json!({ "released": released }));
    }
    for r in &released {
        println!("{}  {}", r.event_id, r.outcome);
    }
    println!(
        "the next scheduled sweep publishes the released events, oldest first (within {} s, the sweep period)",
        stack.config().sweep_period.as_secs()
    );
    Ok(())
}

/// `status --scan` exits non-zero when it found unsweepable items.
fn unsweepable_error(found: Option<&Unsweepable>) -> Result<(), Error> {
    match found {
        Some(u) => Err(Error::Incomplete(format!(
            "{} outbox items are pending under keys no stack's sweeper reads; a failure of their stream record would leave them unpublished: fix their writer's key settings (docs/adopt.md \"What the publisher checks\"), then give them the stack's keys",
            u.count
        ))),
        None => Ok(()),
    }
}
