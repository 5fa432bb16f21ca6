//! The JSON Schemas of the orders' events, derived from the Rust types that
//! write them, as checked in under `schemas/` (a test fails when they are
//! stale; `UPDATE_SCHEMAS=1` rewrites them).

use outbox_core::EventEnvelope;
use serde_json::{json, Value};

use crate::orders::Order;
use crate::service::AGGREGATE_TYPE;

/// Every event type the writer emits, with its current `schemaVersion` and
/// the order `status` its payload carries.
pub const EVENTS: &[(&str, u32, &str)] =
    &[("OrderCreated", 1, "PENDING"), ("OrderPaid", 1, "PAID")];

/// `(file name, schema)` for the envelope and each event type and version.
pub fn all() -> Vec<(String, Value)> {
    let mut schemas = vec![("envelope.v1.schema.json".to_owned(), envelope())];
    for (event_type, version, status) in EVENTS {
        schemas.push((
            format!("{event_type}.v{version}.schema.json"),
            event(event_type, *version, status),
        ));
    }
    schemas
}

/// The envelope every event shares; its `payload` is any JSON value.
pub fn envelope() -> Value {
    let mut schema = schemars::schema_for!(EventEnvelope).to_value();
    schema["$id"] = json!("urn:outbox-dynamodb:schemas:envelope.v1");
    schema
}

/// One event type: the envelope with its `eventType`, `schemaVersion` and
/// `aggregateType` fixed and its payload an [`Order`] in `status`.
pub fn event(event_type: &str, version: u32, status: &str) -> Value {
    let mut schema = envelope();
    let order = schemars::schema_for!(Order).to_value();
    schema["$id"] = json!(format!(
        "urn:outbox-dynamodb:schemas:{event_type}.v{version}"
    ));
    schema["title"] = json!(event_type);
    schema["description"] = json!(format!(
        "`{event_type}` version {version}: the envelope, with the full order after the change as its payload."
    ));
    let properties = &mut schema["properties"];
    properties["eventType"] = json!({"const": event_type});
    properties["schemaVersion"] = json!({"const": version});
    properties["aggregateType"] = json!({"const": AGGREGATE_TYPE});
    properties["payload"] = json!({
        "allOf": [{"$ref": "#/$defs/Order"}],
        "properties": {"status": {"const": status}}
    });
    let defs = schema
        .as_object_mut()
        .map(|s| s.entry("$defs").or_insert_with(|| json!({})));
    if let Some(defs) = defs {
        for (name, def) in order["$defs"].as_object().into_iter().flatten() {
            defs[name] = def.clone();
        }
        let mut order = order.clone();
        if let Some(order) = order.as_object_mut() {
            order.remove("$defs");
            order.remove("$schema");
        }
        defs["Order"] = order;
    }
    schema
}
