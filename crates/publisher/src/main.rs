//! The `publisher` Lambda: wires the configured sink and the DynamoDB store
//! to the handler. The sink's target is verified once, at cold start.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use std::time::Duration;

use outbox_engine::Deadline;
use outbox_engine::SweepStore;

use publisher::{handler, Publisher};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (config, sink, store, record) = outbox_runtime::cold_start("publisher").await?;
    let mut publisher = Publisher::new(sink, store);
    publisher.heartbeat =
        record.map(|r| outbox_runtime::Heartbeat::new(r, outbox_runtime::PUBLISHER_HEARTBEAT));
    publisher.ordering = config.ordering;
    publisher.send_concurrency = config.send_concurrency;
    publisher.keys = config.keys.clone();
    publisher.redelivery = publisher::Redelivery::new(config.recheck_after);
    // The shards the sweeper reads: the configured count or the highest
    // recorded, whichever is larger (one conditional write). Unread, the
    // configured count: an item of a higher shard is then given this
    // stack's keys again, which only costs a write.
    let deadline = Deadline::after(Duration::from_secs(3));
    publisher.shards = match publisher.store.shard_count(&deadline).await {
        Ok(shards) => shards,
        Err(e) => {
            tracing::warn!(error = %e, "the recorded shard count was not read; using OUTBOX_SHARDS");
            config.outbox_shards
        }
    };
    let publisher = &publisher;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        handler(publisher, event)
    }))
    .await
}
