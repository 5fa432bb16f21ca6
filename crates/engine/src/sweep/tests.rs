//! Unit tests of the sweep's helpers.

use super::*;

#[test]
fn floor_and_ceiling_bracket_a_millisecond() {
    let at = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
    let older = Ulid::from_parts(1_800_000_000_000 - 1, u128::MAX);
    let same_ms = Ulid::from_parts(1_800_000_000_000, 1);
    let newer = Ulid::from_parts(1_800_000_000_001, 0);
    assert!(older < ulid_floor(at) && ulid_floor(at) < same_ms);
    assert!(same_ms < ulid_ceiling(at) && ulid_ceiling(at) < newer);
    let before_the_epoch = OffsetDateTime::UNIX_EPOCH - time::Duration::days(1);
    assert_eq!(ulid_floor(before_the_epoch), Ulid::from_parts(0, 0));
}

/// Settings for the unit tests: the functions' defaults where a test
/// reads them (the OnFailure window's lead and lag).
pub(crate) fn settings() -> SweepSettings {
    SweepSettings {
        stranded_after: Duration::from_secs(86_400),
        max_attempts: 10,
        page_size: 100,
        backoff: Backoff::PERSISTED,
        count_limit: 1_000,
        window_lead: Duration::from_secs(300),
        window_lag: Duration::from_secs(2),
        ordering: Ordering::Relaxed,
        sweep_period: Duration::from_secs(300),
        settle_empty_windows: true,
        send_concurrency: crate::DEFAULT_SEND_CONCURRENCY,
    }
}
