//! Unit tests of `crates/sweeper/src/lib.rs`.

use super::*;

#[test]
fn floor_and_ceiling_bracket_a_millisecond() {
    let at = OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
    let older = Ulid::from_parts(1_800_000_000_000 - 1, u128::MAX);
    let same_ms = Ulid::from_parts(1_800_000_000_000, 1);
    let newer = Ulid::from_parts(1_800_000_000_001, 0);
    assert!(older < ulid_floor(at) && ulid_floor(at) < same_ms);
    assert!(same_ms < ulid_ceiling(at) && ulid_ceiling(at) < newer);
    assert_eq!(
        ulid_floor(OffsetDateTime::UNIX_EPOCH - time::Duration::days(1)),
        Ulid::from_parts(0, 0)
    );
}

#[test]
fn the_trigger_is_told_by_the_shape() {
    let scheduled = serde_json::json!({"version": "0", "id": "x", "detail-type": "Scheduled Event", "source": "aws.events", "detail": {}});
    assert!(matches!(
        Trigger::from_value(scheduled).unwrap(),
        Trigger::Schedule
    ));
    let sqs = serde_json::json!({"Records": [{"messageId": "m", "body": "{}", "eventSource": "aws:sqs", "attributes": {}, "messageAttributes": {}}]});
    assert!(matches!(
        Trigger::from_value(sqs).unwrap(),
        Trigger::OnFailure(_)
    ));
}
