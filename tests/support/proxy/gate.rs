//! [`SinkGate`]: the sink calls the proxies send on to moto, held to what
//! one moto process serves.
//!
//! moto serves every request on a thread of its own, one at a time, and
//! walks a queue's messages for each event a rule or a topic sends to it
//! and for each receive and delete; it goes on serving a call whose caller
//! gave up. A sweep sends from every shard at once (40 calls in flight with
//! the template's settings) against one subscriber reader: the queue grows,
//! every call slows past the functions' attempt timeout, the SDK sends
//! again, and moto stops answering (`infra/local/moto_load.py` shows it;
//! docs/reliability.md). Deployed, the sink serves many calls at once and
//! throttles past its quota; the functions see either as a failed attempt.
//!
//! The gate lets a few sink calls through at a time, and none while the
//! subscriber's reader reports its queue backlogged (its last receive came
//! back full). A call whose caller gave up while it was held never reaches
//! moto: it is journaled as delivering nothing, unanswered.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Sink calls in flight to moto at once, through every proxy of a run.
const IN_FLIGHT: usize = 4;

/// Shared by the proxies of a run's publishers and sweeper and by its
/// subscriber reader.
pub struct SinkGate {
    permits: Arc<Semaphore>,
    backlogged: AtomicBool,
}

impl Default for SinkGate {
    fn default() -> Self {
        Self {
            permits: Arc::new(Semaphore::new(IN_FLIGHT)),
            backlogged: AtomicBool::new(false),
        }
    }
}

impl SinkGate {
    /// The reader's word on its queue: `true` when its last receive came
    /// back full (more may be waiting), `false` otherwise, and when it
    /// stops reading.
    pub fn set_backlogged(&self, backlogged: bool) {
        self.backlogged.store(backlogged, Ordering::SeqCst);
    }

    /// Waits until a sink call may go on to moto; the permit is held until
    /// its answer. Calls take permits in the order they came (the
    /// semaphore is fair), and one holding a permit waits out a backlog,
    /// so a call held once does not lose its place to later ones.
    pub(super) async fn admit(&self) -> Option<OwnedSemaphorePermit> {
        let permit = self.permits.clone().acquire_owned().await.ok()?;
        while self.backlogged.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Some(permit)
    }
}
