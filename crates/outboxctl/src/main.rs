//! `outboxctl`: parses the arguments and runs the command (crate docs).

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    match outboxctl::run(outboxctl::Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("outboxctl: {message}");
            ExitCode::FAILURE
        }
    }
}
