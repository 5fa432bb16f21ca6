//! The Custom Event Bus's wire format (Smithy RPC v2 CBOR): a request or
//! answer is one CBOR map, an error is a map with `__type` and `message`
//! under the answer's status, and every answer carries
//! `smithy-protocol: rpc-v2-cbor` (the SDK refuses one without it). The
//! proxy reads `PutEvents` entries from it, refuses some of them, and
//! answers errors and stubs in it.

use bytes::Bytes;
use ciborium::Value;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

/// A CBOR body as its map's members; `None` when it is not one.
pub(super) fn members(body: &[u8]) -> Option<Vec<(Value, Value)>> {
    ciborium::de::from_reader::<Value, _>(body)
        .ok()?
        .into_map()
        .ok()
}

/// The member `key` of a map.
pub(super) fn member<'a>(members: &'a [(Value, Value)], key: &str) -> Option<&'a Value> {
    members
        .iter()
        .find_map(|(k, v)| (k.as_text() == Some(key)).then_some(v))
}

/// A `PutEvents` body's entries (each a map), in request order.
pub(super) fn entries(members: &[(Value, Value)]) -> Vec<Value> {
    member(members, "Entries")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// An entry's `Detail` (the envelope), or `""`.
pub(super) fn detail(entry: &Value) -> &str {
    entry
        .as_map()
        .and_then(|m| member(m, "Detail"))
        .and_then(Value::as_text)
        .unwrap_or("")
}

/// `value` encoded.
pub(super) fn encode(value: &Value) -> Bytes {
    let mut bytes = Vec::new();
    // Writing a `Value` into a Vec cannot fail.
    let _ = ciborium::ser::into_writer(value, &mut bytes);
    Bytes::from(bytes)
}

fn text(s: &str) -> Value {
    Value::Text(s.to_owned())
}

/// An answer carrying `value`, under `status`.
pub(super) fn answer(status: StatusCode, value: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(encode(value)));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/cbor"));
    headers.insert("smithy-protocol", HeaderValue::from_static("rpc-v2-cbor"));
    response
}

/// An error answer: `__type` is the code, as the SDK reads it (a
/// `ThrottlingException` is retried as a throttle, a 500 as transient).
pub(super) fn error(status: StatusCode, code: &str) -> Response<Full<Bytes>> {
    let value = Value::Map(vec![
        (text("__type"), text(code)),
        (text("message"), text("injected by the fault proxy")),
    ]);
    answer(status, &value)
}

/// A failed entry's result.
pub(super) fn failed_entry(code: &str) -> Value {
    Value::Map(vec![
        (text("ErrorCode"), text(code)),
        (text("ErrorMessage"), text("injected by the fault proxy")),
    ])
}

/// A `PutEvents` answer: `FailedEntryCount` and the entries' results.
pub(super) fn put_events_answer(failed: usize, results: Vec<Value>) -> Value {
    Value::Map(vec![
        (
            text("FailedEntryCount"),
            Value::Integer((failed as u64).into()),
        ),
        (text("Entries"), Value::Array(results)),
    ])
}

/// A success answer for a `PutEvents` of `body` that was never forwarded:
/// every entry published.
pub(super) fn fake_put_events(body: &[u8]) -> Response<Full<Bytes>> {
    let n = members(body).map_or(0, |m| entries(&m).len());
    let results = (0..n)
        .map(|i| {
            Value::Map(vec![
                (text("EventId"), text(&format!("sabotaged-{i}"))),
                (text("SuccessCode"), text("PUBLISHED")),
            ])
        })
        .collect();
    answer(StatusCode::OK, &put_events_answer(0, results))
}

/// The body of `members` with `Entries` replaced by `kept`.
pub(super) fn with_entries(members: &[(Value, Value)], kept: Vec<Value>) -> Bytes {
    let mut out: Vec<(Value, Value)> = members
        .iter()
        .filter(|(k, _)| k.as_text() != Some("Entries"))
        .cloned()
        .collect();
    out.push((text("Entries"), Value::Array(kept)));
    encode(&Value::Map(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_put_events_body_is_read_and_rebuilt_without_the_refused_entries() {
        let entry = |d: &str| Value::Map(vec![(text("Detail"), text(d))]);
        let body = encode(&Value::Map(vec![
            (
                text("EventBusArn"),
                text("arn:aws:events:us-east-1:1:event-busv2/b/x"),
            ),
            (text("Entries"), Value::Array(vec![entry("a"), entry("b")])),
        ]));
        let read = members(&body).expect("a map");
        let all = entries(&read);
        assert_eq!(all.iter().map(detail).collect::<Vec<_>>(), ["a", "b"]);
        let rebuilt = members(&with_entries(&read, vec![all[1].clone()])).expect("a map");
        assert_eq!(
            entries(&rebuilt).iter().map(detail).collect::<Vec<_>>(),
            ["b"]
        );
        assert!(member(&rebuilt, "EventBusArn").is_some());
        assert!(members(b"{\"json\": true}").is_none());
    }
}
