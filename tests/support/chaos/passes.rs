//! The passes of a chaos run: the pump's passes over the stream, each
//! followed by a scheduled sweep and the OnFailure queue fed to the sweeper
//! as an SQS mapping would, and the final sweeps until nothing is pending.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;

use crate::Stack;

use super::faults::{Sandboxes, Tagged};
use super::table::pending_outbox;

/// The sweeper of a run and what its passes feed it: the scheduled event,
/// and the OnFailure queue, whose failed messages come back after
/// `retry_after` (their visibility timeout: longer than a dead sweeper's
/// claim, as deployed).
pub(super) struct Passes<'a> {
    pub(super) stack: &'a Stack,
    pub(super) sweeper: &'a Tagged,
    pub(super) scheduled: &'a [u8],
    pub(super) on_failure: &'a str,
    pub(super) retry_after: Duration,
}

impl Passes<'_> {
    /// Feeds the OnFailure queue to the sweeper the way an SQS mapping
    /// does; returns how many messages it handled.
    async fn deliver_on_failure(&self) -> usize {
        let (queue_url, sweeper) = (self.on_failure, self.sweeper);
        let sqs = aws_sdk_sqs::Client::new(&self.stack.sdk);
        let mut handled = 0;
        for _ in 0..20 {
            let Ok(messages) = outbox_runtime::receive_batch(&sqs, queue_url, 0).await else {
                break;
            };
            if messages.is_empty() {
                break;
            }
            let event = outbox_runtime::batch_event(&messages);
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
                            .visibility_timeout(self.retry_after.as_secs() as i32)
                            .send()
                            .await;
                    }
                    continue;
                }
                if outbox_runtime::delete_message(&sqs, queue_url, m)
                    .await
                    .unwrap_or(false)
                {
                    handled += 1;
                }
            }
        }
        handled
    }

    /// [`Self::deliver_on_failure`] until the queue is empty, waiting for
    /// the messages that failed to come back (at most five deliveries);
    /// returns how many messages it handled.
    pub(super) async fn drain_on_failure(&self) -> usize {
        let sqs = aws_sdk_sqs::Client::new(&self.stack.sdk);
        let mut handled = 0;
        for round in 0..5 {
            handled += self.deliver_on_failure().await;
            if round == 4 {
                break;
            }
            let in_flight = outbox_runtime::queue_depth(&sqs, self.on_failure)
                .await
                .map_or(0, |(_, in_flight)| in_flight);
            if in_flight == 0 {
                break;
            }
            tokio::time::sleep(self.retry_after + Duration::from_secs(1)).await;
        }
        handled
    }

    /// Passes of the pump, each followed by a scheduled sweep (when
    /// `sweep`) and the OnFailure queue fed to the sweeper, until a pass
    /// reads nothing new for the publisher (each sweep writes its settings
    /// record, a record the mapping's filter drops); returns the OnFailure
    /// messages handled.
    pub(super) async fn drain(
        &self,
        pump: &mut devkit::Pump<&Sandboxes>,
        sweep: bool,
    ) -> Result<usize, String> {
        let mut handled = 0;
        for pass in 0.. {
            let read = pump.pass().await.map_err(|e| e.to_string())?;
            if sweep {
                let _ = self.sweeper.call(self.scheduled).await;
            }
            handled += self.deliver_on_failure().await;
            if read == 0 && pass > 0 {
                break;
            }
        }
        Ok(handled)
    }

    /// Sweeps until nothing is pending, as long as they make progress: at
    /// 20,000 orders one sweep clears a few hundred items, so a fixed count
    /// of sweeps ended the run with items still pending (551 of them, all
    /// going down sweep by sweep). Three sweeps in a row without progress
    /// end it; whatever is left then is the verdict's. A sweep without
    /// progress is followed by a wait until every pending item is eligible
    /// again, as the schedule's next run would be: an item claimed by a
    /// sweeper that was killed stays the sweeper's until the claim expires
    /// (the function's timeout plus 10 s), and one backing off until its
    /// next attempt. Without the wait, the three sweeps fell inside one
    /// such claim and the run ended with 6 items pending.
    ///
    /// The wait is at most the longest a claim lives (`retry_after`: the
    /// sweeper's timeout plus 13 s), or 120 s when that is shorter; a
    /// backoff longer than that ends the run with its item pending.
    pub(super) async fn sweep_until_settled(&self) {
        let longest = self.retry_after.max(Duration::from_secs(120));
        let mut left = pending_outbox(self.stack).await;
        let mut stalled = 0;
        while left.count > 0 && stalled < 3 {
            let _ = self.sweeper.call(self.scheduled).await;
            let now = pending_outbox(self.stack).await;
            let progress = now.count < left.count;
            stalled = if progress { 0 } else { stalled + 1 };
            left = now;
            if left.count > 0 {
                let mut pause = Duration::from_millis(1_100);
                if !progress {
                    let wait = left.eligible_at.map_or(0, |at| at - unix_now() + 1);
                    let wait = Duration::from_secs(wait.max(0) as u64).min(longest);
                    pause = pause.max(wait);
                }
                tokio::time::sleep(pause).await;
            }
        }
    }
}

/// Now, in Unix seconds (the unit of `claimedUntil` and `nextAttemptAt`).
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}
