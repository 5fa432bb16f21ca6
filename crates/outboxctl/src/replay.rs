//! `outboxctl replay`: an EventBridge archive replayed onto the bus
//! (optionally only to one rule), followed to its end.

use aws_config::SdkConfig;
use aws_sdk_eventbridge::types::{ReplayDestination, ReplayState};
use outbox_runtime::CallError;
use serde_json::json;
use time::OffsetDateTime;

use crate::context::{point_in_time, JsonArg};
use crate::error::Error;
use crate::output::{print_json, Progress};

/// `outboxctl replay`: what to replay.
#[derive(Debug, clap::Args)]
pub(crate) struct ReplayArgs {
    /// The event bus.
    #[arg(long)]
    bus: String,
    /// The archive.
    #[arg(long)]
    archive: String,
    /// Events from: an RFC 3339 time, or an age (`6h`, `2days`).
    #[arg(long, value_parser = point_in_time)]
    from: OffsetDateTime,
    /// Events to: an RFC 3339 time, or an age (`0s`: now).
    #[arg(long, value_parser = point_in_time)]
    to: OffsetDateTime,
    /// Only to this rule.
    #[arg(long)]
    rule: Option<String>,
    #[command(flatten)]
    json: JsonArg,
}

/// Starts the replay and follows it to its end.
pub(crate) async fn run(sdk: &SdkConfig, args: ReplayArgs) -> Result<(), Error> {
    let ReplayArgs {
        bus,
        archive,
        from,
        to,
        rule,
        json,
    } = args;
    let json = json.json;
    if from >= to {
        return Err(Error::Usage("--from must be before --to".into()));
    }
    let events = aws_sdk_eventbridge::Client::new(sdk);
    let bus_arn = events
        .describe_event_bus()
        .name(&bus)
        .send()
        .await
        .map_err(|e| CallError::of("DescribeEventBus", &e))?
        .arn
        .ok_or_else(|| Error::Refused("the bus has no ARN".into()))?;
    let archive_arn = events
        .describe_archive()
        .archive_name(&archive)
        .send()
        .await
        .map_err(|e| CallError::of("DescribeArchive", &e))?
        .archive_arn
        .ok_or_else(|| Error::Refused("the archive has no ARN".into()))?;
    let mut destination = ReplayDestination::builder().arn(&bus_arn);
    if let Some(rule) = &rule {
        let rule_arn = events
            .describe_rule()
            .name(rule)
            .event_bus_name(&bus)
            .send()
            .await
            .map_err(|e| CallError::of("DescribeRule", &e))?
            .arn
            .ok_or_else(|| Error::Refused("the rule has no ARN".into()))?;
        destination = destination.filter_arns(rule_arn);
    }
    let name = format!("outboxctl-{}", ulid::Ulid::new());
    let smithy = |t: OffsetDateTime| aws_smithy_types::DateTime::from_secs(t.unix_timestamp());
    let started = events
        .start_replay()
        .replay_name(&name)
        .event_source_arn(&archive_arn)
        .event_start_time(smithy(from))
        .event_end_time(smithy(to))
        .destination(
            destination
                .build()
                .map_err(|e| Error::Usage(e.to_string()))?,
        )
        .send()
        .await;
    match started {
        Ok(_) => {}
        // The name is a fresh ULID of this run: a replay of that name is
        // this call's own, started by an attempt whose answer was lost
        // (the SDK retried it). Follow it.
        Err(e) if outbox_runtime::error_code(&e) == "ResourceAlreadyExistsException" => {}
        Err(e) => return Err(CallError::of("StartReplay", &e).into()),
    }
    let started = std::time::Instant::now();
    let progress = Progress::new(json, None, "replay");
    loop {
        let replay = events
            .describe_replay()
            .replay_name(&name)
            .send()
            .await
            .map_err(|e| CallError::of("DescribeReplay", &e))?;
        let state = replay.state.clone();
        let state_name = state.as_ref().map_or("?", |s| s.as_str()).to_owned();
        let last = replay
            .event_last_replayed_time
            .map(|t| t.to_string())
            .unwrap_or_else(|| "-".into());
        progress.say(format!(
            "replay {name}: {state_name} (last event replayed {last})"
        ));
        match state {
            Some(ReplayState::Completed) => {
                drop(progress);
                if json {
                    return print_json(
                        &json!({"replay": name, "state": "COMPLETED", "lastReplayed": last, "seconds": started.elapsed().as_secs()}),
                    );
                }
                println!("replay {name} completed (events up to {last} replayed onto {bus})");
                return Ok(());
            }
            Some(ReplayState::Failed | ReplayState::Cancelled) => {
                return Err(Error::Incomplete(format!(
                    "replay {name} ended {state_name}: {}",
                    replay.state_reason.unwrap_or_default()
                )));
            }
            _ => tokio::time::sleep(std::time::Duration::from_secs(2)).await,
        }
    }
}
