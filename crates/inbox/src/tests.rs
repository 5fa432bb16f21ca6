use super::*;
use serde_json::json;

fn event(version: u64) -> EventEnvelope {
    EventEnvelope::new("OrderPaid", "Order", "o-1", version, json!({})).unwrap()
}

fn failed(label: &str) -> FailedCondition {
    FailedCondition {
        index: 0,
        label: label.into(),
        item: None,
    }
}

fn failed_at(label: &str, version: u64) -> FailedCondition {
    FailedCondition {
        item: Some(HashMap::from([(
            DEFAULT_VERSION_ATTRIBUTE.to_owned(),
            AttributeValue::N(version.to_string()),
        )])),
        ..failed(label)
    }
}

#[test]
fn settings_are_checked() {
    assert!(Inbox::new("t", DEFAULT_TTL_SECONDS).is_ok());
    assert!(matches!(
        Inbox::new("", DEFAULT_TTL_SECONDS),
        Err(InboxError::Config(_))
    ));
    assert!(matches!(Inbox::new("t", 60), Err(InboxError::Config(_))));
    // One hour, or anything up to the redelivery window, is refused: a
    // redelivery could outlive the record (#25 item 10).
    for ttl in [3600, 24 * 3600, DEFAULT_REDELIVERY_WINDOW_SECONDS] {
        let err = Inbox::new("t", ttl).unwrap_err().to_string();
        assert!(err.contains("redelivery window (432000 s"), "{err}");
    }
    assert!(Inbox::new("t", DEFAULT_REDELIVERY_WINDOW_SECONDS + 1).is_ok());
    assert!(Inbox::with_redelivery_window("t", 7200, 3600).is_ok());
    assert!(Inbox::with_redelivery_window("t", 3600, 3600).is_err());
    let from = |pairs: &'static [(&'static str, &'static str)]| {
        Inbox::from_lookup(move |k: &str| {
            let found = pairs.iter().find(|(n, _)| *n == k);
            found.map(|(_, v)| v.to_string())
        })
    };
    let inbox = from(&[("TABLE_NAME", "rm")]).unwrap();
    assert_eq!(inbox.ttl(), Duration::from_secs(DEFAULT_TTL_SECONDS));
    for refused in [
        &[("TABLE_NAME", "rm"), ("INBOX_TTL_SECONDS", "x")][..],
        &[("TABLE_NAME", "rm"), ("INBOX_TTL_SECONDS", "3600")],
        // A stack with a longer window (a 14-day queue) needs a longer TTL.
        &[
            ("TABLE_NAME", "rm"),
            ("INBOX_REDELIVERY_WINDOW_SECONDS", "1296000"),
        ],
        &[],
    ] {
        assert!(from(refused).is_err(), "{refused:?}");
    }
}

#[test]
fn the_record_is_conditional_and_expires() {
    let inbox = Inbox::with_redelivery_window("rm", 7200, 3600).unwrap();
    let e = event(2);
    let now = OffsetDateTime::from_unix_timestamp(1_000_000).unwrap();
    let put = inbox.record(&e, now).unwrap();
    let pk = format!("INBOX#{}", e.event_id);
    assert_eq!(put.item["PK"].as_s().unwrap(), &pk);
    assert_eq!(put.item["SK"].as_s().unwrap(), "META");
    assert_eq!(put.item[TTL_ATTRIBUTE].as_n().unwrap(), "1007200");
    assert_eq!(
        put.condition_expression.as_deref(),
        Some("attribute_not_exists(#outboxPk)")
    );
    let names = put.expression_attribute_names.as_ref().unwrap();
    assert_eq!(names["#outboxPk"], "PK");
    assert!(!put.item.contains_key("payload"));
}

#[test]
fn guards_keep_the_callers_condition() {
    let inbox = Inbox::new("rm", DEFAULT_TTL_SECONDS).unwrap();
    let update = Update::builder()
        .table_name("rm")
        .key("PK", AttributeValue::S("A".into()))
        .key("SK", AttributeValue::S("B".into()))
        .update_expression("SET #s = :s, version = :v")
        .condition_expression("#s <> :s")
        .expression_attribute_names("#s", "status")
        .expression_attribute_values(":s", AttributeValue::S("PAID".into()))
        .expression_attribute_values(":v", AttributeValue::N("4".into()))
        .build()
        .unwrap();
    let actions = inbox
        .begin(&event(4))
        .unwrap()
        .guarded_update("row", update, 4)
        .build()
        .unwrap();
    let update = actions[1].update.as_ref().unwrap();
    assert_eq!(
        update.condition_expression.as_deref(),
        Some("(#s <> :s) AND (attribute_not_exists(#inboxVersion) OR #inboxVersion < :inboxEventVersion)")
    );
    let names = update.expression_attribute_names.as_ref().unwrap();
    assert_eq!(names["#s"], "status");
    assert_eq!(names["#inboxVersion"], "version");
    let values = update.expression_attribute_values.as_ref().unwrap();
    assert_eq!(values[":inboxEventVersion"].as_n().unwrap(), "4");
}

#[test]
fn cancellations_are_classified() {
    let guarded = vec![("row".to_owned(), 4)];
    let classify = |failed| classify(failed, &guarded, DEFAULT_VERSION_ATTRIBUTE);
    // The inbox record wins: a duplicate of an applied event also fails
    // its guard (same version).
    assert_eq!(
        classify(vec![failed_at("row", 4), failed(INBOX_LABEL)]).unwrap(),
        EventOutcome::Duplicate
    );
    // Stored at the event's version or newer: the guard failed.
    for stored in [4, 5] {
        let outcome = classify(vec![failed_at("row", stored)]).unwrap();
        assert_eq!(outcome, EventOutcome::Stale, "{stored}");
    }
    // Stored older, without a version, or absent: the guard held, so
    // the action's own condition failed. Never Stale.
    let mut unversioned = failed("row");
    unversioned.item = Some(HashMap::new());
    for own in [failed_at("row", 3), failed("row"), unversioned] {
        let err = classify(vec![own]).unwrap_err();
        assert!(!err.is_retryable());
        assert!(err.failed_condition("row").is_some());
    }
    let err = classify(vec![failed_at("row", 5), failed("other")]).unwrap_err();
    assert!(!err.is_retryable());
    assert!(err.failed_condition("other").is_some());
    assert!(InboxError::Transaction(TransactionError::Throttled).is_retryable());
}
