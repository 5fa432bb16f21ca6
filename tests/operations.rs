//! `outboxctl`'s operator commands against the local API: dead letters made
//! by the real sweeper and publisher code, listed, shown, redriven (once,
//! even when two operators race) and delivered with their original
//! `eventId`; discarded; the status of a table; bad arguments. The tests
//! are in the modules below, by concern; this file holds what they share.

mod dead_letters;
mod errors;
mod on_failure;
mod redrive_now;
mod replay;
mod status;

use std::time::Duration;

use outbox_engine::Sweeper;
use outbox_runtime::DynamoStore;
use testkit::proxy::{Fault, FaultProxy};
use testkit::{far_deadline, Stack};
use time::OffsetDateTime;

const DAY: Duration = Duration::from_secs(86_400);

/// A sweeper whose sink refuses every entry (a throttle), so that an item
/// is dead-lettered after `max_attempts` failed sweeps.
async fn failing_sweeper(
    stack: &Stack,
    proxy: &FaultProxy,
    max_attempts: u32,
) -> Sweeper<outbox_runtime::EventBridgeSink, DynamoStore> {
    let (sink, store) = stack.through(proxy, 8).await;
    proxy.inject("PutEvents", Fault::refuse_all("ThrottlingException"), None);
    let attempts = max_attempts.to_string();
    testkit::scenario::sweeper(sink, store, stack, &[("MAX_ATTEMPTS", &attempts)])
}

/// `n` events, dead-lettered by the sweeper's code (one failed attempt
/// each against a refusing sink).
async fn dead_letters(stack: &Stack, n: usize) -> Vec<outbox_core::OutboxItem> {
    let mut items = Vec::new();
    for _ in 0..n {
        items.push(stack.put_event_aged(Duration::from_secs(120)).await);
    }
    let proxy = FaultProxy::start().await;
    let mut sweeper = failing_sweeper(stack, &proxy, 1).await;
    sweeper.settings.stranded_after = Duration::ZERO;
    sweeper
        .sweep(OffsetDateTime::now_utc(), &far_deadline())
        .await;
    items
}

/// The message Lambda sends to the OnFailure destination when it gives up
/// a batch of `records` of the stack's stream.
fn gave_up(
    stack: &Stack,
    records: &[aws_lambda_events::event::dynamodb::EventRecord],
) -> serde_json::Value {
    devkit::on_failure_message(
        "arn:aws:lambda:us-east-1:123456789012:function:publisher",
        &stack.stream_arn,
        "shardId-1",
        records,
        "RetryAttemptsExhausted",
        11,
    )
}

/// A queue holding that message for every outbox insert of the stack's
/// stream so far.
async fn on_failure_queue(stack: &Stack) -> String {
    let message = gave_up(stack, &stack.outbox_inserts().await);
    testkit::queue_with(&stack.sdk, "on-failure", &[message.to_string()]).await
}

/// `outboxctl redrive-on-failure` of `queue` on the stack's table and bus,
/// `--json`.
fn redrive_on_failure(stack: &Stack, queue: &str) -> (bool, String, String) {
    let (bus, _) = stack.bus.clone().expect("a stack with a bus");
    stack.operator().redrive_on_failure(&[
        "--queue",
        queue,
        "--bus",
        &bus,
        "--source",
        "outbox.orders",
        "--json",
    ])
}

/// `outboxctl replay` of `archive` onto `bus` for the events archived
/// between `from` and `to` (RFC 3339), onto the rule `rule` only if one is
/// named: the arguments of the command line.
pub(crate) fn replay_args(
    bus: &str,
    archive: &str,
    from: OffsetDateTime,
    to: OffsetDateTime,
    rule: Option<&str>,
) -> Vec<String> {
    let rfc = |t: OffsetDateTime| {
        t.format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    let mut args = vec![
        "replay".to_owned(),
        "--bus".to_owned(),
        bus.to_owned(),
        "--archive".to_owned(),
        archive.to_owned(),
        "--from".to_owned(),
        rfc(from),
        "--to".to_owned(),
        rfc(to),
    ];
    if let Some(rule) = rule {
        args.extend(["--rule".to_owned(), rule.to_owned()]);
    }
    args
}
