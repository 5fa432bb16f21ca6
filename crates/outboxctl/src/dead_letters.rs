//! `outboxctl dead-letters list|show|redrive|discard`.

use outbox_runtime::publish::relay::{Entry, Relay, RelayOutcome};
use outbox_runtime::publish::EventSink;
use outbox_runtime::retry::{Deadline, RetryPolicy};
use outbox_runtime::store::{Claim, DeadLetterRecord, DynamoStore, Marked, OutboxStore};
use outbox_runtime::Ordering;
use serde_json::json;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::cli::{sweeper_for, SinkArgs};
use crate::output::{print_json, table, Progress};
use crate::stack::Stack;
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
    stack: &Stack,
    filter: &DeadLetterFilter,
    json: bool,
) -> Result<(), String> {
    let rows = stack
        .operations()
        .dead_letters(filter)
        .await
        .map_err(|e| e.to_string())?;
    if json {
        return print_json(&rows);
    }
    print_rows(&rows);
    Ok(())
}

pub(crate) async fn show(stack: &Stack, event_id: &str, json: bool) -> Result<(), String> {
    let row = stack
        .operations()
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
    stack: &Stack,
    selection: Selection,
    dry_run: bool,
    now: Option<SinkArgs>,
    json: bool,
) -> Result<(), String> {
    let ops = stack.operations();
    // The sink is settled before anything changes: a refused sink leaves
    // every dead letter as it was.
    let now = match now {
        Some(args) => Some(args.sink(stack)?),
        None => None,
    };
    let rows = selection.rows(&ops).await?;
    let sweeper = match (&now, dry_run) {
        (Some(settings), false) => Some(sweeper_for(stack, &ops, settings).await?),
        _ => None,
    };
    let mut report = Vec::new();
    let mut failed = 0;
    let progress = Progress::new(json, Some(rows.len() as u64), "redriving");
    for row in &rows {
        let outcome = match (&sweeper, dry_run) {
            (_, true) if now.is_some() => "would publish now".to_owned(),
            (_, true) => "would redrive".to_owned(),
            (Some(sweeper), false) => {
                let outcome = publish_now(&ops, &sweeper.sink, row).await?;
                if outcome.failed() {
                    failed += 1;
                }
                outcome.text()
            }
            (None, false) => match ops.redrive(row).await.map_err(|e| e.to_string())? {
                Marked::Updated => "redriven".to_owned(),
                Marked::Gone => {
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
        return Err(format!(
            "{failed} of the selected dead letters were not published; each stays a dead letter with the failure as its reason (see above)"
        ));
    }
    Ok(())
}

/// What `--now` did with one dead letter.
enum NowOutcome {
    Published,
    Gone,
    Waits,
    PublishFailed(String),
    NotDeleted,
}

impl NowOutcome {
    fn failed(&self) -> bool {
        matches!(self, Self::PublishFailed(_) | Self::NotDeleted)
    }

    fn text(&self) -> String {
        match self {
            Self::Published => "published".into(),
            Self::Gone => "skipped: no longer a dead letter, or being republished by another redrive --now".into(),
            Self::Waits => "redriven: waits behind an older event of its aggregate still in the table (the next scheduled sweep publishes it after that one)".into(),
            Self::PublishFailed(e) => format!("not published ({e}): it stays a dead letter"),
            Self::NotDeleted => "published, but its item was not deleted: it stays a dead letter; discard it, or a later redrive sends it again".into(),
        }
    }
}

/// How long a `--now` claim holds a dead letter (its holder may die).
const CLAIM_LEASE: std::time::Duration = std::time::Duration::from_secs(300);

/// `--now` for one dead letter: claimed (so that no other path publishes
/// it meanwhile: a claimed dead letter is in no pending index, and another
/// redrive or discard leaves it alone), then published through the relay
/// the publisher and the sweeper use ([`Relay::run_claimed`]), which deletes
/// it once published and otherwise keeps it a dead letter with the failure
/// as its reason. An event whose aggregate has an older event still in the
/// table (pending, held or dead-lettered) is not published now: it is
/// redriven and waits for that one, so an aggregate's events still go out
/// oldest first.
async fn publish_now<S: EventSink>(
    ops: &Operations<DynamoStore>,
    sink: &S,
    row: &DeadLetterRecord,
) -> Result<NowOutcome, String> {
    let store = ops.store();
    let deadline = Deadline::after(std::time::Duration::from_secs(60));
    let claim = Claim::new(CLAIM_LEASE);
    let fail = |e: outbox_runtime::store::StoreError| e.to_string();
    let Some(item) = store
        .claim_dead_letter(row, &claim, &deadline)
        .await
        .map_err(fail)?
    else {
        return Ok(NowOutcome::Gone);
    };
    let key = row.key.clone();
    // Any older event of its aggregate still in the table (pending, held or
    // dead-lettered) goes first: strict order, whatever the setting.
    // One read from its own key: itself and the nearest older item.
    let below = store
        .collection_below(&key, 2, &deadline)
        .await
        .map_err(fail)?;
    if below.about(&key.sk).is_none_or(|g| g.older.is_some()) {
        store
            .release_claim(&key, &claim, None, &deadline)
            .await
            .map_err(fail)?;
        return Ok(match ops.redrive(row).await.map_err(|e| e.to_string())? {
            Marked::Updated => NowOutcome::Waits,
            Marked::Gone => NowOutcome::Gone,
        });
    }
    let relay = Relay {
        sink,
        store,
        retry: &RetryPolicy::default(),
        ordering: Ordering::Relaxed,
        concurrency: 1,
    };
    let report = relay
        .run_claimed(&[Entry::Item(item)], &claim, &deadline)
        .await;
    Ok(match report.outcomes.first() {
        Some(RelayOutcome::Published) if report.delete_failed > 0 => NowOutcome::NotDeleted,
        Some(RelayOutcome::Published) => NowOutcome::Published,
        Some(RelayOutcome::Failed(failure)) => NowOutcome::PublishFailed(failure.to_string()),
        other => {
            // Not sent (the deadline): given back as it was.
            store
                .release_claim(&key, &claim, None, &deadline)
                .await
                .map_err(fail)?;
            NowOutcome::PublishFailed(format!("not sent ({other:?})"))
        }
    })
}

pub(crate) async fn discard(
    stack: &Stack,
    ids: &[String],
    profile: Option<String>,
    json: bool,
) -> Result<(), String> {
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
        .map_err(|e| {
            format!(
                "cannot name the AWS caller for the audit trail, so nothing was discarded: {}",
                outbox_runtime::aws::error_line("GetCallerIdentity", &e)
            )
        })?
        .arn
        .unwrap_or_default();
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
