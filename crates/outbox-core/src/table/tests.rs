use std::collections::HashMap;

use aws_sdk_dynamodb::types::{
    AttributeValue, ConditionCheck, Delete, Put, ReturnValuesOnConditionCheckFailure,
    TransactWriteItem, Update,
};

use super::expression::{self, Scope};
use super::{Item, ItemTable, MemoryTable};
use crate::keys::{ItemKey, KeySchema};

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: &str) -> AttributeValue {
    AttributeValue::N(v.into())
}

fn item(pairs: &[(&str, AttributeValue)]) -> Item {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

fn holds(condition: &str, item: &Item) -> Result<bool, String> {
    let names = HashMap::from([("#s".to_owned(), "status".to_owned())]);
    let values = HashMap::from([
        (":pending".to_owned(), s("PENDING")),
        (":two".to_owned(), n("2")),
        (":ten".to_owned(), n("10")),
    ]);
    let scope = Scope {
        names: &names,
        values: &values,
    };
    expression::condition(condition, &scope, item)
}

#[test]
fn conditions_follow_dynamodb_precedence_and_types() {
    let order = item(&[("status", s("PENDING")), ("version", n("2"))]);
    let cases = [
        ("attribute_exists(version)", true),
        ("attribute_not_exists(#s)", false),
        ("#s = :pending AND version = :two", true),
        ("#s = :pending AND version = :ten", false),
        // AND binds tighter than OR.
        ("version = :ten AND #s = :pending OR version = :two", true),
        (
            "version = :ten AND (#s = :pending OR version = :two)",
            false,
        ),
        ("NOT version = :ten", true),
        // Numbers compare as numbers, not as strings ("10" < "2").
        ("version < :ten", true),
        ("version <= :two AND version >= :two", true),
        // Different types: never equal, always different.
        ("#s = :two", false),
        ("#s <> :two", true),
        // A missing attribute compares false.
        ("missing = :two", false),
        ("missing < :two", false),
    ];
    for (condition, expected) in cases {
        assert_eq!(holds(condition, &order), Ok(expected), "{condition}");
    }
}

#[test]
fn what_is_not_evaluated_is_refused_not_ignored() {
    let order = item(&[("status", s("PENDING"))]);
    for condition in [
        "begins_with(#s, :pending)",
        "#s IN (:pending)",
        "#unknown = :pending",
        "#s = :unknown",
        "missing <> :two",
        "#s = :pending AND",
        "(#s = :pending",
        "a.b = :two",
    ] {
        assert!(holds(condition, &order).is_err(), "{condition}");
    }
}

#[test]
fn updates_set_add_and_remove() {
    let names = HashMap::from([("#v".to_owned(), "version".to_owned())]);
    let values = HashMap::from([(":one".to_owned(), n("1")), (":s".to_owned(), s("PAID"))]);
    let scope = Scope {
        names: &names,
        values: &values,
    };
    let mut summary = item(&[("version", n("4")), ("gone", s("x"))]);
    expression::update(
        "SET status = :s, copy = #v ADD #v :one, orders :one REMOVE gone",
        &scope,
        &mut summary,
    )
    .expect("a supported update");
    assert_eq!(
        summary,
        item(&[
            ("status", s("PAID")),
            ("copy", n("4")),
            ("version", n("5")),
            ("orders", n("1")),
        ])
    );
    assert!(expression::update("ADD status :s", &scope, &mut summary).is_err());
    assert!(expression::update("DELETE tags :s", &scope, &mut summary).is_err());
}

fn key(pk: &str, sk: &str) -> Item {
    KeySchema::default().key(&ItemKey::new(pk, sk))
}

/// A transaction's put of `pk`/`sk` with `extra`, if absent.
fn put(pk: &str, sk: &str, extra: &[(&str, AttributeValue)]) -> TransactWriteItem {
    let mut full = key(pk, sk);
    full.extend(item(extra));
    let put = Put::builder()
        .table_name("t")
        .set_item(Some(full))
        .condition_expression("attribute_not_exists(PK)")
        .return_values_on_condition_check_failure(ReturnValuesOnConditionCheckFailure::AllOld)
        .build()
        .expect("a put");
    TransactWriteItem::builder().put(put).build()
}

fn reasons(error: &super::TransactError) -> &[aws_sdk_dynamodb::types::CancellationReason] {
    let service = error.as_service_error().expect("a service error");
    let aws_sdk_dynamodb::operation::transact_write_items::TransactWriteItemsError::TransactionCanceledException(c) = service else {
        panic!("not a cancellation: {service:?}");
    };
    c.cancellation_reasons()
}

fn codes(error: &super::TransactError) -> Vec<String> {
    let codes = reasons(error).iter().map(|r| r.code().unwrap_or(""));
    codes.map(str::to_owned).collect()
}

fn delete(pk: &str, sk: &str) -> TransactWriteItem {
    let delete = Delete::builder().table_name("t").set_key(Some(key(pk, sk)));
    let delete = delete.build().expect("a delete");
    TransactWriteItem::builder().delete(delete).build()
}

#[tokio::test]
async fn a_transaction_is_all_or_nothing_with_reasons_in_order() {
    let table = MemoryTable::new(KeySchema::default());
    let a1 = || table.item("t", &ItemKey::new("A", "1"));
    let tx = |items, token| table.transact_write(items, token);
    let first = put("A", "1", &[("v", n("1"))]);
    tx(vec![first.clone()], None).await.expect("the first put");

    // A second action that would succeed is not applied when the first fails.
    let other = put("B", "1", &[]);
    let error = tx(vec![first, other], None).await.expect_err("A exists");
    assert_eq!(codes(&error), ["ConditionalCheckFailed", "None"]);
    assert_eq!(
        reasons(&error)[0].item().and_then(|i| i.get("v")).cloned(),
        Some(n("1")),
        "ALL_OLD returns the item as it was"
    );
    assert!(table.item("t", &ItemKey::new("B", "1")).is_none());

    // Update, delete and condition check; then a queued failure.
    let update = Update::builder()
        .table_name("t")
        .set_key(Some(key("A", "1")))
        .update_expression("ADD v :one")
        .condition_expression("v = :one")
        .expression_attribute_values(":one", n("1"))
        .build()
        .expect("an update");
    let check = ConditionCheck::builder()
        .table_name("t")
        .set_key(Some(key("C", "1")))
        .condition_expression("attribute_not_exists(PK)")
        .build()
        .expect("a check");
    let update = TransactWriteItem::builder().update(update).build();
    let check = TransactWriteItem::builder().condition_check(check).build();
    tx(vec![update, check], None)
        .await
        .expect("update and check");
    assert_eq!(a1().and_then(|i| i.get("v").cloned()), Some(n("2")));
    let delete = delete("A", "1");
    table.cancel_next("TransactionConflict");
    let error = tx(vec![delete.clone()], None).await.expect_err("queued");
    assert_eq!(codes(&error), ["TransactionConflict"]);
    tx(vec![delete.clone()], Some("token".into()))
        .await
        .expect("the delete");
    assert!(a1().is_none());

    // A token seen before answers success without writing again.
    table.put("t", key("A", "1"));
    tx(vec![delete], Some("token".into()))
        .await
        .expect("replayed");
    assert!(a1().is_some());
    assert_eq!((table.transactions(), table.reads()), (6, 0));
    let read = table.get_item("t", key("A", "1")).await.expect("a read");
    assert!(read.is_some());
    assert_eq!(table.reads(), 1);
}
