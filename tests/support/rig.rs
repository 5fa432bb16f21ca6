//! A stack with an SNS FIFO topic for tests through the real function
//! binaries: the publisher's and the sweeper's AWS calls go through a fault
//! proxy, a FIFO subscriber queue shows what a consumer receives, in order.

use std::time::Duration;

use aws_lambda_events::event::dynamodb::{Event, EventRecord};
use outbox_core::{EventEnvelope, OutboxItem};

use crate::lambda::LambdaFunction;
use crate::proxy::FaultProxy;
use crate::{unique, Stack};

/// A stack with an SNS FIFO topic and its FIFO subscriber queue, an
/// OnFailure queue, and the proxy every function call goes through.
pub struct Rig {
    /// The table and its resources.
    pub stack: Stack,
    /// The proxy every function's calls go through.
    pub proxy: FaultProxy,
    /// The SNS FIFO topic the functions publish to.
    pub topic_arn: String,
    /// The FIFO subscriber queue's URL.
    pub subscriber: String,
    /// The OnFailure queue's URL.
    pub failures: String,
}

impl Rig {
    /// A rig on a fresh [`Stack`] with the default key schema.
    pub async fn new() -> Self {
        Self::on(Stack::new().await).await
    }

    /// The same around `stack` (a table with another key schema, say).
    pub async fn on(mut stack: Stack) -> Self {
        let (topic_arn, queue) = crate::create_fifo_topic(&stack.sdk, &unique("order"))
            .await
            .expect("topic");
        stack.use_topic(&topic_arn).await;
        let failures = crate::queue_with(&stack.sdk, "publisher-failures", &[]).await;
        Self {
            stack,
            proxy: FaultProxy::start().await,
            topic_arn,
            subscriber: queue.queue_url,
            failures,
        }
    }

    /// The function binary `name` as the templates deploy it with the
    /// parameter `Ordering=ordering`, the variables `extra` on top.
    pub fn function(&self, name: &str, ordering: &str, extra: &[(&str, &str)]) -> LambdaFunction {
        let function = devkit::Function::of_binary(name).expect("a function of the stack");
        self.stack.function_through(
            function,
            Some(&self.proxy.endpoint),
            &[("Ordering", ordering)],
            extra,
        )
    }

    /// The publisher and the sweeper of [`Rig::function`], with no extra
    /// variables.
    pub fn functions(&self, ordering: &str) -> (LambdaFunction, LambdaFunction) {
        (
            self.function("publisher", ordering, &[]),
            self.function("sweeper", ordering, &[]),
        )
    }

    /// Event `version` of `aggregate`, written with `shards` shards.
    pub async fn event(&self, aggregate: &str, version: u64, shards: u16) -> OutboxItem {
        // Distinct, increasing ids.
        tokio::time::sleep(Duration::from_millis(3)).await;
        self.stack
            .put_aggregate_event(aggregate, version, Duration::ZERO, 0, shards)
            .await
    }

    /// The versions of `aggregate` the subscriber received, in order, each
    /// event once (as a consumer deduplicating by event id sees them).
    pub async fn received(&self, aggregate: &str) -> Vec<u64> {
        self.received_at(aggregate)
            .await
            .into_iter()
            .map(|(v, _)| v)
            .collect()
    }

    /// The same, each version with the time SQS accepted its message (ms).
    pub async fn received_at(&self, aggregate: &str) -> Vec<(u64, u64)> {
        let mut seen = std::collections::HashSet::new();
        crate::drain_queue(&self.stack.sdk, &self.subscriber)
            .await
            .into_iter()
            .filter_map(|mut m| {
                let sent = m["__sqs"]["SentTimestamp"]
                    .as_str()
                    .and_then(|t| t.parse::<u64>().ok())
                    .unwrap_or(0);
                if let Some(o) = m.as_object_mut() {
                    o.remove("__sqs");
                }
                let e: EventEnvelope = serde_json::from_value(m).expect("an envelope");
                (e.aggregate_id == aggregate && seen.insert(e.event_id))
                    .then_some((e.aggregate_version, sent))
            })
            .collect()
    }

    /// Checks that the subscriber received the versions `expected` of
    /// `aggregate`, in order, and that no outbox item is left (`case`
    /// names the case in the messages).
    pub async fn assert_all_out(&self, aggregate: &str, expected: &[u64], case: &str) {
        assert_eq!(self.received(aggregate).await, expected, "{case}");
        let left = self.stack.outbox_items().await;
        assert!(left.is_empty(), "{case}: left {left:?}");
    }

    /// [`Rig::invoke`]'s answer as JSON.
    pub async fn answer(
        &self,
        function: &LambdaFunction,
        payload: &serde_json::Value,
    ) -> serde_json::Value {
        serde_json::from_slice(&self.invoke(function, payload).await).expect("a JSON answer")
    }

    /// Invokes the publisher `function` with a stream event of `records`
    /// and checks that it reported no item as failed.
    pub async fn publish_all(&self, function: &LambdaFunction, records: Vec<EventRecord>) {
        crate::scenario::assert_no_failures(&self.invoke(function, &stream_event(records)).await);
    }

    /// Invokes `function` with `payload`; its answer (a function error panics).
    pub async fn invoke(&self, function: &LambdaFunction, payload: &serde_json::Value) -> Vec<u8> {
        function
            .invoke(&serde_json::to_vec(payload).unwrap())
            .await
            .expect("function answered")
    }
}

/// A DynamoDB stream event of `records`, as the mapping sends it.
pub fn stream_event(records: Vec<EventRecord>) -> serde_json::Value {
    let mut event = Event::default();
    event.records = records;
    serde_json::to_value(event).unwrap()
}

/// The scheduled sweeper event (`events/sweeper-scheduled.json`).
pub fn scheduled() -> serde_json::Value {
    serde_json::from_str(&crate::sample("sweeper-scheduled.json")).unwrap()
}
