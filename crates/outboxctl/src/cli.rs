//! The command line: [`Cli`] (clap's derive: the doc comments are the help
//! text) and [`run`], which builds the SDK configuration once and hands it
//! to the command. Each command's arguments are its own module's; the
//! groups several share (the table, the sink, `--json`) are `context.rs`'s.

use clap::{Parser, Subcommand};

use crate::adopt_region::AdoptRegionArgs;
use crate::context::{sdk_config, AwsArgs};
use crate::dead_letters::DeadLetters;
use crate::doctor::DoctorArgs;
use crate::error::Error;
use crate::redrive_on_failure::RedriveOnFailureArgs;
use crate::replay::ReplayArgs;
use crate::status::{MakeDueArgs, ReleaseArgs, StatusArgs};

/// Operate a deployed outbox stack: status, dead letters, OnFailure
/// redrive, archive replay, and check a table with `doctor`. Credentials, region and endpoint come from the
/// AWS CLI's chain (environment, profile, SSO) unless given here. The
/// stack's key schema, home region, sink and ordering come from the
/// settings its functions recorded in the table for this region.
#[derive(Debug, Parser)]
#[command(name = "outboxctl", version, after_help = EXAMPLES)]
pub struct Cli {
    #[command(flatten)]
    aws: AwsArgs,
    #[command(subcommand)]
    command: Command,
}

/// The top-level help's examples.
const EXAMPLES: &str = "Examples:
  outboxctl status --table orders
  outboxctl doctor --table orders --bus orders-events
  outboxctl dead-letters list --table orders --since 1h
  outboxctl dead-letters redrive --table orders --all --now
  outboxctl make-due --table orders --older-than 3600
  outboxctl completions bash > /etc/bash_completion.d/outboxctl
  outboxctl man > outboxctl.1

Colour: only clap's help and errors use it, on a terminal, and not with NO_COLOR set.";

#[derive(Debug, Subcommand)]
enum Command {
    /// Pending events, their oldest age, backoffs and dead letters, per shard.
    Status(StatusArgs),
    /// Events the functions gave up on: list, show, redrive, discard.
    #[command(subcommand)]
    DeadLetters(DeadLetters),
    /// Release a parked aggregate whose events are held behind one that is
    /// not a dead letter (backing off, or stuck): every pending event of it
    /// becomes due now, and the next scheduled sweep publishes them oldest
    /// first. An aggregate parked behind a dead letter is refused (redrive
    /// or discard the dead letter). `status` lists the parked aggregates.
    Release(ReleaseArgs),
    /// Make pending events due now, whatever their backoff or age: those
    /// with the given ids, of one aggregate, or older than an age (each
    /// selector given must match). The next scheduled sweep publishes
    /// them, oldest first (in strict mode after every older event of their
    /// aggregate). An audit line per event on stderr.
    MakeDue(MakeDueArgs),
    /// Handle the publisher's OnFailure queue: republish each window of
    /// discarded stream records from the table, delete the handled messages.
    RedriveOnFailure(RedriveOnFailureArgs),
    /// Check that a table, its stream, the mappings that read it and the
    /// sink are fit for the outbox; each finding with its fix. Only reads.
    /// Exits 1 when a finding is a problem.
    Doctor(DoctorArgs),
    /// Global tables: hand the pending and dead-lettered outbox items of a
    /// lost region over to the region this runs in (HOME_REGION, else the
    /// SDK's region), one conditional write each: pending ones become due
    /// at once for this region's sweeper, dead letters stay dead-lettered
    /// here. An audit line per item. Safe to run twice, and while the lost
    /// region comes back: an item it published and deleted meanwhile is not
    /// resurrected.
    AdoptRegion(AdoptRegionArgs),
    /// Replay an EventBridge archive onto the bus (optionally to one rule)
    /// and follow the replay to its end.
    Replay(ReplayArgs),
    /// Print the shell completion script (generated from this command line).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff, generated from this command line).
    Man,
}

/// Runs a command.
pub async fn run(cli: Cli) -> Result<(), Error> {
    use clap::CommandFactory;
    match &cli.command {
        Command::Completions { shell } => {
            let mut command = Cli::command();
            clap_complete::generate(*shell, &mut command, "outboxctl", &mut std::io::stdout());
            return Ok(());
        }
        Command::Man => {
            clap_mangen::Man::new(Cli::command()).render(&mut std::io::stdout())?;
            return Ok(());
        }
        _ => {}
    }
    let sdk = sdk_config(&cli.aws).await;
    match cli.command {
        Command::Status(args) => crate::status::status(&sdk, args).await,
        Command::DeadLetters(command) => {
            crate::dead_letters::run(&sdk, cli.aws.profile.clone(), command).await
        }
        Command::Release(args) => crate::status::release_cmd(&sdk, args).await,
        Command::MakeDue(args) => crate::status::make_due_cmd(&sdk, args).await,
        Command::RedriveOnFailure(args) => crate::redrive_on_failure::run(&sdk, args).await,
        Command::Doctor(args) => crate::doctor::run(&sdk, args).await,
        Command::AdoptRegion(args) => crate::adopt_region::run(&sdk, args).await,
        Command::Replay(args) => crate::replay::run(&sdk, args).await,
        Command::Completions { .. } | Command::Man => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;
    use crate::context::SinkArgs;
    use outbox_runtime::SinkSettings;

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
        // An age before now, in humantime's units.
        assert!(parse("dead-letters list --table t --since 1h").is_ok());
        assert!(parse("dead-letters list --table t --since 2days").is_ok());
        assert!(parse("replay --bus b --archive a --from 6h --to 0s").is_ok());
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
        let err = with(other_source.clone()).unwrap_err().to_string();
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
        // A Custom Event Bus is named by its ARN.
        let arn =
            "arn:aws:events:us-east-1:000000000000:event-busv2/orders/abcdefghij0123456789abcde";
        let bus = SinkArgs {
            bus: Some(arn.into()),
            source: Some("s".into()),
            ..SinkArgs::default()
        };
        let settings = bus.resolve(None).unwrap();
        assert_eq!(
            (settings.sink.as_str(), settings.target.as_str()),
            ("eventbridge-bus", arn)
        );
        assert!(with(bus).is_err(), "the classic bus is recorded");
        // Recorded settings overridden by their variables' names; an
        // unknown name or a missing value is refused.
        let cli =
            parse("status --table t --setting HOME_REGION=eu-west-1 --setting ORDERING=strict")
                .unwrap();
        let Command::Status(args) = cli.command else {
            panic!("status")
        };
        assert_eq!(
            args.table.settings,
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

    #[test]
    fn an_age_is_a_time_before_now() {
        let now = time::OffsetDateTime::now_utc();
        let at = crate::context::point_in_time("1h").unwrap();
        let age = now - at;
        assert!(
            age >= time::Duration::minutes(59) && age <= time::Duration::minutes(61),
            "{age}"
        );
        let exact = crate::context::point_in_time("2026-12-01T10:00:00Z").unwrap();
        assert_eq!(exact.unix_timestamp(), 1_796_119_200);
        assert!(crate::context::point_in_time("100000000years").is_err());
    }

    #[test]
    fn the_help_examples_parse() {
        for line in EXAMPLES.lines().filter(|l| l.starts_with("  outboxctl ")) {
            let command = line.trim().split(" > ").next().unwrap();
            let words = command
                .split_whitespace()
                .skip(1)
                .collect::<Vec<_>>()
                .join(" ");
            assert!(
                parse(&words).is_ok(),
                "{command}: {:?}",
                parse(&words).err()
            );
        }
    }

    #[test]
    fn completions_and_the_manual_come_from_the_definition() {
        assert!(parse("completions bash").is_ok());
        assert!(parse("completions zsh").is_ok());
        assert!(parse("completions tcsh").is_err());
        assert!(parse("man").is_ok());
        let mut script = Vec::new();
        clap_complete::generate(
            clap_complete::Shell::Bash,
            &mut Cli::command(),
            "outboxctl",
            &mut script,
        );
        let script = String::from_utf8(script).unwrap();
        assert!(script.contains("dead-letters") && script.contains("make-due"));
        let mut page = Vec::new();
        clap_mangen::Man::new(Cli::command())
            .render(&mut page)
            .unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(
            page.contains(".TH outboxctl") && page.contains("Examples"),
            "{page}"
        );
    }
}
