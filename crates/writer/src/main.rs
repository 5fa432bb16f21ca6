//! The `writer` Lambda: the orders API behind API Gateway.

use std::convert::Infallible;

use lambda_http::{service_fn, Error, Request};
use outbox_core::{telemetry, Config};
use writer::{api, OrderService};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init_logging();
    let config = Config::from_env()?;
    let sdk = telemetry::aws_config().await;
    let service = OrderService::from_config(aws_sdk_dynamodb::Client::new(&sdk), &config);
    let service = &service;
    lambda_http::run(service_fn(move |request: Request| async move {
        Ok::<_, Infallible>(api::handle(service, request).await)
    }))
    .await
}
