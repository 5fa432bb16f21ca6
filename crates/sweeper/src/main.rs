//! The `sweeper` Lambda, run on a schedule and by the OnFailure queue:
//! wires the configured sink and the DynamoDB store to the handler; the
//! sink is verified at cold start.

use lambda_runtime::{service_fn, Error, LambdaEvent};
use outbox_engine::{SweepSettings, Sweeper};
use outbox_runtime::Heartbeat;
use sweeper::handler;

#[tokio::main]
async fn main() -> Result<(), Error> {
    let (config, sink, store, record) = outbox_runtime::cold_start("sweeper").await?;
    let sweeper = Sweeper::new(sink, store, SweepSettings::from(&config));
    // Every run (a zero interval).
    let heartbeat = record.map(|r| Heartbeat::new(r, std::time::Duration::ZERO));
    let (sweeper, heartbeat) = (&sweeper, heartbeat.as_ref());
    lambda_runtime::run(service_fn(move |event: LambdaEvent<_>| {
        handler(sweeper, heartbeat, event)
    }))
    .await
}
