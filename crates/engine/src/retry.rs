//! Retrying: the one backoff type, the Lambda deadline that bounds every
//! call, and the one classification of error codes worth retrying.
//!
//! [`Backoff`] serves both the in-call retries of the publishing module
//! (`Backoff::IN_CALL`: milliseconds, full jitter) and the sweeper's
//! persisted schedule ([`Backoff::PERSISTED`]: minutes to hours, equal
//! jitter). [`Deadline::bound`] cuts any call that would outlive the
//! invocation, so a hung request ends in a normal response, not a timeout.

use std::future::Future;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// When the current invocation must have finished its work, and when it
/// must have finished altogether (Lambda's own deadline).
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    hard: Option<Instant>,
}

impl Deadline {
    /// A deadline `after` from now (no hard limit beyond it).
    pub fn after(after: Duration) -> Self {
        Self {
            at: Instant::now() + after,
            hard: None,
        }
    }

    /// The Lambda deadline (epoch milliseconds, as in the invocation context)
    /// less a safety margin for the work that follows (deletes, the
    /// response). The margin is at most a quarter of the time left, so a
    /// short function timeout still leaves time to work.
    ///
    /// `cargo lambda watch` (1.9) sends the function timeout itself (e.g.
    /// `600000`) instead of an epoch time; a value before 2001 is read as
    /// that: milliseconds from now.
    pub fn from_epoch_millis(deadline_ms: u64, margin: Duration) -> Self {
        const EPOCH_2001_MS: u64 = 978_307_200_000;
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let left = if deadline_ms < EPOCH_2001_MS {
            Duration::from_millis(deadline_ms)
        } else {
            Duration::from_millis(deadline_ms.saturating_sub(now_ms))
        };
        let now = Instant::now();
        Self {
            at: now + left.saturating_sub(margin.min(left / 4)),
            // A little before Lambda's deadline: the response still has to go.
            hard: Some(now + left.saturating_sub(Duration::from_millis(200))),
        }
    }

    /// The deadline for the work that must follow work already done
    /// (deletes, bookkeeping): `grace` later, never past the hard limit.
    pub(crate) fn finishing(&self, grace: Duration) -> Self {
        let at = self.at.max(Instant::now()) + grace;
        Self {
            at: self.hard.map_or(at, |hard| at.min(hard)),
            hard: self.hard,
        }
    }

    /// This deadline brought forward by `by` (time kept for what follows).
    pub fn shortened(&self, by: Duration) -> Self {
        Self {
            at: Instant::now() + self.remaining().saturating_sub(by),
            hard: self.hard,
        }
    }

    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Whether `needed` still fits before the deadline.
    pub fn allows(&self, needed: Duration) -> bool {
        self.remaining() > needed
    }

    /// Runs `call` until it finishes or the deadline passes, whichever comes
    /// first; `None` when the deadline cut it (the request is dropped).
    pub async fn bound<F: Future>(&self, call: F) -> Option<F::Output> {
        tokio::time::timeout(self.remaining(), call).await.ok()
    }
}

/// How a delay is drawn below its exponential ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Jitter {
    /// Uniform in `[0, ceiling]`: the least contention for in-call retries.
    Full,
    /// Uniform in `[ceiling / 2, ceiling]`: delays always grow, and
    /// sweepers never retry in lockstep.
    Equal,
}

/// Exponential backoff: the delay after failed attempt `n` (1-based) is
/// drawn below `min(cap, base * 2^(n-1))`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// The first delay's ceiling.
    pub base: Duration,
    /// The largest delay.
    pub cap: Duration,
    /// How a delay is drawn below its ceiling.
    pub jitter: Jitter,
}

impl Backoff {
    /// Retries inside one invocation: 50 ms doubling to 2 s, full jitter.
    pub(crate) const IN_CALL: Self = Self {
        base: Duration::from_millis(50),
        cap: Duration::from_secs(2),
        jitter: Jitter::Full,
    };

    /// The sweeper's persisted schedule: 1 minute doubling to 6 hours, equal
    /// jitter. With 12 attempts an item gets about 20 hours of retries after
    /// it was first found stranded before it is dead-lettered.
    pub const PERSISTED: Self = Self {
        base: Duration::from_secs(60),
        cap: Duration::from_secs(6 * 3600),
        jitter: Jitter::Equal,
    };

    /// The largest delay after failed attempt `attempt` (1-based).
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(31);
        self.base
            .checked_mul(1u32 << exponent)
            .unwrap_or(self.cap)
            .min(self.cap)
    }

    /// The delay after failed attempt `attempt` (1-based), jittered.
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let ceiling = self.ceiling(attempt);
        let floor = match self.jitter {
            Jitter::Full => Duration::ZERO,
            Jitter::Equal => ceiling / 2,
        };
        let spread = ceiling.saturating_sub(floor).as_millis() as u64;
        floor + Duration::from_millis(fastrand::u64(0..=spread))
    }
}

/// How often and how patiently a transient failure is retried in-process.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The delays between attempts.
    pub backoff: Backoff,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            backoff: Backoff::IN_CALL,
        }
    }
}

impl RetryPolicy {
    /// Sleeps before retry number `retry` (1 for the first retry) if another
    /// attempt is allowed and the delay fits before `deadline`; returns
    /// whether to try again.
    pub async fn wait(&self, retry: u32, deadline: &Deadline) -> bool {
        if retry >= self.max_attempts {
            return false;
        }
        let delay = self.backoff.delay(retry);
        if !deadline.allows(delay + self.backoff.base) {
            return false;
        }
        tokio::time::sleep(delay).await;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now_ms() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    }

    #[test]
    fn in_call_delays_grow_and_are_capped() {
        let b = Backoff {
            base: Duration::from_millis(100),
            cap: Duration::from_millis(1_000),
            jitter: Jitter::Full,
        };
        for _ in 0..200 {
            assert!(b.delay(1) <= Duration::from_millis(100));
            assert!(b.delay(3) <= Duration::from_millis(400));
            assert!(b.delay(30) <= Duration::from_millis(1_000));
        }
    }

    #[test]
    fn persisted_delays_grow_within_bounds() {
        let b = Backoff::PERSISTED;
        for _ in 0..100 {
            let d1 = b.delay(1);
            assert!(d1 >= Duration::from_secs(30) && d1 <= Duration::from_secs(60));
            let d3 = b.delay(3);
            assert!(d3 >= Duration::from_secs(120) && d3 <= Duration::from_secs(240));
            let d40 = b.delay(40);
            assert!(d40 >= Duration::from_secs(3 * 3600) && d40 <= Duration::from_secs(6 * 3600));
        }
    }

    #[tokio::test]
    async fn wait_respects_attempts_and_deadline() {
        let p = RetryPolicy {
            max_attempts: 2,
            backoff: Backoff {
                base: Duration::from_millis(1),
                cap: Duration::from_millis(1),
                jitter: Jitter::Full,
            },
        };
        let far = Deadline::after(Duration::from_secs(60));
        assert!(p.wait(1, &far).await);
        assert!(!p.wait(2, &far).await);
        let past = Deadline::after(Duration::ZERO);
        assert!(!p.wait(1, &past).await);
    }

    #[tokio::test]
    async fn bound_cuts_a_call_that_never_ends() {
        let d = Deadline::after(Duration::from_millis(20));
        assert_eq!(d.bound(std::future::pending::<()>()).await, None);
        assert_eq!(d.bound(async { 7 }).await, Some(7));
    }

    #[test]
    fn lambda_deadline_keeps_a_margin() {
        let d = Deadline::from_epoch_millis(now_ms() + 10_000, Duration::from_secs(2));
        assert!(d.remaining() <= Duration::from_secs(8));
        assert!(d.remaining() > Duration::from_secs(7));
        let past = Deadline::from_epoch_millis(0, Duration::ZERO);
        assert_eq!(past.remaining(), Duration::ZERO);
    }

    #[test]
    fn finishing_never_passes_lambdas_deadline() {
        // 4 s left: the margin is 1 s, the grace of 2 s is capped at 3.8 s.
        let d = Deadline::from_epoch_millis(now_ms() + 4_000, Duration::from_secs(3));
        let finish = d.finishing(Duration::from_secs(2));
        assert!(finish.remaining() <= Duration::from_millis(3_800));
        assert!(finish.remaining() > d.remaining());
        // Without a Lambda deadline the grace is whole.
        let d = Deadline::after(Duration::from_secs(1));
        assert!(d.finishing(Duration::from_secs(2)).remaining() > Duration::from_millis(2_900));
        assert!(d.shortened(Duration::from_secs(5)).remaining() == Duration::ZERO);
    }
}
