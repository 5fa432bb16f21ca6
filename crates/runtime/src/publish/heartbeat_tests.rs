//! The heartbeat of a publishing function (`publish::Heartbeat`): a warm
//! function of a stack that must yield stops at its next beat; one beat per
//! interval; a stack made again under a deleted one's name starts anew.

use std::time::Duration;

use outbox_engine::{Deadline, MemoryStore, PublishStore};

use super::Heartbeat;

fn record(stack: &str, id: &str, since: &str) -> crate::RecordedSettings {
    let now = outbox_core::now_utc_millis();
    crate::RecordedSettings {
        region: "eu-west-1".into(),
        stack: stack.into(),
        function: "publisher".into(),
        by: crate::RecordedSettings::by_now(stack, now),
        since: Some(since.into()),
        variables: [
            ("STACK_NAME".to_owned(), stack.to_owned()),
            ("STACK_ID".to_owned(), id.to_owned()),
        ]
        .into(),
    }
}

fn far() -> Deadline {
    Deadline::after(Duration::from_secs(30))
}

#[tokio::test]
async fn a_warm_function_stops_once_an_older_stack_is_live_and_beats_once_per_interval() {
    let store = MemoryStore::new(8);
    let mine = record("two", "arn:two", "2026-12-07T10:00:00Z");
    let every_run = Heartbeat::new(mine.clone(), Duration::ZERO);
    every_run
        .beat(&store, &far())
        .await
        .expect("alone on the table");
    // Stack one's sweeper, there since November, records again.
    PublishStore::record_settings(
        &store,
        &record("one", "arn:one", "2026-11-01T00:00:00Z"),
        &far(),
    )
    .await
    .unwrap();
    let refused = every_run
        .beat(&store, &far())
        .await
        .expect_err("one was first");
    assert!(refused.0.contains("one"), "{refused}");
    // A five-minute heartbeat just after the cold start does not beat yet.
    let warm = Heartbeat::new(mine, Duration::from_secs(300));
    warm.beat(&store, &far()).await.expect("not due");
}

#[tokio::test]
async fn a_stack_made_again_under_a_deleted_ones_name_starts_anew() {
    let store = MemoryStore::new(8);
    let old = record("orders", "arn:old", "2026-01-01T00:00:00Z");
    let again = record("orders", "arn:new", "2026-12-07T10:00:00Z");
    let mut same_stack = again.clone();
    same_stack.since = Some("2026-12-07T11:00:00Z".into());
    for record in [&old, &again, &same_stack] {
        PublishStore::record_settings(&store, record, &far())
            .await
            .unwrap();
    }
    let records = PublishStore::recorded_settings(&store, &far())
        .await
        .unwrap();
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].since.as_deref(), Some("2026-12-07T10:00:00Z"));
}
