//! What a chaos run reads back from the table: the orders' versions, the
//! outbox items still pending (and when a sweep may take them), and an
//! item's attributes.

use std::collections::HashMap;
use std::fmt::Write as _;

use aws_sdk_dynamodb::types::AttributeValue;
use outbox_core::keys::attr as keys;

use crate::{Item, Stack};

/// An item's string or number attribute.
pub(super) fn attr<'a>(item: &'a Item, name: &str) -> Option<&'a str> {
    item.get(name).and_then(|v| match v {
        AttributeValue::S(s) | AttributeValue::N(s) => Some(s.as_str()),
        _ => None,
    })
}

/// Whether `item` is an outbox item.
pub(super) fn is_outbox(item: &Item) -> bool {
    attr(item, "SK").is_some_and(|sk| sk.starts_with("OUTBOX#"))
}

/// Every order's `version`, from its `META` item.
pub(super) fn order_versions(items: &[Item]) -> HashMap<String, u64> {
    items
        .iter()
        .filter(|i| attr(i, "SK") == Some("META"))
        .filter_map(|i| {
            let id = attr(i, "PK")?.strip_prefix("ORDER#")?.to_owned();
            Some((id, attr(i, "version")?.parse().ok()?))
        })
        .collect()
}

/// The outbox items still pending, and when the last of them becomes
/// eligible for a sweep: its claim (a sweeper killed after claiming it)
/// expires and its backoff ends (Unix seconds; `None` when each is
/// eligible now).
pub(super) struct Pending {
    /// Items pending.
    pub count: usize,
    /// When the last of them is eligible (Unix seconds).
    pub eligible_at: Option<i64>,
}

pub(super) async fn pending_outbox(stack: &Stack) -> Pending {
    let items = stack.items().await;
    let pending: Vec<_> = items
        .iter()
        .filter(|i| is_outbox(i) && !i.contains_key(keys::DEAD_LETTERED_AT))
        .collect();
    let eligible_at = pending
        .iter()
        .flat_map(|i| [keys::CLAIMED_UNTIL, keys::NEXT_ATTEMPT_AT].map(|a| attr(i, a)))
        .filter_map(|v| v?.parse::<i64>().ok())
        .max();
    Pending {
        count: pending.len(),
        eligible_at,
    }
}

/// What a pending item carries that decides when a sweep takes it.
pub(super) fn pending_state(item: &Item) -> String {
    let mut state = attr(item, "SK").unwrap_or("?").to_owned();
    for name in [
        keys::ATTEMPTS,
        keys::NEXT_ATTEMPT_AT,
        keys::CLAIMED_UNTIL,
        keys::HELD_BEHIND,
    ] {
        if let Some(value) = attr(item, name) {
            let _ = write!(state, " {name}={value}");
        }
    }
    state
}
