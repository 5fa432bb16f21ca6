//! How a call is answered under its fault: forwarded to the local API
//! (whole, or with some entries of a sink call refused), refused with an
//! error of the call's protocol, dropped, or answered as done without
//! reaching the local API.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE, TRANSFER_ENCODING};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::classify::{event_id, is_custom_bus};
use super::{cbor, BoxError, Fault};

/// A call's wire protocol, which its errors take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// `X-Amz-Target` and a JSON body (DynamoDB, EventBridge, SQS).
    Json,
    /// A form body and an XML answer (SNS).
    Query,
    /// Smithy RPC v2 CBOR (the Custom Event Bus).
    Cbor,
}

impl Protocol {
    fn of(parts: &hyper::http::request::Parts) -> Self {
        if is_custom_bus(parts) {
            Self::Cbor
        } else if parts.headers.contains_key("x-amz-target") {
            Self::Json
        } else {
            Self::Query
        }
    }
}

/// Applies `fault` to the call; returns the answer and the event ids that
/// reached the local API.
pub(super) async fn apply(
    upstream: &str,
    parts: hyper::http::request::Parts,
    body: Bytes,
    operation: &str,
    fault: &Option<Fault>,
    crash: &(dyn Fn() + Sync),
    all: Vec<String>,
) -> (Result<Response<Full<Bytes>>, BoxError>, Vec<String>) {
    let protocol = Protocol::of(&parts);
    let delivered_if_ok = |result: Result<Response<Full<Bytes>>, BoxError>, ids: Vec<String>| {
        let ok = result.as_ref().is_ok_and(|r| r.status().is_success());
        (result, if ok { ids } else { Vec::new() })
    };
    let refused = |status: StatusCode, code: &str| (Ok(error(protocol, status, code)), Vec::new());
    match fault {
        None | Some(Fault::Pass) => delivered_if_ok(forward(upstream, parts, body).await, all),
        Some(Fault::Throttle) => refused(StatusCode::BAD_REQUEST, "Throttling"),
        Some(Fault::ServerError) => refused(StatusCode::INTERNAL_SERVER_ERROR, "InternalFailure"),
        Some(Fault::Refuse(code)) => refused(StatusCode::BAD_REQUEST, code),
        Some(Fault::Status(status, code)) => refused(
            StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
            code,
        ),
        Some(Fault::Hang) => {
            std::future::pending::<()>().await;
            unreachable!()
        }
        Some(Fault::Reset) => (Err("injected connection reset".into()), Vec::new()),
        Some(Fault::Late(after)) => {
            let answer = delivered_if_ok(forward(upstream, parts, body).await, all);
            tokio::time::sleep(*after).await;
            answer
        }
        Some(Fault::Stub(after)) => {
            tokio::time::sleep(*after).await;
            (Ok(fake_success(operation, &body)), all)
        }
        Some(Fault::Crash { forward: false }) => {
            crash();
            (Err("injected crash".into()), Vec::new())
        }
        Some(Fault::Crash { forward: true }) => {
            let (result, delivered) = delivered_if_ok(forward(upstream, parts, body).await, all);
            crash();
            drop(result);
            (Err("injected crash".into()), delivered)
        }
        Some(Fault::FailEntries(positions)) => {
            let refuse = |i: usize, _: &str| positions.contains(&i);
            partial(upstream, parts, body, operation, None, refuse).await
        }
        Some(Fault::RefuseEntries { containing, code }) => {
            let refuse = |_, text: &str| containing.iter().any(|t| text.contains(t.as_str()));
            partial(upstream, parts, body, operation, Some(code), refuse).await
        }
    }
}

/// A sink call (`PublishBatch`, else `PutEvents`) forwarded without the
/// entries `refuse` picks (by position and `Message` or `Detail`), those
/// answered failed with `code` (else the service's internal error); the
/// answer and the event ids that reached the local API.
async fn partial(
    upstream: &str,
    parts: hyper::http::request::Parts,
    body: Bytes,
    operation: &str,
    code: Option<&str>,
    refuse: impl Fn(usize, &str) -> bool,
) -> (Result<Response<Full<Bytes>>, BoxError>, Vec<String>) {
    let mut delivered = Vec::new();
    let result = if operation == "PublishBatch" {
        let code = code.unwrap_or("InternalError");
        partial_publish_batch(upstream, parts, body, code, refuse, &mut delivered).await
    } else if is_custom_bus(&parts) {
        let code = code.unwrap_or("InternalFailure");
        partial_put_events::<CborBody>(upstream, parts, body, code, refuse, &mut delivered).await
    } else {
        let code = code.unwrap_or("InternalFailure");
        type Json = serde_json::Value;
        partial_put_events::<Json>(upstream, parts, body, code, refuse, &mut delivered).await
    };
    (result, delivered)
}

/// An answer of `content_type` carrying `body`.
fn answer(content_type: &'static str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A success answer for a call that was never forwarded
/// ([`Sabotage`](super::Sabotage)).
pub(super) fn fake_success(operation: &str, body: &[u8]) -> Response<Full<Bytes>> {
    let (content_type, text) = match operation {
        "PutEvents" if cbor::members(body).is_some() => return cbor::fake_put_events(body),
        "PutEvents" => {
            let entries = serde_json::from_slice::<serde_json::Value>(body)
                .ok()
                .and_then(|v| v["Entries"].as_array().map(Vec::len))
                .unwrap_or(0);
            let answers: Vec<serde_json::Value> = (0..entries)
                .map(|i| serde_json::json!({"EventId": format!("sabotaged-{i}")}))
                .collect();
            (
                "application/x-amz-json-1.1",
                serde_json::json!({"FailedEntryCount": 0, "Entries": answers}).to_string(),
            )
        }
        "PublishBatch" => {
            let members: String = form_urlencoded::parse(body)
                .filter(|(k, _)| k.ends_with(".Id"))
                .map(|(_, id)| {
                    format!("<member><Id>{id}</Id><MessageId>sabotaged-{id}</MessageId><SequenceNumber>1</SequenceNumber></member>")
                })
                .collect();
            (
                "text/xml",
                format!("<PublishBatchResponse xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\"><PublishBatchResult><Successful>{members}</Successful><Failed></Failed></PublishBatchResult><ResponseMetadata><RequestId>sabotaged</RequestId></ResponseMetadata></PublishBatchResponse>"),
            )
        }
        "BatchWriteItem" => (
            "application/x-amz-json-1.0",
            r#"{"UnprocessedItems":{}}"#.to_owned(),
        ),
        _ => ("application/x-amz-json-1.0", "{}".to_owned()),
    };
    answer(content_type, text)
}

fn error(protocol: Protocol, status: StatusCode, code: &str) -> Response<Full<Bytes>> {
    let json_code = if code == "Throttling" {
        "ThrottlingException"
    } else {
        code
    };
    if protocol == Protocol::Cbor {
        return cbor::error(status, json_code);
    }
    let (content_type, body) = if protocol == Protocol::Json {
        let code = json_code;
        (
            "application/x-amz-json-1.1",
            format!(r#"{{"__type":"{code}","message":"injected by the fault proxy"}}"#),
        )
    } else {
        (
            "text/xml",
            format!(
                "<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>injected by the fault proxy</Message></Error><RequestId>fault-proxy</RequestId></ErrorResponse>"
            ),
        )
    };
    let mut response = answer(content_type, body);
    *response.status_mut() = status;
    response
}

async fn forward(
    upstream: &str,
    mut parts: hyper::http::request::Parts,
    body: Bytes,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let stream = TcpStream::connect(upstream).await?;
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    parts.headers.remove(TRANSFER_ENCODING);
    parts.headers.insert(CONTENT_LENGTH, body.len().into());
    let response = sender
        .send_request(Request::from_parts(parts, Full::new(body)))
        .await?;
    let (mut parts, body) = response.into_parts();
    let body = body.collect().await?.to_bytes();
    parts.headers.remove(TRANSFER_ENCODING);
    parts.headers.insert(CONTENT_LENGTH, body.len().into());
    Ok(Response::from_parts(parts, Full::new(body)))
}

/// A `PutEvents` body in its wire format: the classic bus's JSON or the
/// Custom Event Bus's CBOR.
trait PutEventsWire: Sized {
    /// An entry, or an entry's result.
    type Entry: Clone;
    fn parse(body: &[u8]) -> Result<Self, BoxError>;
    fn entries(&self) -> Vec<Self::Entry>;
    fn detail(entry: &Self::Entry) -> &str;
    /// The body with `entries` in place of its own.
    fn with_entries(&self, entries: Vec<Self::Entry>) -> Bytes;
    /// A refused entry's result, and the result of one the answer lacks.
    fn failed(code: &str) -> Self::Entry;
    fn missing() -> Self::Entry;
    fn answer(failed: usize, results: Vec<Self::Entry>) -> Response<Full<Bytes>>;
}

impl PutEventsWire for serde_json::Value {
    type Entry = serde_json::Value;
    fn parse(body: &[u8]) -> Result<Self, BoxError> {
        Ok(serde_json::from_slice(body)?)
    }
    fn entries(&self) -> Vec<Self::Entry> {
        self["Entries"].as_array().cloned().unwrap_or_default()
    }
    fn detail(entry: &Self::Entry) -> &str {
        entry["Detail"].as_str().unwrap_or("")
    }
    fn with_entries(&self, entries: Vec<Self::Entry>) -> Bytes {
        let mut request = self.clone();
        request["Entries"] = serde_json::Value::Array(entries);
        Bytes::from(request.to_string())
    }
    fn failed(code: &str) -> Self::Entry {
        serde_json::json!({"ErrorCode": code, "ErrorMessage": "injected by the fault proxy"})
    }
    fn missing() -> Self::Entry {
        serde_json::Value::Null
    }
    fn answer(failed: usize, results: Vec<Self::Entry>) -> Response<Full<Bytes>> {
        let body = serde_json::json!({"FailedEntryCount": failed, "Entries": results});
        answer("application/x-amz-json-1.1", body.to_string())
    }
}

/// The Custom Event Bus's CBOR map.
struct CborBody(Vec<(ciborium::Value, ciborium::Value)>);

impl PutEventsWire for CborBody {
    type Entry = ciborium::Value;
    fn parse(body: &[u8]) -> Result<Self, BoxError> {
        Ok(Self(
            cbor::members(body).ok_or("a body that is no CBOR map")?,
        ))
    }
    fn entries(&self) -> Vec<Self::Entry> {
        cbor::entries(&self.0)
    }
    fn detail(entry: &Self::Entry) -> &str {
        cbor::detail(entry)
    }
    fn with_entries(&self, entries: Vec<Self::Entry>) -> Bytes {
        cbor::with_entries(&self.0, entries)
    }
    fn failed(code: &str) -> Self::Entry {
        cbor::failed_entry(code)
    }
    fn missing() -> Self::Entry {
        ciborium::Value::Map(Vec::new())
    }
    fn answer(failed: usize, results: Vec<Self::Entry>) -> Response<Full<Bytes>> {
        cbor::answer(StatusCode::OK, &cbor::put_events_answer(failed, results))
    }
}

/// Forwards the `PutEvents` entries that `refuse` spares (by position and
/// `Detail`), in the body's wire format `W`, and answers for all of them,
/// the refused ones failed with `code`, in request order.
async fn partial_put_events<W: PutEventsWire>(
    upstream: &str,
    parts: hyper::http::request::Parts,
    body: Bytes,
    code: &str,
    refuse: impl Fn(usize, &str) -> bool,
    delivered: &mut Vec<String>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let request = W::parse(&body)?;
    let entries = request.entries();
    let refused: Vec<bool> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| refuse(i, W::detail(e)))
        .collect();
    let kept: Vec<W::Entry> = entries
        .iter()
        .zip(&refused)
        .filter(|(_, r)| !**r)
        .map(|(e, _)| e.clone())
        .collect();
    let mut answers = Vec::new();
    if !kept.is_empty() {
        let ids: Vec<String> = kept.iter().filter_map(|e| event_id(W::detail(e))).collect();
        let forwarded = forward(upstream, parts, request.with_entries(kept)).await?;
        if !forwarded.status().is_success() {
            return Ok(forwarded);
        }
        *delivered = ids;
        let body = forwarded.into_body().collect().await?.to_bytes();
        answers = W::parse(&body)?.entries();
    }
    let mut answers = answers.into_iter();
    let results = refused
        .iter()
        .map(|r| {
            if *r {
                W::failed(code)
            } else {
                answers.next().unwrap_or_else(W::missing)
            }
        })
        .collect();
    Ok(W::answer(refused.iter().filter(|r| **r).count(), results))
}

/// Forwards the SNS `PublishBatch` members whose `Message` `refuse` spares
/// (renumbered) and answers for all of them: the refused ones in `Failed`
/// with `code`. The query protocol: a form body, an XML answer.
async fn partial_publish_batch(
    upstream: &str,
    parts: hyper::http::request::Parts,
    body: Bytes,
    code: &str,
    refuse: impl Fn(usize, &str) -> bool,
    delivered: &mut Vec<String>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    const PREFIX: &str = "PublishBatchRequestEntries.member.";
    let pairs: Vec<(String, String)> = form_urlencoded::parse(&body).into_owned().collect();
    let mut members: std::collections::BTreeMap<usize, Vec<(String, String)>> = Default::default();
    let mut others = Vec::new();
    for (key, value) in pairs {
        let member = key
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(n, field)| n.parse::<usize>().ok().map(|n| (n, field.to_owned())));
        match member {
            Some((n, field)) => members.entry(n).or_default().push((field, value)),
            None => others.push((key, value)),
        }
    }
    let field = |member: &[(String, String)], name: &str| {
        member
            .iter()
            .find(|(f, _)| f == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let (refused, kept): (Vec<_>, Vec<_>) = members
        .into_values()
        .enumerate()
        .partition(|(i, member)| refuse(*i, &field(member, "Message")));
    let refused: Vec<_> = refused.into_iter().map(|(_, m)| m).collect();
    let kept: Vec<_> = kept.into_iter().map(|(_, m)| m).collect();
    let mut successful = String::new();
    if !kept.is_empty() {
        // The serializer is not Send: finish it before the next await.
        let form = {
            let mut form = form_urlencoded::Serializer::new(String::new());
            for (key, value) in &others {
                form.append_pair(key, value);
            }
            for (i, member) in kept.iter().enumerate() {
                for (name, value) in member {
                    form.append_pair(&format!("{PREFIX}{}.{name}", i + 1), value);
                }
            }
            form.finish()
        };
        let ids: Vec<String> = kept
            .iter()
            .filter_map(|member| event_id(&field(member, "Message")))
            .collect();
        let forwarded = forward(upstream, parts, Bytes::from(form)).await?;
        if !forwarded.status().is_success() {
            return Ok(forwarded);
        }
        *delivered = ids;
        let bytes = forwarded.into_body().collect().await?.to_bytes();
        let xml = String::from_utf8_lossy(&bytes).into_owned();
        if let (Some(start), Some(end)) = (xml.find("<Successful>"), xml.find("</Successful>")) {
            successful = xml[start + "<Successful>".len()..end].to_owned();
        }
    }
    let failed: String = refused
        .iter()
        .map(|member| {
            format!(
                "<member><Id>{}</Id><Code>{code}</Code><Message>injected by the fault proxy</Message><SenderFault>{}</SenderFault></member>",
                field(member, "Id"),
                // The caller's fault for the codes SNS uses for a bad entry.
                code.starts_with("Invalid") || code.starts_with("Validation")
            )
        })
        .collect();
    let body = format!(
        "<PublishBatchResponse xmlns=\"http://sns.amazonaws.com/doc/2010-03-31/\"><PublishBatchResult><Successful>{successful}</Successful><Failed>{failed}</Failed></PublishBatchResult><ResponseMetadata><RequestId>fault-proxy</RequestId></ResponseMetadata></PublishBatchResponse>"
    );
    Ok(answer("text/xml", body))
}
