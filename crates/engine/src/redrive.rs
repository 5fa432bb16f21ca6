//! The operator's `dead-letters redrive --now`, one dead letter at a time:
//! claimed, checked against the older events of its aggregate, published
//! through the relay ([`Mode::Operator`](crate::Mode::Operator)), and its
//! claim given back whatever happened. `outboxctl` calls it; the OnFailure
//! queue's redrive is the sweep's ([`Sweeper::redrive`](crate::Sweeper::redrive)).

use std::time::Duration;

use crate::{
    Claim, DeadLetterRecord, Deadline, Entry, EventSink, Marked, OperatorStore, Ordering,
    PublishStore, Relay, RelayOutcome, RetryPolicy, StoreError,
};

/// How long a `--now` claim holds a dead letter (its holder may die).
pub const REDRIVE_CLAIM_LEASE: Duration = Duration::from_secs(300);

/// What [`redrive_now`] did with one dead letter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RedriveNow {
    /// Published and deleted.
    Published,
    /// No longer a dead letter, or claimed by another `--now`: left alone.
    Gone,
    /// Redriven (due for the next scheduled sweep) instead of published:
    /// an older event of its aggregate is still in the table.
    Waits,
    /// Not published (the failure): it stays a dead letter, the failure
    /// its reason.
    PublishFailed(String),
    /// Published, but its item was not deleted: it stays a dead letter (a
    /// later redrive sends it again).
    NotDeleted,
}

impl RedriveNow {
    /// Whether the operator must act again: not published, or published
    /// and not deleted.
    pub fn failed(&self) -> bool {
        matches!(self, Self::PublishFailed(_) | Self::NotDeleted)
    }
}

/// `--now` for one dead letter: claimed (so that no other path publishes
/// it meanwhile: a claimed dead letter is in no pending index, and another
/// redrive or discard leaves it alone), then published through the relay
/// the publisher and the sweeper use ([`Relay::run_claimed`]), which
/// deletes it once published and otherwise keeps it a dead letter with the
/// failure as its reason. An event whose aggregate has an older event
/// still in the table (pending, held or dead-lettered) is not published
/// now: it is redriven and waits for that one, so an aggregate's events
/// still go out oldest first, whatever `ORDERING` says.
///
/// `budget` bounds the claim, the check, the publish and the release
/// together; the redrive of one that waits gets a budget of its own (it
/// comes after them, and must not fail for their time).
pub async fn redrive_now<S, T>(
    sink: &S,
    store: &T,
    letter: &DeadLetterRecord,
    budget: Duration,
) -> Result<RedriveNow, StoreError>
where
    S: EventSink,
    T: PublishStore + OperatorStore,
{
    let deadline = &Deadline::after(budget);
    let claim = Claim::new(REDRIVE_CLAIM_LEASE);
    let Some(item) = store.claim_dead_letter(letter, &claim, deadline).await? else {
        return Ok(RedriveNow::Gone);
    };
    let key = &letter.key;
    // One read from its own key: itself and the nearest older item.
    let below = store.collection_below(key, 2, deadline).await?;
    if below.about(&key.sk).is_none_or(|g| g.older.is_some()) {
        store.release_claim(key, &claim, None, deadline).await?;
        return Ok(
            match store.redrive(letter, &Deadline::after(budget)).await? {
                Marked::Updated => RedriveNow::Waits,
                Marked::Gone | Marked::Claimed | Marked::Refused => RedriveNow::Gone,
            },
        );
    }
    let relay = Relay {
        sink,
        store,
        retry: &RetryPolicy::default(),
        ordering: Ordering::Relaxed,
        concurrency: 1,
    };
    let report = relay
        .run_claimed(&[Entry::Item(item)], &claim, deadline)
        .await;
    Ok(match report.outcomes.first() {
        Some(RelayOutcome::Published) if report.delete_failed > 0 => RedriveNow::NotDeleted,
        Some(RelayOutcome::Published) => RedriveNow::Published,
        Some(RelayOutcome::Failed(failure)) => RedriveNow::PublishFailed(failure.to_string()),
        other => {
            // Not sent (the deadline): given back as it was.
            store.release_claim(key, &claim, None, deadline).await?;
            RedriveNow::PublishFailed(format!("not sent ({other:?})"))
        }
    })
}
