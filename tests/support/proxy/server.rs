//! The server loop: every connection served on its own task, each call
//! classified, recorded, given its fault and answered, and sent on to the
//! local server of its service ([`Upstreams`]).

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

use super::answer::{apply, fake_success};
use super::classify::{
    carries_a_first_event, deleted_event_ids, handed_over_event_ids, iam_requests, is_sink_call,
    operation, sink_event_ids, subject,
};
use super::state::{fault_for, State};
use super::{BoxError, Call, Fault, Sabotage};

/// Where calls go on to, by service.
#[derive(Clone)]
pub(super) struct Upstreams {
    dynamodb: String,
    streams: String,
    others: String,
    /// The local Custom Event Bus (`devkit::LocalBus`), when the test has one.
    bus: Option<String>,
}

impl Upstreams {
    /// The local servers: DynamoDB Local (`AWS_ENDPOINT_URL_DYNAMODB`,
    /// `..._STREAMS`) and moto (`AWS_ENDPOINT_URL`).
    pub(super) fn local() -> Self {
        let host = |url: String| {
            url.trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned()
        };
        Self {
            others: host(devkit::endpoint().expect("a loopback AWS_ENDPOINT_URL")),
            dynamodb: host(devkit::dynamodb_endpoint().expect("a loopback DynamoDB endpoint")),
            streams: host(devkit::streams_endpoint().expect("a loopback streams endpoint")),
            bus: None,
        }
    }

    /// The same with the Custom Event Bus at `endpoint`.
    pub(super) fn with_bus(mut self, endpoint: &str) -> Self {
        self.bus = Some(
            endpoint
                .trim_start_matches("http://")
                .trim_end_matches('/')
                .to_owned(),
        );
        self
    }

    /// The server of a request's service (its `X-Amz-Target` prefix).
    fn of(&self, request: &hyper::http::request::Parts) -> &str {
        let target = super::classify::target(request);
        if super::classify::is_custom_bus(request) {
            self.bus.as_deref().unwrap_or(&self.others)
        } else if target.starts_with("DynamoDBStreams_") {
            &self.streams
        } else if target.starts_with("DynamoDB_") {
            &self.dynamodb
        } else {
            &self.others
        }
    }
}

/// A delete answered and held until its invocation ends
/// ([`Sabotage::DeferDeletes`]).
pub(super) struct Deferred {
    pub(super) tag: u64,
    upstream: String,
    parts: hyper::http::request::Parts,
    body: Bytes,
    operation: String,
    deletes: Vec<String>,
}

/// The journal entry of a call answered as done before it was forwarded
/// (a held delete, an early acknowledgement), forwarded now.
fn forwarded_late(tag: u64, operation: String, fault: Option<Fault>) -> Call {
    Call {
        tag,
        operation,
        fault,
        delivered: Vec::new(),
        deletes: Vec::new(),
        deleted: Vec::new(),
        hands_over: Vec::new(),
        succeeded: true,
        at: std::time::SystemTime::now(),
        answered: true,
        reached: true,
    }
}

/// Changes the journal entry `entry`, if there is one.
fn mark(state: &Mutex<State>, entry: Option<usize>, change: impl FnOnce(&mut Call)) {
    let mut state = state.lock().unwrap();
    if let Some(call) = entry.and_then(|e| state.journal.get_mut(e)) {
        change(call);
    }
}

/// Forwards a held delete and journals it as taking effect now.
pub(super) async fn forward_deferred(state: &Mutex<State>, call: Deferred) {
    let (_, deleted) = apply(
        &call.upstream,
        call.parts,
        call.body,
        &call.operation,
        &None,
        &|| {},
        call.deletes.clone(),
    )
    .await;
    let mut entry = forwarded_late(call.tag, call.operation, None);
    (entry.deletes, entry.deleted) = (call.deletes, deleted);
    state.lock().unwrap().journal.push(entry);
}

/// Accepts connections on `listener` until it fails, each served on its
/// own task.
pub(super) async fn serve(listener: TcpListener, shared: Arc<Mutex<State>>, upstream: Upstreams) {
    while let Ok((stream, _)) = listener.accept().await {
        let state = shared.clone();
        let upstream = upstream.clone();
        tokio::spawn(async move {
            let service =
                service_fn(move |request| handle(state.clone(), upstream.clone(), request));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// One call, as hyper hands it over.
async fn handle(
    state: Arc<Mutex<State>>,
    upstream: Upstreams,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, BoxError> {
    let (parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    // Finished in its own task: a client that gives up (an attempt timeout)
    // drops this future, but a call that reached the local API must still
    // be journaled, as it took effect. Dropping `_here` tells a call held
    // at the gate that its caller is gone.
    let (_here, gone) = tokio::sync::oneshot::channel::<()>();
    let (result, entry) =
        tokio::spawn(handle_call(state.clone(), upstream, parts, body, gone)).await?;
    mark(&state, entry, |call| call.answered = true);
    result
}

/// One call: recorded, given its fault, answered and journaled; the
/// answer and the call's journal entry, if it has one.
async fn handle_call(
    state: Arc<Mutex<State>>,
    upstreams: Upstreams,
    parts: hyper::http::request::Parts,
    body: Bytes,
    gone: tokio::sync::oneshot::Receiver<()>,
) -> (Result<Response<Full<Bytes>>, BoxError>, Option<usize>) {
    let upstream = upstreams.of(&parts).to_owned();
    let operation = operation(&parts, &body);
    {
        let mut state = state.lock().unwrap();
        let mut last_stream = state.last_stream.take();
        let requests = iam_requests(&parts, &operation, &body, &mut last_stream);
        state.last_stream = last_stream;
        state.actions.extend(requests);
    }
    let (tag, fault) = fault_for(&state, &operation, &subject(&operation, &body));
    let deletes = deleted_event_ids(&operation, &body);
    let hands_over = handed_over_event_ids(&operation, &body);
    let journal = |fault: &Option<Fault>, reached: Vec<String>, succeeded: bool| {
        if is_sink_call(&operation)
            || !deletes.is_empty()
            || !hands_over.is_empty()
            || fault.as_ref().is_some_and(|f| *f != Fault::Pass)
        {
            let (delivered, deleted) = if is_sink_call(&operation) {
                (reached, Vec::new())
            } else {
                (Vec::new(), reached)
            };
            let mut state = state.lock().unwrap();
            state.journal.push(Call {
                tag,
                operation: operation.clone(),
                fault: fault.clone(),
                delivered,
                deletes: deletes.clone(),
                deleted,
                hands_over: hands_over.clone(),
                succeeded,
                at: std::time::SystemTime::now(),
                answered: false,
                reached: true,
            });
            Some(state.journal.len() - 1)
        } else {
            None
        }
    };
    let crash = || {
        let hook = state.lock().unwrap().crash.clone();
        if let Some(hook) = hook {
            hook();
        }
    };
    let all = if is_sink_call(&operation) {
        sink_event_ids(&operation, &body)
    } else {
        deletes.clone()
    };
    if fault == Some(Fault::Hang) {
        // Journaled now: the call never ends.
        let _ = journal(&fault, Vec::new(), false);
    }
    let sabotage = state.lock().unwrap().sabotage;
    let unfaulted = fault.as_ref().is_none_or(|f| *f == Fault::Pass);
    match sabotage {
        Some(Sabotage::DropDeletes | Sabotage::SwallowSinkCalls) if unfaulted => {
            let dropped = if sabotage == Some(Sabotage::DropDeletes) {
                !deletes.is_empty()
            } else {
                is_sink_call(&operation)
            };
            if dropped {
                // Answered as done; nothing reached the local API.
                let entry = journal(&None, Vec::new(), true);
                return (Ok(fake_success(&operation, &body)), entry);
            }
        }
        Some(Sabotage::DeferDeletes) if unfaulted && !deletes.is_empty() => {
            // Answered as done now; forwarded (and journaled) when the
            // invocation ends with an answer.
            let answer = fake_success(&operation, &body);
            state.lock().unwrap().deferred.push(Deferred {
                tag,
                upstream,
                parts,
                body,
                operation: operation.clone(),
                deletes: deletes.clone(),
            });
            return (Ok(answer), None);
        }
        Some(Sabotage::SendTwice) if unfaulted && is_sink_call(&operation) => {
            // The first of the two sends, answered to nobody but journaled
            // as answered: the same invocation sent the call twice.
            let (first, delivered) = apply(
                &upstream,
                parts.clone(),
                body.clone(),
                &operation,
                &fault,
                &crash,
                all.clone(),
            )
            .await;
            let entry = journal(&fault, delivered, succeeded(&first));
            mark(&state, entry, |call| call.answered = true);
        }
        Some(Sabotage::AcknowledgeEarly)
            if unfaulted
                && is_sink_call(&operation)
                && carries_a_first_event(&operation, &body) =>
        {
            // Answered as published now, forwarded (and journaled) later.
            let answer = fake_success(&operation, &body);
            let state = state.clone();
            state.lock().unwrap().delayed += 1;
            tokio::spawn(async move {
                tokio::time::sleep(std::time::Duration::from_secs(3)).await;
                let (_, delivered) =
                    apply(&upstream, parts, body, &operation, &fault, &|| {}, all).await;
                let mut entry = forwarded_late(tag, operation, fault);
                entry.delivered = delivered;
                let mut state = state.lock().unwrap();
                state.journal.push(entry);
                state.delayed -= 1;
            });
            return (Ok(answer), None);
        }
        _ => {}
    }
    // An unfaulted sink call goes on to moto as the gate lets it; one whose
    // caller gave up while it was held never reaches moto.
    let gate = state.lock().unwrap().gate.clone();
    let _permit = match gate {
        Some(gate) if unfaulted && is_sink_call(&operation) => {
            tokio::select! {
                biased;
                _ = gone => {
                    let entry = journal(&fault, Vec::new(), false);
                    mark(&state, entry, |call| call.reached = false);
                    return (Err("the caller gave up while its call was held".into()), entry);
                }
                permit = gate.admit() => permit,
            }
        }
        _ => None,
    };
    let (result, delivered) = apply(&upstream, parts, body, &operation, &fault, &crash, all).await;
    if sabotage == Some(Sabotage::DeferDeletes) && is_sink_call(&operation) {
        // The kill, once, at the next sink call after an invocation has
        // published enough.
        let mut state = state.lock().unwrap();
        let published = state.published.entry(tag).or_default();
        *published += delivered.len();
        if *published >= super::DEFER_DELETES_KILL_AFTER && !state.kill_set {
            state.kill_set = true;
            state.rules.push(super::state::Rule {
                operation: operation.clone(),
                fault: Fault::Crash { forward: false },
                remaining: Some(1),
            });
        }
    }
    let entry = journal(&fault, delivered, succeeded(&result));
    (result, entry)
}

/// Whether an answer is a success (2xx).
fn succeeded(result: &Result<Response<Full<Bytes>>, BoxError>) -> bool {
    result.as_ref().is_ok_and(|r| r.status().is_success())
}
