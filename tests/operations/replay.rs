//! `outboxctl replay`: a replay from the bus's archive, started and
//! followed to its end; a missing archive is an error.

use testkit::{outboxctl, Stack};
use time::OffsetDateTime;

use super::replay_args;

#[tokio::test]
async fn a_replay_from_the_archive_is_started_and_followed_to_its_end() {
    let stack = Stack::with_bus().await;
    let (bus, _) = stack.bus.clone().unwrap();
    let events = aws_sdk_eventbridge::Client::new(&stack.sdk);
    let archive = stack.archive_of_bus().await;
    let from = OffsetDateTime::now_utc() - time::Duration::minutes(1);
    let detail = serde_json::json!({"eventId": ulid::Ulid::new().to_string()}).to_string();
    events
        .put_events()
        .entries(
            aws_sdk_eventbridge::types::PutEventsRequestEntry::builder()
                .event_bus_name(&bus)
                .source("outbox.orders")
                .detail_type("OrderCreated")
                .detail(&detail)
                .build(),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(stack.drain_subscriber().await.len(), 1);
    let to = OffsetDateTime::now_utc() + time::Duration::minutes(1);
    let replay = |archive: &str, rule: Option<&str>| {
        let args = replay_args(&bus, archive, from, to, rule);
        outboxctl(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };

    let (ok, out, err) = replay(&archive, Some(&format!("{bus}-to-subscriber")));
    assert!(ok, "{err}");
    assert!(out.contains("completed"), "{out}");
    let replayed = stack.drain_subscriber().await;
    assert_eq!(replayed.len(), 1, "the archived event again");
    assert_eq!(replayed[0]["detail"]["eventId"].as_str().unwrap(), {
        let v: serde_json::Value = serde_json::from_str(&detail).unwrap();
        v["eventId"].as_str().unwrap().to_owned()
    });

    let (ok, _, err) = replay("no-such-archive", None);
    assert!(!ok);
    assert!(err.contains("DescribeArchive"), "{err}");
}
