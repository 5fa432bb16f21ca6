//! `outboxctl dead-letters list|show|redrive|discard`.

use aws_config::SdkConfig;
use outbox_core::retry::Deadline;
use outbox_core::store::{DeadLetterRecord, DynamoStore, Marked};
use serde_json::json;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::cli::{sweeper_for, SinkArgs};
use crate::output::{print_json, table, Progress};
use crate::status::operations;
use crate::{envelope_of, DeadLetterFilter, Operations};

/// The dead letters a redrive names: ids, or `--all` / filters.
pub(crate) enum Selection {
    Ids(Vec<String>),
    Filtered(DeadLetterFilter),
}

impl Selection {
    pub(crate) fn of(
        ids: Vec<String>,
        all: bool,
        filter: DeadLetterFilter,
    ) -> Result<Self, String> {
        match (ids.is_empty(), all || filter.is_set()) {
            (false, true) => Err("give event ids, or --all / filters, not both".into()),
            (false, false) => Ok(Self::Ids(ids)),
            (true, true) => Ok(Self::Filtered(filter)),
            (true, false) => Err(
                "name the dead letters: EVENT_ID..., --all, or --type/--aggregate/--since".into(),
            ),
        }
    }

    async fn rows(&self, ops: &Operations<DynamoStore>) -> Result<Vec<DeadLetterRecord>, String> {
        match self {
            Self::Ids(ids) => {
                let mut rows = Vec::new();
                // Every id is checked before anything changes.
                for id in ids {
                    rows.push(ops.find(id).await.map_err(|e| e.to_string())?);
                }
                Ok(rows)
            }
            Self::Filtered(filter) => ops.dead_letters(filter).await.map_err(|e| e.to_string()),
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
    sdk: &SdkConfig,
    table_name: &str,
    filter: &DeadLetterFilter,
    json: bool,
) -> Result<(), String> {
    let rows = operations(sdk, table_name)
        .dead_letters(filter)
        .await
        .map_err(|e| e.to_string())?;
    if json {
        return print_json(&rows);
    }
    print_rows(&rows);
    Ok(())
}

pub(crate) async fn show(
    sdk: &SdkConfig,
    table_name: &str,
    event_id: &str,
    json: bool,
) -> Result<(), String> {
    let row = operations(sdk, table_name)
        .find(event_id)
        .await
        .map_err(|e| e.to_string())?;
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
    sdk: &SdkConfig,
    table_name: &str,
    selection: Selection,
    dry_run: bool,
    now: Option<SinkArgs>,
    json: bool,
) -> Result<(), String> {
    let ops = operations(sdk, table_name);
    // The sink is settled before anything changes: a refused sink leaves
    // every dead letter as it was.
    let now = match now {
        Some(args) => Some(args.sink(&ops).await?),
        None => None,
    };
    let rows = selection.rows(&ops).await?;
    let mut report = Vec::new();
    let mut redriven = 0;
    let progress = Progress::new(json, Some(rows.len() as u64), "redriving");
    for row in &rows {
        let outcome = if dry_run {
            "would redrive"
        } else {
            match ops.redrive(row).await.map_err(|e| e.to_string())? {
                Marked::Updated => {
                    redriven += 1;
                    "redriven"
                }
                Marked::Gone => "skipped: no longer a dead letter",
            }
        };
        progress.inc();
        report.push(
            json!({"eventId": row.event_id, "aggregateId": row.aggregate_id, "outcome": outcome}),
        );
    }
    drop(progress);
    let mut published = None;
    if let (Some(sink), true) = (now, redriven > 0) {
        published = Some(publish_now(sdk, &ops, &sink).await?);
    }
    let out = json!({"deadLetters": report, "published": published});
    if json {
        return print_json(&out);
    }
    for r in &report {
        println!(
            "{}  {}",
            r["eventId"].as_str().unwrap_or(""),
            r["outcome"].as_str().unwrap_or("")
        );
    }
    match published {
        Some(p) => println!("published now: {p}"),
        None if !dry_run => println!(
            "they are due: the next scheduled sweep publishes them, whatever their age (--now publishes them at once)"
        ),
        None => {}
    }
    Ok(())
}

/// `--now`: a sweep of the redriven range of every shard (the events just
/// redriven, and any other redriven event still due), through the stack's
/// sink.
async fn publish_now(
    sdk: &SdkConfig,
    ops: &Operations<DynamoStore>,
    sink: &outbox_core::SinkSettings,
) -> Result<serde_json::Value, String> {
    let sweeper = sweeper_for(sdk, ops, sink).await?;
    let deadline = Deadline::after(std::time::Duration::from_secs(300));
    let run = sweeper
        .sweep_redriven(OffsetDateTime::now_utc(), &deadline)
        .await;
    Ok(
        json!({"republished": run.republished, "failed": run.failed, "deferred": run.deferred, "deadLettered": run.dead_lettered}),
    )
}

pub(crate) async fn discard(
    sdk: &SdkConfig,
    table_name: &str,
    ids: &[String],
    profile: Option<String>,
    json: bool,
) -> Result<(), String> {
    let ops = operations(sdk, table_name);
    let rows = Selection::Ids(ids.to_vec()).rows(&ops).await?;
    let who = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
    let profile = profile.or_else(|| std::env::var("AWS_PROFILE").ok());
    let mut report = Vec::new();
    for row in &rows {
        let outcome = match ops.discard(row).await.map_err(|e| e.to_string())? {
            Marked::Updated => "discarded",
            Marked::Gone => "skipped: no longer a dead letter",
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
                "table": table_name,
                "eventId": row.event_id,
                "eventType": row.event_type,
                "aggregateId": row.aggregate_id,
                "reason": row.reason,
                "by": who,
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
