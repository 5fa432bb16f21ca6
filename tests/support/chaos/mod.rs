//! The chaos run: the real `writer`, `publisher` and `sweeper` binaries
//! under a local Lambda Runtime API ([`crate::lambda`]), the mapping
//! emulator with the template's settings, and each function's AWS calls
//! through its own fault proxy ([`crate::proxy`]) in front of DynamoDB Local and moto.
//!
//! [`run`] wires the parts together (each module says what it holds);
//! its [`Verdict`] is computed from the subscriber queue and the table,
//! never from the functions' logs, with every duplicate attributed to the
//! fault that caused it ([`Verdict::failures`] lists what breaks a
//! promise).
//!
//! Every fault decision comes from one seeded generator per proxy, in call
//! order: the same seed gives the same faults at the same call positions.
//! The writers run concurrently, so the stream's order (which event sits
//! where in a batch) is up to the scheduler.

mod attribution;
mod delivery;
mod faults;
mod functions;
mod judge;
mod passes;
mod table;
mod timeline;
mod verdict;
mod workload;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::lambda::binary;
use crate::proxy::{Call, Sabotage};
use crate::Stack;

use attribution::Histories;
use delivery::read_subscriber;
pub use delivery::{in_delivery_order, inversions};
use faults::{Schedule, Tagged};
use judge::{judge, judge_on_failure, judge_writes, recovery};
use passes::Passes;
use timeline::{sample_backlog, sink_outages, write_timeline, Phase};
pub use verdict::{FaultRow, Verdict};
use workload::workload;

/// The sink a run publishes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkKind {
    /// EventBridge bus → rule → SQS queue.
    EventBridge,
    /// SNS FIFO topic → SQS FIFO queue (order per aggregate is checked).
    SnsFifo,
    /// Custom Event Bus (`devkit::LocalBus`) → FIFO subscriber → SQS FIFO
    /// queue (order per aggregate is checked; the bus drops a resend of
    /// an event id within 5 minutes).
    CustomBus,
}

impl SinkKind {
    /// The sink's name in the tables and file names.
    pub fn name(self) -> &'static str {
        match self {
            Self::EventBridge => "eventbridge",
            Self::SnsFifo => "sns-fifo",
            Self::CustomBus => "eventbridge-bus",
        }
    }

    /// Every sink, in the order the runs take them.
    pub const ALL: [SinkKind; 3] = [Self::EventBridge, Self::SnsFifo, Self::CustomBus];
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
    /// Every fault kind once, early, on each function (the small runs);
    /// off, only `fault_rate`'s faults (a sabotage run that needs none).
    pub scripted: bool,
    /// The functions' timeout; `None`: each function's own in the
    /// templates (writer 30 s, publisher 60 s, sweeper 300 s), as
    /// `make chaos` runs. The small runs of `make test` set 6 s: a sweeper
    /// killed mid-run keeps its claims for its timeout plus 12 s, and a
    /// failed OnFailure message comes back after it, so the template's
    /// 300 s would add minutes of waiting to each small run.
    pub timeout: Option<Duration>,
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
    pub ordering: Option<outbox_engine::Ordering>,
    /// Other template parameters than the defaults (name, value): a run
    /// that sets one says why.
    pub parameters: Vec<(String, String)>,
    /// Large events (#66): orders whose one event, of `LARGE_EVENT_BYTES`,
    /// a service writes through the claim check (the Rust writer's
    /// `send_with_payloads`, its object in a bucket on moto given as the
    /// stack's `PayloadBucket`) beside the API's orders: each must be
    /// delivered whole, like any other event. Their S3 reads are not
    /// faulted; the sink and delete faults reach them as any event.
    pub large: usize,
}

/// The envelope bytes of a chaos run's large event: over the item's
/// claim-check threshold, within the bus's 1 MB, so published whole.
pub const LARGE_EVENT_BYTES: usize = 500 * 1000;

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
            scripted: true,
            timeout: Some(Duration::from_secs(6)),
            log_dir: crate::root().join("target").join("chaos"),
            sample_every: Duration::from_secs(1),
            parallelization: 1,
            ordering: None,
            parameters: Vec::new(),
            large: 0,
        }
    }
}

/// One chaos run: provisions a fresh stack, creates and pays orders
/// concurrently through the writer (faults and writer crashes on its
/// transactions; clients retry with their `Idempotency-Key`), drains the
/// stream through the publisher (wire faults, a sink outage, `SIGKILL`s
/// around the sink call and the deletes), runs the scheduled sweeper and
/// feeds it the OnFailure queue (killed mid-sweep too), then heals every
/// fault, drains again and sweeps until nothing is pending. `Err` only
/// when the harness itself cannot run.
pub async fn run(config: &ChaosConfig) -> Result<Verdict, String> {
    let started = Instant::now();
    std::fs::create_dir_all(&config.log_dir).map_err(|e| e.to_string())?;
    let binaries = (binary("writer")?, binary("publisher")?, binary("sweeper")?);
    let mut stack = Stack::new().await;
    // The local Custom Event Bus lives as long as the run.
    let mut local_bus = None;
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
                crate::create_fifo_topic(&stack.sdk, &crate::unique("chaos-events"))
                    .await
                    .map_err(|e| e.to_string())?;
            stack.use_topic(&topic).await;
            subscriber
        }
        SinkKind::CustomBus => {
            let bus = devkit::LocalBus::start(&stack.sdk)
                .await
                .map_err(|e| e.to_string())?;
            let (_, subscriber) = stack.use_custom_bus(&bus).await;
            local_bus = Some(bus);
            subscriber
        }
    };
    let bus_endpoint = local_bus.as_ref().map(|b| b.endpoint().to_owned());
    let bus_endpoint = bus_endpoint.as_deref();
    // The templates' defaults, but for what the run is asked to set:
    // - `PublisherParallelizationFactor` (`parallelization` above 1): Lambda
    //   then invokes lanes of one stream shard at once and keeps order per
    //   item only, and every event is its own item, so an aggregate's events
    //   go out from concurrent invocations: the run shows what each ordering
    //   promises when they do (`make chaos` runs at 2; the template's 1
    //   leaves the lanes out);
    // - `Ordering` (`ordering`): strict on EventBridge too, whose default is
    //   relaxed, so that the verdict judges order per aggregate there.
    let factor = config.parallelization.to_string();
    let parameters = (config.parallelization != 1)
        .then_some(("PublisherParallelizationFactor", factor.as_str()))
        .into_iter()
        .chain(config.ordering.map(|o| ("Ordering", o.as_str())))
        .chain(
            config
                .parameters
                .iter()
                .map(|(n, v)| (n.as_str(), v.as_str())),
        );
    for (name, value) in parameters {
        stack.deployment = stack.deployment.clone().with_parameter(name, value);
    }
    // Large events: a bucket of the run's own as the stack's PayloadBucket.
    let s3 = aws_sdk_s3::Client::new(&stack.sdk);
    if config.large > 0 {
        let bucket = crate::unique("chaos-payloads").to_lowercase();
        s3.create_bucket()
            .bucket(&bucket)
            .send()
            .await
            .map_err(|e| outbox_runtime::error_line("CreateBucket", &e))?;
        stack.deployment = stack
            .deployment
            .clone()
            .with_parameter("PayloadBucket", &bucket);
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
    let setup = |function: devkit::Function| -> Result<functions::Setup, String> {
        let mut env = stack.env(function, &[]);
        env.push(("RETRY_BASE_SECONDS".to_owned(), "1".to_owned()));
        let timeout = match config.timeout {
            Some(timeout) => timeout,
            None => stack
                .deployment
                .timeout(function)
                .map_err(|e| e.to_string())?,
        };
        Ok((env, timeout))
    };

    // Writers: each its own proxy (a crash kills the writer that called).
    let writers = functions::writers(config, &binaries.0, &setup(devkit::Function::Writer)?).await;
    for i in 0..config.poison {
        stack
            .put_poison(&format!("poison-{}-{i}", config.seed), Some("not json"))
            .await;
    }
    // The subscriber's queue, read all along (a short queue keeps the local
    // SQS fast on big runs); the publishers' and the sweeper's sink calls
    // go on to moto only as the gate lets them, kept to what one moto
    // process serves (proxy/gate.rs).
    let reading = Arc::new(AtomicBool::new(true));
    let gate = Arc::new(crate::proxy::SinkGate::default());
    let reader = tokio::spawn(read_subscriber(
        aws_sdk_sqs::Client::new(&stack.sdk),
        subscriber.queue_url.clone(),
        reading.clone(),
        gate.clone(),
    ));
    let mut phases = Vec::new();
    let mut mark = Instant::now();
    let mut timeline: Vec<Phase> = Vec::new();
    let at = |instant: Instant| instant.duration_since(started).as_secs_f64();
    let since =
        |name: &str, from: Instant| -> Phase { (name.into(), at(from), at(Instant::now())) };
    let sampling = Arc::new(AtomicBool::new(true));
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
    let requested = requested.merge(workload::large_events(config, &stack, &s3).await?);
    phases.push(("writes", mark.elapsed()));
    timeline.push(since("writes", mark));
    mark = Instant::now();

    let mut rng = fastrand::Rng::with_seed(config.seed);
    let outage_start = rng.u64(2..6);
    // Outages are counted in publisher invocations, which the lanes share:
    // as many again per lane, so that each lane meets about as many.
    let outage_invocations = config.outage_invocations * lanes as u64;
    let retries = mapping.maximum_retry_attempts.max(0) as u64;
    let schedule =
        |function, seed| Schedule::new(seed, config.fault_rate).scripted(function, config.scripted);
    let publisher_schedule = schedule("publisher", config.seed.wrapping_add(1));
    let sweeper_schedule = schedule("sweeper", config.seed.wrapping_add(2));
    let expected_kinds: Vec<String> = publisher_schedule
        .kinds("publisher")
        .into_iter()
        .chain(sweeper_schedule.kinds("sweeper"))
        .chain(schedule("writer", 0).kinds("writer"))
        .collect();
    let publisher_schedule = Arc::new(Mutex::new(Schedule {
        outage: Some((outage_start, outage_start + outage_invocations)),
        hangs: config.hangs,
        ..publisher_schedule
    }));
    let publisher = functions::publishers(
        config,
        (lanes, bus_endpoint),
        &binaries.1,
        &setup(devkit::Function::Publisher)?,
        &publisher_schedule,
    )
    .await;
    let sweeper_setup = setup(devkit::Function::Sweeper)?;
    let sweeper = functions::sweeper(
        config,
        (&binaries.2, bus_endpoint),
        &sweeper_setup,
        sweeper_schedule,
    )
    .await;
    let functions: Vec<&Tagged> = publisher.all.iter().chain([&sweeper]).collect();
    for function in &functions {
        function.proxy.set_sink_gate(gate.clone());
    }

    // Drain the stream under faults, sweeping between passes.
    let scheduled = crate::sample("sweeper-scheduled.json").into_bytes();
    let passes = Passes {
        stack: &stack,
        sweeper: &sweeper,
        scheduled: &scheduled,
        on_failure: &on_failure,
        // A failed OnFailure message's visibility timeout: past the claim
        // of a sweeper run that died (its deadline plus the relay's 2 s
        // grace and the claim's 10 s margin, in whole seconds). Deployed it
        // is six times the timeout at least (E9107).
        retry_after: sweeper_setup.1 + Duration::from_secs(13),
    };
    let mut pump = stack.pump(&publisher, Some(&on_failure));
    let mut on_failure_messages = passes.drain(&mut pump, true).await?;
    timeline.push(since("drain under faults", mark));
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
        on_failure_messages += passes.drain(&mut pump, false).await?;
        timeline.push(since("coverage wave, no sweeps", wave));
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
        on_failure_messages += passes.drain(&mut pump, true).await?;
        timeline.push(since("second wave, outage beyond the retries", wave));
    }
    let writer_faults: Vec<Call> = writers.iter().flat_map(|w| w.proxy.journal()).collect();
    drop(writers);

    phases.push(("drain under faults", mark.elapsed()));
    mark = Instant::now();
    // Heal; drain what is left; then a fresh sweeper that takes every
    // pending item, until nothing is pending.
    for function in &functions {
        function.proxy.heal();
    }
    pump.run_until_idle().await.map_err(|e| e.to_string())?;
    for function in &functions {
        function.proxy.settled().await;
    }
    let pump_stats = pump.stats.clone();
    drop(pump);
    on_failure_messages += passes.drain_on_failure().await;
    passes.sweep_until_settled().await;
    sweeper.proxy.settled().await;

    phases.push(("heal, drain, final sweep", mark.elapsed()));
    timeline.push(since("heal, drain, final sweep", mark));
    // What the bus accepted reaches the subscriber before the reading stops.
    // (A pass stops at a failed send, which the next one retries.)
    if let Some(bus) = &local_bus {
        let mut settled = false;
        for _ in 0..20 {
            settled = bus.settle().await;
            if settled {
                break;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if !settled {
            return Err("the local bus did not deliver what it accepted".into());
        }
    }
    sampling.store(false, Ordering::SeqCst);
    let samples = sampler.await.unwrap_or_default();
    timeline.extend(sink_outages(&publisher.journal(), started));
    write_timeline(config, &samples, &timeline);
    reading.store(false, Ordering::SeqCst);
    let messages = reader.await.map_err(|e| e.to_string())??;
    // Each delivered event's aggregate and version (the OnFailure check
    // reads strict ordering's release from them).
    let events: HashMap<String, (String, u64)> = messages
        .iter()
        .filter_map(|m| delivery::received(config.sink, m))
        .map(|r| (r.event_id, (r.aggregate, r.version)))
        .collect();
    let history = Histories::of(&functions);
    // The table as the run left it.
    let items = stack.items().await;
    let mut verdict = judge(config, &stack, &items, messages, &history).await?;
    verdict.ordering = ordering.as_str();
    verdict.parallelization = lanes;
    verdict.publisher_overlaps = publisher.overlapping();
    verdict.writer_requests = requested.requests;
    verdict.requests_unanswered = requested.unanswered;
    verdict.requests_refused = requested.refused.clone();
    verdict.expected_kinds = expected_kinds;
    verdict.orders = written;
    verdict.expect_on_failure = config.outage_beyond_retries;
    judge_writes(&mut verdict, &items, &requested, &writer_faults);
    verdict.writer_retries = requested.retries;
    verdict.publisher_invocations = publisher.tag() - 1;
    let errors = |name: &str| -> usize {
        let of = history.of.iter().filter(|h| h.name == name);
        of.map(|h| h.errors.len()).sum()
    };
    verdict.publisher_errors = errors("publisher");
    verdict.sweeper_invocations = sweeper.tag() - 1;
    verdict.sweeper_errors = errors("sweeper");
    let cold_starts = functions
        .iter()
        .map(|t| t.function.cold_starts.load(Ordering::SeqCst));
    verdict.cold_starts = cold_starts.sum();
    verdict.on_failure_messages = on_failure_messages;
    judge_on_failure(
        &mut verdict,
        &items,
        &history,
        &pump_stats.given_up,
        &events,
        ordering == outbox_engine::Ordering::Strict,
    );
    let outage = outage_start..outage_start + outage_invocations;
    verdict.recovery = recovery(
        &publisher.journal(),
        outage.end,
        &publisher.events_of(outage.clone()),
    );
    verdict.phases = phases;
    verdict.elapsed = started.elapsed();
    verdict.bus_deduplicated = local_bus.as_ref().map(|b| b.stats().deduplicated);
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
