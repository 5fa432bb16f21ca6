//! `outboxctl dead-letters list|show|redrive|discard`.

use aws_config::SdkConfig;
use clap::{Args, Subcommand};
use outbox_engine::{redrive_now, DeadLetterRecord, Marked, RedriveNow};
use outbox_runtime::DynamoStore;
use serde_json::json;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::context::{connect_sink, point_in_time, JsonArg, SinkArgs, TableArg};
use crate::error::Error;
use crate::output::{print_json, table, Progress};
use crate::stack::Stack;
use crate::{envelope_of, DeadLetterFilter, Operations};

/// `outboxctl dead-letters …`.
#[derive(Debug, Subcommand)]
pub(crate) enum DeadLetters {
    /// List dead letters, oldest first.
    List {
        #[command(flatten)]
        table: TableArg,
        #[command(flatten)]
        filter: FilterArgs,
        #[command(flatten)]
        json: JsonArg,
    },
    /// Show one dead letter with its key and envelope.
    Show {
        #[command(flatten)]
        table: TableArg,
        /// The event id.
        event_id: String,
        #[command(flatten)]
        json: JsonArg,
    },
    /// Put dead letters back into the pending index (attempts reset, same
    /// eventId), due at once: the next scheduled sweep publishes them,
    /// whatever their age; `--now` publishes them immediately.
    Redrive {
        #[command(flatten)]
        table: TableArg,
        /// The event ids (or `--all`, or filters).
        event_ids: Vec<String>,
        /// Every dead letter (that the filters keep).
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        filter: FilterArgs,
        /// Say what would be redriven; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Publish them at once, through the stack's sink (`--bus` or
        /// `--topic`).
        #[arg(long)]
        now: bool,
        #[command(flatten)]
        sink: SinkArgs,
        #[command(flatten)]
        json: JsonArg,
    },
    /// Delete dead letters for good (an audit line per event on stderr).
    Discard {
        #[command(flatten)]
        table: TableArg,
        /// The event ids.
        #[arg(required = true)]
        event_ids: Vec<String>,
        /// Confirm: the events are deleted for good.
        #[arg(long)]
        yes: bool,
        #[command(flatten)]
        json: JsonArg,
    },
}

/// Which dead letters.
#[derive(Debug, Args)]
pub(crate) struct FilterArgs {
    /// Only this event type.
    #[arg(long = "type")]
    event_type: Option<String>,
    /// Only this aggregate.
    #[arg(long)]
    aggregate: Option<String>,
    /// Dead-lettered at or after: an RFC 3339 time, or an age (`1h`, `2days`).
    #[arg(long, value_parser = point_in_time)]
    since: Option<OffsetDateTime>,
}

impl FilterArgs {
    fn filter(&self) -> DeadLetterFilter {
        DeadLetterFilter {
            event_type: self.event_type.clone(),
            aggregate_id: self.aggregate.clone(),
            since: self.since,
        }
    }
}

/// Runs a `dead-letters` command; `profile` names the caller in the audit
/// trail of a discard.
pub(crate) async fn run(
    sdk: &SdkConfig,
    profile: Option<String>,
    command: DeadLetters,
) -> Result<(), Error> {
    match command {
        DeadLetters::List {
            table,
            filter,
            json,
        } => list(&table.stack(sdk).await?, &filter.filter(), json.json).await,
        DeadLetters::Show {
            table,
            event_id,
            json,
        } => show(&table.stack(sdk).await?, &event_id, json.json).await,
        DeadLetters::Redrive {
            table,
            event_ids,
            all,
            filter,
            dry_run,
            now,
            sink,
            json,
        } => {
            let selection = Selection::of(event_ids, all, filter.filter())?;
            let now = match (now, sink.given()) {
                (true, _) => Some(sink),
                (false, true) => {
                    return Err(Error::Usage(
                        "--bus, --topic, --source and --force go with --now".into(),
                    ))
                }
                (false, false) => None,
            };
            redrive(&table.stack(sdk).await?, selection, dry_run, now, json.json).await
        }
        DeadLetters::Discard {
            table,
            event_ids,
            yes,
            json,
        } => {
            if !yes {
                return Err(Error::Usage(
                    "discard deletes events for good: add --yes".into(),
                ));
            }
            discard(&table.stack(sdk).await?, &event_ids, profile, json.json).await
        }
    }
}

/// The dead letters a redrive names: ids, or `--all` / filters.
pub(crate) enum Selection {
    Ids(Vec<String>),
    Filtered(DeadLetterFilter),
}

impl Selection {
    pub(crate) fn of(ids: Vec<String>, all: bool, filter: DeadLetterFilter) -> Result<Self, Error> {
        match (ids.is_empty(), all || filter.is_set()) {
            (false, true) => Err(Error::Usage(
                "give event ids, or --all / filters, not both".into(),
            )),
            (false, false) => Ok(Self::Ids(ids)),
            (true, true) => Ok(Self::Filtered(filter)),
            (true, false) => Err(Error::Usage(
                "name the dead letters: EVENT_ID..., --all, or --type/--aggregate/--since".into(),
            )),
        }
    }

    async fn rows(&self, ops: &Operations<DynamoStore>) -> Result<Vec<DeadLetterRecord>, Error> {
        match self {
            Self::Ids(ids) => {
                let mut rows = Vec::new();
                // Every id is checked before anything changes.
                for id in ids {
                    rows.push(ops.find(id).await?);
                }
                Ok(rows)
            }
            Self::Filtered(filter) => Ok(ops.dead_letters(filter).await?),
        }
    }
}

fn print_rows(rows: &[DeadLetterRecord]) {
    let mut out = table(
        &[
            "event id",
            "type",
            "aggregate",
            "attempts",
            "dead-lettered at",
            "reason",
        ],
        &[3],
    );
    for r in rows {
        out.add_row(vec![
            r.event_id.clone(),
            r.event_type.clone(),
            r.aggregate_id.clone(),
            r.attempts.to_string(),
            r.dead_lettered_at.clone(),
            r.reason.clone(),
        ]);
    }
    println!("{out}");
}

pub(crate) async fn list(
    stack: &Stack,
    filter: &DeadLetterFilter,
    json: bool,
) -> Result<(), Error> {
    let rows = stack.operations().dead_letters(filter).await?;
    if json {
        return print_json(&rows);
    }
    print_rows(&rows);
    Ok(())
}

pub(crate) async fn show(stack: &Stack, event_id: &str, json: bool) -> Result<(), Error> {
    let row = stack.operations().find(event_id).await?;
    let envelope = envelope_of(&row);
    if json {
        return print_json(&json!({
            "deadLetter": row,
            "key": {"PK": row.key.pk, "SK": row.key.sk},
            "envelope": envelope,
            "envelopeDecodes": envelope.is_some(),
        }));
    }
    print_rows(std::slice::from_ref(&row));
    println!("\nkey       {} / {}", row.key.pk, row.key.sk);
    match envelope {
        Some(e) => println!(
            "envelope  {}",
            serde_json::to_string_pretty(&e).unwrap_or_default()
        ),
        None => println!("envelope  (does not decode: fix the data, or discard it)"),
    }
    Ok(())
}

pub(crate) async fn redrive(
    stack: &Stack,
    selection: Selection,
    dry_run: bool,
    now: Option<SinkArgs>,
    json: bool,
) -> Result<(), Error> {
    let ops = stack.operations();
    // The sink is settled before anything changes: a refused sink leaves
    // every dead letter as it was.
    let now = match now {
        Some(args) => Some(args.sink(stack)?),
        None => None,
    };
    let rows = selection.rows(&ops).await?;
    let sink = match (&now, dry_run) {
        (Some(settings), false) => Some(connect_sink(stack, &ops, settings).await?.0),
        _ => None,
    };
    let mut report = Vec::new();
    let mut failed = 0;
    let progress = Progress::new(json, Some(rows.len() as u64), "redriving");
    for row in &rows {
        let outcome = match (&sink, dry_run) {
            (_, true) if now.is_some() => "would publish now".to_owned(),
            (_, true) => "would redrive".to_owned(),
            (Some(sink), false) => {
                let budget = std::time::Duration::from_secs(60);
                let outcome = redrive_now(sink, ops.store(), row, budget).await?;
                if outcome.failed() {
                    failed += 1;
                }
                now_text(&outcome)
            }
            (None, false) => match ops.redrive(row).await? {
                Marked::Updated => "redriven".to_owned(),
                Marked::Gone | Marked::Claimed | Marked::Refused => {
                    "skipped: no longer a dead letter, or being republished by another redrive --now"
                        .to_owned()
                }
            },
        };
        progress.inc();
        report.push(
            json!({"eventId": row.event_id, "aggregateId": row.aggregate_id, "outcome": outcome}),
        );
    }
    drop(progress);
    let published = report
        .iter()
        .filter(|r| r["outcome"] == "published")
        .count();
    let out = json!({"deadLetters": report, "published": now.as_ref().map(|_| published), "failed": failed});
    if json {
        print_json(&out)?;
    } else {
        for r in &report {
            println!(
                "{}  {}",
                r["eventId"].as_str().unwrap_or(""),
                r["outcome"].as_str().unwrap_or("")
            );
        }
        match (&now, dry_run) {
            (Some(_), false) => println!("published now: {published}, failed: {failed}"),
            (None, false) => println!(
                "they are due: the next scheduled sweep publishes them, whatever their age (--now publishes them at once)"
            ),
            _ => {}
        }
    }
    if failed > 0 {
        return Err(Error::Incomplete(format!(
            "{failed} of the selected dead letters were not published; each stays a dead letter with the failure as its reason (see above)"
        )));
    }
    Ok(())
}

/// What `--now` did with one dead letter, for the operator.
fn now_text(outcome: &RedriveNow) -> String {
    match outcome {
        RedriveNow::Published => "published".into(),
        RedriveNow::Gone => "skipped: no longer a dead letter, or being republished by another redrive --now".into(),
        RedriveNow::Waits => "redriven: waits behind an older event of its aggregate still in the table (the next scheduled sweep publishes it after that one)".into(),
        RedriveNow::PublishFailed(e) => format!("not published ({e}): it stays a dead letter"),
        RedriveNow::NotDeleted => "published, but its item was not deleted: it stays a dead letter; discard it, or a later redrive sends it again".into(),
    }
}

pub(crate) async fn discard(
    stack: &Stack,
    ids: &[String],
    profile: Option<String>,
    json: bool,
) -> Result<(), Error> {
    let ops = stack.operations();
    let rows = Selection::Ids(ids.to_vec()).rows(&ops).await?;
    let who = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
    let profile = profile.or_else(|| std::env::var("AWS_PROFILE").ok());
    // The AWS caller, which the OS user alone does not name (in automation
    // it reads "unknown"): `sts:GetCallerIdentity`, which needs no
    // permission. Asked once, before anything is deleted.
    let caller = aws_sdk_sts::Client::new(stack.sdk())
        .get_caller_identity()
        .send()
        .await
        .map_err(|e| Error::AwsWhile {
            doing: "cannot name the AWS caller for the audit trail, so nothing was discarded"
                .into(),
            source: outbox_runtime::CallError::of("GetCallerIdentity", &e),
        })?
        .arn
        .unwrap_or_default();
    let mut report = Vec::new();
    for row in &rows {
        let outcome = match ops.discard(row).await? {
            Marked::Updated => "discarded",
            Marked::Gone | Marked::Claimed | Marked::Refused => "skipped: no longer a dead letter",
        };
        let at = OffsetDateTime::now_utc()
            .format(&Rfc3339)
            .unwrap_or_default();
        // The audit trail: who, what, when, on stderr as JSON.
        eprintln!(
            "{}",
            json!({
                "audit": "dead-letter discarded",
                "outcome": outcome,
                "table": stack.table(),
                "eventId": row.event_id,
                "eventType": row.event_type,
                "aggregateId": row.aggregate_id,
                "reason": row.reason,
                "by": who,
                "caller": caller,
                "profile": profile,
                "at": at,
            })
        );
        report.push(json!({"eventId": row.event_id, "outcome": outcome}));
    }
    if json {
        return print_json(&json!({ "deadLetters": report }));
    }
    for r in &report {
        println!(
            "{}  {}",
            r["eventId"].as_str().unwrap_or(""),
            r["outcome"].as_str().unwrap_or("")
        );
    }
    Ok(())
}
