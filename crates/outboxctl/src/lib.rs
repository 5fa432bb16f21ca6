//! Local operations for the outbox: the local stack that tests and the demo
//! provision on the moto server, mirroring `template.yaml`.
//!
//! # Layout
//! - [`stack`]: the table (keys, stream, sparse indexes, TTL), the event bus
//!   with a rule to a subscriber queue, and an SNS FIFO topic to an SQS FIFO
//!   queue.
//! - [`stream`]: reading a table's stream as an event source mapping does.
//! - [`filter`]: Lambda event filtering (the mapping's `FilterCriteria`).
//! - [`template`]: the mapping's settings read from `template.yaml`.
//! - [`pump`]: the event source mapping emulator (`outboxctl pump`).
//! - [`invoke`]: invoking a function under `cargo lambda watch` (loopback).
//! - [`sqs`]: a batch of queue messages as Lambda's SQS mapping passes it.
//! - [`local`]: AWS configuration for loopback only, refusing anything else.
//! - [`ops`]: operations on a deployed stack's table (status, dead letters),
//!   with the AWS CLI's credential chain, region and endpoint options.

pub mod cli;
pub mod filter;
pub mod invoke;
pub mod local;
pub mod ops;
pub mod pump;
pub mod sqs;
pub mod stack;
pub mod stream;
pub mod template;
