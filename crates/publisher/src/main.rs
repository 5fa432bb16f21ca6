//! The `publisher` Lambda: wires the configured sink and the DynamoDB store
//! to the handler. The sink's target is verified once, at cold start.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use outbox_runtime::publish;
use publisher::{handler, Publisher};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (config, sink, store) = publish::cold_start("publisher").await?;
    let mut publisher = Publisher::new(sink, store);
    publisher.ordering = config.ordering;
    publisher.send_concurrency = config.send_concurrency;
    publisher.keys = config.keys.clone();
    publisher.redelivery = publisher::Redelivery::new(config.recheck_after);
    let publisher = &publisher;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        handler(publisher, event)
    }))
    .await
}
