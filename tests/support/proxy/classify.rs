//! What a request is: its operation (`X-Amz-Target` or the query
//! protocol's `Action`), the IAM actions and resources that authorize it,
//! the subject the chooser is asked about, and the event ids it carries
//! (the entries of a sink call, the outbox items a delete removes).

/// The path prefix of the Custom Event Bus's operations (Smithy RPC v2
/// CBOR: `POST /service/AWSEventsV2/operation/<name>`).
const CUSTOM_BUS_PATH: &str = "/service/AWSEventsV2/operation/";

/// Whether a request is a Custom Event Bus call.
pub(super) fn is_custom_bus(request: &hyper::http::request::Parts) -> bool {
    request.uri.path().starts_with(CUSTOM_BUS_PATH)
}

/// The `EventBusArn` of a Custom Event Bus request's CBOR body, as
/// `event-busv2/<name>/<id>` (the ARN's resource).
fn custom_bus_resource(body: &[u8]) -> String {
    let members = super::cbor::members(body).unwrap_or_default();
    let arn = super::cbor::member(&members, "EventBusArn")
        .and_then(ciborium::Value::as_text)
        .unwrap_or_default();
    arn.splitn(6, ':').nth(5).unwrap_or("?").to_owned()
}

/// The service of a request's SigV4 scope (`Credential=<key>/<date>/<region>/<service>/…`).
fn signing_service(request: &hyper::http::request::Parts) -> &str {
    request
        .headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.split("Credential=").nth(1))
        .and_then(|c| c.split('/').nth(3))
        .unwrap_or("")
}

/// An S3 request (REST, path style on a loopback endpoint): its bucket
/// and object key (empty for a call on the bucket).
fn s3_path(request: &hyper::http::request::Parts) -> Option<(String, String)> {
    if signing_service(request) != "s3" {
        return None;
    }
    let path = request.uri.path().trim_start_matches('/');
    let (bucket, key) = path.split_once('/').unwrap_or((path, ""));
    let key = percent_decoded(key);
    Some((bucket.to_owned(), key))
}

fn percent_decoded(text: &str) -> String {
    form_urlencoded::parse(format!("k={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default()
}

/// The S3 operation of a REST request, by method and by whether it names
/// an object (the few the claim check and its tests make).
fn s3_operation(request: &hyper::http::request::Parts, key: &str) -> &'static str {
    match (request.method.as_str(), key.is_empty()) {
        ("GET", false) => "GetObject",
        ("PUT", false) => "PutObject",
        ("HEAD", false) => "HeadObject",
        ("DELETE", false) => "DeleteObject",
        ("GET", true) => "ListObjectsV2",
        ("PUT", true) => "CreateBucket",
        _ => "Unknown",
    }
}

/// The operation of a request: `X-Amz-Target` for the JSON protocols,
/// `Action` of the form body for the query protocol (SNS), the path for
/// the Custom Event Bus's RPC v2 CBOR, the method and path for S3's REST.
pub(super) fn operation(request: &hyper::http::request::Parts, body: &[u8]) -> String {
    if let Some(operation) = request.uri.path().strip_prefix(CUSTOM_BUS_PATH) {
        return operation.to_owned();
    }
    if let Some((_, key)) = s3_path(request) {
        return s3_operation(request, &key).to_owned();
    }
    let target = target(request);
    if !target.is_empty() {
        return target.rsplit('.').next().unwrap_or(target).to_owned();
    }
    form_urlencoded::parse(body)
        .find(|(k, _)| k == "Action")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_else(|| "Unknown".to_owned())
}

/// A request's `X-Amz-Target` (empty for the query protocol).
pub(super) fn target(request: &hyper::http::request::Parts) -> &str {
    let target = request.headers.get("x-amz-target");
    target.and_then(|v| v.to_str().ok()).unwrap_or("")
}

/// The IAM action that authorizes a call: the service prefix from the
/// target (or the SigV4 scope) and the operation, with the few operations
/// IAM authorizes under another name.
fn iam_action(request: &hyper::http::request::Parts, operation: &str) -> String {
    let target = target(request);
    let scope = signing_service(request);
    let service = if target.starts_with("DynamoDB") {
        "dynamodb"
    } else if target.starts_with("AWSEvents") || is_custom_bus(request) {
        // The Custom Event Bus keeps the `events:` namespace.
        "events"
    } else if target.starts_with("AmazonSQS") {
        "sqs"
    } else {
        scope
    };
    let operation = match (service, operation) {
        ("sns", "PublishBatch") => "Publish",
        // S3 authorizes a listing as ListBucket.
        ("s3", "ListObjectsV2") => "ListBucket",
        (_, op) => op,
    };
    format!("{service}:{operation}")
}

/// The IAM actions that authorize a call and the resource each applies to,
/// read from the request: a `TransactWriteItems` is authorized by the
/// action of each of its items (`Put`, `Update`, `Delete`,
/// `ConditionCheck`) on that item's table, a `TransactGetItems` by
/// `GetItem`; any other call by [`iam_action`]. Resources are named as
/// [`resource_names`] says.
pub(super) fn iam_requests(
    request: &hyper::http::request::Parts,
    operation: &str,
    body: &[u8],
    last_stream: &mut Option<String>,
) -> Vec<(String, String)> {
    let json = serde_json::from_slice::<serde_json::Value>(body).unwrap_or_default();
    let action = iam_action(request, operation);
    let table = |name: &serde_json::Value| format!("table/{}", name.as_str().unwrap_or("?"));
    let stream_of = |arn: &str| {
        // arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>
        arn.split_once(":table/")
            .map(|(_, rest)| format!("table/{}/stream", rest.split('/').next().unwrap_or("?")))
            .unwrap_or_else(|| "?".to_owned())
    };
    if is_custom_bus(request) {
        return vec![(action, custom_bus_resource(body))];
    }
    // An object as `<bucket>/outbox/*` (the claim check's objects, which
    // the roles grant by that prefix), another as `<bucket>/<key>`; a call
    // on the bucket as `<bucket>`.
    if let Some((bucket, key)) = s3_path(request) {
        let resource = match key.as_str() {
            "" => bucket,
            claim if claim.starts_with("outbox/") => format!("{bucket}/outbox/*"),
            other => format!("{bucket}/{other}"),
        };
        return vec![(action, resource)];
    }
    match (action.split(':').next().unwrap_or(""), operation) {
        ("dynamodb", "TransactWriteItems" | "TransactGetItems") => json["TransactItems"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|item| {
                let (kind, inner) = item.as_object()?.iter().next()?;
                let action = match kind.as_str() {
                    "Put" => "PutItem",
                    "Update" => "UpdateItem",
                    "Delete" => "DeleteItem",
                    "ConditionCheck" => "ConditionCheckItem",
                    "Get" => "GetItem",
                    other => other,
                };
                Some((format!("dynamodb:{action}"), table(&inner["TableName"])))
            })
            .collect(),
        ("dynamodb", "BatchWriteItem" | "BatchGetItem") => json["RequestItems"]
            .as_object()
            .into_iter()
            .flat_map(|tables| tables.keys())
            .map(|name| (action.clone(), format!("table/{name}")))
            .collect(),
        ("dynamodb", "Query" | "Scan") => {
            let mut resource = table(&json["TableName"]);
            if let Some(index) = json["IndexName"].as_str() {
                resource = format!("{resource}/index/{index}");
            }
            vec![(action, resource)]
        }
        ("dynamodb", "DescribeStream" | "GetShardIterator") => {
            let stream = stream_of(json["StreamArn"].as_str().unwrap_or(""));
            *last_stream = Some(stream.clone());
            vec![(action, stream)]
        }
        // A shard iterator is opaque: the stream whose iterator was taken.
        ("dynamodb", "GetRecords") => {
            vec![(
                action,
                last_stream.clone().unwrap_or_else(|| "?".to_owned()),
            )]
        }
        ("dynamodb", "ListStreams") => {
            vec![(action, format!("{}/stream", table(&json["TableName"])))]
        }
        ("dynamodb", _) => vec![(action, table(&json["TableName"]))],
        ("events", "PutEvents") => {
            let mut buses: Vec<(String, String)> = json["Entries"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|e| {
                    (
                        action.clone(),
                        bus(e["EventBusName"].as_str().unwrap_or("default")),
                    )
                })
                .collect();
            buses.dedup();
            buses
        }
        ("events", _) => vec![(action, bus(json["Name"].as_str().unwrap_or("default")))],
        ("sqs", _) => vec![(
            action,
            format!(
                "queue/{}",
                json["QueueUrl"]
                    .as_str()
                    .unwrap_or("?")
                    .rsplit('/')
                    .next()
                    .unwrap_or("?")
            ),
        )],
        ("sns", _) => {
            let topic = form_urlencoded::parse(body)
                .find(|(k, _)| k == "TopicArn")
                .map(|(_, v)| v.rsplit(':').next().unwrap_or("?").to_owned())
                .unwrap_or_else(|| "?".to_owned());
            vec![(action, format!("topic/{topic}"))]
        }
        _ => vec![(action, "*".to_owned())],
    }
}

/// An event bus by name or ARN, as `event-bus/<name>`.
fn bus(name_or_arn: &str) -> String {
    let name = name_or_arn
        .rsplit_once("event-bus/")
        .map_or(name_or_arn, |(_, name)| name);
    format!("event-bus/{name}")
}

/// What the chooser is asked about: the operation, or for a write of the
/// settings item (`PK=OUTBOX_SETTINGS`, made once per cold start)
/// `UpdateItem(settings)`, so that a chaos schedule's `UpdateItem` faults,
/// meant for the dead-letter and backoff writes, are not spent on it.
pub(super) fn subject(operation: &str, body: &[u8]) -> String {
    let settings = operation == "UpdateItem"
        && serde_json::from_slice::<serde_json::Value>(body)
            .is_ok_and(|b| b["Key"]["PK"]["S"] == outbox_core::keys::SETTINGS_PK);
    if settings {
        format!("{operation}(settings)")
    } else {
        operation.to_owned()
    }
}

pub(super) fn is_sink_call(operation: &str) -> bool {
    matches!(operation, "PutEvents" | "PublishBatch")
}

/// The `eventId` of an entry's `Detail` (or an SNS `Message`): the envelope.
pub(super) fn event_id(text: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()?
        .get("eventId")?
        .as_str()
        .map(str::to_owned)
}

/// The event ids of the outbox items a `BatchWriteItem` or `DeleteItem`
/// deletes (their sort keys, `OUTBOX#<id>`).
pub(super) fn deleted_event_ids(operation: &str, body: &[u8]) -> Vec<String> {
    let Ok(request) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let sk = |key: &serde_json::Value| {
        key["SK"]["S"]
            .as_str()
            .and_then(|sk| sk.strip_prefix("OUTBOX#"))
            .map(str::to_owned)
    };
    match operation {
        "BatchWriteItem" => request["RequestItems"]
            .as_object()
            .into_iter()
            .flat_map(|tables| tables.values())
            .filter_map(|writes| writes.as_array())
            .flatten()
            .filter_map(|write| sk(&write["DeleteRequest"]["Key"]))
            .collect(),
        "DeleteItem" => sk(&request["Key"]).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// The event id of the outbox item an `UpdateItem` hands to the scheduled
/// sweep: its key's sort key is `OUTBOX#<id>` and it sets the pending sort
/// key to the redriven `!<id>` (the runtime's `hand_to_schedule`, value
/// `:sk`); a claim, a claim's release or a dead letter hands nothing over.
pub(super) fn handed_over_event_ids(operation: &str, body: &[u8]) -> Vec<String> {
    if operation != "UpdateItem" {
        return Vec::new();
    }
    let Ok(request) = serde_json::from_slice::<serde_json::Value>(body) else {
        return Vec::new();
    };
    let redriven = request["ExpressionAttributeValues"][":sk"]["S"]
        .as_str()
        .is_some_and(outbox_core::keys::is_redriven_sk);
    request["Key"]["SK"]["S"]
        .as_str()
        .and_then(|sk| sk.strip_prefix("OUTBOX#"))
        .filter(|_| redriven)
        .map(str::to_owned)
        .into_iter()
        .collect()
}

/// The envelopes a sink call carries (each entry's `Detail`, or each SNS
/// `Message`), in request order.
fn sink_envelopes(operation: &str, body: &[u8]) -> Vec<serde_json::Value> {
    let texts: Vec<String> = match operation {
        // The Custom Event Bus's CBOR, else the classic bus's JSON.
        "PutEvents" => match super::cbor::members(body) {
            Some(members) => super::cbor::entries(&members)
                .iter()
                .map(|e| super::cbor::detail(e).to_owned())
                .collect(),
            None => serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v["Entries"].as_array().cloned())
                .unwrap_or_default()
                .iter()
                .filter_map(|e| e["Detail"].as_str().map(str::to_owned))
                .collect(),
        },
        "PublishBatch" => form_urlencoded::parse(body)
            .filter(|(k, _)| k.ends_with(".Message"))
            .map(|(_, v)| v.into_owned())
            .collect(),
        _ => Vec::new(),
    };
    texts
        .iter()
        .filter_map(|t| serde_json::from_str(t).ok())
        .collect()
}

/// The event ids a sink call carries, in request order.
pub(super) fn sink_event_ids(operation: &str, body: &[u8]) -> Vec<String> {
    sink_envelopes(operation, body)
        .iter()
        .filter_map(|e| e["eventId"].as_str().map(str::to_owned))
        .collect()
}

/// Whether a sink call carries an aggregate's first event
/// (`aggregateVersion` 1).
pub(super) fn carries_a_first_event(operation: &str, body: &[u8]) -> bool {
    sink_envelopes(operation, body)
        .iter()
        .any(|e| e["aggregateVersion"].as_u64() == Some(1))
}
