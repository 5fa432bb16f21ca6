//! `outboxctl`: the operator commands for a deployed outbox stack. It uses
//! the AWS CLI's credential chain, region and endpoint options.
//!
//! ```text
//! outboxctl status --table T [--stack NAME] [--scan] [--json]
//! outboxctl release --table T AGGREGATE
//! outboxctl make-due --table T [--event-id ULID]... [--aggregate ID] [--older-than SECONDS]
//! outboxctl adopt-region --table T --from R [--dry-run] [--json]
//! outboxctl dead-letters list|show|redrive|discard --table T …
//! outboxctl redrive-on-failure --queue URL --table T [--bus B | --topic ARN]
//! outboxctl replay --bus B --archive A --from T --to T [--rule R]
//! outboxctl doctor --table T [--bus B | --topic ARN] [--max-event-bytes N] [--scan]
//! ```
//!
//! `outboxctl help COMMAND` says what each takes. The local AWS kit (the
//! local stack, the mapping emulators) is the `devkit` crate's; `outboxctl`
//! depends on nothing of it.
//!
//! The stack's key schema, home region, sink and ordering are the ones its
//! publisher and sweeper recorded in the table for this region at cold
//! start (`--setting NAME=VALUE` overrides one); nothing is exported.
//!
//! # Layout
//! - `cli.rs`: the command line ([`Cli`], clap's derive; doc comments are
//!   the help text) and [`run`], which hands each command its own
//!   arguments (each command module defines them).
//! - `context.rs`: below the commands: the AWS options and SDK
//!   configuration, the table and its stack, the sink a republish goes to
//!   (`SinkArgs`), the stack's sweeper in this process, `--json`.
//! - `error.rs`: [`Error`], by kind (`thiserror`); AWS failures keep their
//!   operation, error code and message.
//! - `stack.rs`: the stack a command works on: its table and the settings
//!   recorded there (DescribeTable for the key names, one Query of the
//!   records), and the outbox items under other key shapes.
//! - `operations.rs`: [`Operations`], status and dead letters through the
//!   store port (`outbox_engine::OutboxStore`).
//! - `status.rs` (`status`, `release`, `make-due`), `dead_letters.rs`,
//!   `redrive_on_failure.rs`, `replay.rs`, `adopt_region.rs` (global
//!   tables: a lost region's items handed over): one command group each,
//!   with its arguments.
//! - `doctor.rs`: [`diagnose`], the table, stream, mapping and sink checks
//!   of `outboxctl doctor`, each a function of what AWS answered.
//! - `output.rs`: JSON, tables (comfy-table) and progress (indicatif, on a
//!   terminal only, never with `--json`).

mod adopt_region;
mod cli;
mod context;
mod dead_letters;
mod doctor;
mod error;
mod operations;
mod output;
mod redrive_on_failure;
mod replay;
mod stack;
mod status;

pub use cli::{run, Cli};
pub use doctor::{diagnose, problems, Finding, Severity, SinkToCheck};
pub use error::Error;
pub use operations::{
    envelope_of, DeadLetterFilter, DueSelector, Operations, OpsError, ParkedAggregate, Released,
    ShardStatus, Status, READ_LIMIT,
};
