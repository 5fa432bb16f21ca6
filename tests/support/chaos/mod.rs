//! The chaos run: the real `writer`, `publisher` and `sweeper` binaries
//! under a local Lambda Runtime API ([`crate::lambda`]), the mapping
//! emulator with the template's settings, and each function's AWS calls
//! through its own fault proxy ([`crate::proxy`]) in front of DynamoDB Local and moto.
//!
//! # Layout
//! - `mod.rs`: [`ChaosConfig`] and [`run`], which wires the parts together.
//! - `faults.rs`: the seeded fault schedule of each proxy, fault labels and
//!   their severity, and the tagging of each invocation on its proxy.
//! - `workload.rs`: the orders created and paid through the writer, as API
//!   clients with an `Idempotency-Key` would.
//! - `verdict.rs`: [`Verdict`], judged from the subscriber queue, the table
//!   and the proxies' journals.
//!
//! What each does:
//! - [`ChaosConfig`]: seed, size, sink and fault rate of one run.
//! - [`run`]: provisions a fresh stack, creates and pays orders
//!   concurrently through the writer (faults and writer crashes on its
//!   transactions; clients retry with their `Idempotency-Key`), drains the
//!   stream through the publisher (wire faults, a sink outage, `SIGKILL`s
//!   around the sink call and the deletes), runs the scheduled sweeper and
//!   feeds it the OnFailure queue (killed mid-sweep too), then heals every
//!   fault, drains again and sweeps until nothing is pending.
//! - [`Verdict`]: computed from the subscriber queue and the table, never
//!   from the functions' logs, with every duplicate attributed to the fault
//!   that caused it ([`Verdict::failures`] lists what breaks a promise).
//!
//! Every fault decision comes from one seeded generator per proxy, in call
//! order: the same seed gives the same faults at the same call positions.
//! The writers run concurrently, so the stream's order (which event sits
//! where in a batch) is up to the scheduler.

mod faults;
mod verdict;
mod workload;

use outbox_runtime::store::SweepStore;
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::lambda::{binary, FunctionSpec, LambdaFunction};
use crate::proxy::{Call, Fault, FaultProxy, Sabotage};
use crate::Stack;

use faults::{label, Sandboxes, Schedule, Tagged};
pub use verdict::{in_delivery_order, inversions, FaultRow, Verdict};
use verdict::{judge, order_versions, pending_outbox, recovery};
use workload::workload;

/// The sink a run publishes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkKind {
    /// EventBridge bus → rule → SQS queue.
    EventBridge,
    /// SNS FIFO topic → SQS FIFO queue (order per aggregate is checked).
    SnsFifo,
}

impl SinkKind {
    /// The sink's name in the tables and file names.
    pub fn name(self) -> &'static str {
        match self {
            Self::EventBridge => "eventbridge",
            Self::SnsFifo => "sns-fifo",
        }
    }
}

/// One run.
#[derive(Debug, Clone)]
pub struct ChaosConfig {
    /// The seed of every generator of the run (faults, workload).
    pub seed: u64,
    /// Orders created and paid (two events each), before any coverage wave.
    pub orders: usize,
    /// Where the publisher and the sweeper send.
    pub sink: SinkKind,
    /// Undecodable outbox items written straight to the table: each must
    /// end dead-lettered with a reason, and nothing else may.
    pub poison: usize,
    /// Probability that a publisher or sweeper call meets a fault.
    pub fault_rate: f64,
    /// Probability that a writer transaction meets a fault.
    pub writer_fault_rate: f64,
    /// Concurrent writer sandboxes.
    pub writers: usize,
    /// Publisher invocations the sink outage lasts: below the mapping's
    /// `MaximumRetryAttempts`, or above it (the batch goes to the OnFailure
    /// queue, the sweeper redrives it) with `outage_beyond_retries`.
    pub outage_invocations: u64,
    /// The outage outlasts the mapping's retries, and the run must show the
    /// OnFailure path.
    pub outage_beyond_retries: bool,
    /// Wire sabotage on the publisher's and the sweeper's proxies, which
    /// the verdict must catch (the sabotage tests).
    pub sabotage: Option<Sabotage>,
    /// Calls that hang until the deadline (each costs a timeout).
    pub hangs: u32,
    /// The functions' timeout (the template's are longer; a hang costs this).
    pub timeout: Duration,
    /// Where the functions' logs go, and the backlog samples
    /// (`backlog-<seed>-<sink>.csv`, `phases-<seed>-<sink>.csv`).
    pub log_dir: std::path::PathBuf,
    /// How often the backlog is sampled.
    pub sample_every: Duration,
    /// The mapping's `ParallelizationFactor` (the template parameter
    /// `PublisherParallelizationFactor`, default 1): lanes of a stream
    /// shard invoked at once, each on a publisher sandbox of its own.
    pub parallelization: usize,
    /// The template parameter `Ordering`; `None` keeps its default (`auto`:
    /// strict for the SNS FIFO topic, relaxed for EventBridge).
    pub ordering: Option<outbox_runtime::Ordering>,
}

impl ChaosConfig {
    /// The configuration `make test` runs: small, every fault kind.
    pub fn small(seed: u64, sink: SinkKind) -> Self {
        Self {
            seed,
            orders: 40,
            sink,
            poison: 2,
            fault_rate: 0.25,
            writer_fault_rate: 0.15,
            writers: 3,
            outage_invocations: 4,
            outage_beyond_retries: true,
            sabotage: None,
            hangs: 1,
            timeout: Duration::from_secs(6),
            log_dir: crate::root().join("target").join("chaos"),
            sample_every: Duration::from_secs(1),
            parallelization: 1,
            ordering: None,
        }
    }
}

/// Feeds the OnFailure queue to the sweeper the way an SQS mapping does;
/// returns how many messages it handled.
async fn deliver_on_failure(stack: &Stack, queue_url: &str, sweeper: &Tagged) -> usize {
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    let mut handled = 0;
    for _ in 0..20 {
        let Ok(messages) = outbox_runtime::queue::receive_batch(&sqs, queue_url, 0).await else {
            break;
        };
        if messages.is_empty() {
            break;
        }
        let event = outbox_runtime::queue::batch_event(&messages);
        let payload = serde_json::to_vec(&event).unwrap_or_default();
        let failed: HashSet<String> = match sweeper.call(&payload).await {
            Ok(body) => serde_json::from_slice::<Value>(&body)
                .ok()
                .and_then(|v| v["batchItemFailures"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|f| f["itemIdentifier"].as_str().map(str::to_owned))
                .collect(),
            Err(_) => messages
                .iter()
                .filter_map(|m| m.message_id.clone())
                .collect(),
        };
        for m in &messages {
            if m.message_id.as_ref().is_some_and(|id| failed.contains(id)) {
                // Back after the visibility timeout, as in SQS.
                if let Some(handle) = m.receipt_handle() {
                    let _ = sqs
                        .change_message_visibility()
                        .queue_url(queue_url)
                        .receipt_handle(handle)
                        .visibility_timeout(0)
                        .send()
                        .await;
                }
                continue;
            }
            if outbox_runtime::queue::delete_message(&sqs, queue_url, m)
                .await
                .unwrap_or(false)
            {
                handled += 1;
            }
        }
    }
    handled
}

/// `name`'s binary behind `proxy`; `sandbox` numbers its log when the
/// function runs in several sandboxes at once.
fn function(
    config: &ChaosConfig,
    name: &str,
    sandbox: Option<usize>,
    binary_path: &std::path::Path,
    proxy: &FaultProxy,
    env: &[(String, String)],
) -> LambdaFunction {
    let mut all = crate::lambda::loopback_env();
    all.extend(env.iter().cloned());
    // Every service through the proxy (it routes DynamoDB and its streams
    // to DynamoDB Local, the rest to moto).
    all.extend(devkit::endpoint_env_at(&proxy.endpoint));
    LambdaFunction::new(FunctionSpec {
        name: name.to_owned(),
        binary: binary_path.to_owned(),
        env: all,
        timeout: config.timeout,
        log: config.log_dir.join(match sandbox {
            None => format!("{}-{}-{name}.log", config.seed, config.sink.name()),
            Some(n) => format!("{}-{}-{name}-{n}.log", config.seed, config.sink.name()),
        }),
    })
}

/// Passes of the pump, each followed by a scheduled sweep (when `sweep`)
/// and the OnFailure queue fed to the sweeper, until a pass reads nothing
/// new; returns the OnFailure messages handled.
async fn drain(
    pump: &mut devkit::Pump<&Sandboxes>,
    sweeper: &Tagged,
    stack: &Stack,
    on_failure: &str,
    scheduled: &[u8],
    sweep: bool,
) -> Result<usize, String> {
    let mut handled = 0;
    for pass in 0.. {
        let read = pump.pass().await.map_err(|e| e.to_string())?;
        if sweep {
            let _ = sweeper.call(scheduled).await;
        }
        handled += deliver_on_failure(stack, on_failure, sweeper).await;
        if read == 0 && pass > 0 {
            break;
        }
    }
    Ok(handled)
}

/// Receives and deletes the subscriber's messages until `reading` turns
/// false and the queue answers empty twice; every message, in arrival order.
async fn read_subscriber(
    sqs: aws_sdk_sqs::Client,
    queue_url: String,
    reading: Arc<std::sync::atomic::AtomicBool>,
) -> Result<Vec<Value>, String> {
    use aws_sdk_sqs::types::{DeleteMessageBatchRequestEntry, MessageSystemAttributeName};
    let mut messages = Vec::new();
    let mut empty = 0;
    loop {
        let done = !reading.load(Ordering::SeqCst);
        let received = sqs
            .receive_message()
            .queue_url(&queue_url)
            .max_number_of_messages(10)
            .message_system_attribute_names(MessageSystemAttributeName::All)
            .wait_time_seconds(if done { 0 } else { 1 })
            .send()
            .await
            .map_err(|e| outbox_runtime::aws::error_line("ReceiveMessage", &e))?
            .messages
            .unwrap_or_default();
        if received.is_empty() {
            empty = if done { empty + 1 } else { 0 };
            if empty >= 2 {
                return Ok(messages);
            }
            continue;
        }
        empty = 0;
        let mut entries = Vec::new();
        for (i, m) in received.iter().enumerate() {
            messages.push(crate::message_value(m));
            if let Some(handle) = m.receipt_handle() {
                entries.push(
                    DeleteMessageBatchRequestEntry::builder()
                        .id(i.to_string())
                        .receipt_handle(handle)
                        .build()
                        .map_err(|e| e.to_string())?,
                );
            }
        }
        sqs.delete_message_batch()
            .queue_url(&queue_url)
            .set_entries(Some(entries))
            .send()
            .await
            .map_err(|e| outbox_runtime::aws::error_line("DeleteMessageBatch", &e))?;
    }
}

/// One backlog sample: seconds since the run started, pending outbox
/// items, the oldest pending event's age in seconds.
type Sample = (f64, usize, f64);

/// Samples the pending index (every shard: count and oldest id) until
/// `sampling` turns false.
async fn sample_backlog(
    store: outbox_runtime::store::DynamoStore,
    started: Instant,
    every: Duration,
    sampling: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    loop {
        // Read before the sample: the last sample follows the run's end.
        let last = !sampling.load(Ordering::SeqCst);
        let mut pending = 0;
        let mut oldest: Option<ulid::Ulid> = None;
        for shard in 0..outbox_runtime::DEFAULT_OUTBOX_SHARDS {
            if let Ok(stats) = store
                .shard_stats(shard, 10_000_000, &crate::far_deadline())
                .await
            {
                pending += stats.pending;
                oldest = match (oldest, stats.oldest) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
            }
        }
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let age = oldest.map_or(0.0, |id| {
            now_ms.saturating_sub(id.timestamp_ms()) as f64 / 1000.0
        });
        samples.push((started.elapsed().as_secs_f64(), pending, age));
        if last {
            break;
        }
        // Sleep in short steps, so the end of the run is sampled at once.
        let until = Instant::now() + every;
        while Instant::now() < until && sampling.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    samples
}

/// Writes the backlog samples and the phases for `infra/local/plot_backlog.py`.
fn write_timeline(config: &ChaosConfig, samples: &[Sample], timeline: &[(String, f64, f64)]) {
    let run = format!("{}-{}", config.seed, config.sink.name());
    let mut backlog = String::from("seconds,pending,oldest_age_seconds\n");
    for (seconds, pending, age) in samples {
        backlog.push_str(&format!("{seconds:.1},{pending},{age:.1}\n"));
    }
    let mut phases = String::from("name,start,end\n");
    for (name, start, end) in timeline {
        phases.push_str(&format!("\"{name}\",{start:.1},{end:.1}\n"));
    }
    let _ = std::fs::write(config.log_dir.join(format!("backlog-{run}.csv")), backlog);
    let _ = std::fs::write(config.log_dir.join(format!("phases-{run}.csv")), phases);
}

/// One chaos run. `Err` only when the harness itself cannot run.
pub async fn run(config: &ChaosConfig) -> Result<Verdict, String> {
    let started = Instant::now();
    std::fs::create_dir_all(&config.log_dir).map_err(|e| e.to_string())?;
    let binaries = (binary("writer")?, binary("publisher")?, binary("sweeper")?);
    let mut stack = Stack::new().await;
    let subscriber = match config.sink {
        SinkKind::EventBridge => {
            let bus = crate::unique("chaos-bus");
            let subscriber = devkit::create_bus(&stack.sdk, &bus, "outbox.orders")
                .await
                .map_err(|e| e.to_string())?;
            stack.deployment.sink = devkit::LocalSink::Bus(bus.clone());
            stack.bus = Some((bus, subscriber.clone()));
            subscriber
        }
        SinkKind::SnsFifo => {
            let (topic, subscriber) =
                devkit::create_fifo_topic(&stack.sdk, &crate::unique("chaos-events"))
                    .await
                    .map_err(|e| e.to_string())?;
            stack.use_topic(&topic).await;
            subscriber
        }
    };
    // The templates' defaults, but for what the run is asked to set:
    // - `PublisherParallelizationFactor` (`parallelization` above 1): Lambda
    //   then invokes lanes of one stream shard at once and keeps order per
    //   item only, and every event is its own item, so an aggregate's events
    //   go out from concurrent invocations: the run shows what each ordering
    //   promises when they do (`make chaos` runs at 2; the template's 1
    //   leaves the lanes out);
    // - `Ordering` (`ordering`): strict on EventBridge too, whose default is
    //   relaxed, so that the verdict judges order per aggregate there.
    if config.parallelization != 1 {
        stack.deployment = stack.deployment.clone().with_parameter(
            "PublisherParallelizationFactor",
            &config.parallelization.to_string(),
        );
    }
    if let Some(ordering) = config.ordering {
        stack.deployment = stack
            .deployment
            .clone()
            .with_parameter("Ordering", ordering.as_str());
    }
    stack.record_settings().await;
    // The mapping as this stack deploys it, as the pump runs it.
    let mapping = stack.deployment.mapping().map_err(|e| e.to_string())?;
    let lanes = mapping.parallelization_factor.max(1);
    let ordering = stack.config(&[]).ordering;
    let on_failure = devkit::create_queue(&stack.sdk, &crate::unique("chaos-on-failure"), false)
        .await
        .map_err(|e| e.to_string())?
        .queue_url;
    // Each function's environment is the templates' on this stack; one
    // variable more for all: RETRY_BASE_SECONDS=1 (the template leaves the
    // default, 60 s), so that the persisted backoffs of a run that injects
    // thousands of faults end within the run.
    let env_of = |function: devkit::Function| {
        let mut env = stack.env(function, &[]);
        env.push(("RETRY_BASE_SECONDS".to_owned(), "1".to_owned()));
        env
    };

    // Writers: each its own proxy (a crash kills the writer that called).
    let mut writers = Vec::new();
    for w in 0..config.writers {
        let proxy = Arc::new(FaultProxy::start().await);
        let schedule = Mutex::new(
            Schedule::new(
                config.seed.wrapping_add(1000 + w as u64),
                config.writer_fault_rate,
            )
            .scripted_writer(),
        );
        proxy.set_chooser(Box::new(move |op, _| {
            schedule.lock().ok()?.choose_writer(op)
        }));
        let f = function(
            config,
            &format!("writer{w}"),
            None,
            &binaries.0,
            &proxy,
            &env_of(devkit::Function::Writer),
        );
        writers.push(Tagged::new(f, proxy));
    }
    for (i, _) in (0..config.poison).enumerate() {
        stack
            .put_poison(&format!("poison-{}-{i}", config.seed), Some("not json"))
            .await;
    }
    // The subscriber's queue, read all along (a short queue keeps the local
    // SQS fast on big runs).
    let reading = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let reader = tokio::spawn(read_subscriber(
        aws_sdk_sqs::Client::new(&stack.sdk),
        subscriber.queue_url.clone(),
        reading.clone(),
    ));
    let mut phases = Vec::new();
    let mut mark = Instant::now();
    let mut timeline: Vec<(String, f64, f64)> = Vec::new();
    let at = |instant: Instant| instant.duration_since(started).as_secs_f64();
    // The backlog over the run, sampled from the pending index.
    let sampling = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = tokio::spawn(sample_backlog(
        stack.store(),
        started,
        config.sample_every,
        sampling.clone(),
    ));
    // Most orders first; the rest later, during an outage that outlasts
    // the mapping's retries (when the run has one).
    let late = if config.outage_beyond_retries {
        (config.orders / 4).max(1)
    } else {
        0
    };
    let first_wave = config.orders.saturating_sub(late);
    let requested = workload(config, &writers, 0..first_wave).await;
    phases.push(("writes", mark.elapsed()));
    timeline.push(("writes".into(), at(mark), at(Instant::now())));
    mark = Instant::now();

    // Publisher and sweeper, each behind its proxy.
    let mut rng = fastrand::Rng::with_seed(config.seed);
    let outage_start = rng.u64(2..6);
    // Outages are counted in publisher invocations, which the lanes share:
    // as many again per lane, so that each lane meets about as many.
    let outage_invocations = config.outage_invocations * lanes as u64;
    let retries = mapping.maximum_retry_attempts.max(0) as u64;
    let publisher_schedule =
        Schedule::new(config.seed.wrapping_add(1), config.fault_rate).scripted(false);
    let sweeper_schedule =
        Schedule::new(config.seed.wrapping_add(2), config.fault_rate).scripted(true);
    let writer_kinds = Schedule::new(0, 0.0).scripted_writer().kinds("writer");
    let expected_kinds: Vec<String> = publisher_schedule
        .kinds("publisher")
        .into_iter()
        .chain(sweeper_schedule.kinds("sweeper"))
        .chain(writer_kinds)
        .collect();
    let publisher_schedule = Arc::new(Mutex::new(Schedule {
        outage: Some((outage_start, outage_start + outage_invocations)),
        hangs: config.hangs,
        ..publisher_schedule
    }));
    // One publisher sandbox per lane (a sandbox serves one invocation at a
    // time; Lambda runs the lanes in environments of their own), each
    // behind its own proxy, all on one fault schedule and one tag count.
    let publisher_env = env_of(devkit::Function::Publisher);
    let tags = Arc::new(std::sync::atomic::AtomicU64::new(1));
    let mut sandboxes = Vec::new();
    for lane in 0..lanes {
        let proxy = Arc::new(FaultProxy::start().await);
        let schedule = publisher_schedule.clone();
        proxy.set_chooser(Box::new(move |op, tag| {
            schedule.lock().ok()?.choose_publishing(op, tag, false)
        }));
        if let Some(sabotage) = config.sabotage {
            proxy.sabotage(sabotage);
        }
        let f = function(
            config,
            "publisher",
            (lanes > 1).then_some(lane),
            &binaries.1,
            &proxy,
            &publisher_env,
        );
        sandboxes.push(Tagged::counting(f, proxy, tags.clone()));
    }
    let publisher = Sandboxes::new(sandboxes);
    let sweeper_proxy = Arc::new(FaultProxy::start().await);
    let schedule = Mutex::new(sweeper_schedule);
    if let Some(sabotage) = config.sabotage {
        sweeper_proxy.sabotage(sabotage);
    }
    sweeper_proxy.set_chooser(Box::new(move |op, tag| {
        schedule.lock().ok()?.choose_publishing(op, tag, true)
    }));
    // The sweeper runs between the pump's passes, never alongside one, so
    // it takes every pending item at once (STRANDED_AFTER_SECONDS=0): those
    // whose delete failed, whose dead-letter write failed, or that the
    // mapping gave up on. (Deployed, it waits for the stream's retention.)
    let mut sweeper_env = env_of(devkit::Function::Sweeper);
    sweeper_env.push(("STRANDED_AFTER_SECONDS".into(), "0".into()));
    let sweeper = Tagged::new(
        function(
            config,
            "sweeper",
            None,
            &binaries.2,
            &sweeper_proxy,
            &sweeper_env,
        ),
        sweeper_proxy.clone(),
    );

    // Drain the stream under faults, sweeping between passes.
    let scheduled = crate::sample("sweeper-scheduled.json").into_bytes();
    let mut on_failure_messages = 0;
    let mut pump = stack.pump(&publisher, Some(&on_failure));
    on_failure_messages +=
        drain(&mut pump, &sweeper, &stack, &on_failure, &scheduled, true).await?;
    timeline.push(("drain under faults".into(), at(mark), at(Instant::now())));
    // Coverage: which scripted publisher faults get their call depends on
    // how the publisher and the sweeper race for the events (a sweep that
    // takes them first leaves the publisher fewer sink calls and deletes
    // than its script needs; two fresh-clone CI runs of the SNS FIFO small
    // run failed on that alone). While the publisher's script has faults
    // left, waves of a few more orders are written and drained without
    // sweeps, so that the publisher makes the calls; at most
    // `TOP_UP_WAVES` of them, and the verdict still fails a fault that
    // never got its call.
    const TOP_UP_WAVES: usize = 5;
    const TOP_UP_ORDERS: usize = 10;
    let mut requested = requested;
    let mut written = config.orders;
    for _ in 0..TOP_UP_WAVES {
        let left = publisher_schedule
            .lock()
            .is_ok_and(|s| s.script.values().any(|faults| !faults.is_empty()));
        if !left {
            break;
        }
        let wave = Instant::now();
        let more = written..written + TOP_UP_ORDERS;
        written = more.end;
        requested = requested.merge(workload(config, &writers, more).await);
        on_failure_messages +=
            drain(&mut pump, &sweeper, &stack, &on_failure, &scheduled, false).await?;
        timeline.push((
            "coverage wave, no sweeps".into(),
            at(wave),
            at(Instant::now()),
        ));
    }
    let wave = Instant::now();
    if late > 0 {
        // The second wave meets a sink outage longer than the mapping's
        // retries: its batches go to the OnFailure queue, which the
        // sweeper redrives.
        let from = publisher.tag();
        if let Ok(mut schedule) = publisher_schedule.lock() {
            schedule.outage = Some((from, from + (retries + 2) * lanes as u64));
        }
        requested = requested.merge(workload(config, &writers, first_wave..config.orders).await);
        on_failure_messages +=
            drain(&mut pump, &sweeper, &stack, &on_failure, &scheduled, true).await?;
        timeline.push((
            "second wave, outage beyond the retries".into(),
            at(wave),
            at(Instant::now()),
        ));
    }
    let writer_faults: Vec<Call> = writers.iter().flat_map(|w| w.proxy.journal()).collect();
    drop(writers);

    phases.push(("drain under faults", mark.elapsed()));
    mark = Instant::now();
    // Heal; drain what is left; then a fresh sweeper that takes every
    // pending item, until nothing is pending.
    for sandbox in &publisher.all {
        sandbox.proxy.heal();
    }
    sweeper_proxy.heal();
    pump.run_until_idle().await.map_err(|e| e.to_string())?;
    let pump_stats = pump.stats.clone();
    drop(pump);
    on_failure_messages += deliver_on_failure(&stack, &on_failure, &sweeper).await;
    // Sweeps until nothing is pending, as long as they make progress: at
    // 20,000 orders one sweep clears a few hundred items, so a fixed count
    // of sweeps ended the run with items still pending (551 of them, all
    // going down sweep by sweep). Three sweeps in a row without progress
    // end it; whatever is left then is the verdict's. A sweep without
    // progress is followed by a wait until every pending item is eligible
    // again, as the schedule's next run would be: an item claimed by a
    // sweeper that was killed stays the sweeper's until the claim expires
    // (the function's timeout plus 10 s), and one backing off until its
    // next attempt. Without the wait, the three sweeps fell inside one
    // such claim and the run ended with 6 items pending.
    let mut left = pending_outbox(&stack).await;
    let mut stalled = 0;
    while left.count > 0 && stalled < 3 {
        let _ = sweeper.call(&scheduled).await;
        let now = pending_outbox(&stack).await;
        let progress = now.count < left.count;
        stalled = if progress { 0 } else { stalled + 1 };
        left = now;
        if left.count > 0 {
            let mut pause = Duration::from_millis(1_100);
            if !progress {
                let wait = left.eligible_at.map_or(0, |at| at - unix_now() + 1);
                let wait = Duration::from_secs(wait.clamp(0, 120) as u64);
                pause = pause.max(wait);
            }
            tokio::time::sleep(pause).await;
        }
    }

    phases.push(("heal, drain, final sweep", mark.elapsed()));
    timeline.push((
        "heal, drain, final sweep".into(),
        at(mark),
        at(Instant::now()),
    ));
    sampling.store(false, Ordering::SeqCst);
    let samples = sampler.await.unwrap_or_default();
    // The sink outages, from the publisher's journal: runs of calls whose
    // entries were all refused.
    let run_start = std::time::SystemTime::now() - started.elapsed();
    let since =
        |t: std::time::SystemTime| t.duration_since(run_start).map_or(0.0, |d| d.as_secs_f64());
    let mut outage: Option<(f64, f64)> = None;
    for call in publisher.journal() {
        let refused = matches!(call.fault, Some(Fault::RefuseEntries { .. }));
        match (&mut outage, refused) {
            (Some((_, end)), true) => *end = since(call.at),
            (None, true) => outage = Some((since(call.at), since(call.at))),
            (Some((start, end)), false) => {
                timeline.push(("sink outage".into(), *start, *end));
                outage = None;
            }
            (None, false) => {}
        }
    }
    if let Some((start, end)) = outage {
        timeline.push(("sink outage".into(), start, end));
    }
    write_timeline(config, &samples, &timeline);
    reading.store(false, Ordering::SeqCst);
    let messages = reader.await.map_err(|e| e.to_string())??;
    let functions: Vec<&Tagged> = publisher
        .all
        .iter()
        .chain(std::iter::once(&sweeper))
        .collect();
    let mut verdict = judge(config, &stack, messages, &functions).await?;
    verdict.ordering = ordering.as_str();
    verdict.parallelization = lanes;
    verdict.publisher_overlaps = publisher.overlapping();
    verdict.writer_requests = requested.requests;
    verdict.requests_unanswered = requested.unanswered;
    verdict.requests_refused = requested.refused.clone();
    verdict.expected_kinds = expected_kinds;
    verdict.orders = written;
    verdict.expect_on_failure = config.outage_beyond_retries;
    for call in writer_faults.iter().filter(|c| c.fault.is_some()) {
        let fault = call.fault.as_ref().unwrap_or(&Fault::Pass);
        verdict
            .faults
            .entry(label("writer", &call.operation, fault))
            .or_default()
            .injected += 1;
    }
    // What the API acknowledged must be in the table, and the table holds
    // no order the API did not acknowledge (a retried create that wrote a
    // second order, say).
    let versions = order_versions(&stack).await;
    let created: HashSet<&str> = requested
        .acknowledged
        .iter()
        .filter(|(_, v)| *v == 1)
        .map(|(o, _)| o.as_str())
        .collect();
    for order in versions.keys().filter(|o| !created.contains(o.as_str())) {
        verdict.orders_unacknowledged += 1;
        verdict
            .examples
            .push(format!("in the table, never acknowledged: {order}"));
    }
    for (order, version) in &requested.acknowledged {
        if versions.get(order).copied().unwrap_or(0) < *version {
            verdict.unacknowledged_writes += 1;
            verdict.examples.push(format!(
                "acknowledged but not in the table: {order} v{version}"
            ));
        }
    }
    verdict.writer_retries = requested.retries;
    verdict.publisher_invocations = publisher.tag() - 1;
    verdict.publisher_errors = publisher.errors();
    verdict.sweeper_invocations = sweeper.tag() - 1;
    verdict.sweeper_errors = sweeper.errors.lock().unwrap().len();
    verdict.cold_starts =
        publisher.cold_starts() + sweeper.function.cold_starts.load(Ordering::SeqCst);
    verdict.on_failure_messages = on_failure_messages.max(pump_stats.on_failure_messages);
    verdict.recovery = recovery(
        &publisher.journal(),
        outage_start + outage_invocations,
        &verdict,
    );
    verdict.phases = phases;
    verdict.elapsed = started.elapsed();
    cleanup(&stack, &subscriber.queue_url, &on_failure).await;
    Ok(verdict)
}

/// Deletes the run's table and queues so that the local API's memory stays
/// bounded over many runs.
async fn cleanup(stack: &Stack, subscriber: &str, on_failure: &str) {
    let _ = stack
        .ddb
        .delete_table()
        .table_name(&stack.table)
        .send()
        .await;
    let sqs = aws_sdk_sqs::Client::new(&stack.sdk);
    for queue in [subscriber, on_failure] {
        let _ = sqs.delete_queue().queue_url(queue).send().await;
    }
}

/// Now, in Unix seconds (the unit of `claimedUntil` and `nextAttemptAt`).
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
