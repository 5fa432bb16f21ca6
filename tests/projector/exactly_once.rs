//! The inbox library and the projector keep the read model exactly once in
//! effect: duplicates in a batch and across batches, every arrival order,
//! concurrent deliveries of one event, and a guarded action's own failed
//! condition, which is never called stale.

use aws_sdk_dynamodb::types::AttributeValue;
use inbox::{EventOutcome, Inbox};
use outbox_core::EventEnvelope;
use projector::{project_batch, Counts};
use serde_json::json;
use testkit::far_deadline;
use testkit::proxy::FaultProxy;

use super::{batch, model, order_event, projector, read_model, Model};

#[tokio::test]
async fn duplicates_in_one_batch_and_across_batches_apply_once() {
    let (sdk, table) = read_model().await;
    let p = projector(&sdk, &table);
    let created = order_event("o1", "c1", 1, false, 1500);
    let paid = order_event("o1", "c1", 2, true, 1500);

    let (response, counts) =
        project_batch(&p, &batch(&[&created, &created, &paid]), &far_deadline()).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!((counts.applied, counts.duplicate), (2, 1));
    let (response, counts) = project_batch(&p, &batch(&[&paid, &created]), &far_deadline()).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!((counts.applied, counts.duplicate), (0, 2));

    let model = model(&sdk, &table).await;
    assert_eq!(model.summaries["c1"], (1, 1, 1500));
    assert_eq!(model.orders["o1"], ("PAID".into(), 2, 1500));
    assert_eq!(model.inbox, 2, "one inbox record per distinct event");
}

fn permutations<T: Clone>(items: &[T]) -> Vec<Vec<T>> {
    if items.len() <= 1 {
        return vec![items.to_vec()];
    }
    let mut all = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let first = rest.remove(i);
        for mut tail in permutations(&rest) {
            tail.insert(0, first.clone());
            all.push(tail);
        }
    }
    all
}

#[tokio::test]
async fn every_arrival_order_of_create_and_pay_gives_the_same_read_model() {
    let (sdk, table) = read_model().await;
    let p = projector(&sdk, &table);
    // Each order's create and pay, each delivered twice: every order of
    // those four deliveries, one message per invocation, on its own
    // customer and order.
    let orders = permutations(&["C", "C", "P", "P"]);
    let mut expected = Model::default();
    let mut totals = Counts::default();
    for (n, arrival) in orders.iter().enumerate() {
        let (order, customer) = (format!("o{n}"), format!("c{n}"));
        let cents = 100 + n as u64;
        let created = order_event(&order, &customer, 1, false, cents);
        let paid = order_event(&order, &customer, 2, true, cents);
        for which in arrival {
            let body = if *which == "C" { &created } else { &paid };
            let (response, counts) = project_batch(&p, &batch(&[body]), &far_deadline()).await;
            assert!(response.batch_item_failures.is_empty(), "{arrival:?}");
            totals.applied += counts.applied;
            totals.duplicate += counts.duplicate;
            totals.stale += counts.stale;
        }
        expected.summaries.insert(customer, (1, 1, cents));
        expected.orders.insert(order, ("PAID".into(), 2, cents));
    }
    let got = model(&sdk, &table).await;
    assert_eq!(got.summaries, expected.summaries);
    assert_eq!(got.orders, expected.orders);
    // Pay first: both late creates are Stale (a stale event leaves no
    // inbox record, so its duplicate is Stale again, not Duplicate).
    let pay_first = orders.iter().filter(|o| o[0] == "P").count() as u32;
    assert_eq!(totals.stale, 2 * pay_first);
    assert_eq!(
        totals.applied + totals.duplicate + totals.stale,
        4 * orders.len() as u32
    );
}

#[tokio::test]
async fn concurrent_deliveries_of_one_event_apply_it_once() {
    let (_, table) = read_model().await;
    // Both invocations build and send their transactions concurrently,
    // which is the race the inbox settles.
    let proxy = FaultProxy::start().await;
    let sdk = proxy.sdk().await;
    let a = projector(&sdk, &table);
    let b = projector(&sdk, &table);
    let events: Vec<String> = (0..20)
        .map(|i| order_event(&format!("o{i}"), "c1", 1, false, 10))
        .collect();
    let mut outcomes = Vec::new();
    for body in &events {
        let (x, y) = tokio::join!(a.project(body), b.project(body));
        let mut pair = [x.unwrap().outcome, y.unwrap().outcome];
        pair.sort_by_key(|o| o.as_str());
        outcomes.push(pair);
    }
    for pair in &outcomes {
        assert_eq!(pair, &[EventOutcome::Applied, EventOutcome::Duplicate]);
    }
    let model = model(&sdk, &table).await;
    assert_eq!(model.summaries["c1"], (20, 0, 0));
}

/// Issue #25 item 8: a guarded action whose *own* condition fails while the
/// stored version is older is not `Stale` (acknowledging it would drop the
/// event); `Stale` is read from the stored item's version.
#[tokio::test]
async fn a_guarded_actions_own_condition_is_never_called_stale() {
    use aws_sdk_dynamodb::types::Update;
    let (sdk, table) = read_model().await;
    let client = aws_sdk_dynamodb::Client::new(&sdk);
    let s = |v: &str| AttributeValue::S(v.into());
    client
        .put_item()
        .table_name(&table)
        .item("PK", s("ACCOUNT#a1"))
        .item("SK", s("META"))
        .item("version", AttributeValue::N("2".into()))
        .item("state", s("LOCKED"))
        .send()
        .await
        .expect("seed the account");
    let inbox = Inbox::new(&table, inbox::DEFAULT_TTL_SECONDS).unwrap();
    // Renames only an unlocked account, and only from an older version.
    let rename = |version: u64| {
        let event =
            EventEnvelope::new("AccountRenamed", "Account", "a1", version, json!({})).unwrap();
        let update = Update::builder()
            .table_name(&table)
            .key("PK", s("ACCOUNT#a1"))
            .key("SK", s("META"))
            .update_expression("SET #n = :n, version = :v")
            .condition_expression("#st <> :locked")
            .expression_attribute_names("#n", "name")
            .expression_attribute_names("#st", "state")
            .expression_attribute_values(":n", s("Ada"))
            .expression_attribute_values(":v", AttributeValue::N(version.to_string()))
            .expression_attribute_values(":locked", s("LOCKED"))
            .build()
            .unwrap();
        let tx = inbox
            .begin(&event)
            .unwrap()
            .guarded_update("account", update, version);
        (event, tx)
    };

    // Version 3 against stored 2: the guard holds, the lock fails.
    let (event, tx) = rename(3);
    match tx.commit(&client).await {
        Err(inbox::InboxError::ConditionFailed(failed)) => {
            assert_eq!(failed.len(), 1);
            assert_eq!(failed[0].label, "account");
            let stored = failed[0].item.as_ref().expect("ALL_OLD item");
            assert_eq!(stored["version"].as_n().unwrap(), "2");
        }
        other => panic!("a failed own condition must be an error, got {other:?}"),
    }
    let record = client
        .get_item()
        .table_name(&table)
        .key("PK", s(&inbox::inbox_pk(event.event_id)))
        .key("SK", s("META"))
        .consistent_read(true)
        .send()
        .await
        .unwrap();
    assert!(record.item.is_none(), "nothing was written");

    // Version 2 against stored 2: the guard failed: Stale.
    let (_, tx) = rename(2);
    assert_eq!(tx.commit(&client).await.unwrap(), EventOutcome::Stale);
}
