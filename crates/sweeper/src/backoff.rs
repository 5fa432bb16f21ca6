//! The persisted retry schedule of the sweeper.

use std::time::Duration;

/// Exponential backoff with "equal jitter": the n-th failure waits between
/// half and all of `min(cap, base * 2^(n-1))`, so delays always grow and
/// sweepers never retry in lockstep. With the defaults (1 minute, capped at
/// 6 hours) and 12 attempts, an item gets about 20 hours of retries after it
/// was first found stranded before it is dead-lettered.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    pub base: Duration,
    pub cap: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(60),
            cap: Duration::from_secs(6 * 3600),
        }
    }
}

impl Backoff {
    /// The wait after failed attempt number `attempt` (1-based).
    pub fn delay(&self, attempt: u32) -> Duration {
        let exponent = attempt.saturating_sub(1).min(31);
        let ceiling = self
            .base
            .checked_mul(1u32 << exponent)
            .unwrap_or(self.cap)
            .min(self.cap);
        let half = ceiling / 2;
        half + Duration::from_millis(fastrand::u64(0..=half.as_millis() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_grow_within_bounds() {
        let b = Backoff::default();
        for _ in 0..100 {
            let d1 = b.delay(1);
            assert!(d1 >= Duration::from_secs(30) && d1 <= Duration::from_secs(60));
            let d3 = b.delay(3);
            assert!(d3 >= Duration::from_secs(120) && d3 <= Duration::from_secs(240));
            let d40 = b.delay(40);
            assert!(d40 >= Duration::from_secs(3 * 3600) && d40 <= Duration::from_secs(6 * 3600));
        }
    }
}
