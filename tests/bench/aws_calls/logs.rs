//! `BENCH_ONLY=logs`: log bytes per invocation of the function binaries
//! (writer, publisher, sweeper) at the templates' log settings.

use std::time::Duration;

use crate::common::write_bench_json;
use testkit::lambda::{debug_binary, loopback_env, FunctionSpec, LambdaFunction};
use testkit::Stack;

/// Log bytes per invocation, read from the function binaries' real output
/// under the local Lambda runtime at the templates' log settings (JSON
/// format, `LogLevel` and the EMF documents' level as deployed): the bytes
/// of the lines Lambda's log-level filter lets through
/// (`testkit::lambda::passes_lambda_filter`), which is what CloudWatch Logs
/// ingests from the function. The writer: `n` creates and `n` payments
/// through API Gateway events; the publisher: `n` orders at a trickle, one
/// record an invocation (the cost model's arrival); the sweeper: `n`
/// scheduled runs. The first invocation of each (its cold start) apart.
/// Lambda's own lines (`SystemLogLevel`) are not the function's output:
/// `infra/bench/cost.py` prices them from `prices.json`.
pub(super) async fn log_bytes(n: usize) {
    let stack = Stack::with_bus().await;
    let function = |f: devkit::Function, name: &str| {
        LambdaFunction::new(FunctionSpec {
            name: name.into(),
            binary: debug_binary(name).expect("function binary"),
            env: loopback_env()
                .into_iter()
                .chain(stack.env(f, &[]))
                .collect(),
            timeout: Duration::from_secs(60),
            log: std::env::temp_dir().join(format!("{}-{name}-logs.log", stack.table)),
        })
    };
    let bytes =
        |f: &LambdaFunction| -> usize { f.delivered_lines().iter().map(|l| l.len() + 1).sum() };
    let level = stack
        .env(devkit::Function::Publisher, &[])
        .into_iter()
        .find(|(k, _)| k == "AWS_LAMBDA_LOG_LEVEL")
        .map(|(_, v)| v)
        .unwrap_or_default();
    // (cold start, per later invocation): the bytes after the first of `n`
    // invocations, and the mean of the others.
    let split = |cold: usize, total: usize| (cold, (total - cold) as f64 / (n - 1).max(1) as f64);
    let event = |file: &str| -> serde_json::Value {
        serde_json::from_str(&testkit::sample(file)).expect("sample event is JSON")
    };

    let writer = function(devkit::Function::Writer, "writer");
    // The writer's answer to the API Gateway event `e`.
    let answer = |e: serde_json::Value| {
        let writer = &writer;
        async move {
            let out = writer.invoke(e.to_string().as_bytes()).await;
            serde_json::from_slice::<serde_json::Value>(&out.expect("writer answers"))
                .expect("API response")
        }
    };
    let mut ids = Vec::new();
    let mut cold = 0;
    for i in 0..n {
        let mut e = event("writer-create-order.json");
        e["headers"]["idempotency-key"] = format!("logs-create-{i}").into();
        let out = answer(e).await;
        assert_eq!(out["statusCode"], 201, "{out}");
        let body: serde_json::Value =
            serde_json::from_str(out["body"].as_str().unwrap_or("{}")).unwrap_or_default();
        ids.push(body["orderId"].as_str().unwrap_or_default().to_owned());
        if i == 0 {
            cold = bytes(&writer);
        }
    }
    let create = split(cold, bytes(&writer));
    let before_pay = bytes(&writer);
    for (i, id) in ids.iter().enumerate() {
        let mut e = event("writer-pay-order.json");
        e["headers"]["idempotency-key"] = format!("logs-pay-{i}").into();
        e["rawPath"] = format!("/orders/{id}/payment").into();
        e["requestContext"]["http"]["path"] = e["rawPath"].clone();
        e["pathParameters"] = serde_json::json!({ "id": id });
        let out = answer(e).await;
        assert_eq!(out["statusCode"], 200, "{out}");
    }
    let pay = (bytes(&writer) - before_pay) as f64 / ids.len().max(1) as f64;

    // The publisher's cold start takes the writer's events above in one
    // batch; then `n` orders at a trickle, one record an invocation.
    let publisher = function(devkit::Function::Publisher, "publisher");
    let mut pump = stack.pump(&publisher, None);
    pump.run_until_idle().await.expect("pump");
    let publisher_cold = bytes(&publisher);
    let invoked = pump.stats.invocations;
    for _ in 0..n {
        stack.create_orders(1).await;
        pump.run_until_idle().await.expect("pump");
    }
    let invocations = pump.stats.invocations - invoked;
    let published = (
        publisher_cold,
        (bytes(&publisher) - publisher_cold) as f64 / invocations.max(1) as f64,
    );

    let sweeper = function(devkit::Function::Sweeper, "sweeper");
    for i in 0..n {
        sweeper
            .invoke(event("sweeper-scheduled.json").to_string().as_bytes())
            .await
            .expect("sweeper answers");
        if i == 0 {
            cold = bytes(&sweeper);
        }
    }
    let swept = split(cold, bytes(&sweeper));

    println!("## Log bytes per invocation (the binaries' output that Lambda's filter lets through at LogLevel {level})\n");
    println!("| function | invocation | cold start | each later one |");
    println!("|---|---|---|---|");
    println!("| writer | create order | {} | {:.0} |", create.0, create.1);
    println!("| writer | pay order | – | {pay:.0} |");
    println!(
        "| publisher | one record ({invocations} invocations; its cold start took the writer's events in one batch) | {} | {:.0} |",
        published.0, published.1
    );
    println!(
        "| sweeper | scheduled run, nothing pending | {} | {:.0} |\n",
        swept.0, swept.1
    );
    write_bench_json(
        "logs.json",
        serde_json::json!({
            "source": "cargo bench --bench aws_calls (BENCH_ONLY=logs): the function binaries under the local Lambda runtime with the templates' environment, the bytes of the stdout lines Lambda's log-level filter lets through",
            "log_level": level,
            "invocations": n,
            "writer": {"create_cold_start": create.0, "create": create.1, "pay": pay},
            "publisher": {"cold_start": published.0, "one_record": published.1, "invocations": invocations},
            "sweeper": {"cold_start": swept.0, "scheduled": swept.1},
        }),
    );
}
