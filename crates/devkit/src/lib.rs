//! The local AWS kit of the outbox: what the tests, the demo and the
//! benches use to run the real functions on this machine against the local
//! AWS APIs (loopback only). Not for deployed stacks: that is `outboxctl`.
//!
//! # Layout
//! - `local.rs`: AWS configuration for loopback only ([`sdk_config`],
//!   [`is_loopback`]), refusing any other endpoint.
//! - `stack.rs`: the local stack, mirroring `template.yaml`: the table
//!   (keys, stream, sparse indexes, TTL), the event bus with a rule to a
//!   subscriber queue, the read model and the projector's queue ([`create_table`], [`create_bus`], …).
//! - `stream.rs`: reading a table's stream as an event source mapping does
//!   ([`StreamCursor`]).
//! - `filter.rs`: Lambda event filtering, the mapping's `FilterCriteria`
//!   ([`FilterCriteria`]).
//! - `template.rs`: the templates' one reader ([`template::read`],
//!   [`template::parse`], [`template::to_json`]), for this crate and the
//!   tests; `template/resolve.rs`: the templates evaluated ([`Resolved`]:
//!   `Ref`, `Fn::If`, `Fn::Sub`, conditions, pseudo parameters);
//!   `template/mapping.rs`: the mapping's settings read from
//!   `infra/outbox.yaml` ([`MappingSettings`]).
//! - `deployment.rs`: one resolved configuration for every local run: the
//!   environment the templates give each function at their defaults on a
//!   local stack ([`LocalDeployment`], [`Function`]), the region's keys
//!   included.
//! - `pump.rs`: the stream event source mapping emulator ([`Pump`]), its
//!   lanes per shard at a `ParallelizationFactor` above 1.
//! - `sqs.rs`: Lambda's SQS event source mapping: batches of queue
//!   messages as the function gets them, settled by its partial batch
//!   response ([`drain_queue`]); and the loop that receives and deletes a
//!   queue's every message until it answers empty ([`receive_until_empty`]).
//!   The batch primitives of both are the runtime's (`crates/runtime/src/queue.rs`).
//! - `bus.rs`: a local EventBridge Custom Event Bus (the `eventbridgev2`
//!   API, which no local server implements): `PutEvents` with the model's
//!   validation, deduplication and FIFO subscribers to SQS on moto
//!   ([`LocalBus`], [`create_custom_bus`]); `bus/model.rs`, its rules and
//!   their sources.
//! - `invoke.rs`: invoking a function under `cargo lambda watch` on
//!   loopback ([`HttpInvoker`]).
//! - `main.rs`: the `devkit` command (provision, env, items, pump,
//!   receive, deliver, read-model) that `make demo` and the scripts run.

mod bus;
mod deployment;
mod filter;
mod invoke;
mod local;
mod pump;
mod sqs;
mod stack;
mod stream;
pub mod template;

pub use bus::{
    create_custom_bus, BusStats, LocalBus, DEDUPLICATION_WINDOW, ENDPOINT_ENV as BUS_ENDPOINT_ENV,
    UNGROUPED,
};
pub use deployment::{Function, LocalDeployment, LocalSink};
pub use filter::{FilterCriteria, PatternError};
pub use invoke::{stream_response, HttpInvoker, Invocation};
pub use local::{
    dynamodb_endpoint, endpoint, endpoint_env, endpoint_env_at, is_loopback, sdk_config,
    sdk_config_at, sdk_config_in_region, streams_endpoint, LocalError, REGION,
};
pub use pump::{
    on_failure_message, GivenUp, InvokeError, Invoker, OnFailure, Pump, PumpError, PumpStats,
};
pub use sqs::{drain_queue, receive_until_empty, DrainStats};
pub use stack::{
    create_bus, create_custom_bus_read_model, create_queue, create_read_model,
    create_read_model_table, create_table, create_table_streaming, create_table_with,
    projector_pattern, scan_all, ReadModel, StackError, Subscriber, PROJECTOR_MAX_RECEIVES,
};
pub use stream::{StreamCursor, StreamError};
pub use template::{
    MappingSettings, Resolved, Resolver, TemplateError, EXAMPLE_TEMPLATE, OUTBOX_TEMPLATE,
};
