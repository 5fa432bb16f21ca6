//! Exponential backoff with full jitter, bounded by a deadline.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// When the current invocation must have finished its work.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
}

impl Deadline {
    /// A deadline `after` from now.
    pub fn after(after: Duration) -> Self {
        Self {
            at: Instant::now() + after,
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
        Self::after(left.saturating_sub(margin.min(left / 4)))
    }

    /// Time left before the deadline.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Whether `needed` still fits before the deadline.
    pub fn allows(&self, needed: Duration) -> bool {
        self.remaining() > needed
    }
}

/// How often and how patiently a transient failure is retried in-process.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    pub base: Duration,
    pub cap: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_attempts: 4,
            base: Duration::from_millis(50),
            cap: Duration::from_secs(2),
        }
    }
}

impl RetryPolicy {
    /// Full-jitter delay before retry number `retry` (1 for the first retry):
    /// uniform in `[0, min(cap, base * 2^(retry-1))]`.
    pub fn delay(&self, retry: u32) -> Duration {
        jittered(self.base, self.cap, retry.saturating_sub(1))
    }

    /// Sleeps before retry number `retry` if another attempt is allowed and
    /// the delay fits before `deadline`; returns whether to try again.
    pub async fn wait(&self, retry: u32, deadline: &Deadline) -> bool {
        if retry >= self.max_attempts {
            return false;
        }
        let delay = self.delay(retry);
        if !deadline.allows(delay) {
            return false;
        }
        tokio::time::sleep(delay).await;
        true
    }
}

/// `uniform(0, min(cap, base * 2^exponent))`.
pub fn jittered(base: Duration, cap: Duration, exponent: u32) -> Duration {
    let ceiling = base
        .checked_mul(1u32.checked_shl(exponent.min(31)).unwrap_or(u32::MAX))
        .unwrap_or(cap)
        .min(cap);
    let millis = ceiling.as_millis() as u64;
    Duration::from_millis(fastrand::u64(0..=millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_and_are_capped() {
        let p = RetryPolicy {
            max_attempts: 10,
            base: Duration::from_millis(100),
            cap: Duration::from_millis(1_000),
        };
        for _ in 0..200 {
            assert!(p.delay(1) <= Duration::from_millis(100));
            assert!(p.delay(3) <= Duration::from_millis(400));
            assert!(p.delay(30) <= Duration::from_millis(1_000));
        }
    }

    #[tokio::test]
    async fn wait_respects_attempts_and_deadline() {
        let p = RetryPolicy {
            max_attempts: 2,
            base: Duration::from_millis(1),
            cap: Duration::from_millis(1),
        };
        let far = Deadline::after(Duration::from_secs(60));
        assert!(p.wait(1, &far).await);
        assert!(!p.wait(2, &far).await);
        let past = Deadline::after(Duration::ZERO);
        assert!(!p.wait(1, &past).await);
    }

    #[test]
    fn lambda_deadline_keeps_a_margin() {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        let d = Deadline::from_epoch_millis(now_ms + 10_000, Duration::from_secs(2));
        assert!(d.remaining() <= Duration::from_secs(8));
        assert!(d.remaining() > Duration::from_secs(7));
        assert_eq!(
            Deadline::from_epoch_millis(0, Duration::ZERO).remaining(),
            Duration::ZERO
        );
    }
}
