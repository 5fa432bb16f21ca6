//! The item contract as machine-checked artifacts (feature `schema`), for
//! `schemas/` and the writer packages of other languages:
//!
//! - [`item_schema`]: the JSON Schema of an outbox item as a writer puts it
//!   (attribute names at their defaults, types, formats, and the
//!   attributes a writer must leave absent);
//! - [`vectors`]: the contract vectors: for each input (settings, event),
//!   the exact `Put` of [`OutboxTransaction::event`], in DynamoDB's JSON
//!   (what boto3's and the JavaScript SDK's low-level clients send), or the
//!   error code of the refusal; the shard of some aggregate ids; and the
//!   transaction limits. Ids and clocks are fixed.
//!
//! `tests/contracts.rs` fails when either differs from the committed file.

use serde_json::{json, Value};
use ulid::Ulid;

use crate::keys::{self, KeySchema};
use crate::size::{self, EventLimits};
use crate::transaction::{OutboxSettings, OutboxTransaction};
use crate::{EventEnvelope, OutboxError, OutboxItem};

/// The attributes of an outbox item that only the publisher, the sweeper
/// and the operator write: a writer leaves every one absent.
pub const WRITER_ABSENT: [&str; 10] = [
    "nextAttemptAt",
    "lastError",
    "deadLetteredAt",
    "deadLetterReason",
    keys::DEAD_PK,
    keys::DEAD_SK,
    "claimToken",
    "claimedUntil",
    keys::attr::HELD_BEHIND,
    keys::attr::HELD_SINCE,
];

/// The JSON Schema of an outbox item as a writer puts it, with the default
/// attribute names (a table with its own names renames the key attributes
/// only: `KeySchema`), each value as DynamoDB's plain JSON (strings;
/// numbers as numbers).
pub fn item_schema() -> Value {
    let mut schema = schemars::schema_for!(OutboxItem).to_value();
    schema["$id"] = json!("urn:outbox-dynamodb:schemas:outbox-item.v1");
    schema["title"] = json!("OutboxItem");
    schema["description"] = json!(
        "An outbox item as a writer puts it, in the same TransactWriteItems as the business change (attribute names at their defaults). The publisher and the sweeper decode it with these types. The attributes under `not` are theirs: a writer leaves them absent."
    );
    let ulid = json!({"type": "string", "pattern": "^[0-9A-HJKMNP-TV-Z]{26}$"});
    let properties = &mut schema["properties"];
    properties["eventId"] = ulid.clone();
    properties[keys::SK] = json!({"type": "string", "pattern": "^OUTBOX#[0-9A-HJKMNP-TV-Z]{26}$", "description": "`<OUTBOX_PREFIX><eventId>`"});
    properties[keys::PENDING_PK] = json!({"type": "string", "pattern": "^OUTBOX#([a-z]{2}(-[a-z]+)+-[0-9]+#)?[0-9]+$", "description": "`<OUTBOX_PREFIX>[<homeRegion>#]<shard>`, shard = FNV-1a 64 of the aggregate id's UTF-8 bytes modulo the stack's OUTBOX_SHARDS"});
    properties[keys::PENDING_SK] = json!({"type": "string", "pattern": "^[0-9A-HJKMNP-TV-Z]{26}$", "description": "the eventId"});
    properties["createdAt"] = json!({"type": "string", "format": "date-time", "description": "the eventId's time, RFC 3339, UTC"});
    properties["attempts"] = json!({"type": "integer", "const": 0});
    properties["envelope"] = json!({"type": "string", "contentMediaType": "application/json", "description": "the event envelope (envelope.v1.schema.json) as its JSON text, published byte for byte"});
    schema["required"] = json!([
        keys::PK,
        keys::SK,
        "eventId",
        "eventType",
        "aggregateId",
        "aggregateVersion",
        "envelope",
        "createdAt",
        "attempts",
        keys::PENDING_PK,
        keys::PENDING_SK
    ]);
    schema["not"] = json!({"anyOf": WRITER_ABSENT.iter().map(|a| json!({"required": [a]})).collect::<Vec<_>>()});
    schema
}

/// The fixed event id of vector `n` (its time: 2026-12-01T10:00:00.000Z
/// plus `n` milliseconds).
fn event_id(n: u64) -> Ulid {
    Ulid::from_parts(1_796_119_200_000 + n, 0x0123_4567_89ab_cdef_0123)
}

/// One vector's input.
struct Case {
    name: &'static str,
    keys: Option<Vec<(&'static str, &'static str)>>,
    home_region: Option<&'static str>,
    shards: u16,
    sink: Value,
    event: Value,
    /// The claim check's bucket and threshold (`PAYLOAD_BUCKET`,
    /// `PAYLOAD_THRESHOLD_BYTES`), when on.
    claim: Option<(&'static str, usize)>,
}

/// A sink's limits: `kind`, `source` or `fifo`, and `maxBytes` when the
/// stack sets `MAX_EVENT_BYTES` below the service's limit.
fn limits_of(sink: &Value) -> EventLimits {
    let limits = match sink["kind"].as_str() {
        Some("sns") => EventLimits::sns(sink["fifo"].as_bool().unwrap_or(false)),
        Some("eventbridge-bus") => EventLimits::EventBridgeBus {
            source: sink["source"].as_str().unwrap_or_default().to_owned(),
            max_bytes: crate::size::DEFAULT_EVENTBRIDGE_BYTES,
        },
        _ => EventLimits::eventbridge(sink["source"].as_str().unwrap_or_default()),
    };
    match (limits, sink["maxBytes"].as_u64()) {
        (EventLimits::EventBridge { source, .. }, Some(max)) => EventLimits::EventBridge {
            source,
            max_bytes: max as usize,
        },
        (EventLimits::EventBridgeBus { source, .. }, Some(max)) => EventLimits::EventBridgeBus {
            source,
            max_bytes: max as usize,
        },
        (EventLimits::Sns { fifo, .. }, Some(max)) => EventLimits::Sns {
            fifo,
            max_bytes: max as usize,
        },
        (limits, None) => limits,
    }
}

fn settings_of(case: &Case) -> Result<OutboxSettings, String> {
    let variables = case.keys.clone().unwrap_or_default();
    let schema = KeySchema::from_lookup(|name| {
        variables
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| (*v).to_owned())
    })
    .map_err(|e| e.to_string())?
    .with_home_region(case.home_region.map(str::to_owned));
    let settings =
        OutboxSettings::new("orders", limits_of(&case.sink), case.shards).with_keys(schema);
    Ok(match case.claim {
        Some((bucket, threshold)) => settings
            .with_claim_check(crate::claim::ClaimCheck::new(bucket).with_threshold(threshold)),
        None => settings,
    })
}

/// The payload of a case: `payload`, or with `payloadPadding: N` the
/// object `{"pad": "x" repeated N times}` (a large event, kept short here).
/// With `payloadText`, the payload as the writer's JSON text, its keys in
/// the writer's order (the envelope sorts them).
fn payload_of(event: &Value) -> Value {
    if let Some(text) = event["payloadText"].as_str() {
        return serde_json::from_str(text).unwrap_or(Value::Null);
    }
    match event["payloadPadding"].as_u64() {
        Some(n) => json!({"pad": "x".repeat(n as usize)}),
        None => event["payload"].clone(),
    }
}

/// The envelope of a case: its fields, its fixed id and time.
fn envelope_of(event: &Value) -> Result<EventEnvelope, OutboxError> {
    let text = |k: &str| event[k].as_str().unwrap_or_default().to_owned();
    let mut envelope = EventEnvelope::new(
        &text("eventType"),
        &text("aggregateType"),
        &text("aggregateId"),
        event["aggregateVersion"].as_u64().unwrap_or(1),
        payload_of(event),
    )?
    .with_schema_version(event["schemaVersion"].as_u64().unwrap_or(1) as u32);
    if let Some(traceparent) = event["traceparent"].as_str() {
        envelope = envelope.with_traceparent(traceparent)?;
    }
    let id: Ulid = text("eventId").parse().unwrap_or_default();
    envelope.event_id = id;
    envelope.occurred_at = crate::ulid_time(id);
    Ok(envelope)
}

/// The `Put` of a case's event, as DynamoDB JSON, or its error code.
fn expect_of(case: &Case) -> Value {
    let settings = match settings_of(case) {
        Ok(settings) => settings,
        Err(e) => return json!({"error": "InvalidSettings", "message": e}),
    };
    let envelope = match envelope_of(&case.event) {
        Ok(envelope) => envelope,
        Err(e) => return json!({"error": e.code()}),
    };
    let pk = case.event["pk"].as_str().unwrap_or_default();
    let tx = OutboxTransaction::new(&settings).event(pk, &envelope);
    match tx.build() {
        Ok(actions) => match actions.first().and_then(|a| a.put()) {
            Some(put) => {
                let mut expect = json!({"put": {
                    "TableName": put.table_name(),
                    "Item": dynamodb_json(put.item()),
                    "ConditionExpression": put.condition_expression(),
                    "ExpressionAttributeNames": put.expression_attribute_names(),
                    "ReturnValuesOnConditionCheckFailure": put
                        .return_values_on_condition_check_failure()
                        .map(|r| r.as_str()),
                }});
                // A claim check: the object stored first (its body is the
                // whole envelope's JSON, whose SHA-256 and size these are).
                if let Some(offload) = tx.offloads().first() {
                    expect["object"] =
                        serde_json::to_value(&offload.payload_ref).unwrap_or_default();
                }
                expect
            }
            None => json!({"error": "NoPut"}),
        },
        Err(e) => json!({"error": e.code()}),
    }
}

/// An item in DynamoDB's JSON (`{"S": …}`, `{"N": …}`, `{"M": …}`, …),
/// as the low-level clients of other languages send it.
fn dynamodb_json(
    item: &std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>,
) -> Value {
    let item: serde_dynamo::Item = item.clone().into();
    let mut map: Vec<(String, Value)> = item
        .into_inner()
        .into_iter()
        .map(|(k, v)| (k, attribute_json(v)))
        .collect();
    map.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Object(map.into_iter().collect())
}

fn attribute_json(value: serde_dynamo::AttributeValue) -> Value {
    use serde_dynamo::AttributeValue as A;
    match value {
        A::S(s) => json!({"S": s}),
        A::N(n) => json!({"N": n}),
        A::Bool(b) => json!({"BOOL": b}),
        A::Null(n) => json!({"NULL": n}),
        A::M(m) => {
            let mut entries: Vec<(String, Value)> =
                m.into_iter().map(|(k, v)| (k, attribute_json(v))).collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            json!({"M": Value::Object(entries.into_iter().collect())})
        }
        A::L(l) => json!({"L": l.into_iter().map(attribute_json).collect::<Vec<_>>()}),
        A::Ss(v) => json!({"SS": v}),
        A::Ns(v) => json!({"NS": v}),
        A::B(_) | A::Bs(_) => json!({"unsupported": "binary"}),
    }
}

fn event(n: u64, aggregate_id: &str, version: u64, payload: Value) -> Value {
    json!({
        "pk": format!("ORDER#{aggregate_id}"),
        "eventId": event_id(n).to_string(),
        "eventType": "OrderCreated",
        "aggregateType": "Order",
        "aggregateId": aggregate_id,
        "aggregateVersion": version,
        "schemaVersion": 1,
        "payload": payload,
    })
}

/// The event of vector `n` whose entry is exactly `target` bytes as
/// `sink` counts it (its payload padded: `payloadPadding`).
fn padded(n: u64, sink: &Value, target: usize) -> Value {
    let limits = limits_of(sink);
    let with = |pad: usize| {
        let mut e = event(n, "o-pad", 1, Value::Null);
        e.as_object_mut().map(|o| o.remove("payload"));
        e["payloadPadding"] = json!(pad);
        e
    };
    let size = |pad: usize| -> usize {
        envelope_of(&with(pad))
            .and_then(|env| {
                let text = env.to_json()?;
                Ok(limits.entry_size(&env.event_type, &env.event_id.to_string(), &text))
            })
            .unwrap_or(usize::MAX)
    };
    with(target.saturating_sub(size(0)))
}

fn eventbridge() -> Value {
    json!({"kind": "eventbridge", "source": "outbox.orders"})
}

fn cases() -> Vec<Case> {
    let plain = |name, n, aggregate: &str, payload: Value| Case {
        name,
        keys: None,
        home_region: None,
        shards: 8,
        sink: eventbridge(),
        event: event(n, aggregate, 1, payload),
        claim: None,
    };
    let order = json!({"orderId": "o-1", "customerId": "c-1", "currency": "EUR",
        "items": [{"sku": "A", "quantity": 2, "unitPriceCents": 150}], "totalCents": 300,
        "status": "PENDING", "version": 1, "zeta": true, "alpha": null, "ratio": 0.5});
    let sns_fifo = json!({"kind": "sns", "fifo": true});
    let sns = json!({"kind": "sns", "fifo": false});
    let sns_small = json!({"kind": "sns", "fifo": false, "maxBytes": 2048});
    let eb_small = json!({"kind": "eventbridge", "source": "outbox.orders", "maxBytes": 1500});
    let bus = json!({"kind": "eventbridge-bus", "source": "outbox.orders"});
    let bus_small = json!({"kind": "eventbridge-bus", "source": "outbox.orders", "maxBytes": 1500});
    // An event group id at the bus's 128 bytes (64 characters) and one past
    // it in fewer than 128 characters (43 of 3 bytes).
    let group_128 = "é".repeat(64);
    let group_129 = "東".repeat(43);
    let mut traced = event(6, "o-trace", 3, json!({"k": "v"}));
    traced["traceparent"] = json!("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    traced["schemaVersion"] = json!(2);
    traced["eventType"] = json!("OrderPaid");
    let mut bad_type = event(7, "o-1", 1, json!({}));
    bad_type["eventType"] = json!("Order Created");
    let mut bad_trace = event(8, "o-1", 1, json!({}));
    bad_trace["traceparent"] = json!("not-a-traceparent");
    let mut unsorted = event(17, "o-17", 1, Value::Null);
    if let Some(o) = unsorted.as_object_mut() {
        o.remove("payload");
    }
    unsorted["payloadText"] = json!(
        r#"{"zeta":{"b":2,"a":[{"y":1,"x":2}]},"\uff5e":"fullwidth tilde","🚀":"rocket","Alpha":1,"alpha":2,"é":3}"#
    );
    vec![
        plain("default keys, EventBridge", 0, "o-1", order),
        Case { event: unsorted, ..plain("a payload's keys sorted by code point at every depth (U+FF5E before U+1F680)", 17, "o-17", json!({})) },
        plain("non-ASCII aggregate id and payload", 1, "ordre-é-東京-🚀", json!({"name": "Zoë", "city": "東京", "emoji": "🚀", "quote": "a \"b\" \\ c\n", "control": "\u{1}"})),
        Case { shards: 1, ..plain("one shard", 2, "o-2", json!({})) },
        Case { shards: 64, ..plain("64 shards", 3, "o-3", json!({})) },
        Case { home_region: Some("eu-west-1"), ..plain("home region on", 4, "o-4", json!({})) },
        Case {
            keys: Some(vec![("PARTITION_KEY", "pk"), ("SORT_KEY", "sk"), ("OUTBOX_PREFIX", "EVT#"), ("PENDING_INDEX", "pending"), ("PENDING_INDEX_PARTITION_KEY", "pendingPk"), ("PENDING_INDEX_SORT_KEY", "pendingSk")]),
            home_region: Some("us-east-1"),
            ..plain("custom key names and prefix, home region", 5, "o-5", json!({"n": 1}))
        },
        Case { event: traced, ..plain("traceparent, schema version 2, aggregate version 3", 6, "x", json!({})) },
        Case { sink: sns_fifo.clone(), ..plain("SNS FIFO", 9, "o-9", json!({})) },
        Case { sink: sns_small.clone(), event: padded(10, &sns_small, 2048), ..plain("SNS, MAX_EVENT_BYTES 2048, an entry of exactly 2048 bytes", 10, "o", json!({})) },
        Case { sink: sns_small.clone(), event: padded(11, &sns_small, 2049), ..plain("SNS, MAX_EVENT_BYTES 2048, an entry one byte over", 11, "o", json!({})) },
        Case { sink: eb_small.clone(), event: padded(120, &eb_small, 1500), ..plain("EventBridge, MAX_EVENT_BYTES 1500, an entry of exactly 1500 bytes (and a time of 120 ms)", 120, "o", json!({})) },
        Case { sink: eb_small.clone(), event: padded(12, &eb_small, 1501), ..plain("EventBridge, MAX_EVENT_BYTES 1500, an entry one byte over", 12, "o", json!({})) },
        Case { event: padded(13, &eventbridge(), 400 * 1024), ..plain("EventBridge, an item over DynamoDB's 400 KB (its entry within the 1 MB)", 13, "o", json!({})) },
        Case { sink: sns.clone(), ..plain("standard SNS: any aggregate id", 16, "o 16 ✓", json!({})) },
        Case { sink: bus.clone(), ..plain("Custom Event Bus", 18, "o-18", json!({"n": 1})) },
        Case { sink: bus_small.clone(), event: padded(19, &bus_small, 1500), ..plain("Custom Event Bus, MAX_EVENT_BYTES 1500, an entry of exactly 1500 bytes (the event id and 128 bytes for the group counted)", 19, "o", json!({})) },
        Case { sink: bus_small.clone(), event: padded(20, &bus_small, 1501), ..plain("Custom Event Bus, MAX_EVENT_BYTES 1500, an entry one byte over", 20, "o", json!({})) },
        Case { sink: bus.clone(), ..plain("Custom Event Bus, an aggregate id of 128 bytes (64 characters)", 21, group_128.as_str(), json!({})) },
        Case { sink: bus.clone(), ..plain("Custom Event Bus, an aggregate id of 129 bytes (43 characters): no event group id", 22, group_129.as_str(), json!({})) },
        Case { sink: bus, ..plain("Custom Event Bus: an aggregate id with spaces and non-ASCII (unlike SNS FIFO)", 23, "o 23 ✓ é", json!({})) },
        Case { sink: sns_fifo, ..plain("SNS FIFO, an aggregate id that is no group id", 14, "o 14", json!({})) },
        Case { event: bad_type, ..plain("an event type that is not a name", 7, "o", json!({})) },
        Case { event: bad_trace, ..plain("a traceparent that is not W3C", 8, "o", json!({})) },
        Case { keys: Some(vec![("OUTBOX_PREFIX", "EVT!")]), ..plain("an outbox prefix with a reserved character", 15, "o", json!({})) },
        Case { claim: Some(("payloads", 1024)), event: padded(24, &eventbridge(), 1200), ..plain("claim check: an item over PAYLOAD_THRESHOLD_BYTES (1024) is stored in S3 first; the item holds the stub and payloadRef", 24, "o", json!({})) },
        Case { claim: Some(("payloads", 1024)), ..plain("claim check: an event under the threshold stays whole", 25, "o-25", json!({"n": 1})) },
        Case { claim: Some(("payloads", crate::claim::DEFAULT_THRESHOLD_BYTES)), sink: sns_small.clone(), event: padded(26, &sns_small, 4096), ..plain("claim check: an event over the sink's limit (SNS, MAX_EVENT_BYTES 2048), under the threshold", 26, "o", json!({})) },
        Case { claim: Some(("payloads", crate::claim::DEFAULT_THRESHOLD_BYTES)), event: padded(27, &eventbridge(), crate::claim::MAX_PAYLOAD_BYTES + 100), ..plain("claim check: an envelope over 8 MiB is refused", 27, "o", json!({})) },
    ]
}

/// The contract vectors (see the module's doc).
pub fn vectors() -> Value {
    let items: Vec<Value> = cases()
        .iter()
        .map(|case| {
            json!({
                "name": case.name,
                "settings": {
                    "table": "orders",
                    "shards": case.shards,
                    "keys": case.keys.as_ref().map(|k| k.iter().map(|(n, v)| (n.to_string(), json!(v))).collect::<serde_json::Map<_, _>>()),
                    "homeRegion": case.home_region,
                    "sink": case.sink,
                    "claimCheck": case.claim.map(|(bucket, threshold)| json!({"bucket": bucket, "thresholdBytes": threshold})),
                },
                "event": case.event,
                "expect": expect_of(case),
            })
        })
        .collect();
    let shard_ids = ["", "o-1", "ORDER#1", "ordre-é-東京-🚀", "0123456789abcdef"];
    let shards: Vec<Value> = shard_ids
        .iter()
        .flat_map(|id| {
            [1u16, 7, 8, 64, 1000].into_iter().map(
                move |n| json!({"aggregateId": id, "shards": n, "shard": keys::shard_of(id, n)}),
            )
        })
        .collect();
    json!({
        "$id": "urn:outbox-dynamodb:contract-vectors.v1",
        "description": "Generated by the Rust writer (outbox_core::contract::vectors): for each input, the exact Put of one outbox event in a TransactWriteItems, in DynamoDB JSON, and with a claim check (settings.claimCheck) the S3 object stored before it (expect.object: bucket, key, sha256 and size of the whole envelope's JSON), or the error code of the refusal. Event ids are fixed; createdAt and occurredAt are the id's time. The envelope is JSON with its fields in the order of envelope.v1.schema.json and the payload's object keys sorted by their UTF-8 bytes, no spaces; the item's attributes are sorted here for reading, not on the wire.",
        "limits": {
            "maxTransactionActions": size::MAX_TRANSACTION_ACTIONS,
            "maxTransactionBytes": size::MAX_TRANSACTION_BYTES,
            "maxItemBytes": size::MAX_ITEM_BYTES,
            "eventBridgeMaxBytes": size::DEFAULT_EVENTBRIDGE_BYTES,
            "snsMaxBytes": size::DEFAULT_SNS_BYTES,
            "maxFifoGroupId": size::MAX_FIFO_GROUP_ID,
            "maxBusSystemId": size::MAX_BUS_SYSTEM_ID,
            "claimCheckThresholdBytes": crate::claim::DEFAULT_THRESHOLD_BYTES,
            "maxPayloadBytes": crate::claim::MAX_PAYLOAD_BYTES,
        },
        "events": items,
        "shards": shards,
        "transactions": transaction_vectors(),
    })
}

/// The transaction-level refusals: too many actions, two actions on one
/// item, none at all.
fn transaction_vectors() -> Value {
    let settings = OutboxSettings::new("orders", EventLimits::eventbridge("outbox.orders"), 8);
    // Put `i`: `ITEM#<i>` / `META`, with a `pad` string of `pad` bytes.
    let put = |i: usize, pad: usize| {
        let mut put = aws_sdk_dynamodb::types::Put::builder()
            .table_name("orders")
            .item(
                keys::PK,
                aws_sdk_dynamodb::types::AttributeValue::S(format!("ITEM#{i}")),
            )
            .item(
                keys::SK,
                aws_sdk_dynamodb::types::AttributeValue::S("META".into()),
            );
        if pad > 0 {
            put = put.item(
                "pad",
                aws_sdk_dynamodb::types::AttributeValue::S("x".repeat(pad)),
            );
        }
        put.build()
    };
    // A vector: `puts` puts (`putPadding` bytes each), `events` events,
    // `samePutTwice`, `token`, and what `build` says.
    let vector =
        |name: &str, puts: usize, pad: usize, events: usize, twice: bool, token: Option<&str>| {
            let mut tx = OutboxTransaction::new(&settings);
            if twice {
                for label in ["a", "b"] {
                    if let Ok(p) = put(1, 0) {
                        tx = tx.put(label, p);
                    }
                }
            }
            for i in 0..puts {
                if let Ok(p) = put(i, pad) {
                    tx = tx.put(&format!("p{i}"), p);
                }
            }
            for e in 0..events {
                let ev = event(100 + e as u64, "o-tx", 1 + e as u64, json!({}));
                if let Ok(envelope) = envelope_of(&ev) {
                    tx = tx.event("ORDER#o-tx", &envelope);
                }
            }
            if let Some(token) = token {
                tx = tx.idempotency_token(token);
            }
            let expect = match tx.build() {
                Ok(actions) => json!({"actions": actions.len()}),
                Err(e) => json!({"error": e.code()}),
            };
            let mut v = json!({"name": name, "puts": puts, "events": events, "expect": expect});
            if pad > 0 {
                v["putPadding"] = json!(pad);
            }
            if twice {
                v["samePutTwice"] = json!(true);
            }
            if let Some(token) = token {
                v["token"] = json!(token);
            }
            v
        };
    let long = "t".repeat(37);
    let longest = "t".repeat(36);
    json!([
        vector("99 puts and one event", 99, 0, 1, false, None),
        vector("100 puts and one event", 100, 0, 1, false, None),
        vector("two puts of one item", 0, 0, 0, true, None),
        vector("nothing", 0, 0, 0, false, None),
        vector(
            "ten puts of 390 000 bytes and one event",
            10,
            390_000,
            1,
            false,
            None
        ),
        vector(
            "eleven puts of 390 000 bytes: over 4 MB",
            11,
            390_000,
            0,
            false,
            None
        ),
        vector(
            "an idempotency token of 36 characters",
            0,
            0,
            1,
            false,
            Some(&longest)
        ),
        vector(
            "an idempotency token of 37 characters",
            0,
            0,
            1,
            false,
            Some(&long)
        ),
        vector("an empty idempotency token", 0, 0, 1, false, Some("")),
    ])
}
