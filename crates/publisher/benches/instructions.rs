//! Instructions per record of one whole publisher invocation (the runtime's
//! decode, then the handler against a sink and a store that answer at
//! once), counted by callgrind, which machine noise does not move:
//! `infra/bench/instructions.sh` runs this binary under
//! `valgrind --tool=callgrind` with 1 and with 11 invocations of a
//! 100-record batch, and divides the difference by 1,000 records, so the
//! process's start and the first invocation's warm-up cancel out.
//!
//! `instructions invocation N`: N whole invocations (what ships).
//! `instructions lean-decode N`: the publisher's own decode alone
//! (`StreamEvent` and its records), of which `instructions runtime-pass N`
//! is the runtime's part (its validating pass over the text, and the copy).
//! `instructions typed-decode N`: the
//! runtime's decode of the same batch into the general `aws_lambda_events`
//! model, as the publisher took it before the lean decode (the model's
//! figure beside ours). Without arguments (as `cargo test --benches` runs
//! it): one of each.

// A bench binary: nothing here is an API.
#![allow(missing_docs)]

use std::hint::black_box;

use aws_lambda_events::event::dynamodb::Event;
use outbox_core::KeySchema;
use publisher::StreamEvent;

mod support;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let mode = args.first().map(String::as_str);
    let count: usize = args.get(1).and_then(|n| n.parse().ok()).unwrap_or(1);
    let json = support::batch(100);
    let (runtime, publisher) = support::instant_publisher();
    let schema = KeySchema::default();
    let mut seen = 0;
    for _ in 0..count {
        if mode.is_none() || mode == Some("invocation") {
            seen += support::invoke(&runtime, &publisher, &json);
        }
        if mode.is_none() || mode == Some("lean-decode") {
            let event: StreamEvent = support::runtime_decode(&json);
            seen += black_box(event.records(&schema).unwrap()).len();
        }
        if mode.is_none() || mode == Some("runtime-pass") {
            black_box(support::runtime_decode::<StreamEvent>(&json));
        }
        if mode.is_none() || mode == Some("typed-decode") {
            seen += black_box(support::runtime_decode::<Event>(&json))
                .records
                .len();
        }
    }
    println!("records {seen}");
}
