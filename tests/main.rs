//! The integration tests, one binary (each file beside this one is a
//! module of it: `tests/chaos.rs` is `chaos`, and so on). One binary links
//! the AWS SDK once, where a binary per file linked it 20 times; nextest
//! still runs each test in a process of its own, so a test's filter is its
//! module path: `cargo nextest run -p outbox-tests -E 'test(/^chaos::/)'`.
//! The helpers they share are the `testkit` library (`tests/support/`).

// The end-to-end run's nested `json!` values.
#![recursion_limit = "256"]

mod adopt;
mod chaos;
mod claim_check;
mod contracts;
mod custom_bus;
mod dashboard;
mod delivery;
mod docs;
mod doctor;
mod e2e;
mod edges;
mod least_privilege;
mod multi_region;
mod one_table;
mod operations;
mod ordering;
mod projector;
mod publisher;
mod redelivery;
mod stacks;
mod sweeper;
mod template;
mod writer_api;
mod writer_transaction;
