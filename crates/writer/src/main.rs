//! The `writer` Lambda: the orders API behind API Gateway.

use std::convert::Infallible;

use lambda_http::{service_fn, Error, Request};
use outbox_runtime::Config;
use writer::{Api, OrderService};

#[tokio::main]
async fn main() -> Result<(), Error> {
    outbox_runtime::init_logging();
    let config = Config::from_env()?;
    let sdk = outbox_runtime::load_sdk_config().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    // Record the shard count this writer uses before it writes any event, so
    // that a later, lower OUTBOX_SHARDS never hides the higher shards from
    // the sweeper. A failure only delays that: the sweeper records it too.
    if let Err(e) = outbox_runtime::record_shard_count(
        &client,
        &config.table_name,
        &config.keys,
        config.outbox_shards,
    )
    .await
    {
        tracing::warn!(error = %e, "shard count not recorded at cold start");
    }
    let api = Api::from_env(OrderService::from_config(client, &config))?;
    let api = &api;
    lambda_http::run(service_fn(move |request: Request| async move {
        Ok::<_, Infallible>(api.handle(request).await)
    }))
    .await
}
