//! `outboxctl redrive-on-failure`: the publisher's OnFailure queue handled
//! in this process, as the sweeper's SQS trigger would.

use outbox_engine::Deadline;
use serde_json::json;

use aws_config::SdkConfig;

use crate::context::{sweeper_for, JsonArg, SinkArgs, TableArg};
use crate::error::Error;
use crate::output::{print_json, Progress};
use crate::stack::Stack;

/// How long one receive waits for a message (SQS allows up to 20).
const LONG_POLL_SECONDS: i32 = 5;

/// `outboxctl redrive-on-failure`.
#[derive(Debug, clap::Args)]
pub(crate) struct RedriveOnFailureArgs {
    /// The OnFailure queue's URL.
    #[arg(long)]
    queue: String,
    #[command(flatten)]
    table: TableArg,
    #[command(flatten)]
    sink: SinkArgs,
    #[command(flatten)]
    json: JsonArg,
}

/// Handles the queue until it is empty, for the table's stack.
pub(crate) async fn run(sdk: &SdkConfig, args: RedriveOnFailureArgs) -> Result<(), Error> {
    let stack = args.table.stack(sdk).await?;
    redrive(&stack, &args.queue, &args.sink, args.json.json).await
}

async fn redrive(stack: &Stack, queue: &str, sink: &SinkArgs, json: bool) -> Result<(), Error> {
    let sdk = stack.sdk();
    let ops = stack.operations();
    let settings = sink.sink(stack)?;
    let mut sweeper = sweeper_for(stack, &ops, &settings).await?;
    // A window that finds no outbox item is settled only when the keys are
    // surely the stack's: with no recorded settings, or with outbox items
    // under another key shape, its records may sit under keys this run
    // does not read, and deleting the message would lose the only pointer
    // to them.
    let doubt = if stack.recorded() {
        let others = stack.other_keys(time::OffsetDateTime::now_utc()).await?;
        (!others.is_empty()).then(|| {
            let others: Vec<String> = others.iter().map(|o| o.describe()).collect();
            format!("the table holds {}", others.join("; "))
        })
    } else {
        Some(format!("no settings are recorded in {}", stack.table()))
    };
    sweeper.settings.settle_empty_windows = doubt.is_none();
    // A long poll outlasts the functions' 5-second attempt timeout.
    let sqs = aws_sdk_sqs::Client::from_conf(
        aws_sdk_sqs::config::Builder::from(sdk)
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(outbox_runtime::CONNECT_TIMEOUT)
                    .operation_attempt_timeout(std::time::Duration::from_secs(
                        LONG_POLL_SECONDS as u64 + 5,
                    ))
                    .operation_timeout(std::time::Duration::from_secs(60))
                    .build(),
            )
            .build(),
    );
    let (mut handled, mut kept, mut republished, mut claimed_elsewhere) = (0, 0, 0, 0);
    let mut seen = std::collections::HashSet::new();
    let mut foreign = std::collections::BTreeSet::new();
    let progress = Progress::new(json, None, "OnFailure messages");
    loop {
        // A long poll: a short one may answer empty while messages remain.
        let messages = outbox_runtime::receive_batch(&sqs, queue, LONG_POLL_SECONDS).await?;
        if messages.is_empty() {
            // Empty only when no message is visible any more (the ones kept
            // are in flight until the visibility timeout).
            let (visible, _) = outbox_runtime::queue_depth(&sqs, queue).await?;
            if visible == 0 {
                break;
            }
            continue;
        }
        // A kept message that comes back (a short visibility timeout) is
        // not handled twice in one run.
        if messages
            .iter()
            .all(|m| m.message_id().is_some_and(|id| seen.contains(id)))
        {
            break;
        }
        seen.extend(
            messages
                .iter()
                .filter_map(|m| m.message_id().map(str::to_owned)),
        );
        // Another stream's message (another stack's queue given by
        // mistake): its window would find none of this table's items and
        // settle, deleting the only pointer to that stack's events. Kept,
        // and named.
        let (messages, theirs): (Vec<_>, Vec<_>) = messages
            .into_iter()
            .partition(|m| other_stream(m, stack.stream_arn()).is_none());
        for m in &theirs {
            let arn = other_stream(m, stack.stream_arn()).unwrap_or_default();
            eprintln!(
                "kept OnFailure message {}: its stream is {arn}, not the table's ({})",
                m.message_id().unwrap_or("?"),
                stack.stream_arn().unwrap_or("none")
            );
            foreign.insert(arn);
        }
        kept += theirs.len();
        if messages.is_empty() {
            continue;
        }
        let event = outbox_runtime::batch_event(&messages);
        let deadline = Deadline::after(std::time::Duration::from_secs(300));
        let (response, run) = outbox_runtime::redrive_messages(&sweeper, &event, &deadline).await;
        republished += run.republished;
        claimed_elsewhere += run.claimed_elsewhere;
        let failed: std::collections::HashSet<String> = response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect();
        let (deleted, reported) =
            outbox_runtime::settle_batch(&sqs, queue, &messages, &failed).await?;
        handled += deleted;
        kept += reported;
        progress.say(format!("{handled} OnFailure messages handled"));
        if kept > 0 && handled == 0 {
            break;
        }
    }
    drop(progress);
    let out = json!({"handled": handled, "kept": kept, "republished": republished, "claimedElsewhere": claimed_elsewhere, "otherStreams": foreign});
    if json {
        print_json(&out)?;
    } else {
        println!("{handled} OnFailure messages handled and deleted, {republished} events republished, {claimed_elsewhere} left to another sweeper run's live claim, {kept} kept (they come back after the queue's visibility timeout)");
    }
    if kept > 0 {
        let streams: Vec<&str> = foreign.iter().map(String::as_str).collect();
        let streams = if streams.is_empty() {
            String::new()
        } else {
            format!(
                " Messages of another stream were kept, not handled: {} (the table's stream is {}); is this the queue of the table's stack?",
                streams.join(", "),
                stack.stream_arn().unwrap_or("none")
            )
        };
        let why = match &doubt {
            Some(doubt) => format!(
                " A window that finds no outbox item is kept while the keys may not be the stack's: {doubt}; check the settings (`outboxctl status`), or name them with --setting, then run again."
            ),
            None => String::new(),
        };
        return Err(Error::Incomplete(format!(
            "{kept} OnFailure messages were kept (a window not settled, another stream's, or not an OnFailure message): see the log lines above, then run again.{streams}{claims}{why}",
            claims = if claimed_elsewhere > 0 {
                format!(" {claimed_elsewhere} events were held by another sweeper run's live claim: that run is publishing them, or died and its claim lapses within a few minutes.")
            } else {
                String::new()
            }
        )));
    }
    Ok(())
}

/// The stream a message names, when it is not a stream of `table_stream`'s
/// table (both known).
fn other_stream(
    message: &aws_sdk_sqs::types::Message,
    table_stream: Option<&str>,
) -> Option<String> {
    let table_stream = table_stream?;
    let parsed: outbox_engine::OnFailureMessage = serde_json::from_str(message.body()?).ok()?;
    // The table's part (`…:table/<name>`): a stream disabled and enabled
    // again gets a new label, and the old stream's messages are still this
    // table's.
    let table_of = |arn: &str| arn.split("/stream/").next().map(str::to_owned);
    parsed
        .batch
        .stream_arn
        .filter(|arn| table_of(arn) != table_of(table_stream))
}
