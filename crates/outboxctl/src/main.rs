//! `outboxctl`: parses the arguments and runs the command (crate docs).

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    // The sweeper's and the store's warnings and errors (why a window was
    // not settled, say) on stderr; `--json` output stays alone on stdout.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
        .init();
    match outboxctl::run(outboxctl::Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("outboxctl: {error}");
            ExitCode::FAILURE
        }
    }
}
