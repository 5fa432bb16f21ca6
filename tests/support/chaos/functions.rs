//! The functions of a chaos run: the real `writer`, `publisher` and
//! `sweeper` binaries under a local Lambda Runtime API, each process behind
//! its own fault proxy, on its seeded fault schedule.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::lambda::{FunctionSpec, LambdaFunction};
use crate::proxy::FaultProxy;

use super::faults::{Sandboxes, Schedule, Tagged};
use super::ChaosConfig;

/// A function's environment and timeout.
pub(super) type Setup = (Vec<(String, String)>, Duration);

/// A function's proxy: in front of the local servers, and of the local
/// Custom Event Bus at `bus` when the run publishes there.
async fn proxy(bus: Option<&str>) -> Arc<FaultProxy> {
    Arc::new(match bus {
        Some(bus) => FaultProxy::start_with_bus(bus).await,
        None => FaultProxy::start().await,
    })
}

/// `name`'s binary behind `proxy`; `sandbox` numbers its log when the
/// function runs in several sandboxes at once.
fn function(
    config: &ChaosConfig,
    (name, sandbox): (&str, Option<usize>),
    binary_path: &Path,
    (proxy, bus): (&FaultProxy, Option<&str>),
    (env, timeout): &Setup,
) -> LambdaFunction {
    let mut all = crate::lambda::loopback_env();
    all.extend(env.iter().cloned());
    // Every service through the proxy (it routes DynamoDB and its streams
    // to DynamoDB Local, the Custom Event Bus to the local bus, the rest
    // to moto).
    all.extend(devkit::endpoint_env_at(&proxy.endpoint));
    if bus.is_some() {
        let (name, value) = proxy.bus_env();
        all.push((name.to_owned(), value.to_owned()));
    }
    LambdaFunction::new(FunctionSpec {
        name: name.to_owned(),
        binary: binary_path.to_owned(),
        env: all,
        timeout: *timeout,
        log: config.log_dir.join(match sandbox {
            None => format!("{}-{}-{name}.log", config.seed, config.sink.name()),
            Some(n) => format!("{}-{}-{name}-{n}.log", config.seed, config.sink.name()),
        }),
    })
}

/// The writers, `config.writers` of them: each its own proxy (a crash
/// kills the writer that called), on a writer schedule of its own.
pub(super) async fn writers(config: &ChaosConfig, binary: &Path, env: &Setup) -> Vec<Tagged> {
    let mut writers = Vec::new();
    for w in 0..config.writers {
        let proxy = Arc::new(FaultProxy::start().await);
        let seed = config.seed.wrapping_add(1000 + w as u64);
        let schedule = Schedule::new(seed, config.writer_fault_rate);
        let schedule = Mutex::new(schedule.scripted("writer", config.scripted));
        proxy.set_chooser(Box::new(move |op, _| {
            schedule.lock().ok()?.choose_writer(op)
        }));
        let f = function(
            config,
            (&format!("writer{w}"), None),
            binary,
            (&proxy, None),
            env,
        );
        writers.push(Tagged::new(f, proxy, Arc::new(AtomicU64::new(1))));
    }
    writers
}

/// One publisher sandbox per lane (a sandbox serves one invocation at a
/// time; Lambda runs the lanes in environments of their own), each behind
/// its own proxy, all on one fault `schedule` and one tag count; `bus`: the
/// local Custom Event Bus, when the run publishes there.
pub(super) async fn publishers(
    config: &ChaosConfig,
    (lanes, bus): (usize, Option<&str>),
    binary: &Path,
    env: &Setup,
    schedule: &Arc<Mutex<Schedule>>,
) -> Sandboxes {
    let tags = Arc::new(AtomicU64::new(1));
    let mut sandboxes = Vec::new();
    for lane in 0..lanes {
        let proxy = proxy(bus).await;
        let schedule = schedule.clone();
        proxy.set_chooser(Box::new(move |op, tag| {
            schedule.lock().ok()?.choose_publishing(op, tag, false)
        }));
        if let Some(sabotage) = config.sabotage.filter(|s| s.applies_to("publisher")) {
            proxy.sabotage(sabotage);
        }
        let f = function(
            config,
            ("publisher", (lanes > 1).then_some(lane)),
            binary,
            (&proxy, bus),
            env,
        );
        sandboxes.push(Tagged::new(f, proxy, tags.clone()));
    }
    Sandboxes::new(sandboxes)
}

/// The sweeper, behind its proxy on `schedule` (`bus`: as for
/// [`publishers`]).
pub(super) async fn sweeper(
    config: &ChaosConfig,
    (binary, bus): (&Path, Option<&str>),
    env: &Setup,
    schedule: Schedule,
) -> Tagged {
    let proxy = proxy(bus).await;
    let schedule = Mutex::new(schedule);
    if let Some(sabotage) = config.sabotage.filter(|s| s.applies_to("sweeper")) {
        proxy.sabotage(sabotage);
    }
    proxy.set_chooser(Box::new(move |op, tag| {
        schedule.lock().ok()?.choose_publishing(op, tag, true)
    }));
    // The template's STRANDED_AFTER_SECONDS (a day, far above the run):
    // the scheduled sweeps publish only what was handed to them (a failed
    // delete, a held event, a backoff), and what the mapping gave up on is
    // the OnFailure path's alone (the verdict checks it published it).
    let f = function(config, ("sweeper", None), binary, (&proxy, bus), env);
    Tagged::new(f, proxy, Arc::new(AtomicU64::new(1)))
}
