//! The read model and its key schema: one row per order under its customer
//! and one summary per customer, written with the inbox record in one
//! transaction per event, without reads.
//!
//! ```text
//! PK=CUSTOMER#<customerId>  SK=ORDER#<orderId>  orderId customerId status currency totalCents version updatedAt
//! PK=CUSTOMER#<customerId>  SK=SUMMARY          orders paidOrders paidCents
//! PK=INBOX#<eventId>        SK=META             (the inbox library's record, with a TTL)
//! ```

use outbox_core::keys;
use std::collections::HashMap;

use aws_sdk_dynamodb::types::{AttributeValue, Put, Update};
use serde::Deserialize;

/// The event types the projector applies; others are `Ignored`.
pub(crate) const ORDER_CREATED: &str = "OrderCreated";
/// The event that marks an order paid.
pub(crate) const ORDER_PAID: &str = "OrderPaid";

/// A customer's partition key.
pub(crate) fn customer_pk(customer_id: &str) -> String {
    format!("CUSTOMER#{customer_id}")
}

/// An order row's sort key.
pub(crate) fn order_sk(order_id: &str) -> String {
    format!("ORDER#{order_id}")
}

/// The customer summary's sort key.
pub(crate) const SUMMARY_SK: &str = "SUMMARY";
/// A row's version: the order's `aggregateVersion` it reflects.
pub(crate) const VERSION: &str = "version";
/// A row's order status.
pub(crate) const STATUS: &str = "status";

/// An order's status as events carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub(crate) enum Status {
    /// Created, not paid.
    Pending,
    /// Paid.
    Paid,
}

impl Status {
    /// As stored.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Paid => "PAID",
        }
    }

    fn parse(text: &str) -> Option<Self> {
        match text {
            "PENDING" => Some(Self::Pending),
            "PAID" => Some(Self::Paid),
            _ => None,
        }
    }
}

/// What the projector reads of an order event's payload (state-carrying:
/// the whole order after the change). Other fields are ignored, so the
/// producer may add some.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OrderState {
    /// The order.
    pub order_id: String,
    /// Its customer.
    pub customer_id: String,
    /// Its status.
    pub status: Status,
    /// Its currency.
    pub currency: String,
    /// Its total.
    pub total_cents: u64,
}

/// What the projector believes the stored row is when it builds a
/// transaction: it starts from a guess (no read) and learns the truth from a
/// failed condition's `ALL_OLD` item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stored {
    /// No row yet.
    Absent,
    /// A row at this version and status.
    Present {
        /// The row's version.
        version: u64,
        /// The row's status.
        status: Status,
    },
}

impl Stored {
    /// The first guess for an event: the order is new when the event says
    /// `PENDING` (its `OrderCreated`), else it was `PENDING` before.
    pub(crate) fn guess(order: &OrderState, version: u64) -> Self {
        match order.status {
            Status::Pending => Self::Absent,
            Status::Paid => Self::Present {
                version: version.saturating_sub(1),
                status: Status::Pending,
            },
        }
    }

    /// The stored row as a failed condition returned it.
    pub(crate) fn from_item(item: Option<&HashMap<String, AttributeValue>>) -> Self {
        let Some(item) = item else {
            return Self::Absent;
        };
        let version = item
            .get(VERSION)
            .and_then(|v| v.as_n().ok())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let status = item
            .get(STATUS)
            .and_then(|v| v.as_s().ok())
            .and_then(|s| Status::parse(s))
            .unwrap_or(Status::Pending);
        Self::Present { version, status }
    }
}

/// The row put, conditional on `stored` still being true: absent, or at
/// that status with an older version than `version`.
pub(crate) fn row_put(
    table: &str,
    order: &OrderState,
    version: u64,
    updated_at: &str,
    stored: Stored,
) -> Result<Put, aws_sdk_dynamodb::error::BuildError> {
    let s = |v: &str| AttributeValue::S(v.to_owned());
    let n = |v: u64| AttributeValue::N(v.to_string());
    let builder = Put::builder()
        .table_name(table)
        .item(keys::PK, s(&customer_pk(&order.customer_id)))
        .item(keys::SK, s(&order_sk(&order.order_id)))
        .item("orderId", s(&order.order_id))
        .item("customerId", s(&order.customer_id))
        .item(STATUS, s(order.status.as_str()))
        .item("currency", s(&order.currency))
        .item("totalCents", n(order.total_cents))
        .item(VERSION, n(version))
        .item("updatedAt", s(updated_at));
    match stored {
        Stored::Absent => builder.condition_expression(keys::absent()),
        Stored::Present { status, .. } => builder
            .condition_expression("#version < :version AND #status = :stored")
            .expression_attribute_names("#version", VERSION)
            .expression_attribute_names("#status", STATUS)
            .expression_attribute_values(":version", n(version))
            .expression_attribute_values(":stored", s(status.as_str())),
    }
    .build()
}

/// The summary's counters for this change: a new order counts once, an
/// order that becomes `PAID` counts once in `paidOrders` and `paidCents`.
/// `None` when the change moves no counter.
pub(crate) fn summary_update(
    table: &str,
    order: &OrderState,
    stored: Stored,
) -> Result<Option<Update>, aws_sdk_dynamodb::error::BuildError> {
    let new = matches!(stored, Stored::Absent);
    let paid = order.status == Status::Paid
        && !matches!(
            stored,
            Stored::Present {
                status: Status::Paid,
                ..
            }
        );
    let mut adds = Vec::new();
    let mut builder = Update::builder()
        .table_name(table)
        .key(keys::PK, AttributeValue::S(customer_pk(&order.customer_id)))
        .key(keys::SK, AttributeValue::S(SUMMARY_SK.into()));
    if new {
        adds.push("orders :one");
    }
    if paid {
        adds.push("paidOrders :one, paidCents :cents");
        builder = builder.expression_attribute_values(
            ":cents",
            AttributeValue::N(order.total_cents.to_string()),
        );
    }
    if adds.is_empty() {
        return Ok(None);
    }
    builder
        .update_expression(format!("ADD {}", adds.join(", ")))
        .expression_attribute_values(":one", AttributeValue::N("1".into()))
        .build()
        .map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(status: Status) -> OrderState {
        OrderState {
            order_id: "o1".into(),
            customer_id: "c1".into(),
            status,
            currency: "EUR".into(),
            total_cents: 1500,
        }
    }

    fn present(version: u64, status: Status) -> Stored {
        Stored::Present { version, status }
    }

    #[test]
    fn counters_move_only_on_creation_and_on_payment() {
        let (pending, paid) = (order(Status::Pending), order(Status::Paid));
        for (order, stored, expected) in [
            (&pending, Stored::Absent, Some("ADD orders :one")),
            (
                &paid,
                Stored::Absent,
                Some("ADD orders :one, paidOrders :one, paidCents :cents"),
            ),
            (
                &paid,
                present(1, Status::Pending),
                Some("ADD paidOrders :one, paidCents :cents"),
            ),
            (&paid, present(2, Status::Paid), None),
            (&pending, present(1, Status::Pending), None),
        ] {
            let update = summary_update("t", order, stored).unwrap();
            let expression = update.map(|u| u.update_expression);
            assert_eq!(expression.as_deref(), expected, "{order:?} over {stored:?}");
        }
    }

    #[test]
    fn the_stored_row_is_read_from_a_failed_condition() {
        assert_eq!(Stored::from_item(None), Stored::Absent);
        let item = HashMap::from([
            ("version".to_owned(), AttributeValue::N("2".into())),
            ("status".to_owned(), AttributeValue::S("PAID".into())),
        ]);
        assert_eq!(Stored::from_item(Some(&item)), present(2, Status::Paid));
        assert_eq!(Stored::guess(&order(Status::Pending), 1), Stored::Absent);
        assert_eq!(
            Stored::guess(&order(Status::Paid), 2),
            present(1, Status::Pending)
        );
    }
}
