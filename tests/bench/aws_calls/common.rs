//! Helpers the sections share: the quick mode's switch, the publisher
//! binary as the templates deploy it, and the JSON results for
//! `infra/bench/cost.py`.

use std::time::Duration;

use testkit::lambda::{debug_binary, loopback_env, FunctionSpec, LambdaFunction};
use testkit::proxy::FaultProxy;
use testkit::Stack;

/// `make test`'s one quick pass (`--quick` or `BENCH_QUICK`), not a measurement.
pub(super) fn quick() -> bool {
    std::env::args().any(|a| a == "--quick") || std::env::var("BENCH_QUICK").is_ok()
}

/// The publisher binary (the debug build) as the templates deploy it on
/// `stack` with the parameter `Ordering=ordering`, its calls through `proxy`.
pub(super) fn publisher_binary(
    stack: &Stack,
    proxy: &FaultProxy,
    ordering: &str,
) -> LambdaFunction {
    let binary = debug_binary("publisher").expect("publisher binary");
    publisher_with(stack, proxy, &[("Ordering", ordering)], binary, &[])
}

/// The publisher `binary` as the templates deploy it on `stack` with the
/// template `parameters`, its calls through `proxy`, the variables `extra`
/// on top (a local endpoint the templates cannot give).
pub(super) fn publisher_with(
    stack: &Stack,
    proxy: &FaultProxy,
    parameters: &[(&str, &str)],
    binary: std::path::PathBuf,
    extra: &[(&str, &str)],
) -> LambdaFunction {
    let env = loopback_env()
        .into_iter()
        .chain(devkit::endpoint_env_at(&proxy.endpoint))
        .chain(stack.env(devkit::Function::Publisher, parameters))
        .chain(
            extra
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
        )
        .collect();
    LambdaFunction::new(FunctionSpec {
        name: "publisher".into(),
        binary,
        env,
        timeout: Duration::from_secs(60),
        log: std::env::temp_dir().join(format!("{}-publisher.log", testkit::unique(&stack.table))),
    })
}

/// A stack with a bus, a proxy, and [`publisher_binary`] on them.
pub(super) async fn publisher_rig(ordering: &str) -> (Stack, FaultProxy, LambdaFunction) {
    let stack = Stack::with_bus().await;
    let proxy = FaultProxy::start().await;
    let function = publisher_binary(&stack, &proxy, ordering);
    (stack, proxy, function)
}

/// How many calls of `action` the proxy's counts hold.
pub(super) fn count(calls: &std::collections::BTreeMap<String, usize>, action: &str) -> usize {
    calls.get(action).copied().unwrap_or(0)
}

/// A bench result for `infra/bench/cost.py`, in `.local/bench/`.
pub(super) fn write_bench_json(name: &str, value: serde_json::Value) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".local/bench");
    std::fs::create_dir_all(&dir).expect("bench dir");
    let text = serde_json::to_string_pretty(&value).expect("json");
    std::fs::write(dir.join(name), text).expect("bench result written");
}
