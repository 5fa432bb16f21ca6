//! The outbox's CloudWatch dashboard (`OutboxDashboard` in the reusable
//! stack, `infra/outbox.yaml`)
//! names only metrics that exist: every `DynamoDbOutbox` metric of a widget
//! is in the EMF output of the function its `Function` dimension names
//! (built by the functions' own code), with the EMF documents' dimensions
//! (`Stack` and `Function`), its `Stack` the stack's own name (the value
//! the functions get as `STACK_NAME`), and every AWS metric is one the
//! service publishes for that resource. The widgets the issue asks for are
//! there.

use outbox_runtime::SweepMetrics;
use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde_json::Value;
use testkit::root;

fn template() -> serde_yaml_ng::Value {
    devkit::template::read(&root().join(devkit::OUTBOX_TEMPLATE)).expect("template")
}

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

/// A widget metric's dimensions, name to value (the `!Sub` placeholders
/// replaced by their names, as [`widgets`] leaves them).
type Dimensions = BTreeMap<String, String>;

/// (namespace, metric, dimensions) of every metric of every widget: a
/// metric is `[namespace, name, dimension, value, …, {options}?]`.
fn named(widgets: &[Value]) -> BTreeSet<(String, String, Dimensions)> {
    widgets
        .iter()
        .flat_map(|w| {
            w["properties"]["metrics"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .map(|m| {
            let parts: Vec<&str> = m
                .as_array()
                .expect("a metric is an array")
                .iter()
                .map_while(Value::as_str)
                .collect();
            assert!(parts.len() >= 2 && parts.len().is_multiple_of(2), "{m}");
            let dimensions = parts[2..]
                .chunks(2)
                .map(|pair| (pair[0].to_owned(), pair[1].to_owned()))
                .collect();
            (parts[0].to_owned(), parts[1].to_owned(), dimensions)
        })
        .collect()
}

/// The dimension sets of the EMF documents: the functions emit every
/// metric under one set, `Stack` and `Function`.
const EMF_DIMENSIONS: [&str; 2] = ["Stack", "Function"];

/// (function, metric) of everything the functions' EMF documents hold, each
/// with all its optional metrics present; each document's dimension set
/// and `Stack` value checked.
fn emitted() -> HashSet<(String, String)> {
    let sweep = outbox_engine::SweepReport {
        stats_read: true,
        oldest_pending_age_seconds: Some(1.0),
        parked_aggregates: Some(0),
        commit_to_publish_ms: vec![1],
        ..Default::default()
    };
    // A count the publisher emits only when it is not zero: each is one.
    let published = publisher::Report {
        skipped: 1,
        repaired: 1,
        unhandled: 1,
        relayed: outbox_engine::RelayReport {
            published: 1,
            dead_lettered: 1,
            delete_failed: 1,
            // One held, one poison left for the sweeper (DeadLetterDeferred).
            deferred: 2,
            held: 1,
            released: 1,
            commit_to_publish_ms: vec![1],
            ..Default::default()
        },
        ..Default::default()
    };
    let documents = [
        published.emf(),
        sweep.emf(),
        projector::emf(&projector::Counts::default(), Some(time::Duration::ZERO)),
    ];
    let mut names = HashSet::new();
    for document in documents {
        let doc: Value = serde_json::from_str(&document).expect("EMF JSON");
        let function = doc["Function"].as_str().expect("Function").to_owned();
        if doc.get("_aws").is_some() {
            assert_eq!(
                doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
                serde_json::json!([EMF_DIMENSIONS]),
                "{document}"
            );
        }
        // This process's STACK_NAME (unset here: the documented fallback).
        assert_eq!(doc["Stack"], outbox_runtime::stack_name(), "{document}");
        // Every value of the document: a metric with DetailedMetrics, and
        // the core ones (`first_row_reads_the_default_metrics`) always.
        for name in doc.as_object().expect("an object").keys() {
            if !["_aws", "level", "timestamp", "Stack", "Function"].contains(&name.as_str()) {
                names.insert((function.clone(), name.clone()));
            }
        }
    }
    names
}

#[test]
fn the_dashboard_names_only_metrics_the_functions_emit() {
    let widgets = widgets();
    assert_eq!(widgets.len(), 9, "{widgets:#?}");
    let emitted = emitted();
    let aws: HashSet<(&str, &str)> = HashSet::from([
        ("AWS/Lambda", "IteratorAge"),
        ("AWS/Lambda", "Errors"),
        ("AWS/Lambda", "Throttles"),
        ("AWS/SQS", "ApproximateNumberOfMessagesVisible"),
    ]);
    let named = named(&widgets);
    for (namespace, metric, dimensions) in &named {
        if namespace == "DynamoDbOutbox" {
            let names: Vec<&str> = dimensions.keys().map(String::as_str).collect();
            let mut emf = EMF_DIMENSIONS.to_vec();
            emf.sort_unstable();
            assert_eq!(names, emf, "{metric}: the EMF documents' dimensions");
            // `${Stack}`: the stack's name (`stack_placeholders_are_the_functions_stack_name`).
            assert_eq!(dimensions["Stack"], "Stack", "{metric}");
            let function = &dimensions["Function"];
            assert!(
                emitted.contains(&(function.clone(), metric.clone())),
                "{metric} of {function} is not in its EMF output"
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
        ("CommitToPublishLatency", "publisher"),
        ("CommitToPublishLatency", "sweeper"),
    ] {
        assert!(
            named
                .iter()
                .any(|(_, m, d)| m == metric
                    && d.get("Function").map(String::as_str) == Some(function)),
            "the dashboard shows {metric}"
        );
    }
    for metric in ["IteratorAge", "Errors", "Throttles"] {
        assert!(named
            .iter()
            .any(|(n, m, _)| n == "AWS/Lambda" && m == metric));
    }
}

/// Every widget that reads an outbox metric gets its `${Stack}` from the
/// expression that gives the functions their `STACK_NAME` (the Globals of
/// `infra/outbox.yaml`): the dashboard reads the metrics of its own stack.
#[test]
fn stack_placeholders_are_the_functions_stack_name() {
    use serde_yaml_ng::Value as Y;
    let doc = template();
    let stack_name = &doc["Globals"]["Function"]["Environment"]["Variables"]["STACK_NAME"];
    assert!(!stack_name.is_null(), "the functions get STACK_NAME");
    let body = match &doc["Resources"]["OutboxDashboard"]["Properties"]["DashboardBody"] {
        Y::Tagged(t) if t.tag == "!Join" => t.value[1].as_sequence().expect("the pieces").clone(),
        other => panic!("the body is not a !Join: {other:?}"),
    };
    // Each piece, through the `!If`s that add a widget.
    let mut pieces: Vec<Y> = Vec::new();
    for piece in body {
        match piece {
            Y::Tagged(t) if t.tag == "!If" => {
                pieces.extend(t.value.as_sequence().expect("!If")[1..].iter().cloned())
            }
            other => pieces.push(other),
        }
    }
    let mut read = 0;
    for piece in &pieces {
        let (text, variables) = match piece {
            Y::Tagged(t) if t.tag == "!Sub" => match &t.value {
                Y::String(text) => (text.clone(), None),
                Y::Sequence(s) => (s[0].as_str().expect("!Sub text").to_owned(), s.get(1)),
                other => panic!("a !Sub of {other:?}"),
            },
            Y::String(text) => (text.clone(), None),
            other => panic!("a piece of the body: {other:?}"),
        };
        if !text.contains("\"DynamoDbOutbox\"") {
            continue;
        }
        assert!(
            text.contains("\"Stack\",\"${Stack}\""),
            "an outbox widget without the Stack dimension: {text}"
        );
        let bound = variables.map(|v| &v["Stack"]);
        assert_eq!(
            bound,
            Some(stack_name),
            "${{Stack}} is not the functions' STACK_NAME in {text}"
        );
        read += 1;
    }
    assert_eq!(read, 7, "the widgets with outbox metrics");
}

/// With `DetailedMetrics` at its default the functions declare only
/// `CORE_METRICS`: the dashboard's first row reads those (and AWS's own
/// metrics) alone, so it is never empty on a lean stack; the widgets that
/// read others say so in their title. Every alarm on an outbox metric
/// reads a core one.
#[test]
fn first_row_reads_the_default_metrics() {
    let widgets = widgets();
    let (first, rest): (Vec<Value>, Vec<Value>) = widgets
        .into_iter()
        .partition(|w| w["y"].as_u64() == Some(0));
    assert_eq!(first.len(), 2, "{first:#?}");
    for (_, metric, _) in named(&first)
        .into_iter()
        .filter(|(namespace, _, _)| namespace == "DynamoDbOutbox")
    {
        assert!(
            outbox_runtime::CORE_METRICS.contains(&metric.as_str()),
            "{metric} on the first row is not a core metric"
        );
    }
    for widget in &rest {
        let detailed = named(std::slice::from_ref(widget))
            .into_iter()
            .any(|(n, m, _)| {
                n == "DynamoDbOutbox" && !outbox_runtime::CORE_METRICS.contains(&m.as_str())
            });
        let title = widget["properties"]["title"].as_str().unwrap_or("");
        assert!(
            !detailed || title.contains("DetailedMetrics"),
            "{title}: reads detailed metrics without saying so"
        );
    }
    let template = template();
    for (name, alarm) in template["Resources"].as_mapping().expect("resources") {
        let p = &alarm["Properties"];
        if p["Namespace"].as_str() == Some("DynamoDbOutbox")
            && name.as_str() != Some("CommitToPublishLatencyAlarm")
        {
            let metric = p["MetricName"].as_str().expect("MetricName");
            assert!(
                outbox_runtime::CORE_METRICS.contains(&metric),
                "{name:?} reads {metric}, which is not declared by default"
            );
        }
    }
}

/// The real sweeper binary, its environment from `infra/outbox.yaml`: at
/// the template's defaults its document declares the core metrics alone
/// and carries every count as a field; with the parameter
/// `DetailedMetrics=true` (set here: the option under test) it declares
/// every count.
#[tokio::test]
async fn detailed_metrics_is_a_parameter_of_the_template() {
    let rig = testkit::rig::Rig::new().await;
    rig.event("a", 1, 8).await;
    for (parameters, every) in [(vec![], false), (vec![("DetailedMetrics", "true")], true)] {
        let sweeper = rig.stack.function_through(
            devkit::Function::Sweeper,
            Some(&rig.proxy.endpoint),
            &parameters,
            &[],
        );
        rig.invoke(&sweeper, &testkit::rig::scheduled()).await;
        let documents = sweeper.emf();
        let doc = documents.last().expect("a metric document");
        let declared: BTreeSet<&str> = doc["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("declared metrics")
            .iter()
            .filter_map(|m| m["Name"].as_str())
            .collect();
        let fields: BTreeSet<&str> = doc
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .filter(|k| !["_aws", "level", "timestamp", "Stack", "Function"].contains(k))
            .collect();
        assert!(
            fields.contains("PendingCount") && fields.contains("Republished"),
            "{doc}"
        );
        if every {
            assert_eq!(declared, fields, "{doc}");
        } else {
            // The rig's stack is strict (an SNS FIFO topic): ParkedAggregates
            // is among them.
            let core: BTreeSet<&str> = fields
                .iter()
                .copied()
                .filter(|f| outbox_runtime::CORE_METRICS.contains(f))
                .collect();
            assert_eq!(
                core,
                BTreeSet::from([
                    "OldestPendingAgeSeconds",
                    "DeadLetterCount",
                    "ParkedAggregates"
                ])
            );
            assert_eq!(declared, core, "{doc}");
        }
    }
}
