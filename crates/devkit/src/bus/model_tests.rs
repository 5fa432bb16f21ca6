//! Each rule against its source: the constants against the service model
//! botocore ships (`make venv` installs it with moto), and the rules on
//! values at and past each bound.

use super::*;

/// The shapes of the installed model, read with the venv's Python (the
/// model is gzipped JSON).
fn shapes() -> serde_json::Value {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let python = root.join(".venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run `make venv`",
        python.display()
    );
    let out = std::process::Command::new(python)
        .args([
            "-c",
            "import botocore.loaders, json; \
             print(json.dumps(botocore.loaders.Loader().load_service_model('eventbridgev2', 'service-2')['shapes']))",
        ])
        .output()
        .expect("python runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the model's shapes")
}

#[test]
fn the_constants_are_the_models() {
    let shapes = shapes();
    let shape = |name: &str| &shapes[name];
    let max = |name: &str| shape(name)["max"].as_u64().map(|v| v as usize);
    assert_eq!(max("PutEventsRequestEntryList"), Some(MAX_ENTRIES));
    assert_eq!(shape("PutEventsRequestEntryList")["min"], 1);
    assert_eq!(max("Source"), Some(MAX_SOURCE));
    assert_eq!(max("DetailType"), Some(MAX_DETAIL_TYPE));
    assert_eq!(max("PutEventsResourceList"), Some(MAX_RESOURCES));
    assert_eq!(max("EventGroupId"), Some(MAX_SYSTEM_ID));
    assert_eq!(max("EventDeduplicationId"), Some(MAX_SYSTEM_ID));
    assert_eq!(max("EventBusArn"), Some(1011));
    assert_eq!(max("EventBusName"), Some(256));
    assert_eq!(max("SubscriberName"), Some(256));
    assert_eq!(
        shape("RetentionPeriodInDays")["min"],
        *RETENTION_DAYS.start()
    );
    assert_eq!(shape("RetentionPeriodInDays")["max"], *RETENTION_DAYS.end());
    assert_eq!(shape("EventBusArn")["pattern"], EVENT_BUS_ARN);
    assert_eq!(shape("EventBusName")["pattern"], RESOURCE_NAME);
    assert_eq!(shape("SubscriberName")["pattern"], RESOURCE_NAME);
    assert_eq!(shape("EventDeduplicationId")["pattern"], DEDUPLICATION_ID);
    let required = &shape("PutEventsRequestEntry")["required"];
    assert_eq!(*required, serde_json::json!(["Source", "DetailType"]));
    assert_eq!(
        shape("SuccessCode")["enum"],
        serde_json::json!(["PUBLISHED", "DEDUPLICATED"])
    );
    assert_eq!(
        shape("OrderingType")["enum"],
        serde_json::json!(["FIFO", "UNORDERED"])
    );
}

fn entry(detail: &str) -> Entry {
    Entry {
        source: "outbox.orders".into(),
        detail_type: "OrderCreated".into(),
        detail: Some(detail.into()),
        ..Entry::default()
    }
}

#[test]
fn bus_arns_and_names_follow_the_model() {
    let arn = "arn:aws:events:us-east-1:000000000000:event-busv2/orders/abcdefghij0123456789abcde";
    assert_eq!(check_bus_arn(arn), Ok(()));
    for bad in [
        // A classic bus.
        "arn:aws:events:us-east-1:000000000000:event-bus/orders",
        // An id of 24 characters, and one with an upper-case letter.
        "arn:aws:events:us-east-1:000000000000:event-busv2/orders/abcdefghij0123456789abcd",
        "arn:aws:events:us-east-1:000000000000:event-busv2/orders/Abcdefghij0123456789abcde",
        // An account of 11 digits; a trailing newline.
        "arn:aws:events:us-east-1:00000000000:event-busv2/orders/abcdefghij0123456789abcde",
        "arn:aws:events:us-east-1:000000000000:event-busv2/orders/abcdefghij0123456789abcde\n",
    ] {
        assert!(check_bus_arn(bad).is_err(), "{bad:?} accepted");
    }
    assert_eq!(check_name("Name", "orders-bus.v2_1"), Ok(()));
    for bad in ["", "-orders", "orders bus", &"a".repeat(257)] {
        assert!(check_name("Name", bad).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn entries_are_checked_field_by_field() {
    assert_eq!(entry("{}").check(), Ok(()));
    let cases: Vec<(&str, Entry)> = vec![
        (
            "empty source",
            Entry {
                source: String::new(),
                ..entry("{}")
            },
        ),
        (
            "long source",
            Entry {
                source: "s".repeat(MAX_SOURCE + 1),
                ..entry("{}")
            },
        ),
        (
            "aws. source",
            Entry {
                source: "aws.orders".into(),
                ..entry("{}")
            },
        ),
        (
            "long type",
            Entry {
                detail_type: "t".repeat(MAX_DETAIL_TYPE + 1),
                ..entry("{}")
            },
        ),
        (
            "resources",
            Entry {
                resources: vec!["r".into(); MAX_RESOURCES + 1],
                ..entry("{}")
            },
        ),
        (
            "long group",
            Entry {
                group: Some("g".repeat(MAX_SYSTEM_ID + 1)),
                ..entry("{}")
            },
        ),
        (
            "empty group",
            Entry {
                group: Some(String::new()),
                ..entry("{}")
            },
        ),
        (
            "blank id",
            Entry {
                deduplication_id: Some(" \t".into()),
                ..entry("{}")
            },
        ),
        (
            "long id",
            Entry {
                deduplication_id: Some("d".repeat(MAX_SYSTEM_ID + 1)),
                ..entry("{}")
            },
        ),
    ];
    for (case, e) in cases {
        assert!(e.check().is_err(), "{case}: accepted");
    }
    let at_bounds = Entry {
        source: "s".repeat(MAX_SOURCE),
        detail_type: "t".repeat(MAX_DETAIL_TYPE),
        group: Some("g".repeat(MAX_SYSTEM_ID)),
        deduplication_id: Some("d".repeat(MAX_SYSTEM_ID)),
        ..entry("{}")
    };
    assert_eq!(at_bounds.check(), Ok(()));
}

#[test]
fn a_request_holds_1_to_100_entries_of_1_mb_in_all() {
    assert!(check_put_events(&[]).is_err());
    assert_eq!(check_put_events(&vec![entry("{}"); MAX_ENTRIES]), Ok(()));
    assert!(check_put_events(&vec![entry("{}"); MAX_ENTRIES + 1]).is_err());
    // Source (13) + DetailType (12) + Detail: exactly 1 MB, then a byte more.
    let fill = MAX_REQUEST_BYTES - 25;
    assert_eq!(check_put_events(&[entry(&"x".repeat(fill))]), Ok(()));
    assert!(check_put_events(&[entry(&"x".repeat(fill + 1))]).is_err());
    // Across entries: the limit is the request's (two of 25 + half).
    let half = (MAX_REQUEST_BYTES - 50) / 2;
    assert_eq!(
        check_put_events(&[entry(&"x".repeat(half)), entry(&"x".repeat(half))]),
        Ok(())
    );
    let half = entry(&"x".repeat(half));
    let over = entry(&"x".repeat((MAX_REQUEST_BYTES - 50) / 2 + 1));
    assert!(check_put_events(&[half, over]).is_err());
}

#[test]
fn the_size_counts_every_string_and_time() {
    let e = Entry {
        source: "ab".into(),
        detail_type: "cd".into(),
        detail: Some("é".into()),
        resources: vec!["r1".into(), "r2".into()],
        time: true,
        group: Some("g".into()),
        deduplication_id: Some("id".into()),
    };
    assert_eq!(e.size(), 2 + 2 + 2 + 4 + 14 + 1 + 2);
}

#[test]
fn deduplication_is_scoped_by_group() {
    let mut a = entry("{}");
    assert_eq!(deduplication_key(&a), None);
    a.deduplication_id = Some("01J".into());
    assert_eq!(deduplication_key(&a), Some((String::new(), "01J".into())));
    a.group = Some("order-1".into());
    assert_eq!(
        deduplication_key(&a),
        Some(("order-1".into(), "01J".into()))
    );
}
