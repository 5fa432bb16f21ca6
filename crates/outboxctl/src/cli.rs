//! The arguments of every command (clap's derive: the doc comments are the
//! help text) and the AWS configuration they name.

use aws_config::{Region, SdkConfig};
use clap::{Args, Parser, Subcommand};
use outbox_runtime::store::DynamoStore;
use outbox_runtime::{publish, SinkConfig, SinkSettings};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::operations::DeadLetterFilter;
use crate::stack::{Origin, Stack};

/// Operate a deployed outbox stack: status, dead letters, OnFailure
/// redrive, archive replay, and check a table with `doctor`. Credentials, region and endpoint come from the
/// AWS CLI's chain (environment, profile, SSO) unless given here. The
/// stack's key schema, home region, sink and ordering come from the
/// settings its functions recorded in the table for this region.
#[derive(Debug, Parser)]
#[command(name = "outboxctl", version)]
pub struct Cli {
    #[command(flatten)]
    aws: AwsArgs,
    #[command(subcommand)]
    command: Command,
}

/// AWS options, as the AWS CLI takes them.
#[derive(Debug, Clone, Default, Args)]
struct AwsArgs {
    /// The region (else `AWS_REGION` or the profile's).
    #[arg(long, global = true)]
    region: Option<String>,
    /// A named profile (else `AWS_PROFILE`).
    #[arg(long, global = true)]
    profile: Option<String>,
    /// Another endpoint for every service (else `AWS_ENDPOINT_URL`).
    #[arg(long, global = true)]
    endpoint_url: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Pending events, their oldest age, backoffs and dead letters, per shard.
    Status {
        #[command(flatten)]
        table: TableArg,
        #[command(flatten)]
        json: JsonArg,
    },
    /// Events the functions gave up on: list, show, redrive, discard.
    #[command(subcommand)]
    DeadLetters(DeadLetters),
    /// Release a parked aggregate whose events are held behind one that is
    /// not a dead letter (backing off, or stuck): every pending event of it
    /// becomes due now, and the next scheduled sweep publishes them oldest
    /// first. An aggregate parked behind a dead letter is refused (redrive
    /// or discard the dead letter). `status` lists the parked aggregates.
    Release {
        #[command(flatten)]
        table: TableArg,
        /// The aggregate id.
        aggregate_id: String,
        #[command(flatten)]
        json: JsonArg,
    },
    /// Handle the publisher's OnFailure queue: republish each window of
    /// discarded stream records from the table, delete the handled messages.
    RedriveOnFailure {
        /// The OnFailure queue's URL.
        #[arg(long)]
        queue: String,
        #[command(flatten)]
        table: TableArg,
        #[command(flatten)]
        sink: SinkArgs,
        #[command(flatten)]
        json: JsonArg,
    },
    /// Check that a table, its stream, the mappings that read it and the
    /// sink are fit for the outbox; each finding with its fix. Only reads.
    /// Exits 1 when a finding is a problem.
    Doctor {
        #[command(flatten)]
        table: TableArg,
        /// The event bus the functions publish to (EventBridge sink).
        #[arg(long, conflicts_with = "topic")]
        bus: Option<String>,
        /// The topic ARN the functions publish to (SNS sink).
        #[arg(long)]
        topic: Option<String>,
        /// The stack's MAX_EVENT_BYTES, which the sink must accept (by
        /// default the sink's: 1 MiB for EventBridge, 256 KiB for SNS).
        #[arg(long)]
        max_event_bytes: Option<usize>,
        #[command(flatten)]
        json: JsonArg,
    },
    /// Global tables: hand the pending and dead-lettered outbox items of a
    /// lost region over to the region this runs in (HOME_REGION, else the
    /// SDK's region), one conditional write each: pending ones become due
    /// at once for this region's sweeper, dead letters stay dead-lettered
    /// here. An audit line per item. Safe to run twice, and while the lost
    /// region comes back: an item it published and deleted meanwhile is not
    /// resurrected.
    AdoptRegion {
        #[command(flatten)]
        table: TableArg,
        /// The lost region.
        #[arg(long)]
        from: String,
        /// Only list what would move.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        json: JsonArg,
    },
    /// Replay an EventBridge archive onto the bus (optionally to one rule)
    /// and follow the replay to its end.
    Replay {
        /// The event bus.
        #[arg(long)]
        bus: String,
        /// The archive.
        #[arg(long)]
        archive: String,
        /// Events from (RFC 3339).
        #[arg(long, value_parser = rfc3339)]
        from: OffsetDateTime,
        /// Events to (RFC 3339).
        #[arg(long, value_parser = rfc3339)]
        to: OffsetDateTime,
        /// Only to this rule.
        #[arg(long)]
        rule: Option<String>,
        #[command(flatten)]
        json: JsonArg,
    },
}

#[derive(Debug, Subcommand)]
enum DeadLetters {
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

/// The table, and overrides of the settings its stack recorded there.
#[derive(Debug, Args)]
struct TableArg {
    /// The stack's table.
    #[arg(long)]
    table: String,
    /// Override one of the stack's recorded settings, by its variable's
    /// name (`HOME_REGION=eu-west-1`, `OUTBOX_PREFIX=evt#`, `ORDERING=strict`);
    /// repeatable. With nothing recorded in the table, the settings are
    /// this environment's variables, these on top.
    #[arg(long = "setting", value_name = "NAME=VALUE", value_parser = setting)]
    settings: Vec<(String, String)>,
}

/// JSON output.
#[derive(Debug, Args)]
struct JsonArg {
    /// Print JSON (no progress, no table).
    #[arg(long)]
    json: bool,
}

/// Which dead letters.
#[derive(Debug, Args)]
struct FilterArgs {
    /// Only this event type.
    #[arg(long = "type")]
    event_type: Option<String>,
    /// Only this aggregate.
    #[arg(long)]
    aggregate: Option<String>,
    /// Dead-lettered at or after (RFC 3339).
    #[arg(long, value_parser = rfc3339)]
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

/// The stack's sink. By default the settings the stack's publisher and
/// sweeper recorded in the table at cold start; the flags are for a table
/// where nothing is recorded, and must agree with what is.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct SinkArgs {
    /// The event bus (EventBridge sink); by default the recorded one.
    #[arg(long, conflicts_with = "topic")]
    bus: Option<String>,
    /// The topic ARN (SNS sink); by default the recorded one.
    #[arg(long)]
    topic: Option<String>,
    /// The events' source (EVENT_SOURCE); by default the recorded one.
    #[arg(long)]
    source: Option<String>,
    /// Use --bus, --topic and --source even where they disagree with the
    /// settings the stack's functions recorded.
    #[arg(long)]
    force: bool,
}

impl SinkArgs {
    fn given(&self) -> bool {
        self.bus.is_some() || self.topic.is_some() || self.source.is_some() || self.force
    }

    /// The sink to republish to: the `recorded` settings (and who recorded
    /// them), checked against the flags; the flags alone when nothing is
    /// recorded; an error when neither names a complete sink, or when a
    /// flag disagrees with the record without `--force`.
    pub(crate) fn resolve(
        &self,
        recorded: Option<(SinkSettings, String)>,
    ) -> Result<SinkSettings, String> {
        let Some((recorded, by)) = recorded else {
            let (sink, target) = match (&self.bus, &self.topic) {
                (Some(bus), _) => ("eventbridge", bus.clone()),
                (_, Some(topic)) => ("sns", topic.clone()),
                (None, None) => {
                    return Err("no sink settings are recorded in the table (the stack's publisher and sweeper record theirs when they start: have they run?) and none are given: name the sink with --bus NAME or --topic ARN, and --source".into())
                }
            };
            let source = self.source.clone().ok_or(
                "name --source (the stack's EVENT_SOURCE): nothing is recorded in the table to take it from",
            )?;
            return Ok(SinkSettings {
                sink: sink.to_owned(),
                fifo: sink == "sns" && target.ends_with(".fifo"),
                target,
                source,
            });
        };
        let mut settings = recorded.clone();
        let mut disagree = Vec::new();
        if let Some(bus) = &self.bus {
            if recorded.sink != "eventbridge" || &recorded.target != bus {
                disagree.push(format!("--bus {bus}"));
            }
            settings.sink = "eventbridge".into();
            settings.target = bus.clone();
            settings.fifo = false;
        }
        if let Some(topic) = &self.topic {
            if recorded.sink != "sns" || &recorded.target != topic {
                disagree.push(format!("--topic {topic}"));
            }
            settings.sink = "sns".into();
            settings.target = topic.clone();
            settings.fifo = topic.ends_with(".fifo");
        }
        if let Some(source) = &self.source {
            if &recorded.source != source {
                disagree.push(format!("--source {source}"));
            }
            settings.source = source.clone();
        }
        if !disagree.is_empty() && !self.force {
            return Err(format!(
                "{} disagrees with the stack's recorded sink ({} {}, source {}; recorded by {by}): events republished there would reach none of the stack's rules or subscriptions, and their items would be deleted as published. Leave the flag out to use the recorded settings, or add --force",
                disagree.join(" and "),
                recorded.sink,
                recorded.target,
                recorded.source
            ));
        }
        Ok(settings)
    }

    /// The sink of `stack`: its recorded one, checked against the flags.
    pub(crate) fn sink(&self, stack: &Stack) -> Result<SinkSettings, String> {
        let recorded = match stack.origin() {
            Origin::Recorded { by, .. } => Some((SinkSettings::of(stack.config()), by.clone())),
            Origin::Environment => None,
        };
        self.resolve(recorded)
    }
}

/// The stack's sweeper, in this process, publishing to `settings`, with
/// the stack's ordering and key schema.
pub(crate) async fn sweeper_for(
    stack: &Stack,
    ops: &crate::Operations<DynamoStore>,
    settings: &SinkSettings,
) -> Result<sweeper::Sweeper<publish::AnySink, DynamoStore>, String> {
    let mut config = stack.config().clone();
    config.outbox_shards = ops.shards().await.map_err(|e| e.to_string())?;
    config.event_source = settings.source.clone();
    config.sink = if settings.sink == "sns" {
        SinkConfig::Sns {
            topic_arn: settings.target.clone(),
        }
    } else {
        SinkConfig::EventBridge {
            bus_name: settings.target.clone(),
        }
    };
    let (sink, store) = publish::connect(&config, stack.sdk())
        .await
        .map_err(|e| e.to_string())?;
    Ok(sweeper::Sweeper::new(
        sink,
        store,
        sweeper::SweepSettings::from(&config),
    ))
}

/// `NAME=VALUE`, NAME one of the stack's variables.
fn setting(text: &str) -> Result<(String, String), String> {
    let (name, value) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?} is not NAME=VALUE"))?;
    if !outbox_runtime::VARIABLES.contains(&name) {
        return Err(format!(
            "{name} is not one of the stack's settings ({})",
            outbox_runtime::VARIABLES.join(", ")
        ));
    }
    Ok((name.to_owned(), value.to_owned()))
}

fn rfc3339(text: &str) -> Result<OffsetDateTime, String> {
    OffsetDateTime::parse(text, &Rfc3339).map_err(|_| format!("{text:?} is not an RFC 3339 time"))
}

/// The SDK configuration for a deployed stack: the AWS CLI's chain, with
/// the explicit options on top.
async fn sdk_config(options: &AwsArgs) -> SdkConfig {
    let mut loader = outbox_runtime::aws::loader();
    if let Some(region) = &options.region {
        loader = loader.region(Region::new(region.clone()));
    }
    if let Some(profile) = &options.profile {
        loader = loader.profile_name(profile);
    }
    if let Some(endpoint) = &options.endpoint_url {
        loader = loader.endpoint_url(endpoint);
    }
    loader.load().await
}

/// Runs a command.
pub async fn run(cli: Cli) -> Result<(), String> {
    let sdk = sdk_config(&cli.aws).await;
    let profile = cli.aws.profile.clone();
    let stack = |table: TableArg| {
        let sdk = sdk.clone();
        async move { Stack::load(&sdk, &table.table, &table.settings).await }
    };
    match cli.command {
        Command::Status { table, json } => {
            crate::status::run(&stack(table).await?, json.json).await
        }
        Command::DeadLetters(command) => dead_letters(command, profile, stack).await,
        Command::Release {
            table,
            aggregate_id,
            json,
        } => crate::status::release(&stack(table).await?, &aggregate_id, json.json).await,
        Command::RedriveOnFailure {
            queue,
            table,
            sink,
            json,
        } => crate::redrive_on_failure::run(&stack(table).await?, &queue, &sink, json.json).await,
        Command::Doctor {
            table,
            bus,
            topic,
            max_event_bytes,
            json,
        } => {
            let sink = crate::doctor::SinkToCheck {
                bus,
                topic,
                max_event_bytes,
            };
            // The table's recorded key schema when it can be read; else
            // (no such table, say) the environment's, and the doctor
            // reports what it finds.
            let keys = match Stack::load(&sdk, &table.table, &table.settings).await {
                Ok(stack) => stack.keys().clone(),
                Err(_) => outbox_core::KeySchema::from_lookup(|k| std::env::var(k).ok())
                    .map_err(|e| e.to_string())?,
            };
            crate::doctor::run(&sdk, &keys, &table.table, &sink, json.json).await
        }
        Command::AdoptRegion {
            table,
            from,
            dry_run,
            json,
        } => crate::adopt_region::run(&stack(table).await?, &from, dry_run, json.json).await,
        Command::Replay {
            bus,
            archive,
            from,
            to,
            rule,
            json,
        } => {
            let replay = crate::replay::Replay {
                bus,
                archive,
                from,
                to,
                rule,
            };
            crate::replay::run(&sdk, replay, json.json).await
        }
    }
}

async fn dead_letters<F, Fut>(
    command: DeadLetters,
    profile: Option<String>,
    stack: F,
) -> Result<(), String>
where
    F: Fn(TableArg) -> Fut,
    Fut: std::future::Future<Output = Result<Stack, String>>,
{
    use crate::dead_letters::{self as dl, Selection};
    match command {
        DeadLetters::List {
            table,
            filter,
            json,
        } => dl::list(&stack(table).await?, &filter.filter(), json.json).await,
        DeadLetters::Show {
            table,
            event_id,
            json,
        } => dl::show(&stack(table).await?, &event_id, json.json).await,
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
                    return Err("--bus, --topic, --source and --force go with --now".into())
                }
                (false, false) => None,
            };
            dl::redrive(&stack(table).await?, selection, dry_run, now, json.json).await
        }
        DeadLetters::Discard {
            table,
            event_ids,
            yes,
            json,
        } => {
            if !yes {
                return Err("discard deletes events for good: add --yes".into());
            }
            dl::discard(&stack(table).await?, &event_ids, profile, json.json).await
        }
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("outboxctl").chain(line.split_whitespace()))
    }

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn flags_are_per_command_unique_and_checked() {
        assert!(parse("status --table t --json").is_ok());
        assert!(
            parse("dead-letters list --table t --type OrderPaid --since 2026-01-01T00:00:00Z")
                .is_ok()
        );
        // Unknown, misplaced and repeated flags are errors.
        assert!(parse("status --tabel t").is_err());
        assert!(parse("status --table t --yes").is_err());
        assert!(parse("dead-letters discard --table t X --yes --dry-run").is_err());
        assert!(parse("status --table t --table u").is_err());
        assert!(parse("dead-letters list --table t --since yesterday").is_err());
        // A sink is one of bus or topic.
        assert!(parse("redrive-on-failure --queue q --table t --bus b --topic a").is_err());
        let only_source = SinkArgs {
            source: Some("s".into()),
            ..SinkArgs::default()
        };
        assert!(only_source.given() && only_source.resolve(None).is_err());
        // The recorded sink wins; a disagreeing flag needs --force.
        let recorded = SinkSettings {
            sink: "eventbridge".into(),
            target: "stack-bus".into(),
            source: "shop.orders".into(),
            fifo: false,
        };
        let with = |args: SinkArgs| args.resolve(Some((recorded.clone(), "f at t".into())));
        assert_eq!(with(SinkArgs::default()).unwrap(), recorded);
        let agreeing = SinkArgs {
            bus: Some("stack-bus".into()),
            ..SinkArgs::default()
        };
        assert_eq!(with(agreeing).unwrap(), recorded);
        let other_source = SinkArgs {
            source: Some("outbox.orders".into()),
            ..SinkArgs::default()
        };
        let err = with(other_source.clone()).unwrap_err();
        assert!(err.contains("--source outbox.orders disagrees") && err.contains("--force"));
        let forced = with(SinkArgs {
            force: true,
            ..other_source
        })
        .unwrap();
        assert_eq!(forced.source, "outbox.orders");
        let topic = SinkArgs {
            topic: Some("arn:aws:sns:us-east-1:1:t.fifo".into()),
            ..SinkArgs::default()
        };
        assert!(with(topic.clone()).is_err());
        // Nothing recorded: the flags, complete, or nothing.
        assert!(SinkArgs::default().resolve(None).is_err());
        assert!(topic.resolve(None).is_err(), "no --source");
        let flags = SinkArgs {
            source: Some("s".into()),
            ..topic
        };
        let settings = flags.resolve(None).unwrap();
        assert!(settings.fifo && settings.sink == "sns");
        // Recorded settings overridden by their variables' names; an
        // unknown name or a missing value is refused.
        let cli =
            parse("status --table t --setting HOME_REGION=eu-west-1 --setting ORDERING=strict")
                .unwrap();
        let Command::Status { table, .. } = cli.command else {
            panic!("status")
        };
        assert_eq!(
            table.settings,
            vec![
                ("HOME_REGION".to_owned(), "eu-west-1".to_owned()),
                ("ORDERING".to_owned(), "strict".to_owned())
            ]
        );
        assert!(parse("status --table t --setting BOGUS=1").is_err());
        assert!(parse("status --table t --setting HOME_REGION").is_err());
        // AWS options anywhere.
        assert!(parse("status --table t --region eu-west-1").is_ok());
        let help = parse("--help").unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    }
}
