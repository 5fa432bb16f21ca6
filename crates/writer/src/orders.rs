//! The order domain: requests parsed into valid values at the edge, and the
//! order as stored, returned and carried by its events.

use serde::{Deserialize, Serialize};

/// The order's keys and attribute names: the example's own, beside the
/// outbox's key schema (`outbox_core::keys`).
pub(crate) mod keys {
    use outbox_core::{keys::META, ItemKey};

    /// Prefix of order partition keys.
    const ORDER_PREFIX: &str = "ORDER#";

    /// `ORDER#<id>`: the partition key of the order and of its events.
    pub(crate) fn order_pk(order_id: &str) -> String {
        format!("{ORDER_PREFIX}{order_id}")
    }

    /// The key of an order's business item (`PK=ORDER#<id>, SK=META`).
    pub(crate) fn order_key(order_id: &str) -> ItemKey {
        ItemKey::new(order_pk(order_id), META)
    }

    /// Attribute names of the business item that conditions and updates name.
    pub(crate) mod attr {
        /// `PENDING`, `PAID`.
        pub(crate) const STATUS: &str = "status";
        /// The aggregate's version, one per event.
        pub(crate) const VERSION: &str = "version";
        /// The caller that owns the order (never returned by the API).
        pub(crate) const OWNER: &str = "ownerId";
        /// When the order last changed (RFC 3339).
        pub(crate) const UPDATED_AT: &str = "updatedAt";
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn keys_follow_the_design_card() {
            assert_eq!(order_pk("abc"), "ORDER#abc");
            assert_eq!(order_key("abc"), ItemKey::new("ORDER#abc", "META"));
        }
    }
}

/// Most lines in one order.
pub const MAX_LINES: usize = 100;
/// Largest amount in cents: 2^53 − 1, the largest integer a JavaScript
/// number (and EventBridge's numeric matching) holds exactly. Unit prices,
/// line totals and `totalCents` stay at or below it.
pub const MAX_SAFE_CENTS: u64 = (1 << 53) - 1;

/// An order as stored in its `META` item, returned by the API and carried in
/// full by `OrderCreated` and `OrderPaid`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct Order {
    /// The order's id (a ULID), chosen by the writer.
    #[cfg_attr(
        feature = "schema",
        schemars(regex(pattern = r"^[0-9A-HJKMNP-TV-Z]{26}$"))
    )]
    pub order_id: String,
    /// The customer who placed it.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 128)))]
    pub customer_id: String,
    /// ISO 4217 code.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[A-Z]{3}$")))]
    pub currency: String,
    /// What was ordered.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 100)))]
    pub items: Vec<OrderLine>,
    /// The sum of the lines' `quantity × unitPriceCents`.
    #[cfg_attr(feature = "schema", schemars(range(max = 9_007_199_254_740_991u64)))]
    pub total_cents: u64,
    /// `PENDING` until paid.
    pub status: OrderStatus,
    /// 1 when created, +1 with each change; the events' `aggregateVersion`.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub version: u64,
    /// RFC 3339, UTC.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub created_at: String,
    /// RFC 3339, UTC.
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub updated_at: String,
}

/// One line of an order, as stored and carried by the events. Readers
/// ignore fields they do not know: a version may gain fields.
// Open on purpose (docs/events.md's evolution rules): no
// `deny_unknown_fields`, so the event schemas carry no
// `additionalProperties: false`. Requests are parsed strictly by
// `OrderLineRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct OrderLine {
    /// 1 to 64 characters, no spaces or control characters.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 64)))]
    pub sku: String,
    /// How many.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub quantity: u32,
    /// The price of one, in cents.
    #[cfg_attr(feature = "schema", schemars(range(max = 9_007_199_254_740_991u64)))]
    pub unit_price_cents: u64,
}

/// Where an order is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum OrderStatus {
    /// Created, not paid.
    Pending,
    /// Paid.
    Paid,
}

impl OrderStatus {
    /// As stored and published.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "PENDING",
            Self::Paid => "PAID",
        }
    }
}

/// The body of `POST /orders`, as received. Unknown fields are refused
/// (a typo must not be dropped silently).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateOrderRequest {
    /// The customer.
    pub customer_id: String,
    /// ISO 4217 code.
    pub currency: String,
    /// The lines.
    pub items: Vec<OrderLineRequest>,
}

/// One line of `POST /orders`, as received. Unknown fields are refused.
/// Numbers are JSON Schema integers: `3` and `3.0` are the same integer
/// (docs/openapi.yaml says `type: integer`), `3.5` is refused.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OrderLineRequest {
    /// The article.
    pub sku: String,
    /// How many.
    #[serde(deserialize_with = "integer")]
    pub quantity: u32,
    /// The price of one, in cents.
    #[serde(deserialize_with = "integer")]
    pub unit_price_cents: u64,
}

/// The body of `POST /orders/{id}/payment`, when one is sent: an empty
/// object. Any field is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct PaymentRequest {}

/// A JSON Schema integer: a number without a fractional part (`5` or
/// `5.0`), at least 0, at most 2^53 − 1 and within `T`.
fn integer<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    use serde::de::Error;
    let number = serde_json::Number::deserialize(deserializer)?;
    let whole = number.as_u64().or_else(|| {
        number
            .as_f64()
            .filter(|f| f.fract() == 0.0 && (0.0..=MAX_SAFE_CENTS as f64).contains(f))
            .map(|f| f as u64)
    });
    whole.and_then(|n| T::try_from(n).ok()).ok_or_else(|| {
        D::Error::custom(format!(
            "expected a non-negative integer in range, got {number}"
        ))
    })
}

/// A field of a request that is not acceptable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FieldError {
    /// JSON path of the field, e.g. `items[2].quantity`.
    pub field: String,
    /// What is wrong.
    pub message: String,
}

fn field_error(field: impl Into<String>, message: impl Into<String>) -> FieldError {
    FieldError {
        field: field.into(),
        message: message.into(),
    }
}

/// A valid new order: everything `POST /orders` needs, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewOrder {
    /// The customer.
    pub customer_id: String,
    /// ISO 4217 code.
    pub currency: String,
    /// The lines, at least one.
    pub items: Vec<OrderLine>,
    /// Their sum, at most 2^53 - 1.
    pub total_cents: u64,
}

impl TryFrom<CreateOrderRequest> for NewOrder {
    type Error = FieldError;

    fn try_from(req: CreateOrderRequest) -> Result<Self, FieldError> {
        let chars = req.customer_id.chars().count();
        if chars == 0 || chars > 128 {
            return Err(field_error("customerId", "must be 1 to 128 characters"));
        }
        if req.customer_id.chars().any(char::is_control) {
            return Err(field_error(
                "customerId",
                "must not contain control characters",
            ));
        }
        if req.currency.len() != 3 || !req.currency.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(field_error(
                "currency",
                "must be an ISO 4217 code: three upper-case letters",
            ));
        }
        if req.items.is_empty() || req.items.len() > MAX_LINES {
            return Err(field_error(
                "items",
                format!("must have 1 to {MAX_LINES} lines"),
            ));
        }
        let mut total: u64 = 0;
        for (i, line) in req.items.iter().enumerate() {
            let sku_len = line.sku.chars().count();
            if sku_len == 0
                || sku_len > 64
                || line
                    .sku
                    .chars()
                    .any(|c| c.is_control() || c.is_whitespace())
            {
                return Err(field_error(
                    format!("items[{i}].sku"),
                    "must be 1 to 64 characters without spaces or control characters",
                ));
            }
            if line.quantity == 0 {
                return Err(field_error(
                    format!("items[{i}].quantity"),
                    "must be at least 1",
                ));
            }
            if line.unit_price_cents > MAX_SAFE_CENTS {
                return Err(field_error(
                    format!("items[{i}].unitPriceCents"),
                    format!("must be at most {MAX_SAFE_CENTS}"),
                ));
            }
            let line_total = u64::from(line.quantity)
                .checked_mul(line.unit_price_cents)
                .filter(|t| *t <= MAX_SAFE_CENTS)
                .ok_or_else(|| {
                    field_error(
                        format!("items[{i}]"),
                        format!("the line total (quantity × unitPriceCents) must be at most {MAX_SAFE_CENTS}"),
                    )
                })?;
            total = total
                .checked_add(line_total)
                .filter(|t| *t <= MAX_SAFE_CENTS)
                .ok_or_else(|| {
                    field_error(
                        "totalCents",
                        format!("the order total (the sum of the line totals) must be at most {MAX_SAFE_CENTS}"),
                    )
                })?;
        }
        Ok(Self {
            customer_id: req.customer_id,
            currency: req.currency,
            items: req
                .items
                .into_iter()
                .map(|line| OrderLine {
                    sku: line.sku,
                    quantity: line.quantity,
                    unit_price_cents: line.unit_price_cents,
                })
                .collect(),
            total_cents: total,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn request(json: Value) -> Result<NewOrder, FieldError> {
        NewOrder::try_from(serde_json::from_value::<CreateOrderRequest>(json).unwrap())
    }

    fn order(customer: &str, currency: &str, items: Value) -> Result<NewOrder, FieldError> {
        request(json!({"customerId": customer, "currency": currency, "items": items}))
    }

    fn line(quantity: u64, price: u64) -> Value {
        json!({"sku": "A", "quantity": quantity, "unitPriceCents": price})
    }

    #[test]
    fn integers_may_be_written_as_whole_floats() {
        let order = request(json!({
            "customerId": "c-1", "currency": "EUR",
            "items": [{"sku": "A", "quantity": 2.0, "unitPriceCents": 1.5e2}]
        }))
        .unwrap();
        assert_eq!(order.total_cents, 300);
        for line in [
            json!({"sku": "A", "quantity": 2.5, "unitPriceCents": 1}),
            json!({"sku": "A", "quantity": -1, "unitPriceCents": 1}),
            json!({"sku": "A", "quantity": 4294967296u64, "unitPriceCents": 1}),
            json!({"sku": "A", "quantity": "2", "unitPriceCents": 1}),
            json!({"sku": "A", "quantity": 1, "unitPriceCents": 1e300}),
        ] {
            let body = json!({"customerId": "c", "currency": "EUR", "items": [line]});
            assert!(
                serde_json::from_value::<CreateOrderRequest>(body).is_err(),
                "{line}"
            );
        }
    }

    #[test]
    fn valid_order_and_total() {
        let items = json!([line(2, 150), {"sku": "B", "quantity": 1, "unitPriceCents": 0}]);
        assert_eq!(order("c-1", "EUR", items).unwrap().total_cents, 300);
    }

    #[test]
    fn each_rule_names_its_field() {
        let long = "c".repeat(129);
        for (customer, currency, field) in [
            ("", "EUR", "customerId"),
            (long.as_str(), "EUR", "customerId"),
            ("c", "eur", "currency"),
            ("c", "EURO", "currency"),
        ] {
            let error = order(customer, currency, json!([line(1, 1)])).unwrap_err();
            assert_eq!(error.field, field, "{customer:?} {currency:?}");
        }
        let safe = MAX_SAFE_CENTS;
        let no_sku = json!({"sku": "", "quantity": 1, "unitPriceCents": 1});
        let huge = line(4_000_000_000, u64::MAX / 2);
        for (items, field) in [
            (json!([]), "items"),
            (json!(vec![line(1, 1); 101]), "items"),
            (json!([line(0, 1)]), "items[0].quantity"),
            (json!([no_sku]), "items[0].sku"),
            (json!([line(1, 1), huge]), "items[1].unitPriceCents"),
            (json!([line(1, safe + 1)]), "items[0].unitPriceCents"),
            (json!([line(1, 1), line(2, safe / 2 + 1)]), "items[1]"),
            (json!([line(1, safe), line(1, 1)]), "totalCents"),
        ] {
            let error = order("c", "EUR", items.clone()).unwrap_err();
            assert_eq!(error.field, field, "{items}");
        }
        // At the limit exactly is accepted.
        let at_limit = order("c", "EUR", json!([line(1, safe - 1), line(1, 1)])).unwrap();
        assert_eq!(at_limit.total_cents, MAX_SAFE_CENTS);
    }
}
