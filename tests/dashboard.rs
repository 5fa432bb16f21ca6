//! The outbox's CloudWatch dashboard (`OutboxDashboard` in the reusable
//! stack, `infra/outbox.yaml`)
//! names only metrics that exist: every `DynamoDbOutbox` metric of a widget
//! is in the EMF output of the function its `Function` dimension names
//! (built by the functions' own code), and every AWS metric is one the
//! service publishes for that resource. The widgets the issue asks for are
//! there.

use std::collections::{BTreeSet, HashSet};

use serde_json::Value;
use testkit::root;

/// The widgets' JSON, from the resource's `!Sub` strings: a quoted
/// `${Name}` becomes `"Name"`, an unquoted one (a number) `0`.
fn widgets() -> Vec<Value> {
    let text = std::fs::read_to_string(root().join(devkit::OUTBOX_TEMPLATE)).expect("template");
    let start = text
        .find("\n  OutboxDashboard:")
        .expect("the dashboard resource");
    let end = start + text[start..].find("\nOutputs:").expect("Outputs after it");
    let mut widgets = Vec::new();
    for line in text[start..end].lines() {
        let Some(open) = line.find("'{").or_else(|| line.find("',{")) else {
            continue;
        };
        let Some(close) = line.rfind('\'') else {
            continue;
        };
        let mut json = line[open + 1..close].trim_start_matches(',').to_owned();
        if !json.contains("\"type\"") {
            continue; // the body's opening `{"widgets":[`
        }
        while let Some(at) = json.find("${") {
            let until = at + json[at..].find('}').expect("closed placeholder");
            let name = json[at + 2..until].to_owned();
            let quoted = json[..at].ends_with('"');
            json.replace_range(at..=until, if quoted { &name } else { "0" });
        }
        widgets.push(serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}")));
    }
    widgets
}

/// (namespace, metric, dimension value) of every metric of every widget.
fn named(widgets: &[Value]) -> BTreeSet<(String, String, String)> {
    widgets
        .iter()
        .flat_map(|w| {
            w["properties"]["metrics"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|m| {
            let text = |i: usize| m[i].as_str().unwrap_or_default().to_owned();
            (text(0), text(1), text(3))
        })
        .collect()
}

/// (function, metric) of everything the functions' EMF documents hold, each
/// with all its optional metrics present.
fn emitted() -> HashSet<(String, String)> {
    let sweep = sweeper::SweepReport {
        stats_read: true,
        oldest_pending_age_seconds: Some(1.0),
        parked_aggregates: Some(0),
        ..Default::default()
    };
    let documents = [
        publisher::Report::default().emf(),
        sweep.emf(),
        projector::emf(&projector::Counts::default(), Some(time::Duration::ZERO)),
    ];
    let mut names = HashSet::new();
    for document in documents {
        let doc: Value = serde_json::from_str(&document).expect("EMF JSON");
        let function = doc["Function"].as_str().expect("Function").to_owned();
        for metric in doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("metrics")
        {
            names.insert((
                function.clone(),
                metric["Name"].as_str().unwrap().to_owned(),
            ));
        }
    }
    names
}

#[test]
fn the_dashboard_names_only_metrics_the_functions_emit() {
    let widgets = widgets();
    assert_eq!(widgets.len(), 8, "{widgets:#?}");
    let emitted = emitted();
    let aws: HashSet<(&str, &str)> = HashSet::from([
        ("AWS/Lambda", "IteratorAge"),
        ("AWS/Lambda", "Errors"),
        ("AWS/Lambda", "Throttles"),
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible"),
    ]);
    let named = named(&widgets);
    for (namespace, metric, dimension) in &named {
        if namespace == "DynamoDbOutbox" {
            assert!(
                emitted.contains(&(dimension.clone(), metric.clone())),
                "{metric} of {dimension} is not in its EMF output"
            );
        } else {
            assert!(
                aws.contains(&(namespace.as_str(), metric.as_str())),
                "{namespace} {metric}"
            );
        }
    }
    // What the page must show.
    for (metric, function) in [
        ("OldestPendingAgeSeconds", "sweeper"),
        ("Published", "publisher"),
        ("DeadLetterCount", "sweeper"),
        ("WindowsRedriven", "sweeper"),
        ("ProjectionLagSeconds", "projector"),
    ] {
        assert!(
            named.iter().any(|(_, m, d)| m == metric && d == function),
            "the dashboard shows {metric}"
        );
    }
    for metric in ["IteratorAge", "Errors", "Throttles"] {
        assert!(named
            .iter()
            .any(|(n, m, _)| n == "AWS/Lambda" && m == metric));
    }
}
