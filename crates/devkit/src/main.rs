//! `devkit`: the local AWS kit's command, for `make demo`, the contract run
//! and the benches. Loopback only: `AWS_ENDPOINT_URL` must be 127.0.0.0/8.
//! Operator commands for a deployed stack are `outboxctl`'s.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::process::ExitCode;

use aws_sdk_dynamodb::types::AttributeValue;
use clap::{Parser, Subcommand};
use devkit::{HttpInvoker, MappingSettings, OnFailure, Pump, StreamCursor};

/// The local AWS kit: provisions the local stack and plays the event source
/// mappings against functions under `cargo lambda watch` (loopback only).
#[derive(Debug, Parser)]
#[command(name = "devkit", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create the local stack (outbox table, bus, queues, read-model table
    /// and projector queue); prints `name=value` lines for `eval`.
    Provision {
        /// The outbox table.
        table: String,
        /// The event bus.
        bus: String,
        /// The events' source.
        source: String,
        /// A Custom Event Bus on the local bus (`devkit bus`, reached
        /// through `AWS_ENDPOINT_URL_EVENTBRIDGEV2`), with FIFO subscribers
        /// to SQS FIFO queues, in place of a classic bus with rules; `bus=`
        /// is then its ARN.
        #[arg(long)]
        custom_bus: bool,
    },
    /// Serve the local Custom Event Bus (the `eventbridgev2` API, no local
    /// server has it) on 127.0.0.1:PORT until stopped, delivering to the
    /// SQS queues on `AWS_ENDPOINT_URL`; prints `bus_endpoint=<URL>`.
    Bus {
        /// The port (0: a free one).
        #[arg(long, default_value_t = 0)]
        port: u16,
    },
    /// Print every item of a table (keys, type, status).
    Items {
        /// The table.
        table: String,
    },
    /// The stream event source mapping: the table's stream into a function
    /// under `cargo lambda watch` on 127.0.0.1:PORT. Reads the mapping's
    /// settings and filter from `infra/outbox.yaml`, sends OnFailure messages to
    /// `$ON_FAILURE_QUEUE_URL` when set, and keeps its position in
    /// `.local/pump-<table>.json` so that the next run resumes.
    Pump {
        /// The table whose stream to read.
        table: String,
        /// The port of `cargo lambda watch`.
        port: u16,
        /// The function to invoke.
        #[arg(default_value = "publisher")]
        function: String,
    },
    /// Print (and delete) the events a subscriber queue got.
    Receive {
        /// The queue URL.
        queue_url: String,
    },
    /// An SQS event source mapping: the queue's messages into the function
    /// (batches of 10), deleting the ones it did not report in
    /// `batchItemFailures`; reported ones come back after the visibility
    /// timeout, until the queue's maxReceiveCount sends them to its DLQ.
    Deliver {
        /// The queue URL.
        queue_url: String,
        /// The port of `cargo lambda watch`.
        port: u16,
        /// The function to invoke.
        function: String,
    },
    /// Print the read model: each customer's summary and orders.
    ReadModel {
        /// The read-model table.
        table: String,
    },
    /// Print the environment the templates give FUNCTIONs (writer,
    /// projector, publisher, sweeper) on this local stack at their defaults,
    /// as `cargo lambda watch --env-var` takes it (`NAME=VALUE,…`). Several
    /// functions under one watch share one environment: a variable they
    /// would get with different values is an error.
    Env {
        /// The outbox table.
        #[arg(long)]
        table: String,
        /// Its stream's ARN.
        #[arg(long)]
        stream: String,
        /// The event bus: a name (EventBridge sink) or a Custom Event Bus's
        /// ARN (eventbridge-bus sink).
        #[arg(long, conflicts_with = "topic", required_unless_present = "topic")]
        bus: Option<String>,
        /// The topic ARN (SNS sink).
        #[arg(long)]
        topic: Option<String>,
        /// The read-model table (the projector's).
        #[arg(long)]
        read_model: Option<String>,
        /// A template parameter other than its default, `Name=Value`
        /// (repeatable): say why where you pass it.
        #[arg(long = "parameter", value_name = "NAME=VALUE")]
        parameters: Vec<String>,
        /// The functions.
        #[arg(required = true)]
        functions: Vec<String>,
    },
}

/// What a `devkit` command could not do.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// An AWS call failed (its operation, code and message).
    #[error(transparent)]
    Aws(#[from] outbox_runtime::CallError),
    /// The local stack could not be provisioned.
    #[error(transparent)]
    Stack(#[from] devkit::StackError),
    /// Another failure, said in a line.
    #[error("{0}")]
    Other(String),
}

impl From<String> for Error {
    fn from(message: String) -> Self {
        Self::Other(message)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    match run(Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("devkit: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The local projector queue's visibility timeout: a reported message
/// comes back after 2 s instead of the template's 180 s.
const LOCAL_VISIBILITY_SECONDS: u32 = 2;

async fn run(cli: Cli) -> Result<(), Error> {
    // `env` only reads the templates.
    let sdk = match &cli.command {
        Command::Env { .. } => None,
        _ => Some(devkit::sdk_config().await.map_err(|e| e.to_string())?),
    };
    let sdk = &sdk.unwrap_or_else(|| aws_config::SdkConfig::builder().build());
    match cli.command {
        Command::Provision {
            table,
            bus,
            source,
            custom_bus,
        } => provision(sdk, &table, (&bus, custom_bus), &source).await,
        Command::Bus { port } => serve_bus(sdk, port).await,
        Command::Items { table } => print_items(sdk, &table).await,
        Command::Pump {
            table,
            port,
            function,
        } => pump(sdk, &table, port, &function).await,
        Command::Receive { queue_url } => receive(sdk, &queue_url).await,
        Command::Deliver {
            queue_url,
            port,
            function,
        } => deliver(sdk, &queue_url, port, &function).await,
        Command::ReadModel { table } => print_read_model(sdk, &table).await,
        Command::Env {
            table,
            stream,
            bus,
            topic,
            read_model,
            parameters,
            functions,
        } => {
            let sink = match (bus, topic) {
                (Some(bus), _) if bus.contains(":event-busv2/") => {
                    devkit::LocalSink::CustomBus(bus)
                }
                (Some(bus), _) => devkit::LocalSink::Bus(bus),
                (None, Some(topic)) => devkit::LocalSink::Topic(topic),
                (None, None) => return Err(Error::Other("name --bus or --topic".into())),
            };
            let root = std::env::current_dir().map_err(|e| e.to_string())?;
            let mut deployment = devkit::LocalDeployment::example(&root, &table, &stream, sink);
            deployment.read_model = read_model;
            for parameter in &parameters {
                let (name, value) = parameter
                    .split_once('=')
                    .ok_or_else(|| format!("{parameter:?} is not NAME=VALUE"))?;
                deployment = deployment.with_parameter(name, value);
            }
            let mut env: BTreeMap<String, (String, &str)> = BTreeMap::new();
            for name in &functions {
                let function = devkit::Function::of_binary(name)
                    .ok_or_else(|| format!("no function {name:?}"))?;
                for (k, v) in deployment.env(function).map_err(|e| e.to_string())? {
                    if let Some((other, by)) = env.get(&k) {
                        if other != &v {
                            return Err(Error::Other(format!(
                                "{k} is {other:?} for {by} and {v:?} for {name}: run them under separate watches"
                            )));
                        }
                    }
                    env.insert(k, (v, name));
                }
            }
            let line: Vec<String> = env
                .into_iter()
                .map(|(k, (v, _))| format!("{k}={v}"))
                .collect();
            println!("{}", line.join(","));
            Ok(())
        }
    }
}

/// The local stack; with `custom_bus`, the bus is a Custom Event Bus named
/// `bus` and `bus=` its ARN.
async fn provision(
    sdk: &aws_config::SdkConfig,
    table: &str,
    (bus, custom_bus): (&str, bool),
    source: &str,
) -> Result<(), Error> {
    let stream = devkit::create_table(sdk, table).await?;
    let on_failure =
        devkit::create_queue(sdk, &format!("{table}-publisher-failures"), false).await?;
    let read_model_table = format!("{table}-read-model");
    let (bus, subscriber, read_model) = if custom_bus {
        let events = aws_sdk_eventbridgev2::Client::new(sdk);
        // The template's default retention.
        let (arn, subscriber) = devkit::create_custom_bus(sdk, &events, bus, 7).await?;
        let read_model = devkit::create_custom_bus_read_model(
            sdk,
            &events,
            &read_model_table,
            &arn,
            LOCAL_VISIBILITY_SECONDS,
        )
        .await?;
        (arn, subscriber, read_model)
    } else {
        let subscriber = devkit::create_bus(sdk, bus, source).await?;
        let read_model = devkit::create_read_model(
            sdk,
            &read_model_table,
            bus,
            source,
            LOCAL_VISIBILITY_SECONDS,
        )
        .await?;
        (bus.to_owned(), subscriber, read_model)
    };
    println!(
        "table={table}\nstream={stream}\nbus={bus}\nsubscriber={}\non_failure={}\nread_model={}\nprojector_queue={}\nprojector_dlq={}",
        subscriber.queue_url,
        on_failure.queue_url,
        read_model.table,
        read_model.queue.queue_url,
        read_model.dead_letters.queue_url
    );
    Ok(())
}

/// Serves the local Custom Event Bus until the process is stopped.
async fn serve_bus(sdk: &aws_config::SdkConfig, port: u16) -> Result<(), Error> {
    let bus = devkit::LocalBus::start_on(sdk, port)
        .await
        .map_err(|e| format!("the local bus on port {port}: {e}"))?;
    println!("bus_endpoint={}", bus.endpoint());
    // Until the process is killed (the demo's exit trap).
    std::future::pending::<()>().await;
    drop(bus);
    Ok(())
}

async fn pump(
    sdk: &aws_config::SdkConfig,
    table: &str,
    port: u16,
    function: &str,
) -> Result<(), Error> {
    let ddb = aws_sdk_dynamodb::Client::new(sdk);
    let stream_arn = ddb
        .describe_table()
        .table_name(table)
        .send()
        .await
        .map_err(|e| outbox_runtime::error_line("DescribeTable", &e))?
        .table
        .and_then(|t| t.latest_stream_arn)
        .ok_or_else(|| format!("table {table} has no stream"))?;
    let state = PathBuf::from(".local").join(format!("pump-{table}.json"));
    let positions: BTreeMap<String, String> = std::fs::read_to_string(&state)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    let mapping = MappingSettings::from_template(&PathBuf::from(devkit::OUTBOX_TEMPLATE))
        .map_err(|e| e.to_string())?;
    let on_failure = std::env::var("ON_FAILURE_QUEUE_URL")
        .ok()
        .map(|queue_url| OnFailure {
            sqs: aws_sdk_sqs::Client::new(sdk),
            queue_url,
        });
    let invoker = HttpInvoker::new(port, function);
    let cursor = StreamCursor::resume(sdk, &stream_arn, positions);
    let mut pump = Pump::new(cursor, mapping, invoker, on_failure).map_err(|e| e.to_string())?;
    pump.run_until_idle().await.map_err(|e| e.to_string())?;
    let _ = std::fs::create_dir_all(".local");
    std::fs::write(
        &state,
        serde_json::to_string(pump.cursor().positions()).unwrap_or_default(),
    )
    .map_err(|e| format!("cannot save {}: {e}", state.display()))?;
    let s = &pump.stats;
    println!(
        "pump: {} records read, {} filtered out, {} invocations, {} partial failures, {} function errors, {} sent to OnFailure",
        s.records_read, s.filtered_out, s.invocations, s.partial_failures, s.function_errors, s.on_failure_messages
    );
    Ok(())
}

/// What Lambda's SQS event source mapping does with `ReportBatchItemFailures`
/// (`devkit::drain_queue`): batches of 10 to the function, the messages
/// it did not report deleted, the reported ones back after the visibility
/// timeout and, after the queue's `maxReceiveCount`, in its dead-letter
/// queue.
async fn deliver(
    sdk: &aws_config::SdkConfig,
    queue_url: &str,
    port: u16,
    function: &str,
) -> Result<(), Error> {
    use aws_lambda_events::event::sqs::SqsBatchResponse;
    let invoker = HttpInvoker::new(port, function);
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let invoker = &invoker;
    let stats = devkit::drain_queue(
        &sqs,
        queue_url,
        std::time::Duration::from_secs(DELIVER_PATIENCE_SECONDS),
        |event| async move {
            let payload = serde_json::to_vec(&event).map_err(|e| e.to_string())?;
            let answer = invoker.call(payload).await.map_err(|e| e.to_string())?;
            // A function error fails the whole batch: nothing is deleted.
            if answer.status != 200 || answer.function_error {
                return Err(format!("{function} failed the batch"));
            }
            Ok(serde_json::from_slice::<SqsBatchResponse>(&answer.body)
                .map_err(|e| format!("invalid batch response: {e}"))?
                .batch_item_failures
                .into_iter()
                .map(|f| f.item_identifier)
                .collect::<HashSet<String>>())
        },
    )
    .await?;
    println!(
        "deliver: {} messages in {} batches to {function}, {} handled and deleted, {} reported for retry",
        stats.messages, stats.batches, stats.deleted, stats.reported
    );
    Ok(())
}

/// How long `deliver` waits for messages in flight to come back (longer
/// than the local queues' visibility timeouts).
const DELIVER_PATIENCE_SECONDS: u64 = 35;

/// Prints each message of a subscriber (or OnFailure) queue and deletes
/// it, until the queue answers empty ([`devkit::receive_until_empty`]).
async fn receive(sdk: &aws_config::SdkConfig, queue_url: &str) -> Result<(), Error> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let mut distinct = HashSet::new();
    let total = devkit::receive_until_empty(
        &sqs,
        queue_url,
        || false,
        |m| {
            let body: serde_json::Value =
                serde_json::from_str(m.body().unwrap_or("{}")).unwrap_or_default();
            if let Some(info) = body.get("DDBStreamBatchInfo") {
                println!(
                    "  OnFailure  {}  batch of {} from {} ({})",
                    body["requestContext"]["condition"].as_str().unwrap_or(""),
                    info["batchSize"],
                    info["startSequenceNumber"].as_str().unwrap_or(""),
                    info["shardId"].as_str().unwrap_or("")
                );
            } else {
                let detail = body.get("detail").unwrap_or(&body);
                let id = detail["eventId"].as_str().unwrap_or("").to_owned();
                let first = distinct.insert(id.clone());
                println!(
                    "  {id}  {:<13} order {}  v{}{}",
                    detail["eventType"].as_str().unwrap_or(""),
                    detail["aggregateId"].as_str().unwrap_or(""),
                    detail["aggregateVersion"],
                    if first {
                        ""
                    } else {
                        "  (duplicate: same eventId)"
                    }
                );
            }
        },
    )
    .await?;
    println!("received={total} distinct={}", distinct.len());
    Ok(())
}

async fn print_items(sdk: &aws_config::SdkConfig, table: &str) -> Result<(), Error> {
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let mut rows = Vec::new();
    for item in devkit::scan_all(&client, table).await? {
        let get = |name: &str| match item.get(name) {
            Some(AttributeValue::S(s)) => s.clone(),
            Some(AttributeValue::N(n)) => n.clone(),
            Some(other) => format!("{other:?}"),
            None => String::new(),
        };
        let pk = get("PK");
        let pk = if pk.len() > 34 {
            format!("{}…", &pk[..33])
        } else {
            pk
        };
        rows.push(format!(
            "{:<34} {:<34} {:<13} {:<8} {:<7} {}",
            pk,
            get("SK"),
            get("eventType"),
            get("status"),
            get("version"),
            if item.contains_key("deadLetteredAt") {
                "dead-lettered"
            } else {
                ""
            }
        ));
    }
    rows.sort();
    println!(
        "{:<34} {:<34} {:<13} {:<8} {:<7}",
        "PK", "SK", "eventType", "status", "version"
    );
    for row in rows {
        println!("{row}");
    }
    Ok(())
}

/// The projector's read model: per customer, the summary then the orders;
/// and how many inbox records (events applied) the table holds.
async fn print_read_model(sdk: &aws_config::SdkConfig, table: &str) -> Result<(), Error> {
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let mut customers: BTreeMap<String, (String, Vec<String>)> = BTreeMap::new();
    let mut inbox = 0;
    for item in devkit::scan_all(&client, table).await? {
        let get = |name: &str| match item.get(name) {
            Some(AttributeValue::S(s)) => s.clone(),
            Some(AttributeValue::N(n)) => n.clone(),
            _ => "0".into(),
        };
        let (pk, sk) = (get("PK"), get("SK"));
        if pk.starts_with("INBOX#") {
            inbox += 1;
            continue;
        }
        let Some(customer) = pk.strip_prefix("CUSTOMER#") else {
            continue;
        };
        let entry = customers.entry(customer.to_owned()).or_default();
        if sk == "SUMMARY" {
            entry.0 = format!(
                "orders={} paidOrders={} paidCents={}",
                get("orders"),
                get("paidOrders"),
                get("paidCents")
            );
        } else {
            entry.1.push(format!(
                "    {:<28} {:<8} {} {:>10}  v{}",
                get("orderId"),
                get("status"),
                get("currency"),
                get("totalCents"),
                get("version")
            ));
        }
    }
    for (customer, (summary, mut orders)) in customers {
        orders.sort();
        println!("  customer {customer}: {summary}");
        for order in orders {
            println!("{order}");
        }
    }
    println!("inbox records (events applied): {inbox}");
    Ok(())
}
