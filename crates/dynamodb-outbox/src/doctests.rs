//! The Rust examples of `README.md` and `docs/`, compiled and run by
//! `cargo test --doc -p dynamodb-outbox` with warnings denied (an unused
//! import fails), against this crate as a user depends on it. Every page is
//! here (`infra/checks/doc_links.py` fails on one left out); a ```rust block
//! that is a fragment says so: ```rust,ignore, with `<!-- fragment: why -->`
//! on the line before.

#[doc = include_str!("../../../README.md")]
struct Readme;

#[doc = include_str!("../../../docs/adopt.md")]
struct DocsAdopt;

#[doc = include_str!("../../../docs/architecture.md")]
struct DocsArchitecture;

#[doc = include_str!("../../../docs/consumer.md")]
struct DocsConsumer;

#[doc = include_str!("../../../docs/deploy.md")]
struct DocsDeploy;

#[doc = include_str!("../../../docs/events.md")]
struct DocsEvents;

#[doc = include_str!("../../../docs/local.md")]
struct DocsLocal;

#[doc = include_str!("../../../docs/ordering.md")]
struct DocsOrdering;

#[doc = include_str!("../../../docs/performance.md")]
struct DocsPerformance;

#[doc = include_str!("../../../docs/publisher.md")]
struct DocsPublisher;

#[doc = include_str!("../../../docs/reliability.md")]
struct DocsReliability;

#[doc = include_str!("../../../docs/runbook.md")]
struct DocsRunbook;

#[doc = include_str!("../../../docs/sweeper.md")]
struct DocsSweeper;

#[doc = include_str!("../../../docs/writer.md")]
struct DocsWriter;
