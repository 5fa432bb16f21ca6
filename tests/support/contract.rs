//! The contracts the tests hold us to: the events' JSON Schemas
//! (`schemas/`) and the orders API's OpenAPI document (`docs/openapi.yaml`).

use std::collections::HashMap;
use std::sync::OnceLock;

use jsonschema::Validator;
use lambda_http::{Body, Request, Response};
use serde_json::Value;

use crate::root;

fn compile(schema: &Value) -> Validator {
    jsonschema::validator_for(schema).unwrap_or_else(|e| panic!("schema does not compile: {e}"))
}

fn errors(validator: &Validator, instance: &Value) -> Vec<String> {
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// A checked-in schema from `schemas/`.
pub fn schema_file(name: &str) -> Value {
    let path = root().join("schemas").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

struct EventSchemas {
    envelope: Validator,
    by_type: HashMap<(String, u64), Validator>,
}

fn event_schemas() -> &'static EventSchemas {
    static SCHEMAS: OnceLock<EventSchemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| EventSchemas {
        envelope: compile(&schema_file("envelope.v1.schema.json")),
        by_type: writer::schemas::EVENTS
            .iter()
            .map(|(event_type, version, _)| {
                let schema = schema_file(&format!("{event_type}.v{version}.schema.json"));
                (
                    (event_type.to_string(), u64::from(*version)),
                    compile(&schema),
                )
            })
            .collect(),
    })
}

/// Checks an envelope (an EventBridge `detail`, an SNS message) against the
/// envelope schema and, when `schemas/` has its type and version (the
/// writer's events), against that schema too. Tests publish made-up types
/// of their own; those are held to the envelope only.
pub fn check_envelope(envelope: &Value) -> Result<(), String> {
    let schemas = event_schemas();
    let mut found = errors(&schemas.envelope, envelope);
    let key = (
        envelope["eventType"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        envelope["schemaVersion"].as_u64().unwrap_or_default(),
    );
    if let Some(validator) = schemas.by_type.get(&key) {
        found.extend(errors(validator, envelope));
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(found.join("; "))
    }
}

/// The envelope a subscriber queue's message carries: an EventBridge
/// event's `detail`, an SNS notification's `Message`, or itself (SNS raw
/// delivery).
pub fn envelope_of(message: &Value) -> Option<Value> {
    if let Some(detail) = message.get("detail") {
        return Some(detail.clone());
    }
    if message.get("eventId").is_some() {
        let mut envelope = message.clone();
        if let Some(object) = envelope.as_object_mut() {
            object.remove("__sqs");
        }
        return Some(envelope);
    }
    let text = message.get("Message")?.as_str()?;
    serde_json::from_str(text).ok()
}

/// The OpenAPI document, as JSON.
pub fn openapi() -> &'static Value {
    static DOC: OnceLock<Value> = OnceLock::new();
    DOC.get_or_init(|| {
        let path = root().join("docs/openapi.yaml");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    })
}

/// Resolves a local `$ref` (`#/components/...`) of the document.
fn resolve<'a>(doc: &'a Value, value: &'a Value) -> &'a Value {
    match value.get("$ref").and_then(Value::as_str) {
        Some(pointer) => doc
            .pointer(pointer.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("openapi: unresolved {pointer}")),
        None => value,
    }
}

/// The document's path template for a request path, e.g.
/// `/orders/01J…/payment` → `/orders/{orderId}/payment`.
fn path_template(doc: &Value, path: &str) -> Option<String> {
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    doc["paths"].as_object()?.keys().find_map(|template| {
        let parts: Vec<&str> = template.split('/').filter(|s| !s.is_empty()).collect();
        let matches = parts.len() == segments.len()
            && parts
                .iter()
                .zip(&segments)
                .all(|(p, s)| p == s || (p.starts_with('{') && p.ends_with('}')));
        matches.then(|| template.clone())
    })
}

/// Checks a response of the orders API against the OpenAPI document: its
/// status is declared for the operation, its content type and body are
/// the declared ones, and its declared required headers are present.
/// Requests to operations the document does not have (API Gateway never
/// routes them) return `Ok(false)`.
pub fn check_response(method: &str, path: &str, response: &Response<Body>) -> Result<bool, String> {
    let doc = openapi();
    let Some(template) = path_template(doc, path) else {
        return Ok(false);
    };
    let Some(operation) = doc["paths"][&template].get(method.to_lowercase()) else {
        return Ok(false);
    };
    let status = response.status().as_u16().to_string();
    let declared = operation["responses"]
        .get(&status)
        .or_else(|| operation["responses"].get("default"))
        .ok_or_else(|| format!("{method} {template}: status {status} is not documented"))?;
    let declared = resolve(doc, declared);
    for (name, header) in declared["headers"].as_object().into_iter().flatten() {
        let header = resolve(doc, header);
        if header["required"] == true && response.headers().get(name.as_str()).is_none() {
            return Err(format!(
                "{method} {template} {status}: header {name} is missing"
            ));
        }
    }
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let Some(media) = declared["content"].get(content_type) else {
        return Err(format!(
            "{method} {template} {status}: content type {content_type:?} is not documented"
        ));
    };
    let body: Value = match response.body() {
        Body::Text(text) => {
            serde_json::from_str(text).map_err(|e| format!("body is not JSON: {e}"))?
        }
        Body::Binary(bytes) => {
            serde_json::from_slice(bytes).map_err(|e| format!("body is not JSON: {e}"))?
        }
        _ => Value::Null,
    };
    // The media type's schema, with the document's components beside it so
    // that its `#/components/...` references resolve.
    let mut schema = media["schema"].clone();
    if let Some(object) = schema.as_object_mut() {
        object.insert("components".into(), doc["components"].clone());
    }
    let found = errors(&compile(&schema), &body);
    if found.is_empty() {
        Ok(true)
    } else {
        Err(format!(
            "{method} {template} {status}: {}",
            found.join("; ")
        ))
    }
}

/// The orders API with every response checked against the OpenAPI
/// document (a violation fails the test).
#[derive(Debug, Clone)]
pub struct CheckedApi(pub writer::Api);

impl CheckedApi {
    /// The writer's answer to `request`, checked against the document.
    pub async fn handle(&self, request: Request) -> Response<Body> {
        let method = request.method().as_str().to_owned();
        let path = request.uri().path().to_owned();
        let response = self.0.handle(request).await;
        if let Err(e) = check_response(&method, &path, &response) {
            panic!("response off the OpenAPI document: {e}");
        }
        response
    }

    /// The API with `caller` as its local caller (see `writer::Api::with_local_caller`).
    pub fn with_local_caller(self, caller: writer::Caller) -> Self {
        Self(self.0.with_local_caller(caller))
    }
}

/// The JSON Schema walk of `path` (`payload.status`) through `schema`,
/// following `$ref`, `allOf`, `properties`: whether the schema defines it.
pub fn defines(schema: &Value, path: &[&str]) -> bool {
    fn walk(root: &Value, node: &Value, path: &[&str]) -> bool {
        let node = match node.get("$ref").and_then(Value::as_str) {
            Some(pointer) => match root.pointer(pointer.trim_start_matches('#')) {
                Some(target) => target,
                None => return false,
            },
            None => node,
        };
        let Some((first, rest)) = path.split_first() else {
            return true;
        };
        if let Some(child) = node["properties"].get(*first) {
            if walk(root, child, rest) {
                return true;
            }
        }
        node["allOf"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|branch| walk(root, branch, path))
    }
    walk(schema, schema, path)
}
