//! `outboxctl adopt-region`: hands a lost region's pending and dead-lettered
//! outbox items over to the region it runs in (global tables,
//! docs/runbook.md "A region is lost").

use outbox_engine::Deadline;
use outbox_engine::{AdoptOutcome, AdoptedFrom, Adoption};
use outbox_engine::{OperatorStore, SweepStore};
use outbox_runtime::DynamoStore;

use aws_config::SdkConfig;

use crate::context::{JsonArg, TableArg};
use crate::error::Error;
use crate::stack::Stack;

/// `outboxctl adopt-region`.
#[derive(Debug, clap::Args)]
pub(crate) struct AdoptRegionArgs {
    #[command(flatten)]
    table: TableArg,
    /// The lost region.
    #[arg(long)]
    from: String,
    /// Only list what would move.
    #[arg(long)]
    dry_run: bool,
    /// Adopt even though the region's functions recorded their settings
    /// within the last hour (the region may be alive: two regions would
    /// then publish its events).
    #[arg(long)]
    force: bool,
    #[command(flatten)]
    json: JsonArg,
}

/// Runs `adopt-region` on the table's stack.
pub(crate) async fn run(sdk: &SdkConfig, args: AdoptRegionArgs) -> Result<(), Error> {
    let stack = args.table.stack(sdk).await?;
    adopt(&stack, &args.from, args.dry_run, args.force, args.json.json).await
}

/// What a run did, per item and in total.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary<'a> {
    from: &'a str,
    to: &'a str,
    dry_run: bool,
    shards: u16,
    adopted: usize,
    would_adopt: usize,
    gone: usize,
}

/// The audit line of one item.
#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct Audit<'a> {
    from: &'a str,
    to: &'a str,
    #[serde(flatten)]
    adoption: &'a Adoption,
}

/// How recently a region's functions must have recorded their settings for
/// `adopt-region` to take it as alive.
const ALIVE_WITHIN: time::Duration = time::Duration::hours(1);

/// The records of `from` written within [`ALIVE_WITHIN`] of `now`, as
/// "function (by)" lines.
fn recent_runs(stack: &Stack, from: &str, now: time::OffsetDateTime) -> Vec<String> {
    stack
        .records()
        .iter()
        .filter(|r| r.region == from)
        .filter(|r| {
            r.by.rsplit_once(" at ")
                .and_then(|(_, at)| {
                    time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339)
                        .ok()
                })
                .is_some_and(|at| now - at < ALIVE_WITHIN)
        })
        .map(|r| format!("{} ({})", r.function, r.by))
        .collect()
}

async fn adopt(
    stack: &Stack,
    from: &str,
    dry_run: bool,
    force: bool,
    json: bool,
) -> Result<(), Error> {
    if let Err(outbox_core::ConfigError::Invalid { reason, .. }) =
        outbox_core::keys::check_region("--from", from)
    {
        return Err(Error::Usage(format!("--from {from:?}: {reason}")));
    }
    let schema = stack.keys().clone();
    // The region it runs in: the stack's HOME_REGION, else the SDK's.
    let to = match schema.home_region.clone() {
        Some(region) => region,
        None => stack.sdk().region().map(|r| r.to_string()).ok_or_else(|| {
            Error::Usage("no region: set --region, AWS_REGION or HOME_REGION".into())
        })?,
    };
    if to == from {
        return Err(Error::Usage(format!(
            "adopt-region runs in the region that takes the items over; this is {from} itself"
        )));
    }
    // A region whose functions started within the hour may be alive: both
    // regions would publish its events. A dry run only lists.
    let recent = recent_runs(stack, from, time::OffsetDateTime::now_utc());
    if !recent.is_empty() {
        let what = format!(
            "{from}'s functions recorded their settings within the last hour: {}",
            recent.join("; ")
        );
        if dry_run {
            eprintln!("warning: {what}; a run without --dry-run needs --force");
        } else if !force {
            return Err(Error::Refused(format!(
                "{what}. The region may be alive, and both regions would then publish its events. Check that {from}'s functions are stopped (or its mapping disabled), then run again with --force; --dry-run lists what would move."
            )));
        }
    }
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::new(stack.sdk()),
        stack.table(),
        outbox_runtime::DEFAULT_OUTBOX_SHARDS,
    )
    .with_keys(schema.with_home_region(Some(to.clone())));
    let deadline = Deadline::after(std::time::Duration::from_secs(900));
    let shards = store
        .recorded_shards(&deadline)
        .await?
        .max(store.configured_shards());
    let mut summary = Summary {
        from,
        to: &to,
        dry_run,
        shards,
        adopted: 0,
        would_adopt: 0,
        gone: 0,
    };
    for shard in 0..shards {
        let adoptions = store
            .adopt(Some(from), shard, true, dry_run, &deadline)
            .await
            .map_err(|source| Error::StoreWhile {
                doing: format!("shard {shard}"),
                source,
            })?;
        for adoption in &adoptions {
            match adoption.outcome {
                AdoptOutcome::Adopted => summary.adopted += 1,
                AdoptOutcome::WouldAdopt => summary.would_adopt += 1,
                AdoptOutcome::Gone => summary.gone += 1,
            }
            // One audit line per item, as it happens.
            if json {
                let line = Audit {
                    from,
                    to: &to,
                    adoption,
                };
                println!("{}", serde_json::to_string(&line)?);
            } else {
                let index = match adoption.index {
                    AdoptedFrom::Pending => "pending",
                    AdoptedFrom::DeadLetter => "dead-letter",
                };
                let outcome = match adoption.outcome {
                    AdoptOutcome::Adopted => "adopted",
                    AdoptOutcome::WouldAdopt => "would adopt",
                    AdoptOutcome::Gone => "gone",
                };
                println!(
                    "{outcome} {index} {} {} event {} ({from} -> {to})",
                    adoption.key.pk,
                    adoption.key.sk,
                    adoption.event_id.as_deref().unwrap_or("-"),
                );
            }
        }
    }
    if json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "{}: {} adopted, {} would be, {} gone meanwhile, over {} shards ({from} -> {to}); pending ones are published by this region's next scheduled sweep, dead letters stay for `outboxctl dead-letters`",
            if dry_run { "dry run" } else { "done" },
            summary.adopted,
            summary.would_adopt,
            summary.gone,
            shards,
        );
    }
    Ok(())
}
