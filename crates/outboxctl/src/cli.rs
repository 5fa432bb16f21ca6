//! The operator commands' arguments and output (`outboxctl status`,
//! `outboxctl dead-letters …`, `outboxctl redrive-on-failure`).

use std::collections::HashMap;
use std::io::IsTerminal;

use aws_config::SdkConfig;
use outbox_core::retry::Deadline;
use outbox_core::{publish, Config};
use serde_json::json;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use crate::ops::{AwsOptions, DeadLetterRow, Filter, Redrive, Table};

/// The operator commands' usage.
pub const USAGE: &str = "\
outboxctl status --table T [--json]
outboxctl dead-letters list --table T [--type X] [--aggregate ID] [--since RFC3339] [--json]
outboxctl dead-letters show --table T EVENT_ID [--json]
outboxctl dead-letters redrive --table T (EVENT_ID... | --all | --type/--aggregate/--since) [--dry-run]
                                [--now (--bus B | --topic ARN) [--source S]]
outboxctl dead-letters discard --table T EVENT_ID... --yes
outboxctl redrive-on-failure --queue URL --table T (--bus B | --topic ARN) [--source S]
outboxctl replay --bus B --archive A --from RFC3339 --to RFC3339 [--rule R]
  AWS options: --region R, --profile P, --endpoint-url URL (and the AWS CLI's environment)";

/// Parsed flags and positional arguments.
#[derive(Debug, Default)]
pub struct Args {
    values: HashMap<&'static str, String>,
    switches: Vec<&'static str>,
    pub positional: Vec<String>,
}

const VALUED: [&str; 15] = [
    "archive",
    "from",
    "to",
    "rule",
    "table",
    "type",
    "aggregate",
    "since",
    "queue",
    "bus",
    "topic",
    "source",
    "region",
    "profile",
    "endpoint-url",
];
const SWITCHES: [&str; 5] = ["json", "all", "dry-run", "now", "yes"];

impl Args {
    pub fn parse(args: &[String]) -> Result<Self, String> {
        let mut parsed = Self::default();
        let mut rest = args.iter();
        while let Some(arg) = rest.next() {
            let Some(flag) = arg.strip_prefix("--") else {
                parsed.positional.push(arg.clone());
                continue;
            };
            let (name, inline) = match flag.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (flag, None),
            };
            if let Some(known) = VALUED.iter().find(|k| **k == name) {
                let value = match inline {
                    Some(v) => v,
                    None => rest
                        .next()
                        .cloned()
                        .ok_or(format!("--{name} needs a value"))?,
                };
                if value.is_empty() || value.starts_with("--") {
                    return Err(format!("--{name} needs a value"));
                }
                parsed.values.insert(known, value);
            } else if let Some(known) = SWITCHES.iter().find(|k| **k == name) {
                parsed.switches.push(known);
            } else {
                return Err(format!("unknown option --{name}"));
            }
        }
        Ok(parsed)
    }

    pub fn value(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    pub fn required(&self, name: &str) -> Result<&str, String> {
        self.value(name).ok_or(format!("--{name} is required"))
    }

    pub fn switch(&self, name: &str) -> bool {
        self.switches.contains(&name)
    }

    fn aws(&self) -> AwsOptions {
        AwsOptions {
            region: self.value("region").map(str::to_owned),
            profile: self.value("profile").map(str::to_owned),
            endpoint_url: self.value("endpoint-url").map(str::to_owned),
        }
    }

    fn filter(&self) -> Result<Filter, String> {
        Ok(Filter {
            event_type: self.value("type").map(str::to_owned),
            aggregate_id: self.value("aggregate").map(str::to_owned),
            since: self
                .value("since")
                .map(|t| {
                    OffsetDateTime::parse(t, &Rfc3339)
                        .map_err(|_| format!("--since {t:?} is not an RFC 3339 time"))
                })
                .transpose()?,
        })
    }

    fn has_filter(&self) -> bool {
        ["type", "aggregate", "since"]
            .iter()
            .any(|f| self.value(f).is_some())
    }
}

fn print_json(value: &impl serde::Serialize) -> Result<(), String> {
    println!(
        "{}",
        serde_json::to_string_pretty(value).map_err(|e| e.to_string())?
    );
    Ok(())
}

/// Progress of a long operation, on stderr, when a person watches (stdout
/// is a terminal); never mixed into `--json` output.
fn progress(text: &str) {
    if std::io::stdout().is_terminal() {
        eprint!("\r{text}");
    }
}

/// Runs an operator command (`args` without the program name).
pub async fn run(args: &[String]) -> Result<(), String> {
    let (command, rest) = match args {
        [first, second, rest @ ..] if first == "dead-letters" => {
            (format!("dead-letters {second}"), rest)
        }
        [first, rest @ ..] => (first.clone(), rest),
        [] => return Err(USAGE.into()),
    };
    let args = Args::parse(rest)?;
    let sdk = crate::ops::sdk_config(&args.aws()).await;
    match command.as_str() {
        "status" => status(&sdk, &args).await,
        "dead-letters list" => list(&sdk, &args).await,
        "dead-letters show" => show(&sdk, &args).await,
        "dead-letters redrive" => redrive(&sdk, &args).await,
        "dead-letters discard" => discard(&sdk, &args).await,
        "redrive-on-failure" => redrive_on_failure(&sdk, &args).await,
        "replay" => replay(&sdk, &args).await,
        other => Err(format!("unknown command {other:?}\n{USAGE}")),
    }
}

fn no_positional(args: &Args) -> Result<(), String> {
    match args.positional.first() {
        Some(extra) => Err(format!("unexpected argument {extra:?}")),
        None => Ok(()),
    }
}

async fn status(sdk: &SdkConfig, args: &Args) -> Result<(), String> {
    no_positional(args)?;
    let table = Table::new(sdk, args.required("table")?);
    let status = table
        .status(OffsetDateTime::now_utc())
        .await
        .map_err(|e| e.to_string())?;
    if args.switch("json") {
        return print_json(&status);
    }
    let bound = if status.capped { " (at least)" } else { "" };
    println!("pending               {}{bound}", status.pending);
    println!(
        "oldest pending age    {}",
        status
            .oldest_pending_age_seconds
            .map_or("-".into(), |s| format!("{s} s"))
    );
    println!(
        "backing off           {} (next attempt due {})",
        status.backing_off,
        status.next_attempt_due.as_deref().unwrap_or("-")
    );
    println!("dead letters          {}{bound}", status.dead_letters);
    println!("\nshard  pending  backing-off  dead-letters  oldest-age");
    for s in &status.shards {
        println!(
            "{:>5}  {:>7}  {:>11}  {:>12}  {}",
            s.shard,
            s.pending,
            s.backing_off,
            s.dead_letters,
            s.oldest_pending_age_seconds
                .map_or("-".into(), |a| format!("{a} s"))
        );
    }
    Ok(())
}

fn print_rows(rows: &[DeadLetterRow]) {
    println!(
        "{:<26}  {:<14}  {:<26}  {:>8}  {:<24}  reason",
        "event id", "type", "aggregate", "attempts", "dead-lettered at"
    );
    for r in rows {
        println!(
            "{:<26}  {:<14}  {:<26}  {:>8}  {:<24}  {}",
            r.event_id, r.event_type, r.aggregate_id, r.attempts, r.dead_lettered_at, r.reason
        );
    }
}

async fn list(sdk: &SdkConfig, args: &Args) -> Result<(), String> {
    no_positional(args)?;
    let table = Table::new(sdk, args.required("table")?);
    let rows = table
        .dead_letters(&args.filter()?)
        .await
        .map_err(|e| e.to_string())?;
    if args.switch("json") {
        return print_json(&rows);
    }
    print_rows(&rows);
    Ok(())
}

async fn show(sdk: &SdkConfig, args: &Args) -> Result<(), String> {
    let table = Table::new(sdk, args.required("table")?);
    let [id] = args.positional.as_slice() else {
        return Err("dead-letters show takes one EVENT_ID".into());
    };
    let (row, item) = table.find(id).await.map_err(|e| e.to_string())?;
    let envelope = DeadLetterRow::envelope(&item);
    let shown = json!({
        "deadLetter": row,
        "key": {"PK": row.pk, "SK": row.sk},
        "envelope": envelope,
        "envelopeDecodes": envelope.is_some(),
    });
    if args.switch("json") {
        return print_json(&shown);
    }
    print_rows(std::slice::from_ref(&row));
    println!("\nkey       {} / {}", row.pk, row.sk);
    match envelope {
        Some(e) => println!(
            "envelope  {}",
            serde_json::to_string_pretty(&e).unwrap_or_default()
        ),
        None => println!("envelope  (does not decode: fix the data, or discard it)"),
    }
    Ok(())
}

/// The dead letters a redrive or discard names: ids, `--all`, or filters.
async fn selected(
    table: &Table,
    args: &Args,
    allow_all: bool,
) -> Result<Vec<DeadLetterRow>, String> {
    let by_id = !args.positional.is_empty();
    let by_filter = args.switch("all") || args.has_filter();
    match (by_id, by_filter) {
        (true, true) => Err("give event ids, or --all / filters, not both".into()),
        (false, _) if !allow_all => Err("name the dead letters to discard: EVENT_ID...".into()),
        (false, false) => {
            Err("name the dead letters: EVENT_ID..., --all, or --type/--aggregate/--since".into())
        }
        (true, false) => {
            let mut rows = Vec::new();
            // Every id is checked before anything changes.
            for id in &args.positional {
                rows.push(table.find(id).await.map_err(|e| e.to_string())?.0);
            }
            Ok(rows)
        }
        (false, true) => table
            .dead_letters(&args.filter()?)
            .await
            .map_err(|e| e.to_string()),
    }
}

fn sink_config(args: &Args, table: &str, shards: u16) -> Result<Config, String> {
    let mut vars: HashMap<&str, String> = HashMap::from([
        ("TABLE_NAME", table.to_owned()),
        ("OUTBOX_SHARDS", shards.to_string()),
    ]);
    if let Some(source) = args.value("source") {
        vars.insert("EVENT_SOURCE", source.to_owned());
    }
    match (args.value("bus"), args.value("topic")) {
        (Some(bus), None) => {
            vars.insert("EVENT_BUS_NAME", bus.to_owned());
        }
        (None, Some(topic)) => {
            vars.insert("SINK", "sns".into());
            vars.insert("SNS_TOPIC_ARN", topic.to_owned());
        }
        _ => return Err("name the sink: --bus NAME or --topic ARN".into()),
    }
    Config::from_lookup(|k| vars.get(k).cloned()).map_err(|e| e.to_string())
}

/// The sweeper of the stack, in this process.
async fn sweeper(
    sdk: &SdkConfig,
    args: &Args,
    table: &Table,
) -> Result<sweeper::Sweeper<publish::AnySink, outbox_core::store::DynamoStore>, String> {
    let shards = table.shards().await.map_err(|e| e.to_string())?;
    let config = sink_config(args, &table.name, shards)?;
    let (sink, store) = publish::connect(&config, sdk)
        .await
        .map_err(|e| e.to_string())?;
    Ok(sweeper::Sweeper::new(
        sink,
        store,
        sweeper::SweepSettings::from(&config),
    ))
}

async fn redrive(sdk: &SdkConfig, args: &Args) -> Result<(), String> {
    let table = Table::new(sdk, args.required("table")?);
    if args.switch("now") && args.value("bus").is_none() && args.value("topic").is_none() {
        return Err("--now publishes: name the sink with --bus NAME or --topic ARN".into());
    }
    let rows = selected(&table, args, true).await?;
    let mut report = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        progress(&format!("redriving {}/{}", i + 1, rows.len()));
        let outcome = if args.switch("dry-run") {
            "would redrive".to_owned()
        } else {
            match table.redrive(row).await.map_err(|e| e.to_string())? {
                Redrive::Redriven => "redriven".to_owned(),
                _ => "skipped: no longer a dead letter".to_owned(),
            }
        };
        report.push(
            json!({"eventId": row.event_id, "aggregateId": row.aggregate_id, "outcome": outcome}),
        );
    }
    progress("");
    let mut published = None;
    let redriven: Vec<&DeadLetterRow> = rows
        .iter()
        .zip(&report)
        .filter(|(_, r)| r["outcome"] == "redriven")
        .map(|(row, _)| row)
        .collect();
    if args.switch("now") && !args.switch("dry-run") && !redriven.is_empty() {
        let times: Vec<OffsetDateTime> = redriven
            .iter()
            .filter_map(|r| ulid::Ulid::from_string(&r.event_id).ok())
            .filter_map(|id| {
                OffsetDateTime::from_unix_timestamp_nanos(i128::from(id.timestamp_ms()) * 1_000_000)
                    .ok()
            })
            .collect();
        if let (Some(from), Some(to)) = (times.iter().min(), times.iter().max()) {
            let sweeper = sweeper(sdk, args, &table).await?;
            let deadline = Deadline::after(std::time::Duration::from_secs(300));
            let window = sweeper::Window {
                from: *from,
                to: *to + time::Duration::milliseconds(1),
            };
            let run = sweeper
                .redrive(window, OffsetDateTime::now_utc(), &deadline)
                .await;
            published = Some(
                json!({"republished": run.republished, "failed": run.failed, "deferred": run.deferred, "deadLettered": run.dead_lettered}),
            );
        }
    }
    let out = json!({"deadLetters": report, "published": published});
    if args.switch("json") {
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
        None if !args.switch("dry-run") => println!(
            "the next sweep publishes them once they are older than STRANDED_AFTER_SECONDS; --now publishes them at once"
        ),
        None => {}
    }
    Ok(())
}

async fn discard(sdk: &SdkConfig, args: &Args) -> Result<(), String> {
    let table = Table::new(sdk, args.required("table")?);
    if !args.switch("yes") {
        return Err("discard deletes events for good: add --yes".into());
    }
    let rows = selected(&table, args, false).await?;
    let who = std::env::var("USER").unwrap_or_else(|_| "unknown".into());
    let profile = args
        .value("profile")
        .map(str::to_owned)
        .or_else(|| std::env::var("AWS_PROFILE").ok());
    for row in &rows {
        let outcome = table.discard(row).await.map_err(|e| e.to_string())?;
        let at = OffsetDateTime::now_utc()
            .format(&Rfc3339)
            .unwrap_or_default();
        // The audit trail: who, what, when, on stderr as JSON.
        eprintln!(
            "{}",
            json!({
                "audit": "dead-letter discarded",
                "outcome": outcome,
                "table": table.name,
                "eventId": row.event_id,
                "eventType": row.event_type,
                "aggregateId": row.aggregate_id,
                "reason": row.reason,
                "by": who,
                "profile": profile,
                "at": at,
            })
        );
        println!(
            "{}  {}",
            row.event_id,
            match outcome {
                Redrive::Discarded => "discarded",
                _ => "skipped: no longer a dead letter",
            }
        );
    }
    Ok(())
}

async fn redrive_on_failure(sdk: &SdkConfig, args: &Args) -> Result<(), String> {
    no_positional(args)?;
    let queue = args.required("queue")?;
    let table = Table::new(sdk, args.required("table")?);
    let sweeper = sweeper(sdk, args, &table).await?;
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let (mut handled, mut kept, mut republished) = (0, 0, 0);
    loop {
        let messages = crate::sqs::receive(&sqs, queue).await?;
        if messages.is_empty() {
            break;
        }
        let event = crate::sqs::event(&messages);
        let deadline = Deadline::after(std::time::Duration::from_secs(300));
        let (response, run) = sweeper::redrive_messages(&sweeper, &event, &deadline).await;
        republished += run.republished;
        let failed: std::collections::HashSet<String> = response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect();
        let (deleted, reported) = crate::sqs::settle(&sqs, queue, &messages, &failed).await?;
        handled += deleted;
        kept += reported;
        progress(&format!("{handled} messages handled"));
        if kept > 0 && handled == 0 {
            break;
        }
    }
    progress("");
    let out = json!({"handled": handled, "kept": kept, "republished": republished});
    if args.switch("json") {
        return print_json(&out);
    }
    println!("{handled} OnFailure messages handled and deleted, {republished} events republished, {kept} kept (they come back after the queue's visibility timeout)");
    Ok(())
}

fn time_arg(args: &Args, name: &str) -> Result<OffsetDateTime, String> {
    let text = args.required(name)?;
    OffsetDateTime::parse(text, &Rfc3339)
        .map_err(|_| format!("--{name} {text:?} is not an RFC 3339 time"))
}

/// Starts an EventBridge replay from the archive onto the bus (optionally
/// only to one rule) and follows it to its end.
async fn replay(sdk: &SdkConfig, args: &Args) -> Result<(), String> {
    use aws_sdk_eventbridge::types::{ReplayDestination, ReplayState};
    no_positional(args)?;
    let bus = args.required("bus")?;
    let archive = args.required("archive")?;
    let (from, to) = (time_arg(args, "from")?, time_arg(args, "to")?);
    if from >= to {
        return Err("--from must be before --to".into());
    }
    let events = aws_sdk_eventbridge::Client::new(sdk);
    let bus_arn = events
        .describe_event_bus()
        .name(bus)
        .send()
        .await
        .map_err(|e| crate::ops::aws_error("DescribeEventBus", e))?
        .arn
        .ok_or("the bus has no ARN")?;
    let archive_arn = events
        .describe_archive()
        .archive_name(archive)
        .send()
        .await
        .map_err(|e| crate::ops::aws_error("DescribeArchive", e))?
        .archive_arn
        .ok_or("the archive has no ARN")?;
    let mut destination = ReplayDestination::builder().arn(&bus_arn);
    if let Some(rule) = args.value("rule") {
        let rule_arn = events
            .describe_rule()
            .name(rule)
            .event_bus_name(bus)
            .send()
            .await
            .map_err(|e| crate::ops::aws_error("DescribeRule", e))?
            .arn
            .ok_or("the rule has no ARN")?;
        destination = destination.filter_arns(rule_arn);
    }
    let name = format!("outboxctl-{}", ulid::Ulid::new());
    let smithy = |t: OffsetDateTime| aws_smithy_types::DateTime::from_secs(t.unix_timestamp());
    events
        .start_replay()
        .replay_name(&name)
        .event_source_arn(&archive_arn)
        .event_start_time(smithy(from))
        .event_end_time(smithy(to))
        .destination(destination.build().map_err(|e| e.to_string())?)
        .send()
        .await
        .map_err(|e| crate::ops::aws_error("StartReplay", e))?;
    let started = std::time::Instant::now();
    loop {
        let replay = events
            .describe_replay()
            .replay_name(&name)
            .send()
            .await
            .map_err(|e| crate::ops::aws_error("DescribeReplay", e))?;
        let state = replay.state.clone();
        let last = replay
            .event_last_replayed_time
            .map(|t| t.to_string())
            .unwrap_or_else(|| "-".into());
        progress(&format!(
            "replay {name}: {} (last event replayed {last})",
            state.as_ref().map_or("?", |s| s.as_str())
        ));
        match state {
            Some(ReplayState::Completed) => {
                progress("");
                let out = json!({"replay": name, "state": "COMPLETED", "lastReplayed": last, "seconds": started.elapsed().as_secs()});
                if args.switch("json") {
                    return print_json(&out);
                }
                println!("replay {name} completed (events up to {last} replayed onto {bus})");
                return Ok(());
            }
            Some(ReplayState::Failed | ReplayState::Cancelled) => {
                progress("");
                return Err(format!(
                    "replay {name} ended {}: {}",
                    state.as_ref().map_or("?", |s| s.as_str()),
                    replay.state_reason.unwrap_or_default()
                ));
            }
            _ => tokio::time::sleep(std::time::Duration::from_secs(2)).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Args, String> {
        Args::parse(
            &text
                .split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>(),
        )
    }

    #[test]
    fn flags_values_and_positionals() {
        let a = parse("--table t --json 01ARZ3NDEKTSV4RRFFQ69G5FAV --type=OrderPaid").unwrap();
        assert_eq!(a.value("table"), Some("t"));
        assert_eq!(a.value("type"), Some("OrderPaid"));
        assert!(a.switch("json"));
        assert_eq!(a.positional, ["01ARZ3NDEKTSV4RRFFQ69G5FAV"]);
    }

    #[test]
    fn bad_arguments_are_named() {
        assert_eq!(parse("--tabel t").unwrap_err(), "unknown option --tabel");
        assert_eq!(parse("--table").unwrap_err(), "--table needs a value");
        assert_eq!(
            parse("--table --json").unwrap_err(),
            "--table needs a value"
        );
        let a = parse("--since yesterday").unwrap();
        assert!(a.filter().unwrap_err().contains("RFC 3339"));
    }
}
