//! [`FakeSink`]: the one configurable [`EventSink`] for unit tests, benches
//! and tests of other crates (feature `testing`): a sink's limits (its own
//! defaults, or a real sink's), scripted failures, a call that never
//! answers, a check that calls in flight together never share an
//! aggregate, several transmissions per call, a store's item count seen at
//! each call, and a hook run before each answer. It records every call.
//! Adapters are tested against the local AWS API, never this.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};

use futures::future::BoxFuture;
use outbox_core::OutboxItem;

use crate::MemoryStore;
use crate::SendCounter;
use crate::{EntryOutcome, EventSink, FailureKind, PublishFailure, SinkError};

/// The size of an entry as a sink counts it.
type EntrySize = Box<dyn Fn(&OutboxItem) -> usize + Send + Sync>;

/// What runs before a call answers.
type Hook = Box<dyn for<'a> Fn(&'a [&'a OutboxItem]) -> BoxFuture<'a, ()> + Send + Sync>;

/// An [`EventSink`] whose answers a test decides. [`FakeSink::new`] takes
/// at most 10 entries and 256 KiB a call, counts an entry as its
/// envelope's length, and accepts every entry at once; the builder
/// methods change that.
pub struct FakeSink {
    max_entries: usize,
    max_bytes: usize,
    entry_size: EntrySize,
    /// Event type, failure, how many more times it fails.
    script: Mutex<Vec<(String, PublishFailure, u32)>>,
    /// The failure of every entry no scripted failure matches.
    fail_all: Option<PublishFailure>,
    hang: bool,
    sends_per_call: u32,
    record: bool,
    calls: Mutex<Vec<Vec<String>>>,
    watch: Option<&'static MemoryStore>,
    stored: Mutex<Vec<usize>>,
    overlap: bool,
    /// The aggregates of the calls in flight, and the most calls in flight
    /// at once.
    in_flight: Mutex<(Vec<HashSet<String>>, usize)>,
    before_answer: Option<Hook>,
    /// With [`FakeSink::keep_items`]: every item sent, as it was sent.
    kept: Option<Mutex<Vec<OutboxItem>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Default for FakeSink {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeSink {
    /// At most 10 entries and 256 KiB a call (EventBridge's limits), an
    /// entry counted as its envelope's length; every entry accepted.
    pub fn new() -> Self {
        Self {
            max_entries: 10,
            max_bytes: 256 * 1024,
            entry_size: Box::new(|item| item.envelope.len()),
            script: Mutex::new(Vec::new()),
            fail_all: None,
            hang: false,
            sends_per_call: 1,
            record: true,
            calls: Mutex::new(Vec::new()),
            watch: None,
            stored: Mutex::new(Vec::new()),
            overlap: false,
            in_flight: Mutex::new((Vec::new(), 0)),
            before_answer: None,
            kept: None,
        }
    }

    /// The limits and entry sizes of `sink` (a real adapter, never called):
    /// the batches the relay makes for it, without its service.
    pub fn like<S: EventSink + 'static>(sink: S) -> Self {
        Self {
            max_entries: sink.max_entries(),
            max_bytes: sink.max_bytes(),
            entry_size: Box::new(move |item| sink.entry_size(item)),
            ..Self::new()
        }
    }

    /// At most `max_bytes` a call (and an entry).
    pub fn with_max_bytes(self, max_bytes: usize) -> Self {
        Self { max_bytes, ..self }
    }

    /// Fails the next `times` entries of type `event_type` with a failure
    /// of `kind` (code `Scripted`); the entries after them are accepted.
    pub fn fail(self, event_type: &str, kind: FailureKind, times: u32) -> Self {
        lock(&self.script).push((
            event_type.to_owned(),
            PublishFailure::new(kind, "Scripted", "scripted failure"),
            times,
        ));
        self
    }

    /// Fails every entry that no [`FakeSink::fail`] matches with `failure`.
    pub fn fail_all(self, failure: PublishFailure) -> Self {
        Self {
            fail_all: Some(failure),
            ..self
        }
    }

    /// Never answers: each call is recorded, then waits for ever (for the
    /// caller's deadline to cut it).
    pub fn hang(self) -> Self {
        Self { hang: true, ..self }
    }

    /// Counts `sends` transmissions per call (an SDK that retries a
    /// timed-out attempt the service may have accepted).
    pub fn sends_per_call(self, sends: u32) -> Self {
        Self {
            sends_per_call: sends,
            ..self
        }
    }

    /// Records, at the start of each call, how many items `store` holds
    /// (read with [`FakeSink::stored`]).
    pub fn watch(self, store: &'static MemoryStore) -> Self {
        Self {
            watch: Some(store),
            ..self
        }
    }

    /// Yields once inside each call, so that calls made together overlap,
    /// and checks that no two calls in flight carry one aggregate (read
    /// the most in flight at once with [`FakeSink::most_in_flight`]).
    ///
    /// # Panics
    /// A call panics when another call in flight carries one of its
    /// aggregates.
    pub fn overlapping(self) -> Self {
        Self {
            overlap: true,
            ..self
        }
    }

    /// Runs `hook` on each call's entries before it answers (after its
    /// transmissions are counted and its overlap checked): another process
    /// acting meanwhile, or the work a real sink does.
    pub fn before_answer<F>(self, hook: F) -> Self
    where
        F: for<'a> Fn(&'a [&'a OutboxItem]) -> BoxFuture<'a, ()> + Send + Sync + 'static,
    {
        Self {
            before_answer: Some(Box::new(hook)),
            ..self
        }
    }

    /// Records no calls (a bench that calls it millions of times).
    pub fn quiet(self) -> Self {
        Self {
            record: false,
            ..self
        }
    }

    /// Keeps a copy of every item sent ([`FakeSink::kept`]).
    pub fn keep_items(self) -> Self {
        Self {
            kept: Some(Mutex::new(Vec::new())),
            ..self
        }
    }

    /// Every item sent so far, as it was sent (with [`FakeSink::keep_items`]).
    pub fn kept(&self) -> Vec<OutboxItem> {
        self.kept
            .as_ref()
            .map(|k| lock(k).clone())
            .unwrap_or_default()
    }

    /// The event types of each call so far, in order.
    pub fn calls(&self) -> Vec<Vec<String>> {
        lock(&self.calls).clone()
    }

    /// The watched store's item count at the start of each call.
    pub fn stored(&self) -> Vec<usize> {
        lock(&self.stored).clone()
    }

    /// The most calls in flight at once (with [`FakeSink::overlapping`]).
    pub fn most_in_flight(&self) -> usize {
        lock(&self.in_flight).1
    }

    /// Holds the call of `aggregates` in flight while it yields once.
    async fn hold_in_flight(&self, aggregates: HashSet<String>) {
        {
            let mut flight = lock(&self.in_flight);
            for other in &flight.0 {
                assert!(
                    other.is_disjoint(&aggregates),
                    "two calls in flight carry one aggregate"
                );
            }
            flight.0.push(aggregates.clone());
            flight.1 = flight.1.max(flight.0.len());
        }
        tokio::task::yield_now().await;
        lock(&self.in_flight).0.retain(|a| *a != aggregates);
    }

    /// The answer for each entry: the first scripted failure of its type
    /// with failures left, or the failure of all, or accepted.
    fn answer(&self, items: &[&OutboxItem]) -> Vec<EntryOutcome> {
        let mut script = lock(&self.script);
        items
            .iter()
            .map(|item| {
                for (event_type, failure, times) in script.iter_mut() {
                    if *event_type == item.event_type && *times > 0 {
                        *times -= 1;
                        return Err(failure.clone());
                    }
                }
                match &self.fail_all {
                    Some(failure) => Err(failure.clone()),
                    None => Ok(()),
                }
            })
            .collect()
    }
}

impl EventSink for FakeSink {
    fn max_entries(&self) -> usize {
        self.max_entries
    }

    fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    fn entry_size(&self, item: &OutboxItem) -> usize {
        (self.entry_size)(item)
    }

    async fn publish_batch(
        &self,
        items: &[&OutboxItem],
        _max_sends: u32,
        sends: &SendCounter,
    ) -> Vec<EntryOutcome> {
        for _ in 0..self.sends_per_call {
            sends.record();
        }
        if self.record {
            lock(&self.calls).push(items.iter().map(|i| i.event_type.clone()).collect());
        }
        if let Some(kept) = &self.kept {
            lock(kept).extend(items.iter().map(|i| (*i).clone()));
        }
        if let Some(store) = self.watch {
            lock(&self.stored).push(store.items().len());
        }
        if self.hang {
            std::future::pending::<()>().await;
        }
        if self.overlap {
            self.hold_in_flight(items.iter().map(|i| i.aggregate_id.clone()).collect())
                .await;
        }
        if let Some(hook) = &self.before_answer {
            hook(items).await;
        }
        self.answer(items)
    }

    async fn verify(&self) -> Result<(), SinkError> {
        Ok(())
    }
}
