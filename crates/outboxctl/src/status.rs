//! `outboxctl status`.

use aws_config::SdkConfig;
use time::OffsetDateTime;

use crate::output::{print_json, table};
use crate::Operations;

/// The operations on `table`'s outbox, through the DynamoDB store.
pub(crate) fn operations(
    sdk: &SdkConfig,
    table: &str,
) -> Operations<outbox_core::store::DynamoStore> {
    Operations::new(
        outbox_core::store::DynamoStore::new(
            aws_sdk_dynamodb::Client::new(sdk),
            table,
            outbox_core::DEFAULT_OUTBOX_SHARDS,
        )
        .with_keys(crate::cli::key_schema().unwrap_or_default()),
    )
}

pub(crate) async fn run(sdk: &SdkConfig, table_name: &str, json: bool) -> Result<(), String> {
    let status = operations(sdk, table_name)
        .status(OffsetDateTime::now_utc())
        .await
        .map_err(|e| e.to_string())?;
    if json {
        return print_json(&status);
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
        let mut parked = table(&["parked aggregate", "dead letter", "waiting"], &[2]);
        for p in &status.parked {
            parked.add_row(vec![
                p.aggregate_id.clone(),
                p.dead_letter.clone(),
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
    Ok(())
}
