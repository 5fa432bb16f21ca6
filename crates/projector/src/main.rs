//! The `projector` Lambda: builds the DynamoDB client once and lends it,
//! with the inbox settings, to the handler.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use outbox_runtime::{aws, telemetry};
use projector::{handler, Projector};

#[tokio::main]
async fn main() -> Result<(), Error> {
    telemetry::init_logging();
    let inbox = inbox::Inbox::from_env()?;
    let sdk = aws::load().await;
    let projector = Projector::new(aws_sdk_dynamodb::Client::new(&sdk), inbox);
    let projector = &projector;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        handler(projector, event)
    }))
    .await
}
