//! Issue #38 item 4: two outbox stacks in one account do not cross. Two
//! stacks on the local servers (each its table, bus, OnFailure queue, and
//! the real publisher and sweeper binaries with the environment the
//! templates give them, `STACK_NAME` the stack's name); a
//! poison event is dead-lettered through stack one's publisher only. Each
//! stack's EMF documents carry its own `Stack`; the dead letter shows in
//! stack one's `DeadLetterCount` only, in its `outboxctl status` only, and
//! the alarms of `infra/outbox.yaml`, their dimensions resolved with each
//! stack's name as `NamePrefix`, select that stack's documents only.

use serde_json::Value;
use serde_yaml_ng::Value as Y;
use testkit::lambda::LambdaFunction;
use testkit::{root, Stack};

/// One outbox stack: its resources and its two functions.
struct Outbox {
    /// The stack's name: its `NamePrefix`, its functions' `STACK_NAME`.
    name: String,
    stack: Stack,
    failures: String,
    publisher: LambdaFunction,
    sweeper: LambdaFunction,
}

impl Outbox {
    async fn new() -> Self {
        let stack = Stack::with_bus().await;
        let failures = testkit::queue_with(&stack.sdk, "publisher-failures", &[]).await;
        Self {
            publisher: stack.function(devkit::Function::Publisher, &[], &[]),
            sweeper: stack.function(devkit::Function::Sweeper, &[], &[]),
            // The example passes its stack's name as NamePrefix.
            name: stack.deployment.stack_name.clone(),
            stack,
            failures,
        }
    }

    /// The stream mapping (the template's settings) into the publisher
    /// until the stream is drained, then one scheduled sweep.
    async fn run(&self) {
        let mut pump = self.stack.pump(&self.publisher, Some(&self.failures));
        pump.run_until_idle().await.expect("pump");
        self.sweeper.sweep_scheduled().await;
    }
}

/// An alarm on an outbox metric, resolved for one stack.
#[derive(Debug)]
struct Alarm {
    name: String,
    metric: String,
    threshold: f64,
    dimensions: Vec<(String, String)>,
}

impl Alarm {
    /// Whether CloudWatch feeds the EMF document `doc` to this alarm: the
    /// namespace, the metric, exactly the alarm's dimension set, and each
    /// dimension's value.
    fn reads(&self, doc: &Value) -> bool {
        let definition = &doc["_aws"]["CloudWatchMetrics"][0];
        let mut wanted: Vec<&str> = self.dimensions.iter().map(|(k, _)| k.as_str()).collect();
        wanted.sort_unstable();
        let same_set = |set: &Value| {
            let mut names: Vec<&str> = set
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            names.sort_unstable();
            names == wanted
        };
        definition["Namespace"] == outbox_runtime::NAMESPACE
            && definition["Metrics"]
                .as_array()
                .is_some_and(|m| m.iter().any(|d| d["Name"] == self.metric.as_str()))
            && definition["Dimensions"]
                .as_array()
                .is_some_and(|sets| sets.iter().any(same_set))
            && self
                .dimensions
                .iter()
                .all(|(k, v)| doc[k.as_str()] == v.as_str())
    }
}

/// The reusable stack's template as `outbox`'s stack deploys it.
fn template_of(outbox: &Outbox) -> devkit::Resolved {
    let deployment = &outbox.stack.deployment;
    devkit::Resolved::read(
        &root().join(devkit::OUTBOX_TEMPLATE),
        devkit::Resolver {
            parameters: deployment.reusable_parameters().expect("parameters"),
            region: deployment.region.clone(),
            // The nested stack's own name, which is not its prefix.
            stack_name: "orders-Outbox-1X2Y3Z".into(),
            resources: Default::default(),
        },
    )
    .expect("template")
}

/// Every alarm of `infra/outbox.yaml` on a `DynamoDbOutbox` metric, its
/// dimensions resolved as `outbox`'s stack deploys it.
fn alarms_of(outbox: &Outbox) -> Vec<Alarm> {
    let template = template_of(outbox);
    let eval = |v: &Y| template.evaluate(v).expect("evaluated").expect("a value");
    template.document()["Resources"]
        .as_mapping()
        .expect("resources")
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some("AWS::CloudWatch::Alarm"))
        .filter(|(_, r)| r["Properties"]["Namespace"].as_str() == Some("DynamoDbOutbox"))
        // The alarms this stack deploys (ParkedAggregates needs strict
        // ordering possible, CommitToPublishLatency a threshold).
        .filter(|(_, r)| {
            r["Condition"]
                .as_str()
                .is_none_or(|c| template.condition_holds(c).expect("a condition"))
        })
        .map(|(k, r)| {
            let p = &r["Properties"];
            assert_eq!(
                p["ComparisonOperator"].as_str(),
                Some("GreaterThanThreshold")
            );
            Alarm {
                name: k.as_str().expect("a name").to_owned(),
                metric: p["MetricName"].as_str().expect("MetricName").to_owned(),
                threshold: eval(&p["Threshold"]).parse().expect("a number"),
                dimensions: p["Dimensions"]
                    .as_sequence()
                    .expect("Dimensions")
                    .iter()
                    .map(|d| {
                        (
                            d["Name"].as_str().expect("Name").to_owned(),
                            eval(&d["Value"]),
                        )
                    })
                    .collect(),
            }
        })
        .collect()
}

#[tokio::test]
async fn two_stacks_in_one_account_see_only_their_own_dead_letters() {
    // One after the other: `function` builds the binaries, blocking the
    // runtime, which must not hold the other stack's calls in flight.
    let one = Outbox::new().await;
    let two = Outbox::new().await;
    // The functions get the stack's name from the templates.
    for outbox in [&one, &two] {
        let env = outbox.stack.env(devkit::Function::Publisher, &[]);
        assert!(env.contains(&("STACK_NAME".to_owned(), outbox.name.clone())));
    }

    // An order in each; a poison event (an envelope that is not JSON) in
    // stack one only, which its publisher dead-letters.
    one.stack.create_orders(1).await;
    two.stack.create_orders(1).await;
    one.stack.put_poison("poison", Some("not json")).await;
    tokio::join!(one.run(), two.run());

    // Each stack's documents carry its own name, and nothing else does.
    for (outbox, dead_lettered) in [(&one, 1.0), (&two, 0.0)] {
        let publisher = outbox.publisher.emf();
        let sweeper = outbox.sweeper.emf();
        assert!(
            !publisher.is_empty() && sweeper.len() == 1,
            "{publisher:?} {sweeper:?}"
        );
        for (function, docs) in [("publisher", &publisher), ("sweeper", &sweeper)] {
            for doc in docs {
                assert_eq!(doc["Stack"], outbox.name.as_str(), "{doc}");
                assert_eq!(doc["Function"], function, "{doc}");
                // A document declaring no metric (the publisher's, with
                // DetailedMetrics at its default) has no directive.
                if doc.get("_aws").is_some() {
                    assert_eq!(
                        doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"],
                        serde_json::json!([["Stack", "Function"]])
                    );
                }
            }
        }
        let sum = |name: &str| -> f64 {
            publisher
                .iter()
                .filter_map(|d| d[name].as_f64())
                .sum::<f64>()
        };
        assert_eq!(sum("DeadLettered"), dead_lettered, "{}", outbox.name);
        assert_eq!(sum("Published"), 1.0, "{}: its order's event", outbox.name);
        assert_eq!(
            sweeper[0]["DeadLetterCount"].as_f64(),
            Some(dead_lettered),
            "{}: {}",
            outbox.name,
            sweeper[0]
        );
    }

    // `outboxctl status` of each table: the dead letter in stack one only.
    for (outbox, dead_letters) in [(&one, 1), (&two, 0)] {
        let status = testkit::ok_json(outbox.stack.operator().status(&["--json"]));
        let name = &outbox.name;
        assert_eq!(status["deadLetters"], dead_letters, "{name}: {status}");
    }

    // The alarms' input: every EMF document of both stacks, as CloudWatch
    // receives them from one account.
    let documents: Vec<(&str, Value)> = [&one, &two]
        .into_iter()
        .flat_map(|o| {
            o.publisher
                .emf()
                .into_iter()
                .chain(o.sweeper.emf())
                .map(move |d| (o.name.as_str(), d))
        })
        .collect();
    let mut fires = Vec::new();
    for outbox in [&one, &two] {
        let alarms = alarms_of(outbox);
        assert!(
            // ParkedAggregatesAlarm is deployed only where strict ordering
            // may be chosen (not at these stacks' relaxed defaults).
            [
                "OldestPendingAgeAlarm",
                "DeadLetterAlarm",
                "KeysRepairedAlarm"
            ]
            .iter()
            .all(|a| alarms.iter().any(|alarm| alarm.name == *a)),
            "{alarms:?}"
        );
        for alarm in &alarms {
            let read: Vec<&(&str, Value)> =
                documents.iter().filter(|(_, d)| alarm.reads(d)).collect();
            assert!(
                read.iter().all(|(owner, _)| *owner == outbox.name),
                "{} of {} reads another stack's metric: {read:?}",
                alarm.name,
                outbox.name
            );
            // Each alarm the sweeper feeds on every run reads this stack's
            // run (the publisher's `KeysRepaired` is emitted only when not
            // zero: none here).
            if !["ParkedAggregates", "KeysRepaired"].contains(&alarm.metric.as_str()) {
                assert_eq!(read.len(), 1, "{} of {}: {read:?}", alarm.name, outbox.name);
            }
            let breaching = read
                .iter()
                .filter_map(|(_, d)| d[alarm.metric.as_str()].as_f64())
                .any(|v| v > alarm.threshold);
            if breaching {
                fires.push((outbox.name.clone(), alarm.name.clone()));
            }
        }
    }
    assert_eq!(
        fires,
        vec![(one.name.clone(), "DeadLetterAlarm".to_owned())]
    );
}
