//! The sink port: [`EventSink`], what one call says per entry
//! ([`EntryOutcome`], [`PublishFailure`], [`FailureKind`]), and the
//! count of its transmissions ([`SendCounter`]). The adapters (EventBridge,
//! SNS) are the runtime's, and so is `classify`, which tells a service's
//! error codes apart.

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering as AtomicOrdering};
use std::sync::Arc;

use outbox_core::OutboxItem;

/// What kind of failure an entry met.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// Throttling, 5xx, timeouts, dropped connections: worth retrying soon.
    Transient,
    /// The event itself can never be accepted (malformed, too large): retrying
    /// cannot help, so it is dead-lettered instead of blocking its shard.
    Poison,
    /// Neither (a missing bus, a denied permission, an unknown code): the
    /// event is kept and the failure reported; an operator must act.
    Rejected,
}

/// The code of a failure the run's own deadline made (the sink call was
/// cut before its answer).
pub const DEADLINE_REACHED: &str = "DeadlineReached";

/// The code with which the stream publisher reports a record it published
/// but could neither delete nor hand to the scheduled sweep (the stream
/// delivers it again; the next invocation publishes it again and deletes it).
pub const NOT_DELETED: &str = "NotDeleted";

/// Why one entry was not published.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublishFailure {
    /// What kind of failure.
    pub kind: FailureKind,
    /// The service's error code, or a code of ours.
    pub code: String,
    /// A short, sanitized message (no payload).
    pub message: String,
    /// The whole call failed, after the SDK's own retries (crate::aws): the
    /// relay does not retry it again; only failed entries of a call that
    /// succeeded are retried by [`crate::RetryPolicy`].
    pub whole_call: bool,
}

impl PublishFailure {
    /// A failure of one entry (the message cut at 256 bytes).
    pub fn new(kind: FailureKind, code: impl Into<String>, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        if message.len() > 256 {
            let mut cut = 256;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        Self {
            kind,
            code: code.into(),
            message,
            whole_call: false,
        }
    }

    /// The failure of an entry whose sink call the run's own deadline cut
    /// (the sink may have accepted it; its answer never came).
    pub fn deadline_reached() -> Self {
        Self::new(
            FailureKind::Transient,
            DEADLINE_REACHED,
            "the sink did not answer before the deadline",
        )
        .of_whole_call()
    }

    /// Whether the run's own deadline cut the call: not the sink's
    /// answer, so (sweep mode) not an attempt of the event.
    pub fn is_deadline_reached(&self) -> bool {
        self.code == DEADLINE_REACHED
    }

    /// The same failure, for every entry of a call that failed as a whole.
    pub fn of_whole_call(self) -> Self {
        Self {
            whole_call: true,
            ..self
        }
    }
}

impl std::fmt::Display for PublishFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// What a sink says about one entry of a batch.
pub type EntryOutcome = Result<(), PublishFailure>;

/// One outcome per entry from the answers a call gathered, `None` where
/// none came: that entry fails transient with `code` and `message` (sent
/// again, a duplicate at worst).
pub fn answered(
    outcomes: Vec<Option<EntryOutcome>>,
    code: &str,
    message: &str,
) -> Vec<EntryOutcome> {
    outcomes
        .into_iter()
        .map(|o| {
            o.unwrap_or_else(|| Err(PublishFailure::new(FailureKind::Transient, code, message)))
        })
        .collect()
}

/// The sink could not be verified at start-up.
#[derive(Debug, thiserror::Error)]
#[error("event sink {target} is not usable: {reason}")]
pub struct SinkError {
    /// The bus or topic.
    pub target: String,
    /// Why it is not usable.
    pub reason: String,
}

/// The port through which events leave the outbox.
pub trait EventSink: Send + Sync {
    /// Most entries in one call.
    fn max_entries(&self) -> usize;
    /// Most bytes in one call (and in one entry).
    fn max_bytes(&self) -> usize;
    /// The size of `item`'s entry as the service counts it.
    fn entry_size(&self, item: &OutboxItem) -> usize;
    /// Publishes one batch (within the limits above), transmitting it at
    /// most `max_sends` times (the SDK's attempts of the call: a timed-out
    /// attempt the service may have accepted is one send) and counting each
    /// transmission in `sends`. Returns exactly one outcome per item, in
    /// order; a whole-call error fails every entry.
    fn publish_batch(
        &self,
        items: &[&OutboxItem],
        max_sends: u32,
        sends: &SendCounter,
    ) -> impl Future<Output = Vec<EntryOutcome>> + Send;
    /// Checks once, at cold start, that the target exists: some services
    /// report success for a target that does not exist.
    fn verify(&self) -> impl Future<Output = Result<(), SinkError>> + Send;
}

/// Counts the transmissions of sink calls (the SDK's attempts included):
/// the runtime's adapters count through an SDK interceptor
/// (the runtime's `CountSends`), a sink that does not go through the SDK
/// calls [`SendCounter::record`].
#[derive(Debug, Clone, Default)]
pub struct SendCounter(Arc<AtomicU32>);

impl SendCounter {
    /// Attempts transmitted so far.
    pub fn sends(&self) -> u32 {
        self.0.load(AtomicOrdering::SeqCst)
    }

    /// Counts one attempt.
    pub fn record(&self) {
        self.0.fetch_add(1, AtomicOrdering::SeqCst);
    }
}
