//! `outboxctl redrive-on-failure`: the publisher's OnFailure queue handled
//! in this process, as the sweeper's SQS trigger would.

use aws_config::SdkConfig;
use outbox_core::retry::Deadline;
use serde_json::json;

use crate::cli::Sink;
use crate::output::{print_json, Progress};
use crate::status::operations;

pub(crate) async fn run(
    sdk: &SdkConfig,
    queue: &str,
    table: &str,
    sink: &Sink,
    json: bool,
) -> Result<(), String> {
    let sweeper = sink.sweeper(sdk, &operations(sdk, table)).await?;
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let (mut handled, mut kept, mut republished) = (0, 0, 0);
    let progress = Progress::new(json, None, "OnFailure messages");
    loop {
        let messages = devkit::receive_batch(&sqs, queue).await?;
        if messages.is_empty() {
            break;
        }
        let event = devkit::batch_event(&messages);
        let deadline = Deadline::after(std::time::Duration::from_secs(300));
        let (response, run) = sweeper::redrive_messages(&sweeper, &event, &deadline).await;
        republished += run.republished;
        let failed: std::collections::HashSet<String> = response
            .batch_item_failures
            .into_iter()
            .map(|f| f.item_identifier)
            .collect();
        let (deleted, reported) = devkit::settle_batch(&sqs, queue, &messages, &failed).await?;
        handled += deleted;
        kept += reported;
        progress.say(format!("{handled} OnFailure messages handled"));
        if kept > 0 && handled == 0 {
            break;
        }
    }
    drop(progress);
    let out = json!({"handled": handled, "kept": kept, "republished": republished});
    if json {
        return print_json(&out);
    }
    println!("{handled} OnFailure messages handled and deleted, {republished} events republished, {kept} kept (they come back after the queue's visibility timeout)");
    Ok(())
}
