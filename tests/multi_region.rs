//! Global tables (issue #28), locally: two "regions", each a DynamoDB
//! Local server with its replica of one table (`NEW_AND_OLD_IMAGES`, as
//! global tables require) and its own bus on moto; a replication emulator
//! that copies every committed change of each replica to the other, as
//! global tables do; in each region the real publisher binary behind the
//! stream mapping emulator, with the reusable stack's filter as deployed in
//! that region. Orders written in both regions are each published exactly
//! once, by their home region, while both run.
//!
//! Then one region stops with pending and dead-lettered items,
//! `outboxctl adopt-region` runs in the other, and every one of those events
//! is published once, with its original id, by the region that took them.

use outbox_engine::{PublishStore, SweepStore};
use std::collections::HashMap;
use std::time::Duration;

use aws_config::SdkConfig;
use aws_lambda_events::event::dynamodb::EventRecord;
use aws_sdk_dynamodb::types::{AttributeValue, StreamViewType};
use devkit::{MappingSettings, Pump, StreamCursor};
use outbox_core::KeySchema;
use serde_json::Value;
use testkit::lambda::{binary, loopback_env, FunctionSpec, LambdaFunction};
use testkit::scenario::envelopes;
use testkit::{drain_queue, root, unique};

type Item = HashMap<String, AttributeValue>;

/// One region: its replica of the table, its bus and subscriber queue.
struct Region {
    name: &'static str,
    sdk: SdkConfig,
    dynamodb: String,
    table: String,
    stream_arn: String,
    bus: String,
    queue_url: String,
}

impl Region {
    async fn new(name: &'static str, dynamodb: &str, table: &str) -> Self {
        let sdk = devkit::sdk_config_in_region(name, dynamodb)
            .await
            .expect("a loopback replica endpoint");
        let stream_arn = devkit::create_table_streaming(
            &sdk,
            table,
            &KeySchema::default(),
            &[],
            StreamViewType::NewAndOldImages,
        )
        .await
        .expect("replica table");
        let bus = unique("bus");
        let subscriber = devkit::create_bus(&sdk, &bus, "outbox.orders")
            .await
            .expect("bus");
        Self {
            name,
            sdk,
            dynamodb: dynamodb.to_owned(),
            table: table.to_owned(),
            stream_arn,
            bus,
            queue_url: subscriber.queue_url,
        }
    }

    /// The writer library as this region's functions run it: the home
    /// region from `HOME_REGION` (the stacks set it to `AWS::Region`).
    async fn create_orders(&self, n: usize) -> Vec<String> {
        let env: std::collections::HashMap<String, String> = self
            .deployment()
            .env_vec(devkit::Function::Writer)
            .expect("the writer's environment")
            .into_iter()
            .collect();
        let config = outbox_runtime::Config::from_lookup(|k| env.get(k).cloned()).expect("config");
        assert_eq!(config.keys.home_region.as_deref(), Some(self.name));
        let ddb = aws_sdk_dynamodb::Client::new(&self.sdk);
        let service = writer::OrderService::from_config(ddb, &config);
        let mut ids = Vec::new();
        for i in 0..n {
            let request: writer::CreateOrderRequest = serde_json::from_value(serde_json::json!({
                "customerId": format!("{}-{i}", self.name), "currency": "EUR",
                "items": [{"sku": "A-1", "quantity": 1, "unitPriceCents": 100}]
            }))
            .expect("request");
            let new = writer::NewOrder::try_from(request).expect("valid order");
            let created = service
                .create(&testkit::test_caller(), new, None, None)
                .await;
            match created.expect("order created") {
                writer::Reply::Done(order) => ids.push(order.order_id),
                other => panic!("unexpected {other:?}"),
            }
        }
        ids
    }

    /// This region's stack: the orders example on its replica, in its
    /// region (`HOME_REGION` is `AWS::Region`).
    fn deployment(&self) -> devkit::LocalDeployment {
        devkit::LocalDeployment::example(
            &testkit::root(),
            &self.table,
            &self.stream_arn,
            devkit::LocalSink::Bus(self.bus.clone()),
        )
        .in_region(self.name)
    }

    /// The real binary `name`, configured as this region's stack configures
    /// it.
    fn function(&self, name: &str) -> LambdaFunction {
        let function = devkit::Function::of_binary(name).expect("a function of the stack");
        let region = [
            ("AWS_REGION", self.name),
            ("AWS_DEFAULT_REGION", self.name),
            ("AWS_ENDPOINT_URL_DYNAMODB", &self.dynamodb),
            ("AWS_ENDPOINT_URL_DYNAMODB_STREAMS", &self.dynamodb),
        ];
        let env = loopback_env()
            .into_iter()
            .chain(region.map(|(k, v)| (k.to_owned(), v.to_owned())))
            .chain(
                self.deployment()
                    .env_vec(function)
                    .expect("the function's environment"),
            )
            .collect();
        LambdaFunction::new(FunctionSpec {
            name: format!("{name}-{}", self.name),
            binary: binary(name).expect("function binary"),
            env,
            timeout: Duration::from_secs(60),
            log: std::env::temp_dir().join(format!("{}.log", unique("multi-region"))),
        })
    }

    async fn outbox_items(&self) -> Vec<Item> {
        let ddb = aws_sdk_dynamodb::Client::new(&self.sdk);
        devkit::scan_all(&ddb, &self.table)
            .await
            .expect("scan")
            .into_iter()
            .filter(
                |i| matches!(i.get("SK"), Some(AttributeValue::S(sk)) if sk.starts_with("OUTBOX#")),
            )
            .collect()
    }

    /// The store as this region's functions (and `outboxctl`, with
    /// `HOME_REGION`) see the table.
    fn store(&self) -> outbox_runtime::DynamoStore {
        outbox_runtime::DynamoStore::new(aws_sdk_dynamodb::Client::new(&self.sdk), &self.table, 8)
            .with_keys(KeySchema::default().with_home_region(Some(self.name.to_owned())))
    }

    /// What this region's bus delivered: the events' aggregate ids and
    /// their event ids, each sorted.
    async fn delivered(&self) -> (Vec<String>, Vec<String>) {
        let events = envelopes(&drain_queue(&self.sdk, &self.queue_url).await);
        let sorted = |mut v: Vec<String>| {
            v.sort();
            v
        };
        let aggregates = sorted(events.iter().map(|e| e.aggregate_id.clone()).collect());
        (
            aggregates,
            sorted(events.iter().map(|e| e.event_id.to_string()).collect()),
        )
    }
}

/// A change as the replicator fingerprints it: the keys, and the new image
/// (`None`: a delete).
type Change = (Value, Option<Value>);

/// The replication emulator: every committed change of one replica is
/// applied to the other, in stream order, as global tables replicate; a
/// change it applied itself is not replicated back (global tables do not
/// echo a replicated write). Conflicting writes to one item in both regions
/// would resolve by the last one applied (last writer wins); this test
/// writes each item in one region only.
struct Replicator {
    sides: [(StreamCursor, aws_sdk_dynamodb::Client, String); 2],
    applied: [Vec<Change>; 2],
    copied: usize,
}

impl Replicator {
    fn new(a: &Region, b: &Region) -> Self {
        let side = |r: &Region| {
            (
                StreamCursor::new(&r.sdk, &r.stream_arn),
                aws_sdk_dynamodb::Client::new(&r.sdk),
                r.table.clone(),
            )
        };
        Self {
            sides: [side(a), side(b)],
            applied: [Vec::new(), Vec::new()],
            copied: 0,
        }
    }

    /// Replicates what both streams hold now; returns how many changes
    /// were copied.
    async fn pass(&mut self) -> usize {
        let mut copied = 0;
        for from in 0..2 {
            let to = 1 - from;
            let records = self.sides[from].0.read().await.expect("stream read");
            for record in records {
                let change = fingerprint(&record);
                // A change this replicator made: not replicated back.
                if let Some(at) = self.applied[from].iter().position(|c| *c == change) {
                    self.applied[from].remove(at);
                    continue;
                }
                let (_, client, table) = &self.sides[to];
                let image: Item = attributes(record.change.new_image);
                if record.event_name == "REMOVE" {
                    client
                        .delete_item()
                        .table_name(table)
                        .set_key(Some(attributes(record.change.keys)))
                        .send()
                        .await
                        .expect("replicated delete");
                } else {
                    client
                        .put_item()
                        .table_name(table)
                        .set_item(Some(image))
                        .send()
                        .await
                        .expect("replicated put");
                }
                self.applied[to].push(change);
                copied += 1;
            }
        }
        self.copied += copied;
        copied
    }
}

fn fingerprint(record: &EventRecord) -> Change {
    let keys = serde_json::to_value(&record.change.keys).unwrap_or_default();
    let image = (record.event_name != "REMOVE")
        .then(|| serde_json::to_value(&record.change.new_image).unwrap_or_default());
    (keys, image)
}

fn attributes(item: serde_dynamo::Item) -> Item {
    item.into_inner()
        .into_iter()
        .map(|(k, v)| (k, v.into()))
        .collect()
}

#[tokio::test]
async fn each_event_is_published_once_by_its_home_region() {
    let (_, east, west, mut replicator) = two_regions().await;

    let east_fn = east.function("publisher");
    let west_fn = west.function("publisher");
    let mut east_pump = pump(&east, &east_fn);
    let mut west_pump = pump(&west, &west_fn);

    let east_orders = east.create_orders(4).await;
    let west_orders = west.create_orders(3).await;
    // Replication, publishing and the replicated deletes, until nothing
    // moves: each round replicates what was written, lets each region's
    // mapping deliver its stream, then replicates the publishers' deletes.
    for _ in 0..20 {
        let copied = replicator.pass().await;
        east_pump.run_until_idle().await.expect("east pump");
        west_pump.run_until_idle().await.expect("west pump");
        if copied == 0 && replicator.pass().await == 0 {
            break;
        }
    }

    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    assert_eq!(east.delivered().await.0, sorted(east_orders.clone()));
    assert_eq!(west.delivered().await.0, sorted(west_orders.clone()));
    // Each region saw the other's inserts replicated into its stream, and
    // its filter dropped them.
    assert!(east_pump.stats.filtered_out >= west_orders.len());
    assert!(west_pump.stats.filtered_out >= east_orders.len());
    // Nothing left in either replica: each home region deleted its items,
    // and the deletes replicated.
    assert!(east.outbox_items().await.is_empty());
    assert!(west.outbox_items().await.is_empty());
    assert!(replicator.copied >= 2 * (east_orders.len() + west_orders.len()));
}

/// One table replicated in two regions: us-east-1 on the main DynamoDB
/// Local, eu-west-1 on the replica server; and the replicator between them.
async fn two_regions() -> (String, Region, Region, Replicator) {
    let Ok(replica) = std::env::var("LOCAL_DYNAMODB_REPLICA_ENDPOINT") else {
        panic!("no replica server: run the tests through `make test` (infra/local/with-local.sh)");
    };
    let primary = devkit::dynamodb_endpoint().expect("DynamoDB Local");
    let table = unique("global");
    let east = Region::new("us-east-1", &primary, &table).await;
    let west = Region::new("eu-west-1", &replica, &table).await;
    let replicator = Replicator::new(&east, &west);
    (table, east, west, replicator)
}

/// The stream mapping of `region`'s stack (infra/outbox.yaml's filter as
/// deployed there) into `publisher`.
fn pump<'a>(region: &Region, publisher: &'a LambdaFunction) -> Pump<&'a LambdaFunction> {
    let template = root().join(devkit::OUTBOX_TEMPLATE);
    Pump::new(
        StreamCursor::new(&region.sdk, &region.stream_arn),
        MappingSettings::from_template_in(&template, region.name).unwrap(),
        publisher,
        None,
    )
    .unwrap()
}

/// Replicates until both streams are quiet.
async fn settle(replicator: &mut Replicator) {
    for _ in 0..20 {
        if replicator.pass().await == 0 {
            return;
        }
    }
    panic!("replication did not settle");
}

#[tokio::test]
async fn a_lost_regions_events_are_adopted_and_published_once_by_another() {
    let (table, east, west, mut replicator) = two_regions().await;
    let east_fn = east.function("publisher");
    let mut east_pump = pump(&east, &east_fn);

    // West writes four events; one is dead-lettered there (its sink was
    // down for good), then west stops before publishing the others.
    west.create_orders(4).await;
    let written = west.outbox_items().await;
    assert_eq!(written.len(), 4);
    let ids = |items: &[Item]| {
        let mut ids: Vec<String> = items
            .iter()
            .map(|i| i["eventId"].as_s().unwrap().clone())
            .collect();
        ids.sort();
        ids
    };
    let all_ids = ids(&written);
    let text = |i: &Item, k: &str| i[k].as_s().unwrap().clone();
    let letter = &written[0];
    let letter_key = outbox_core::keys::ItemKey::new(text(letter, "PK"), text(letter, "SK"));
    let (aggregate, deadline) = (text(letter, "aggregateId"), testkit::far_deadline());
    let dead_letter = outbox_engine::DeadLetter {
        key: &letter_key,
        aggregate_id: Some(&aggregate),
        reason: "the sink stayed down",
        attempts: Some(12),
        claim: None,
    };
    let marked = west.store().dead_letter(dead_letter, &deadline).await;
    assert_eq!(marked.unwrap(), outbox_engine::Marked::Updated);
    settle(&mut replicator).await;
    // East's mapping drops every one of them: west's items.
    east_pump.run_until_idle().await.unwrap();
    assert!(east.delivered().await.0.is_empty());
    let replicated = east.outbox_items().await;
    assert_eq!(ids(&replicated), all_ids);
    assert!(replicated
        .iter()
        .all(|i| i["homeRegion"].as_s().unwrap() == "eu-west-1"));

    // West's publisher started minutes before the region was lost (#61
    // finding 5): its settings record says so, and a region that recorded
    // a run within the hour may be alive. adopt-region refuses without
    // --force (at b82c310 it adopted at once: two regions publishing).
    let at = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap();
    // Each region's publisher records its settings as it starts, east's
    // too (the operator's tool reads its own region's).
    for region in [&east, &west] {
        // The stack's own name, as its functions record it.
        let publisher = region.function("publisher");
        let stack = publisher
            .env("STACK_NAME")
            .expect("the templates set STACK_NAME");
        PublishStore::record_settings(
            &region.store(),
            &outbox_runtime::RecordedSettings {
                region: region.name.into(),
                stack: stack.to_owned(),
                function: "publisher".into(),
                by: format!("outbox-publisher at {at}"),
                since: Some(at.clone()),
                variables: [("HOME_REGION".to_owned(), region.name.to_owned())].into(),
            },
            &testkit::far_deadline(),
        )
        .await
        .unwrap();
    }
    settle(&mut replicator).await;
    let operator = testkit::Operator::new(&table).with_env(&[("HOME_REGION", "us-east-1")]);
    let (ok, _, err) = operator.adopt_region(&["--from", "eu-west-1"]);
    assert!(!ok, "a region that ran within the hour is not adopted");
    let why = err.contains("within the last hour") && err.contains("--force");
    assert!(why, "{err}");
    assert_eq!(east.outbox_items().await, replicated, "nothing moved");

    // adopt-region in east: a dry run changes nothing...
    let adopt = |extra: &[&str]| {
        let mut args = vec!["--from", "eu-west-1", "--json"];
        args.extend_from_slice(extra);
        let (ok, out, err) = operator.adopt_region(&args);
        assert!(ok, "{err}");
        out.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .collect::<Vec<Value>>()
    };
    // A region name that is not one: refused before anything is read.
    let (ok, _, err) = operator.adopt_region(&["--from", "EU West"]);
    assert!(!ok && err.contains("--from \"EU West\""), "{err}");
    let dry = adopt(&["--dry-run"]);
    assert_eq!(dry.len(), 5, "four audit lines and the summary: {dry:?}");
    assert_eq!(dry[4]["wouldAdopt"], 4);
    assert_eq!(east.outbox_items().await, replicated);
    // ...the run moves the three pending and the dead letter, one audit
    // line each...
    let run = adopt(&["--force"]);
    let audits = &run[..run.len() - 1];
    assert_eq!(audits.len(), 4, "{run:?}");
    assert!(audits
        .iter()
        .all(|a| a["outcome"] == "adopted" && a["to"] == "us-east-1"));
    let dead: Vec<&Value> = audits
        .iter()
        .filter(|a| a["index"] == "dead-letter")
        .collect();
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0]["eventId"], text(letter, "eventId"));
    // ...and a second run finds nothing.
    let again = adopt(&["--force"]);
    assert_eq!(again.len(), 1, "{again:?}");
    assert_eq!(again[0]["adopted"], 0);

    // West comes back before east has published them (#40 item 3): its
    // mapping starts from its backlog, the original inserts (home region
    // eu-west-1, so its filter admits them); its publisher, a new process,
    // checks the batch and finds them adopted: nothing is published twice.
    settle(&mut replicator).await;
    let west_fn = west.function("publisher");
    pump(&west, &west_fn).run_until_idle().await.unwrap();
    let (published, _) = west.delivered().await;
    assert!(published.is_empty(), "adopted events are east's to publish");

    // East's scheduled sweep (the real sweeper binary under the local
    // Lambda runtime) publishes the pending ones at once; the operator
    // republishes the dead letter (outboxctl, this region's keys).
    let scheduled = testkit::sample("sweeper-scheduled.json");
    let swept = east.function("sweeper").invoke(scheduled.as_bytes()).await;
    swept.expect("scheduled sweep");
    let store = east.store();
    let mut dead_here = 0;
    for shard in 0..8 {
        let page = store.dead_letter_page(shard, 100, None, &deadline).await;
        dead_here += page.unwrap().items.len();
    }
    assert_eq!(dead_here, 1, "the dead letter is this region's now");
    let letter_id = text(letter, "eventId");
    let now = [
        "--now",
        "--bus",
        &east.bus,
        "--source",
        "outbox.orders",
        "--json",
    ];
    let (ok, out, err) = operator.redrive(&[&[letter_id.as_str()][..], &now].concat());
    assert!(ok, "{err}");
    assert!(out.contains("published"), "{out}");

    // Every one of west's events, once, with its original id, on east's
    // bus; nothing left in either replica once east's deletes replicate.
    assert_eq!(east.delivered().await.1, all_ids);
    assert!(west.delivered().await.0.is_empty());
    settle(&mut replicator).await;
    assert!(east.outbox_items().await.is_empty());
    assert!(west.outbox_items().await.is_empty());

    // West comes back once they were published and their deletes
    // replicated: a new process with the same backlog publishes nothing.
    let west_fn = west.function("publisher");
    pump(&west, &west_fn).run_until_idle().await.unwrap();
    let (published, _) = west.delivered().await;
    assert!(published.is_empty(), "nothing published twice");
}
