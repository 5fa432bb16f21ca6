//! What every command stands on, below the commands: the AWS options and
//! the SDK configuration they name, the table and the stack settings
//! recorded there ([`Stack`]), the sink a republish goes to, the stack's
//! sweeper in this process, and the argument groups several commands share.

use aws_config::{Region, SdkConfig};
use clap::Args;
use outbox_runtime::DynamoStore;
use outbox_runtime::{SinkConfig, SinkSettings};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::error::Error;
use crate::stack::{Origin, Stack};

/// AWS options, as the AWS CLI takes them.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct AwsArgs {
    /// The region (else `AWS_REGION` or the profile's).
    #[arg(long, global = true)]
    pub(crate) region: Option<String>,
    /// A named profile (else `AWS_PROFILE`).
    #[arg(long, global = true)]
    pub(crate) profile: Option<String>,
    /// Another endpoint for every service (else `AWS_ENDPOINT_URL`).
    #[arg(long, global = true)]
    pub(crate) endpoint_url: Option<String>,
}

/// The table, and overrides of the settings its stack recorded there.
#[derive(Debug, Args)]
pub(crate) struct TableArg {
    /// The stack's table.
    #[arg(long)]
    pub(crate) table: String,
    /// Override one of the stack's recorded settings, by its variable's
    /// name (`HOME_REGION=eu-west-1`, `OUTBOX_PREFIX=evt#`, `ORDERING=strict`);
    /// repeatable. With nothing recorded in the table, the settings are
    /// this environment's variables, these on top.
    #[arg(long = "setting", value_name = "NAME=VALUE", value_parser = setting)]
    pub(crate) settings: Vec<(String, String)>,
    /// The stack to act for (its `STACK_NAME`: the `NamePrefix`, else the
    /// stack's name), when more than one recorded its settings in the
    /// table for this region.
    #[arg(long = "stack", value_name = "NAME")]
    pub(crate) stack: Option<String>,
}

/// JSON output.
#[derive(Debug, Args)]
pub(crate) struct JsonArg {
    /// Print JSON (no progress, no table).
    #[arg(long)]
    pub(crate) json: bool,
}

impl TableArg {
    /// The stack of this table: its recorded settings, the overrides on top.
    pub(crate) async fn stack(&self, sdk: &SdkConfig) -> Result<Stack, Error> {
        Stack::load(sdk, &self.table, &self.settings, self.stack.as_deref()).await
    }
}

/// The stack's sink. By default the settings the stack's publisher and
/// sweeper recorded in the table at cold start; the flags are for a table
/// where nothing is recorded, and must agree with what is.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct SinkArgs {
    /// The event bus: a classic bus's name (EventBridge sink), or a Custom
    /// Event Bus's ARN (`…:event-busv2/…`, the eventbridge-bus sink); by
    /// default the recorded one.
    #[arg(long, conflicts_with = "topic")]
    pub(crate) bus: Option<String>,
    /// The topic ARN (SNS sink); by default the recorded one.
    #[arg(long)]
    pub(crate) topic: Option<String>,
    /// The events' source (EVENT_SOURCE); by default the recorded one.
    #[arg(long)]
    pub(crate) source: Option<String>,
    /// Use --bus, --topic and --source even where they disagree with the
    /// settings the stack's functions recorded.
    #[arg(long)]
    pub(crate) force: bool,
}

/// The sink a `--bus` names: a Custom Event Bus by its ARN, a classic bus
/// by its name.
pub(crate) fn bus_sink(bus: &str) -> &'static str {
    if bus.starts_with("arn:") && bus.contains(":event-busv2/") {
        "eventbridge-bus"
    } else {
        "eventbridge"
    }
}

impl SinkArgs {
    pub(crate) fn given(&self) -> bool {
        self.bus.is_some() || self.topic.is_some() || self.source.is_some() || self.force
    }

    /// The sink to republish to: the `recorded` settings (and who recorded
    /// them), checked against the flags; the flags alone when nothing is
    /// recorded; an error when neither names a complete sink, or when a
    /// flag disagrees with the record without `--force`.
    pub(crate) fn resolve(
        &self,
        recorded: Option<(SinkSettings, String)>,
    ) -> Result<SinkSettings, Error> {
        let Some((recorded, by)) = recorded else {
            let (sink, target) = match (&self.bus, &self.topic) {
                (Some(bus), _) => (bus_sink(bus), bus.clone()),
                (_, Some(topic)) => ("sns", topic.clone()),
                (None, None) => {
                    return Err(Error::Refused("no sink settings are recorded in the table (the stack's publisher and sweeper record theirs when they start: have they run?) and none are given: name the sink with --bus NAME or --topic ARN, and --source".into()))
                }
            };
            let source = self.source.clone().ok_or_else(|| {
                Error::Refused("name --source (the stack's EVENT_SOURCE): nothing is recorded in the table to take it from".into())
            })?;
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
            if recorded.sink != bus_sink(bus) || &recorded.target != bus {
                disagree.push(format!("--bus {bus}"));
            }
            settings.sink = bus_sink(bus).into();
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
            return Err(Error::Refused(format!(
                "{} disagrees with the stack's recorded sink ({} {}, source {}; recorded by {by}): events republished there would reach none of the stack's rules or subscriptions, and their items would be deleted as published. Leave the flag out to use the recorded settings, or add --force",
                disagree.join(" and "),
                recorded.sink,
                recorded.target,
                recorded.source
            )));
        }
        Ok(settings)
    }

    /// The sink of `stack`: its recorded one, checked against the flags.
    pub(crate) fn sink(&self, stack: &Stack) -> Result<SinkSettings, Error> {
        let recorded = match stack.origin() {
            Origin::Recorded { by, .. } => Some((SinkSettings::of(stack.config()), by.clone())),
            Origin::Environment => None,
        };
        self.resolve(recorded)
    }
}

/// The stack's sink, in this process, publishing to `settings`, with the
/// stack's configuration (source, limits) and its store.
pub(crate) async fn connect_sink(
    stack: &Stack,
    ops: &crate::Operations<DynamoStore>,
    settings: &SinkSettings,
) -> Result<(outbox_runtime::AnySink, DynamoStore, outbox_runtime::Config), Error> {
    let mut config = stack.config().clone();
    config.outbox_shards = ops.shards().await?;
    config.event_source = settings.source.clone();
    config.sink = match settings.sink.as_str() {
        "sns" => SinkConfig::Sns {
            topic_arn: settings.target.clone(),
        },
        "eventbridge-bus" => SinkConfig::EventBridgeBus {
            bus_arn: settings.target.clone(),
        },
        _ => SinkConfig::EventBridge {
            bus_name: settings.target.clone(),
        },
    };
    let (sink, store) = outbox_runtime::connect(&config, stack.sdk()).await?;
    Ok((sink, store, config))
}

/// The stack's sweep, in this process, publishing to `settings`, with the
/// stack's ordering and key schema.
pub(crate) async fn sweeper_for(
    stack: &Stack,
    ops: &crate::Operations<DynamoStore>,
    settings: &SinkSettings,
) -> Result<outbox_engine::Sweeper<outbox_runtime::AnySink, DynamoStore>, Error> {
    let (sink, store, config) = connect_sink(stack, ops, settings).await?;
    Ok(outbox_engine::Sweeper::new(
        sink,
        store,
        outbox_engine::SweepSettings::from(&config),
    ))
}

/// `NAME=VALUE`, NAME one of the stack's variables.
pub(crate) fn setting(text: &str) -> Result<(String, String), String> {
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

/// A point in time: RFC 3339 (`2026-12-01T10:00:00Z`), or an age before
/// now (`90s`, `30m`, `1h`, `2days`, `1h 30m`: humantime's units).
pub(crate) fn point_in_time(text: &str) -> Result<OffsetDateTime, String> {
    if let Ok(at) = OffsetDateTime::parse(text, &Rfc3339) {
        return Ok(at);
    }
    let age = humantime::parse_duration(text).map_err(|_| {
        format!("{text:?} is neither an RFC 3339 time nor an age such as 30m, 1h or 2days")
    })?;
    let age = time::Duration::try_from(age).map_err(|_| format!("{text:?} is too long an age"))?;
    OffsetDateTime::now_utc()
        .checked_sub(age)
        .ok_or_else(|| format!("{text:?} reaches before the calendar"))
}

/// The SDK configuration for a deployed stack: the AWS CLI's chain, with
/// the explicit options on top.
pub(crate) async fn sdk_config(options: &AwsArgs) -> SdkConfig {
    let mut loader = outbox_runtime::sdk_config_loader();
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
