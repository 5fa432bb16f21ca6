//! `outboxctl`: local operations on the outbox stack (loopback only).
//!
//! ```text
//! outboxctl provision <table> <bus> <source>   create the local stack
//! outboxctl items <table>                      print every item (keys, type, status)
//! ```

use std::process::ExitCode;

use outboxctl::{local, stack};

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("outboxctl: {message}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: &[String]) -> Result<(), String> {
    let sdk = local::sdk_config().await.map_err(|e| e.to_string())?;
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        ["provision", table, bus, source] => {
            let stream = stack::create_table(&sdk, table)
                .await
                .map_err(|e| e.to_string())?;
            let subscriber = stack::create_bus(&sdk, bus, source)
                .await
                .map_err(|e| e.to_string())?;
            println!(
                "table      {table}\nstream     {stream}\nbus        {bus}\nsubscriber {}",
                subscriber.queue_url
            );
            Ok(())
        }
        ["items", table] => print_items(&sdk, table).await,
        _ => Err("usage: outboxctl provision <table> <bus> <source> | items <table>".into()),
    }
}

async fn print_items(sdk: &aws_config::SdkConfig, table: &str) -> Result<(), String> {
    use aws_sdk_dynamodb::types::AttributeValue;
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let mut pages = client
        .scan()
        .table_name(table)
        .into_paginator()
        .items()
        .send();
    let mut rows = Vec::new();
    while let Some(item) = pages.next().await {
        let item = item.map_err(|e| format!("scan failed: {e:?}"))?;
        let get = |name: &str| match item.get(name) {
            Some(AttributeValue::S(s)) => s.clone(),
            Some(AttributeValue::N(n)) => n.clone(),
            Some(other) => format!("{other:?}"),
            None => String::new(),
        };
        rows.push(format!(
            "{:<34} {:<34} {:<13} {:<8} {}",
            get("PK"),
            get("SK"),
            get("eventType"),
            get("status"),
            get("version")
        ));
    }
    rows.sort();
    println!(
        "{:<34} {:<34} {:<13} {:<8} version",
        "PK", "SK", "eventType", "status"
    );
    for row in rows {
        println!("{row}");
    }
    Ok(())
}
