//! The `sweeper` Lambda, run on a schedule: wires the configured sink and
//! the DynamoDB store to the handler; the sink is verified at cold start.

use lambda_runtime::{service_fn, Error, LambdaEvent};

use sweeper::{handler, SweepSettings, Sweeper};

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (config, sink, store, record) = outbox_runtime::cold_start("sweeper").await?;
    let mut sweeper = Sweeper::new(sink, store, SweepSettings::from(&config));
    // Every run (a zero interval).
    sweeper.heartbeat =
        record.map(|r| outbox_runtime::Heartbeat::new(r, std::time::Duration::ZERO));
    let sweeper = &sweeper;
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        handler(sweeper, event)
    }))
    .await
}
