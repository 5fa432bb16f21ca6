//! What a test writes into a [`Stack`]: orders created and paid through
//! the writer library, outbox items put by hand (aged, of an aggregate's
//! version, poisoned, raw), and items that are not outbox items.

use super::*;

impl Stack {
    /// Writes `n` orders through the writer library (one `OrderCreated` each).
    pub async fn create_orders(&self, n: usize) -> Vec<writer::Order> {
        let service = writer::OrderService::from_config(self.ddb.clone(), &self.config(&[]));
        let mut orders = Vec::new();
        for i in 0..n {
            let new = writer::NewOrder::try_from(
                serde_json::from_value::<writer::CreateOrderRequest>(serde_json::json!({
                    "customerId": format!("c-{i}"),
                    "currency": "EUR",
                    "items": [{"sku": "A-1", "quantity": i + 1, "unitPriceCents": 100}]
                }))
                .expect("request"),
            )
            .expect("valid order");
            match service
                .create(&test_caller(), new, None, None)
                .await
                .expect("order created")
            {
                writer::Reply::Done(order) => orders.push(order),
                other => panic!("unexpected {other:?}"),
            }
        }
        orders
    }

    /// Pays `orders` through the writer library (one `OrderPaid`, the
    /// aggregate's version 2, each).
    pub async fn pay_orders(&self, orders: &[writer::Order]) {
        let service = writer::OrderService::from_config(self.ddb.clone(), &self.config(&[]));
        for order in orders {
            service
                .pay(&test_caller(), &order.order_id, None, None)
                .await
                .expect("order paid");
        }
    }

    /// Writes `n` items that are not outbox items (`PK=<prefix>#<i>`,
    /// `SK=META`), 25 per `BatchWriteItem`.
    pub async fn fill_unrelated(&self, prefix: &str, n: usize) {
        use aws_sdk_dynamodb::types::{PutRequest, WriteRequest};
        let requests: Vec<WriteRequest> = (0..n)
            .map(|i| {
                let item = HashMap::from([
                    ("PK".to_owned(), AttributeValue::S(format!("{prefix}#{i}"))),
                    ("SK".to_owned(), AttributeValue::S("META".into())),
                    ("status".to_owned(), AttributeValue::S("ACTIVE".into())),
                ]);
                let put = PutRequest::builder()
                    .set_item(Some(item))
                    .build()
                    .expect("put request");
                WriteRequest::builder().put_request(put).build()
            })
            .collect();
        for chunk in requests.chunks(25) {
            self.ddb
                .batch_write_item()
                .request_items(&self.table, chunk.to_vec())
                .send()
                .await
                .expect("batch write");
        }
    }

    /// Puts an outbox item created `age` ago (its ULID and `occurredAt` carry
    /// that time), without a transaction.
    pub async fn put_event_aged(&self, age: Duration) -> OutboxItem {
        let order = ulid::Ulid::new().to_string();
        let mut envelope = outbox_core::EventEnvelope::new(
            "OrderCreated",
            "Order",
            &order,
            1,
            serde_json::json!({"orderId": order}),
        )
        .expect("envelope");
        let at = time::OffsetDateTime::now_utc() - age;
        envelope.occurred_at = at
            .replace_nanosecond(at.nanosecond() / 1_000_000 * 1_000_000)
            .expect("millisecond");
        envelope.event_id = ulid::Ulid::from_parts(
            (at.unix_timestamp_nanos() / 1_000_000) as u64,
            fastrand::u128(..),
        );
        self.put_item(self.item_of(&order, &envelope, 8)).await
    }

    /// The outbox item of `envelope` in aggregate `order`'s collection,
    /// written with `shards` pending-index shards.
    fn item_of(
        &self,
        order: &str,
        envelope: &outbox_core::EventEnvelope,
        shards: u16,
    ) -> OutboxItem {
        let limits = outbox_core::size::EventLimits::eventbridge("outbox.orders");
        OutboxItem::in_table(
            &self.keys,
            &format!("ORDER#{order}"),
            envelope,
            &limits,
            shards,
        )
        .expect("outbox item")
    }

    /// Writes `item` under this stack's key names; returns it.
    async fn put_item(&self, item: OutboxItem) -> OutboxItem {
        let attributes = item.to_attributes().expect("attributes");
        self.put_raw(self.keys.to_table(attributes)).await;
        item
    }

    /// Sets the attributes `values` (name, value) of the item at `key`, as
    /// time or another region's writer would have.
    pub async fn set(&self, key: &outbox_core::keys::ItemKey, values: &[(&str, AttributeValue)]) {
        let mut update = self.ddb.update_item().table_name(&self.table);
        let mut sets = Vec::new();
        for (i, (name, value)) in values.iter().enumerate() {
            sets.push(format!("#a{i} = :v{i}"));
            update = update
                .expression_attribute_names(format!("#a{i}"), *name)
                .expression_attribute_values(format!(":v{i}"), value.clone());
        }
        let update = update.update_expression(format!("SET {}", sets.join(", ")));
        let key = Some(self.keys.key(key));
        update.set_key(key).send().await.expect("update item");
    }

    /// Puts a raw item (for poison and hand-made records).
    pub async fn put_raw(&self, item: Item) {
        self.ddb
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .send()
            .await
            .expect("put item");
    }

    /// Puts an outbox event of `aggregate` (version `version`) created `age`
    /// ago plus `offset_ms`, written with `shards` pending-index shards.
    pub async fn put_aggregate_event(
        &self,
        aggregate: &str,
        version: u64,
        age: Duration,
        offset_ms: u64,
        shards: u16,
    ) -> OutboxItem {
        let mut envelope = outbox_core::EventEnvelope::new(
            "OrderUpdated",
            "Order",
            aggregate,
            version,
            serde_json::json!({"orderId": aggregate, "version": version}),
        )
        .expect("envelope");
        let at = time::OffsetDateTime::now_utc() - age;
        let ms = (at.unix_timestamp_nanos() / 1_000_000) as u64 + offset_ms;
        envelope.event_id = ulid::Ulid::from_parts(ms, fastrand::u128(..));
        envelope.occurred_at = outbox_core::ulid_time(envelope.event_id);
        self.put_item(self.item_of(aggregate, &envelope, shards))
            .await
    }

    /// Puts a poison outbox item of aggregate `order`: its envelope replaced
    /// by `envelope` (not JSON, say), or removed when `None`.
    pub async fn put_poison(&self, order: &str, envelope: Option<&str>) {
        let event = outbox_core::EventEnvelope::new(
            "OrderCreated",
            "Order",
            order,
            1,
            serde_json::json!({}),
        )
        .expect("envelope");
        let mut item = self
            .item_of(order, &event, 8)
            .to_attributes()
            .expect("attributes");
        match envelope {
            Some(text) => item.insert("envelope".into(), AttributeValue::S(text.into())),
            None => item.remove("envelope"),
        };
        self.put_raw(self.keys.to_table(item)).await;
    }
}
