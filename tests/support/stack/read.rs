//! What a test reads back from a [`Stack`]: the table's items (outbox
//! items raw or decoded, one by key), the outbox inserts in its stream, and
//! the subscriber queue (checked against the events' schemas on demand).

use super::*;

impl Stack {
    /// Every item in the table but the stack's settings records. The
    /// harness's own read, with a patient
    /// client: a page of a 20,000-order table on a loaded machine can take
    /// longer than the functions' 12 s operation timeout (two 20,000-order
    /// chaos runs died on it, after their faults and sweeps, before their
    /// verdicts).
    pub async fn items(&self) -> Vec<Item> {
        let patient = aws_sdk_dynamodb::Client::from_conf(
            aws_sdk_dynamodb::config::Builder::from(&self.sdk)
                .timeout_config(
                    aws_config::timeout::TimeoutConfig::builder()
                        .operation_attempt_timeout(std::time::Duration::from_secs(120))
                        .operation_timeout(std::time::Duration::from_secs(600))
                        .build(),
                )
                .build(),
        );
        devkit::scan_all(&patient, &self.table)
            .await
            .expect("scan")
            .into_iter()
            .filter(|item| !self.is_settings_record(item))
            .collect()
    }

    /// Whether `item` is one of the stack's settings records (the functions'
    /// cold-start record, not a test's data).
    pub fn is_settings_record(&self, item: &Item) -> bool {
        let text = |name: &str| item.get(name).and_then(|v| v.as_s().ok());
        text(&self.keys.partition_key).map(String::as_str) == Some(outbox_core::keys::SETTINGS_PK)
            && text(&self.keys.sort_key)
                .is_some_and(|sk| sk.starts_with(outbox_core::keys::STACK_SETTINGS_PREFIX))
    }

    /// Every outbox item as stored (a poison item too).
    pub async fn outbox_raw(&self) -> Vec<HashMap<String, AttributeValue>> {
        self.items()
            .await
            .into_iter()
            .filter(|i| {
                i.get(&self.keys.sort_key)
                    .and_then(|v| v.as_s().ok())
                    .is_some_and(|s| s.starts_with(&self.keys.outbox_prefix))
            })
            .collect()
    }

    /// Every outbox item, decoded.
    pub async fn outbox_items(&self) -> Vec<OutboxItem> {
        let mut out: Vec<OutboxItem> = self
            .outbox_raw()
            .await
            .into_iter()
            .map(|i| {
                OutboxItem::from_attributes(self.keys.from_table(i)).expect("outbox item decodes")
            })
            .collect();
        out.sort_by_key(|i| i.event_id);
        out
    }

    /// One item by key.
    pub async fn get(&self, pk: &str, sk: &str) -> Option<Item> {
        self.ddb
            .get_item()
            .table_name(&self.table)
            .key("PK", AttributeValue::S(pk.into()))
            .key("SK", AttributeValue::S(sk.into()))
            .consistent_read(true)
            .send()
            .await
            .expect("get item")
            .item
    }

    /// Receives everything currently in the subscriber queue (bodies).
    pub async fn drain_subscriber(&self) -> Vec<serde_json::Value> {
        let (_, subscriber) = self.bus.as_ref().expect("stack has a bus");
        drain_queue(&self.sdk, &subscriber.queue_url).await
    }

    /// [`Stack::drain_subscriber`] for tests whose events come from the
    /// writer: each event is checked against its schema in `schemas/`
    /// (other tests publish made-up events of their own).
    pub async fn drain_subscriber_checked(&self) -> Vec<serde_json::Value> {
        let messages = self.drain_subscriber().await;
        for message in &messages {
            let envelope =
                contract::envelope_of(message).unwrap_or_else(|| panic!("not an event: {message}"));
            if let Err(e) = contract::check_envelope(&envelope) {
                panic!("an event off its schema: {e}");
            }
        }
        messages
    }

    /// Every outbox insert in the table's stream so far.
    pub async fn outbox_inserts(&self) -> Vec<aws_lambda_events::event::dynamodb::EventRecord> {
        self.stream()
            .read()
            .await
            .expect("stream")
            .into_iter()
            .filter(|r| is_outbox_insert(&self.keys, r))
            .collect()
    }
}
