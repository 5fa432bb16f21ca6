//! The contracts: `schemas/` is what the Rust types generate, the template's
//! event patterns use only fields the schemas define, the template never
//! sets the writer's local caller, and the OpenAPI document agrees with the
//! event schemas on the order.

use serde_json::Value;
use testkit::contract::{defines, openapi, schema_file};
use testkit::root;

/// `schemas/` is what the Rust types generate, and the contract vectors
/// the writer packages of other languages reproduce (`clients/`) are what
/// the Rust writer puts for each input, as committed.
#[test]
fn schemas_are_the_ones_the_types_generate() {
    let dir = root().join("schemas");
    let update = std::env::var_os("UPDATE_SCHEMAS").is_some();
    let mut generated = writer::schemas::all();
    generated.push((
        "outbox-item.v1.schema.json".to_owned(),
        outbox_core::contract::item_schema(),
    ));
    let vectors = "contract-vectors.v1.json".to_owned();
    generated.push((vectors, outbox_core::contract::vectors()));
    let mut stale = Vec::new();
    for (name, schema) in &generated {
        let text = serde_json::to_string_pretty(schema).unwrap() + "\n";
        let path = dir.join(name);
        if update {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &text).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(name.clone());
        }
    }
    assert!(
        stale.is_empty(),
        "schemas/ is stale for {stale:?}: run `UPDATE_SCHEMAS=1 cargo nextest run -E 'test(/^contracts::/)'` and commit"
    );
    let schema_files = |names: Vec<String>| {
        let mut names: Vec<String> = names
            .into_iter()
            .filter(|n| n.ends_with(".schema.json"))
            .collect();
        names.sort();
        names
    };
    let on_disk = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned());
    let expected = generated.into_iter().map(|(n, _)| n);
    assert_eq!(
        schema_files(on_disk.collect()),
        schema_files(expected.collect()),
        "schemas/ holds exactly the generated files"
    );
}

/// Every item the vectors put validates against the item schema, and an
/// item with an attribute only the publisher writes does not.
#[test]
fn the_vectors_items_validate_against_the_item_schema() {
    let schema = outbox_core::contract::item_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let vectors = outbox_core::contract::vectors();
    let mut checked = 0;
    for vector in vectors["events"].as_array().unwrap() {
        let Some(item) = vector["expect"]["put"]["Item"].as_object() else {
            continue;
        };
        if vector["settings"]["keys"].is_object() {
            continue; // the schema names the default attributes
        }
        // DynamoDB JSON as plain JSON: strings, numbers, maps (a claim
        // check's payloadRef).
        fn plain_of(v: &Value) -> Value {
            match (v.get("S"), v.get("N"), v.get("M")) {
                (Some(s), _, _) => s.clone(),
                (_, Some(n), _) => serde_json::from_str(n.as_str().unwrap()).unwrap(),
                (_, _, Some(m)) => Value::Object(
                    m.as_object()
                        .unwrap()
                        .iter()
                        .map(|(k, v)| (k.clone(), plain_of(v)))
                        .collect(),
                ),
                _ => panic!("unexpected attribute value {v}"),
            }
        }
        let plain: serde_json::Map<String, Value> =
            item.iter().map(|(k, v)| (k.clone(), plain_of(v))).collect();
        let plain = Value::Object(plain);
        assert!(validator.is_valid(&plain), "{}: {plain}", vector["name"]);
        let mut held = plain.clone();
        held["heldBehind"] = serde_json::json!("OUTBOX#01");
        assert!(!validator.is_valid(&held), "{}", vector["name"]);
        checked += 1;
    }
    assert!(checked >= 5, "{checked}");
}

#[test]
fn sample_events_validate_and_broken_ones_do_not() {
    let order = serde_json::json!({
        "orderId": "01JDQ6ZQ3T4W3D7Y8Z9A0B1C2D", "customerId": "c-1", "currency": "EUR",
        "items": [{"sku": "A", "quantity": 2, "unitPriceCents": 150}], "totalCents": 300,
        "status": "PENDING", "version": 1,
        "createdAt": "2026-12-01T10:00:00.000Z", "updatedAt": "2026-12-01T10:00:00.000Z"
    });
    let envelope = serde_json::json!({
        "eventId": "01JDQ6ZQ3T4W3D7Y8Z9A0B1C2E", "eventType": "OrderCreated", "schemaVersion": 1,
        "aggregateType": "Order", "aggregateId": "01JDQ6ZQ3T4W3D7Y8Z9A0B1C2D", "aggregateVersion": 1,
        "occurredAt": "2026-12-01T10:00:00.000Z", "payload": order
    });
    testkit::contract::check_envelope(&envelope).unwrap();
    // A field added within a version is allowed (readers ignore it).
    let mut added = envelope.clone();
    added["newField"] = serde_json::json!(true);
    testkit::contract::check_envelope(&added).unwrap();
    // So is one added to the payload, to the order or to one of its lines
    // (docs/events.md's evolution rules; issue #25 item 13).
    for pointer in ["/payload", "/payload/items/0"] {
        let mut added = envelope.clone();
        added.pointer_mut(pointer).unwrap()["giftWrap"] = serde_json::json!(true);
        testkit::contract::check_envelope(&added)
            .unwrap_or_else(|e| panic!("a field added at {pointer} must validate: {e}"));
    }
    for (pointer, value) in [
        ("/payload/status", serde_json::json!("PAID")),
        (
            "/payload/totalCents",
            serde_json::json!(9_007_199_254_740_992u64),
        ),
        ("/eventId", serde_json::json!("not-a-ulid")),
        ("/schemaVersion", serde_json::json!(0)),
    ] {
        let mut broken = envelope.clone();
        *broken.pointer_mut(pointer).unwrap() = value;
        assert!(
            testkit::contract::check_envelope(&broken).is_err(),
            "{pointer}"
        );
    }
    let mut missing = envelope.clone();
    missing.as_object_mut().unwrap().remove("eventId");
    assert!(testkit::contract::check_envelope(&missing).is_err());
}

/// template.yaml as JSON; a short-form intrinsic (`!Ref X`) becomes its
/// long form (`{"Ref": "X"}`, `{"Fn::GetAtt": …}`).
fn template() -> Value {
    devkit::template::to_json(
        &devkit::template::read(&root().join(devkit::EXAMPLE_TEMPLATE)).unwrap(),
    )
}

/// Field paths of an EventBridge pattern's `detail`: nested objects are
/// fields; arrays and `$or` hold matchers.
fn detail_paths(pattern: &Value, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    for (key, value) in pattern.as_object().into_iter().flatten() {
        if key == "$or" {
            for branch in value.as_array().into_iter().flatten() {
                detail_paths(branch, prefix, out);
            }
            continue;
        }
        prefix.push(key.clone());
        if value.is_object() {
            detail_paths(value, prefix, out);
        } else {
            out.push(prefix.clone());
        }
        prefix.pop();
    }
}

#[test]
fn event_patterns_use_only_fields_the_schemas_define() {
    let template = template();
    let schemas: Vec<(String, Value)> = writer::schemas::all();
    let event_types: Vec<&str> = writer::schemas::EVENTS.iter().map(|e| e.0).collect();
    let mut checked = 0;
    for (name, resource) in template["Resources"].as_object().unwrap() {
        if resource["Type"] != "AWS::Events::Rule" {
            continue;
        }
        let pattern = &resource["Properties"]["EventPattern"];
        for (key, value) in pattern.as_object().into_iter().flatten() {
            match key.as_str() {
                "source" | "account" | "region" | "resources" | "time" | "id" => {}
                "detail-type" => {
                    for t in value.as_array().unwrap() {
                        let t = t.as_str().unwrap();
                        assert!(
                            event_types.contains(&t),
                            "{name}: detail-type {t} has no schema"
                        );
                    }
                }
                "detail" => {
                    let mut paths = Vec::new();
                    detail_paths(value, &mut Vec::new(), &mut paths);
                    for path in paths {
                        let path: Vec<&str> = path.iter().map(String::as_str).collect();
                        assert!(
                            schemas.iter().any(|(_, s)| defines(s, &path)),
                            "{name}: detail.{} is in no schema",
                            path.join(".")
                        );
                        checked += 1;
                    }
                }
                other => panic!("{name}: pattern key {other} is not an EventBridge event field"),
            }
        }
    }
    assert!(checked > 0, "the projector rule filters on detail fields");
    // The walk itself finds undefined fields.
    assert!(!schemas
        .iter()
        .any(|(_, s)| defines(s, &["payload", "ownerId"])));
    assert!(schemas
        .iter()
        .any(|(_, s)| defines(s, &["payload", "status"])));
}

#[test]
fn the_local_projector_rule_is_the_templates() {
    let template = template();
    let mut pattern = template["Resources"]["ProjectorRule"]["Properties"]["EventPattern"].clone();
    // `!Ref EventSource` is a tagged value in YAML: compare the rest.
    pattern["source"] = serde_json::json!(["outbox.orders"]);
    assert_eq!(pattern, devkit::projector_pattern("outbox.orders"));
}

/// Issue #25 item 10: the projector's inbox outlives every redelivery the
/// stack's own settings allow, and the projector is told that window.
#[test]
fn the_inbox_outlives_every_redelivery_the_template_allows() {
    let template = template();
    let resources = &template["Resources"];
    let number = |v: &Value| {
        v.as_u64()
            .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            .unwrap_or_else(|| panic!("not a number: {v}"))
    };
    let target = &resources["ProjectorRule"]["Properties"]["Targets"][0];
    let retry = number(&target["RetryPolicy"]["MaximumEventAgeInSeconds"]);
    let retention = number(&resources["ProjectorQueue"]["Properties"]["MessageRetentionPeriod"]);
    let window = retry + retention;
    let env = &resources["ProjectorFunction"]["Properties"]["Environment"]["Variables"];
    assert_eq!(number(&env["INBOX_REDELIVERY_WINDOW_SECONDS"]), window);
    assert_eq!(window, inbox::DEFAULT_REDELIVERY_WINDOW_SECONDS);
    let ttl = &template["Parameters"]["InboxTtlSeconds"];
    assert!(
        number(&ttl["MinValue"]) > window,
        "the smallest TTL accepted"
    );
    assert!(number(&ttl["Default"]) > window);
    // And the projector's configuration refuses the same values.
    let lookup = |ttl: u64| {
        move |k: &str| match k {
            "TABLE_NAME" => Some("rm".to_owned()),
            "INBOX_TTL_SECONDS" => Some(ttl.to_string()),
            "INBOX_REDELIVERY_WINDOW_SECONDS" => Some(window.to_string()),
            _ => None,
        }
    };
    assert!(inbox::Inbox::from_lookup(lookup(window)).is_err());
    assert!(inbox::Inbox::from_lookup(lookup(number(&ttl["MinValue"]))).is_ok());
}

#[test]
fn the_template_never_sets_the_local_caller() {
    for path in ["template.yaml", devkit::OUTBOX_TEMPLATE] {
        let text = std::fs::read_to_string(root().join(path)).unwrap();
        assert!(!text.contains(writer::LOCAL_CALLER_ENV), "{path}");
    }
}

#[test]
fn the_openapi_order_is_the_event_schemas_order() {
    let doc = openapi();
    let event = schema_file("OrderCreated.v1.schema.json");
    let names = |schema: &Value| {
        let mut names: Vec<String> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        names.sort();
        names
    };
    for name in ["Order", "OrderLine"] {
        let api = &doc["components"]["schemas"][name];
        let events = &event["$defs"][name];
        assert_eq!(
            names(api),
            names(events),
            "{name}: the API and the events disagree on fields"
        );
        assert_eq!(
            api["required"].as_array().map(Vec::len),
            events["required"].as_array().map(Vec::len),
            "{name}"
        );
    }
}

/// Issue #25 item 14: every error code the writer can answer is in the
/// document's `Error.code` enum and nothing else is, and each is
/// documented as a response of its one status, by name.
#[test]
fn the_documented_error_codes_are_the_codes_the_writer_answers() {
    use writer::ErrorCode;
    let doc = openapi();
    let documented: Vec<&str> = doc["components"]["schemas"]["Error"]["properties"]["error"]
        ["properties"]["code"]["enum"]
        .as_array()
        .expect("an enum of codes")
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    let answered: Vec<&str> = ErrorCode::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(documented, answered);
    // Every (status, description) a documented operation can answer.
    let resolve = |response: &Value| -> Value {
        match response["$ref"].as_str() {
            Some(r) => doc.pointer(&r.replace("#/", "/")).cloned().unwrap(),
            None => response.clone(),
        }
    };
    let mut responses = Vec::new();
    for (_, item) in doc["paths"].as_object().unwrap() {
        for (_, operation) in item.as_object().unwrap() {
            for (status, response) in operation["responses"].as_object().into_iter().flatten() {
                let response = resolve(response);
                responses.push((
                    status.clone(),
                    response["description"].as_str().unwrap_or("").to_owned(),
                ));
            }
        }
    }
    for code in ErrorCode::ALL {
        let status = code.status().as_u16().to_string();
        let name = format!("`{}`", code.as_str());
        assert!(
            responses
                .iter()
                .any(|(s, d)| *s == status && d.contains(&name)),
            "{name}: no documented {status} response names it"
        );
    }
}

#[test]
fn the_response_check_finds_what_is_off_the_document() {
    use lambda_http::{Body, Response};
    use testkit::contract::check_response;
    let response = |status: u16, body: &str| {
        Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Body::Text(body.to_owned()))
            .unwrap()
    };
    let error = r#"{"error":{"code":"order_not_found","message":"no such order"}}"#;
    let path = "/orders/01JDQ6ZQ3T4W3D7Y8Z9A0B1C2D";
    assert_eq!(check_response("GET", path, &response(404, error)), Ok(true));
    assert!(
        check_response("GET", path, &response(418, error)).is_err(),
        "undocumented status"
    );
    assert!(
        check_response("GET", path, &response(200, error)).is_err(),
        "body off its schema"
    );
    let unknown_code = r#"{"error":{"code":"teapot","message":"x"}}"#;
    assert!(check_response("GET", path, &response(404, unknown_code)).is_err());
    // A 503 must say when to retry.
    let throttled = r#"{"error":{"code":"throttled","message":"busy"}}"#;
    assert!(check_response("GET", path, &response(503, throttled)).is_err());
    // Operations the document does not have are not checked.
    assert_eq!(
        check_response("DELETE", "/orders", &response(405, error)),
        Ok(false)
    );
}

#[test]
fn the_projector_samples_carry_events_of_the_schemas() {
    let mut checked = 0;
    for name in [
        "projector-batch.json",
        "projector-duplicate.json",
        "projector-out-of-order.json",
    ] {
        let sample: Value = serde_json::from_str(&testkit::sample(name)).unwrap();
        for record in sample["Records"].as_array().unwrap() {
            let event: Value = serde_json::from_str(record["body"].as_str().unwrap()).unwrap();
            let envelope = testkit::contract::envelope_of(&event).unwrap();
            testkit::contract::check_envelope(&envelope).unwrap_or_else(|e| panic!("{name}: {e}"));
            checked += 1;
        }
    }
    assert!(checked >= 3);
}
