//! Scenario builders the test files share: a stack with a bus behind a
//! fault proxy with the publisher or the sweeper in-process on it, what a
//! subscriber received (each aggregate's versions), and the client
//! packages' scripts (Python, Node) run against the local API.

use std::collections::{BTreeMap, HashSet};
use std::path::Path;

use aws_lambda_events::event::dynamodb::EventRecord;
use outbox_core::EventEnvelope;
use outbox_engine::{EventSink, PublishStore, SweepReport, SweepSettings, SweepStore, Sweeper};
use outbox_runtime::{DynamoStore, EventBridgeSink};
use publisher::{Publisher, Report};
use serde_json::Value;

use crate::proxy::FaultProxy;
use crate::{far_deadline, fast_retry, root, InProcessPublisher, Stack};

/// The publisher in-process on `sink` and `store` with `stack`'s key
/// schema and [`fast_retry`].
pub fn publisher<S: EventSink, T: PublishStore>(
    sink: S,
    store: T,
    stack: &Stack,
) -> Publisher<S, T> {
    InProcessPublisher::new(sink, store, &stack.keys).publisher
}

/// One invocation's processing of `records` with a far deadline.
pub async fn process<S: EventSink, T: PublishStore>(
    publisher: &Publisher<S, T>,
    records: Vec<EventRecord>,
) -> Report {
    let report = publisher.process(records, &far_deadline()).await;
    report.expect("the batch is processed")
}

/// The sweeper in-process on `sink` and `store`, configured as the
/// templates configure it on `stack` with the variables `extra` on top, and
/// [`fast_retry`].
pub fn sweeper<S: EventSink, T: PublishStore + SweepStore>(
    sink: S,
    store: T,
    stack: &Stack,
    extra: &[(&str, &str)],
) -> Sweeper<S, T> {
    let mut sweeper = Sweeper::new(sink, store, SweepSettings::from(&stack.config(extra)));
    sweeper.retry = fast_retry();
    sweeper
}

/// A sweep at the current time, with a far deadline.
pub async fn sweep_now<S: EventSink, T: PublishStore + SweepStore>(
    sweeper: &Sweeper<S, T>,
) -> SweepReport {
    sweeper
        .sweep(time::OffsetDateTime::now_utc(), &far_deadline())
        .await
}

/// A stack with a bus and a fault proxy for the in-process publisher's or
/// sweeper's calls.
pub struct Wire {
    /// The stack.
    pub stack: Stack,
    /// The proxy the functions' clients go through.
    pub proxy: FaultProxy,
}

impl std::ops::Deref for Wire {
    type Target = Stack;
    fn deref(&self) -> &Stack {
        &self.stack
    }
}

impl Wire {
    /// A fresh stack with a bus and `orders` orders written by the writer.
    pub async fn orders(orders: usize) -> Self {
        let stack = Stack::with_bus().await;
        stack.create_orders(orders).await;
        let proxy = FaultProxy::start().await;
        Self { stack, proxy }
    }

    /// The publisher, its calls through the proxy.
    pub async fn publisher(&self) -> Publisher<EventBridgeSink, DynamoStore> {
        let (sink, store) = self.stack.through(&self.proxy, 8).await;
        publisher(sink, store, &self.stack)
    }

    /// The sweeper (with the variables `extra`), its calls through the
    /// proxy, its store writing `shards` shards.
    pub async fn sweeper(
        &self,
        shards: u16,
        extra: &[(&str, &str)],
    ) -> Sweeper<EventBridgeSink, DynamoStore> {
        let (sink, store) = self.stack.through(&self.proxy, shards).await;
        sweeper(sink, store, &self.stack, extra)
    }
}

/// Each message's event: an EventBridge event's `detail`, or the message
/// itself (raw SNS delivery, its `__sqs` attributes left out).
pub fn envelopes(messages: &[Value]) -> Vec<EventEnvelope> {
    messages
        .iter()
        .map(|m| {
            let mut body = m.get("detail").cloned().unwrap_or_else(|| m.clone());
            if let Some(o) = body.as_object_mut() {
                o.remove("__sqs");
            }
            serde_json::from_value(body).unwrap_or_else(|e| panic!("not an envelope ({e}): {m}"))
        })
        .collect()
}

/// Each aggregate's versions in the order received; with `once`, each
/// event once (as a consumer deduplicating by event id sees them).
pub fn versions(envelopes: &[EventEnvelope], once: bool) -> BTreeMap<String, Vec<u64>> {
    let mut seen = HashSet::new();
    let mut versions: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in envelopes {
        if !once || seen.insert(e.event_id) {
            let aggregate = versions.entry(e.aggregate_id.clone()).or_default();
            aggregate.push(e.aggregate_version);
        }
    }
    versions
}

/// Checks a stream-mapped function's answer: no record reported failed.
pub fn assert_no_failures(answer: &[u8]) {
    let response: Value = serde_json::from_slice(answer).expect("a JSON answer");
    let failures = &response["batchItemFailures"];
    assert_eq!(failures, &serde_json::json!([]), "{response}");
}

/// Runs `program` with `args` in `dir` with the variables `env` (no
/// metadata probe; the local endpoints, region and credentials come from
/// the environment `infra/local/with-local.sh` sets); its standard output,
/// trimmed. A failure panics with its standard error.
pub fn run(program: &Path, args: &[&str], env: &[(&str, &str)], dir: &Path) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .envs(env.iter().copied())
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// [`run`]s the Python of the writer package's tests from the workspace
/// root (`make clients-test` installs boto3 and the package into it).
pub fn python(args: &[&str], env: &[(&str, &str)]) -> String {
    let python = root().join(".venv-clients/bin/python");
    let missing = format!("{} is missing: run `make clients-test`", python.display());
    assert!(python.exists(), "{missing} (make test does)");
    run(&python, args, env, &root())
}

/// [`run`]s Node in `dir` (under the workspace root) once the TypeScript
/// writer package is built (`make clients-test` builds it).
pub fn node(args: &[&str], env: &[(&str, &str)], dir: &str) -> String {
    let dist = root().join("clients/typescript/dist/src/index.js");
    let missing = format!("{} is missing: run `make clients-test`", dist.display());
    assert!(dist.exists(), "{missing} (make test does)");
    run(Path::new("node"), args, env, &root().join(dir))
}
