//! The `projector` Lambda: builds the DynamoDB and S3 clients once and
//! lends them, with the inbox settings, to the handler.

use lambda_runtime::{service_fn, Error, LambdaEvent};

use projector::{handler, Projector};

#[tokio::main]
async fn main() -> Result<(), Error> {
    outbox_runtime::init_logging();
    let inbox = inbox::Inbox::from_env()?;
    let sdk = outbox_runtime::load_sdk_config().await;
    let projector = Projector::new(
        aws_sdk_dynamodb::Client::new(&sdk),
        inbox,
        aws_sdk_s3::Client::new(&sdk),
    );
    let projector = &projector;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        handler(projector, event)
    }))
    .await
}
