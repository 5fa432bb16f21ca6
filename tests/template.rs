//! The reusable stack's template (`infra/outbox.yaml`, nested by
//! `template.yaml`) as the single source of truth of the stream mapping: its
//! filter pattern (through the same code the local pipeline uses) against
//! sample and real stream records, and its settings.

use std::collections::HashSet;

use devkit::MappingSettings;
use serde_json::Value;
use serde_yaml_ng::Value as Y;
use std::time::Duration;

use testkit::proxy::{Fault, FaultProxy};
use testkit::{far_deadline, root, sample, Stack};
use time::OffsetDateTime;

/// A template of the workspace, as written (its tags kept).
fn read(path: &str) -> Y {
    devkit::template::read(&root().join(path)).unwrap()
}

/// The keys of a YAML mapping.
fn keys(v: &Y) -> Vec<String> {
    let mapping = v
        .as_mapping()
        .unwrap_or_else(|| panic!("not a mapping: {v:?}"));
    mapping
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect()
}

/// Filter patterns (JSON text) as JSON values, to compare them.
fn json(patterns: &[String]) -> Vec<Value> {
    patterns
        .iter()
        .map(|p| serde_json::from_str(p).unwrap())
        .collect()
}

fn mapping() -> MappingSettings {
    MappingSettings::from_template(&root().join(devkit::OUTBOX_TEMPLATE))
        .expect("template has the mapping")
}

#[test]
fn mapping_settings_are_the_safe_ones() {
    let m = mapping();
    assert_eq!(m.function, "PublisherFunction");
    assert_eq!(m.starting_position, "TRIM_HORIZON");
    assert!(m.report_batch_item_failures);
    assert!(m.bisect_on_error);
    assert!(m.maximum_retry_attempts >= 0, "bounded retries");
    assert!(m.maximum_record_age_seconds > 0, "bounded record age");
    // One parameter feeds both; its default is the sweeper's default too.
    let config =
        outbox_runtime::Config::from_lookup(|k| (k == "TABLE_NAME").then(|| "t".to_owned()))
            .unwrap();
    assert_eq!(
        m.maximum_record_age_seconds as u64,
        config.stranded_after.as_secs()
    );
    // The home-region rule's two: this region's items, items without one.
    assert_eq!(m.patterns.len(), 2);
}

/// The template's pattern is the one the key schema builds (the pattern of
/// a table with other names is built the same way: docs/adopt.md).
#[test]
fn the_pattern_is_the_default_key_schemas() {
    for region in [devkit::REGION, "eu-west-1"] {
        let m = MappingSettings::from_template_in(&root().join(devkit::OUTBOX_TEMPLATE), region)
            .unwrap();
        let schema = outbox_core::KeySchema::default().with_home_region(Some(region.to_owned()));
        assert_eq!(json(&m.patterns), json(&schema.stream_filter_patterns()));
    }
}

/// Issue #27 item 2: the reusable stack hands each key-schema setting to
/// the functions from a parameter whose default is today's name, and builds
/// the mapping's filter from the same parameters: with a table's other
/// names (docs/adopt.md's second table), the template's pattern is the one
/// `KeySchema` builds from the functions' settings.
#[test]
fn the_stack_builds_its_filter_from_the_key_schema_parameters() {
    let doc = read(devkit::OUTBOX_TEMPLATE);
    let variables = &doc["Globals"]["Function"]["Environment"]["Variables"];
    let settings = outbox_core::KeySchema::VARIABLES;
    // Each setting is `!Ref <Parameter>`.
    let parameter = |setting: &str| -> String {
        match &variables[setting] {
            Y::Tagged(t) if t.tag == "!Ref" => t.value.as_str().unwrap().to_owned(),
            other => panic!("{setting} is not a !Ref to a parameter: {other:?}"),
        }
    };
    let default = |name: &str| {
        doc["Parameters"][name]["Default"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let defaults = outbox_core::KeySchema::from_lookup(|k| {
        settings.contains(&k).then(|| default(&parameter(k)))
    })
    .unwrap();
    assert!(
        defaults.is_default(),
        "the parameters' defaults are today's names"
    );

    let theirs = [
        ("PARTITION_KEY", "pk"),
        ("SORT_KEY", "sk"),
        ("OUTBOX_PREFIX", "evt#"),
        ("PENDING_INDEX", "outbox-pending"),
        ("PENDING_INDEX_PARTITION_KEY", "opk"),
        ("PENDING_INDEX_SORT_KEY", "osk"),
        ("DEAD_LETTER_INDEX", "outbox-dead"),
        ("DEAD_LETTER_INDEX_PARTITION_KEY", "dpk"),
        ("DEAD_LETTER_INDEX_SORT_KEY", "dsk"),
        ("TTL_ATTRIBUTE", "ttl"),
    ];
    let schema = testkit::schema_named(&theirs);
    // The patterns as CloudFormation substitutes them with those
    // parameters, in eu-west-2, with the home-region rule on (each filter's
    // `!If` then-branch) and off (the else-branch of the first).
    let filters = &doc["Resources"]["PublisherFunction"]["Properties"]["Events"]["OutboxStream"]
        ["Properties"]["FilterCriteria"]["Filters"];
    let substituted = |filter: &Y, branch: usize| -> Option<Value> {
        let chosen = match filter {
            Y::Tagged(t) if t.tag == "!If" => &t.value.as_sequence().unwrap()[branch],
            other => panic!("a filter is not an !If on the home-region rule: {other:?}"),
        };
        let mut pattern = match &chosen["Pattern"] {
            Y::Tagged(t) if t.tag == "!Sub" => t.value.as_str().unwrap().to_owned(),
            Y::Null => return None, // !Ref AWS::NoValue
            other => panic!("the pattern is not a !Sub of the parameters: {other:?}"),
        };
        for (setting, value) in theirs {
            pattern = pattern.replace(&format!("${{{}}}", parameter(setting)), value);
        }
        pattern = pattern.replace("${AWS::Region}", "eu-west-2");
        assert!(!pattern.contains("${"), "{pattern}");
        Some(serde_json::from_str(&pattern).unwrap())
    };
    // Branch 1 of each `!If`: the rule on; branch 2: off.
    let branch = |n: usize| -> Vec<Value> {
        filters
            .as_sequence()
            .unwrap()
            .iter()
            .filter_map(|f| substituted(f, n))
            .collect()
    };
    let regional = schema.clone().with_home_region(Some("eu-west-2".into()));
    assert_eq!(branch(1), json(&regional.stream_filter_patterns()));
    assert_eq!(branch(2), json(&schema.stream_filter_patterns()));
}

#[test]
fn the_pattern_passes_only_outbox_inserts_of_the_samples() {
    let filters = mapping().filters().unwrap();
    let records = |name: &str| -> Vec<Value> {
        let event: Value = serde_json::from_str(&sample(name)).unwrap();
        event["Records"].as_array().unwrap().clone()
    };
    let mixed = records("publisher-mixed-batch.json");
    let passed: Vec<(&str, &str)> = mixed
        .iter()
        .filter(|r| filters.matches(r))
        .map(|r| {
            let sk = r["dynamodb"]["Keys"]["SK"]["S"].as_str().unwrap();
            (r["eventName"].as_str().unwrap(), sk)
        })
        .collect();
    assert_eq!(passed.len(), 2, "{passed:?}");
    assert!(passed
        .iter()
        .all(|(name, sk)| *name == "INSERT" && sk.starts_with("OUTBOX#")));
    let all_pass = |name: &str| records(name).iter().all(|r| filters.matches(r));
    assert!(all_pass("publisher-single-insert.json"));
    // An outbox insert without its envelope never reaches the publisher
    // through the mapping: the sweeper finds it in the pending index and
    // dead-letters it (it does not decode). Invoked directly, the publisher
    // dead-letters it at once.
    assert!(!all_pass("publisher-malformed-outbox.json"));
}

#[tokio::test]
async fn the_pattern_against_real_stream_records() {
    let stack = Stack::with_bus().await;
    // The writer: orders (META + OUTBOX inserts), payments (META modifies),
    // idempotency records, and the shard settings record.
    let service = writer::OrderService::from_config(stack.ddb.clone(), &stack.config(&[]));
    let key = writer::IdempotencyKey::parse("template-test-key").unwrap();
    let new = writer::NewOrder::try_from(
        serde_json::from_value::<writer::CreateOrderRequest>(serde_json::json!({
            "customerId": "c-1", "currency": "EUR",
            "items": [{"sku": "A-1", "quantity": 1, "unitPriceCents": 100}]
        }))
        .unwrap(),
    )
    .unwrap();
    let order = match service
        .create(&testkit::test_caller(), new, Some(&key), None)
        .await
        .unwrap()
    {
        writer::Reply::Done(order) => order,
        other => panic!("{other:?}"),
    };
    service
        .pay(&testkit::test_caller(), &order.order_id, None, None)
        .await
        .unwrap();
    stack.create_orders(2).await;
    outbox_runtime::record_shard_count(&stack.ddb, &stack.table, &Default::default(), 8)
        .await
        .unwrap();
    // The sweeper with a sink that refuses everything: one stranded item
    // gets its attempt recorded (MODIFY), another is dead-lettered (MODIFY).
    stack.put_event_aged(Duration::from_secs(2 * 86_400)).await;
    let proxy = FaultProxy::start().await;
    let (sink, store) = stack.through(&proxy, 8).await;
    proxy.inject("PutEvents", Fault::refuse_all("ThrottlingException"), None);
    let mut sweeper = testkit::scenario::sweeper(sink, store, &stack, &[]);
    sweeper
        .sweep(OffsetDateTime::now_utc(), &far_deadline())
        .await;
    stack.put_event_aged(Duration::from_secs(3 * 86_400)).await;
    sweeper.settings.max_attempts = 1;
    sweeper
        .sweep(
            OffsetDateTime::now_utc() + Duration::from_secs(86_400),
            &far_deadline(),
        )
        .await;
    // Strict ordering: an event held behind an older one of its aggregate
    // (MODIFY, heldBehind).
    let a1 = stack
        .put_aggregate_event("held", 1, Duration::ZERO, 0, 8)
        .await;
    let a2 = stack
        .put_aggregate_event("held", 2, Duration::ZERO, 1, 8)
        .await;
    outbox_engine::PublishStore::hold(&stack.store(), &a2.key(), &a1.sk, None, &far_deadline())
        .await
        .unwrap();
    // The publisher: its deletes (REMOVE).
    let mut stream = stack.stream();
    let mut records = stream.read().await.unwrap();
    let (sink, _) = stack.eventbridge_sink();
    publisher::Publisher::new(sink, stack.store())
        .with_keys(stack.keys.clone())
        .process(records.clone(), &far_deadline())
        .await
        .unwrap();
    records.extend(stream.read().await.unwrap());

    let filters = mapping().filters().unwrap();
    let mut seen = HashSet::new();
    let mut passed = 0;
    for record in &records {
        let json = serde_json::to_value(record).unwrap();
        let key = |name: &str| -> String {
            serde_dynamo::from_attribute_value(record.change.keys[name].clone()).unwrap()
        };
        let (pk, sk) = (key("PK"), key("SK"));
        let outbox_insert = record.event_name == "INSERT" && sk.starts_with("OUTBOX#");
        assert_eq!(
            filters.matches(&json),
            outbox_insert,
            "{} {pk} {sk}",
            record.event_name
        );
        passed += usize::from(outbox_insert);
        let kind = if sk.starts_with("OUTBOX#") {
            "outbox"
        } else {
            pk.split('#').next().unwrap_or("").to_owned().leak()
        };
        seen.insert((record.event_name.clone(), kind));
    }
    // 3 created, 1 paid, 4 put by hand.
    assert_eq!(passed, 8);
    // Every kind of record the system writes was seen.
    for kind in [
        ("INSERT", "outbox"),
        ("MODIFY", "outbox"),
        ("REMOVE", "outbox"),
        ("INSERT", "ORDER"),
        ("MODIFY", "ORDER"),
        ("INSERT", "IDEMPOTENCY"),
        ("INSERT", "OUTBOX_SETTINGS"),
    ] {
        assert!(
            seen.contains(&(kind.0.to_owned(), kind.1)),
            "{kind:?} missing from {seen:?}"
        );
    }
}

/// Issue #27 item 1: the orders example nests the reusable stack and keeps
/// its outputs. CloudFormation checks a nested stack's parameters and
/// outputs only at deploy time; this checks them here: every parameter the
/// example passes is one the stack takes, every parameter without a
/// default is passed, every `Outbox.Outputs.X` the example reads is an
/// output of the stack, and the example's outputs are the ones it had
/// before the split.
#[test]
fn the_example_nests_the_reusable_stack_and_keeps_its_outputs() {
    let example = read("template.yaml");
    let outbox = read(devkit::OUTBOX_TEMPLATE);
    let application = &example["Resources"]["Outbox"];
    assert_eq!(
        application["Type"].as_str(),
        Some("AWS::Serverless::Application")
    );
    assert_eq!(
        application["Properties"]["Location"].as_str(),
        Some(devkit::OUTBOX_TEMPLATE)
    );
    let passed = keys(&application["Properties"]["Parameters"]);
    let taken = outbox["Parameters"].as_mapping().unwrap();
    for name in &passed {
        assert!(
            taken.contains_key(name.as_str()),
            "{name} is not a parameter of the stack"
        );
    }
    for (name, parameter) in taken {
        let name = name.as_str().unwrap();
        if parameter.get("Default").is_none() {
            assert!(
                passed.iter().any(|p| p == name),
                "{name} has no default and is not passed"
            );
        }
    }
    // Every Outbox.Outputs.X the example reads.
    let text = std::fs::read_to_string(root().join("template.yaml")).unwrap();
    let outputs = keys(&outbox["Outputs"]);
    let mut read_outputs = 0;
    for (at, _) in text.match_indices("Outbox.Outputs.") {
        let name: String = text[at + "Outbox.Outputs.".len()..]
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect();
        assert!(
            outputs.contains(&name),
            "Outbox.Outputs.{name} is not an output of the stack"
        );
        read_outputs += 1;
    }
    assert!(read_outputs > 0);
    // The example's outputs before the split, all still there.
    let mine = keys(&example["Outputs"]);
    for name in [
        "ApiUrl",
        "TableName",
        "EventBusName",
        "EventArchiveName",
        "EventTopicArn",
        "SubscriberQueueUrl",
        "ReadModelTableName",
        "ProjectorQueueUrl",
        "ProjectorDeadLetterQueueUrl",
        "OperationsDeadLetterQueueUrl",
        "PublisherFailureQueueUrl",
        "OnFailureDeadLetterQueueUrl",
        "AlarmTopicArn",
        "AlarmKeyArn",
    ] {
        assert!(mine.iter().any(|m| m == name), "the output {name} is gone");
    }
}

/// The variable names a template sets for `function` (Globals and the
/// function's own), read from the YAML as written: whatever their values.
fn variables_written(template: &str, function: &str) -> Vec<String> {
    let doc = read(template);
    let names = |v: &Y| if v.is_null() { Vec::new() } else { keys(v) };
    let mut out = names(&doc["Globals"]["Function"]["Environment"]["Variables"]);
    out.extend(names(
        &doc["Resources"][function]["Properties"]["Environment"]["Variables"],
    ));
    out.sort();
    out.dedup();
    out
}

/// Issue #38 item 1: one resolved configuration. The real publisher and
/// sweeper binaries, started by the harness as every local run starts them,
/// record the variables they were given (their cold-start settings
/// record); each is exactly what the templates give the function at their
/// defaults on this stack, and every variable the templates write for them
/// is one the record keeps (a variable a template adds and the functions do
/// not record fails here). The local run writes the region's keys, as the
/// deployed default does. The scripts' path (`devkit env`) gives the same.
#[tokio::test]
async fn the_functions_run_with_the_templates_environment() {
    let stack = Stack::with_bus().await;
    for function in [devkit::Function::Publisher, devkit::Function::Sweeper] {
        for name in variables_written(devkit::OUTBOX_TEMPLATE, function.logical_id()) {
            assert!(
                outbox_runtime::VARIABLES.contains(&name.as_str()),
                "{name}, set by the template for {}, is not recorded",
                function.binary()
            );
        }
    }
    let publisher = stack.function(devkit::Function::Publisher, &[], &[]);
    stack
        .pump(&publisher, None)
        .run_until_idle()
        .await
        .expect("pump");
    let sweeper = stack.function(devkit::Function::Sweeper, &[], &[]);
    sweeper.sweep_scheduled().await;
    let records = outbox_engine::PublishStore::recorded_settings(&stack.store(), &far_deadline())
        .await
        .expect("records");
    assert_eq!(records.len(), 2, "{records:?}");
    for record in &records {
        assert_eq!(record.region, devkit::REGION);
        let function = devkit::Function::of_binary(&record.function).expect("a function");
        let expected: std::collections::BTreeMap<String, String> = stack
            .deployment
            .env(function)
            .expect("template environment");
        assert_eq!(record.variables, expected, "{}", record.function);
        assert_eq!(
            expected.get("HOME_REGION").map(String::as_str),
            Some(devkit::REGION),
            "the region's keys by default"
        );
    }
    // The scripts' path: `devkit env`, from the same templates.
    let (bus, _) = stack.bus.clone().unwrap();
    let out = std::process::Command::new(testkit::lambda::binary("devkit").unwrap())
        .args([
            "env",
            "--table",
            &stack.table,
            "--stream",
            &stack.stream_arn,
            "--bus",
            &bus,
            "sweeper",
        ])
        .current_dir(root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: std::collections::BTreeMap<String, String> = String::from_utf8(out.stdout)
        .unwrap()
        .trim()
        .split(',')
        .filter_map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
        })
        .collect();
    assert_eq!(
        printed,
        stack.deployment.env(devkit::Function::Sweeper).unwrap()
    );
}

/// #64 point 3: in both templates every parameter stands in exactly one
/// labelled group (the console and `sam deploy --guided` show the groups in
/// order), the first group holds what a user must decide, and every label
/// names a parameter that exists.
#[test]
fn every_parameter_is_in_one_labelled_group_the_decisions_first() {
    for (template, decisions) in [
        (
            devkit::OUTBOX_TEMPLATE,
            &[
                "TableName",
                "TableStreamArn",
                "EventBusName",
                "EventTopicArn",
                "Ordering",
            ][..],
        ),
        (devkit::EXAMPLE_TEMPLATE, &["Sink", "Ordering"][..]),
    ] {
        let doc = read(template);
        let parameters = keys(&doc["Parameters"]);
        let interface = &doc["Metadata"]["AWS::CloudFormation::Interface"];
        let groups = interface["ParameterGroups"].as_sequence().expect("groups");
        let mut grouped: Vec<String> = Vec::new();
        for group in groups {
            assert!(
                group["Label"]["default"]
                    .as_str()
                    .is_some_and(|l| !l.is_empty()),
                "{template}: a group without a label"
            );
            for name in group["Parameters"].as_sequence().unwrap() {
                grouped.push(name.as_str().unwrap().to_owned());
            }
        }
        let mut sorted = grouped.clone();
        sorted.sort();
        let mut expected = parameters.clone();
        expected.sort();
        assert_eq!(
            sorted, expected,
            "{template}: each parameter in exactly one group"
        );
        let first: Vec<&str> = groups[0]["Parameters"]
            .as_sequence()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        for decision in decisions {
            assert!(
                first.contains(decision),
                "{template}: {decision} is not in the first group"
            );
        }
        for (name, _) in interface["ParameterLabels"].as_mapping().unwrap() {
            assert!(
                parameters.iter().any(|p| Some(p.as_str()) == name.as_str()),
                "{template}: label of no parameter {name:?}"
            );
        }
    }
}
