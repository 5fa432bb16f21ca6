//! The orders HTTP API behind API Gateway (HTTP API, payload v2).
//!
//! | route | success | errors |
//! |---|---|---|
//! | `POST /orders` | 201 + order | 400, 401, 405, 409, 413, 415, 422, 503, 500 |
//! | `POST /orders/{id}/payment` | 200 + order | 400, 401, 404, 405, 409, 413, 415, 422, 503, 500 |
//! | `GET /orders/{id}` | 200 + order | 401, 404, 405, 503, 500 |
//!
//! Each error's status follows from its [`ErrorCode`].
//!
//! The caller is the authorizer's principal ([`Caller::iam`]: the Cognito
//! identity, the role of an assumed-role session, else the IAM ARN; or the
//! JWT's `sub`). A request without one is 401 `unauthenticated`, unless the
//! function runs with `WRITER_LOCAL_CALLER` (local runs under `cargo lambda
//! watch`, which has no authorizer; the template never sets it). An order of
//! another caller is 404, exactly like one that does not exist.
//! `docs/openapi.yaml` is the contract.
//!
//! Every error is `{"error":{"code":…,"message":…}}` (plus `field` when one
//! field is at fault); no error leaks AWS internals. A replayed response
//! carries `Idempotent-Replayed: true`.

use lambda_http::http::{header, HeaderMap, Method, StatusCode};
use lambda_http::request::RequestContext;
use lambda_http::{Body, Request, RequestExt, Response};
use serde_json::json;

use crate::caller::Caller;
use crate::idempotency::IdempotencyKey;
use crate::orders::{CreateOrderRequest, NewOrder, Order, PaymentRequest};
use crate::service::{OrderError, OrderService, Reply};
use outbox_core::table::ItemTable;

/// The environment variable naming the caller of requests that carry no
/// principal. For local runs only: the template never sets it.
pub const LOCAL_CALLER_ENV: &str = "WRITER_LOCAL_CALLER";

/// Largest accepted request body.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
const IDEMPOTENCY_HEADER: &str = "idempotency-key";
const RETRY_AFTER_SECONDS: u32 = 1;

/// Every error `code` the API answers, each with its one HTTP status.
/// `docs/openapi.yaml`'s `Error.code` enum lists exactly these
/// (`tests/contracts.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// 400: the body is not JSON, or empty where one is needed.
    InvalidJson,
    /// 400: a field is missing, of the wrong type, out of range or unknown.
    InvalidField,
    /// 400: the `Idempotency-Key` header is not acceptable.
    InvalidIdempotencyKey,
    /// 401: no authenticated principal.
    Unauthenticated,
    /// 404: no such order, or another caller's.
    OrderNotFound,
    /// 404: no such route.
    RouteNotFound,
    /// 405: the path exists, the method does not (`Allow` lists the one that does).
    MethodNotAllowed,
    /// 409: the order is not `PENDING`.
    OrderNotPending,
    /// 409: a concurrent change, or the same key in progress.
    Conflict,
    /// 413: the body is too large.
    BodyTooLarge,
    /// 415: the body is not `application/json`.
    UnsupportedMediaType,
    /// 422: the key was used for a different request.
    IdempotencyKeyReused,
    /// 503: throttled; `Retry-After` says when to retry.
    Throttled,
    /// 500: anything else; the cause is in the log only.
    Internal,
}

impl ErrorCode {
    /// Every code, in the document's order.
    pub const ALL: [Self; 14] = [
        Self::InvalidJson,
        Self::InvalidField,
        Self::InvalidIdempotencyKey,
        Self::Unauthenticated,
        Self::OrderNotFound,
        Self::RouteNotFound,
        Self::MethodNotAllowed,
        Self::OrderNotPending,
        Self::Conflict,
        Self::BodyTooLarge,
        Self::UnsupportedMediaType,
        Self::IdempotencyKeyReused,
        Self::Throttled,
        Self::Internal,
    ];

    /// The `code` of the JSON body.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::InvalidField => "invalid_field",
            Self::InvalidIdempotencyKey => "invalid_idempotency_key",
            Self::Unauthenticated => "unauthenticated",
            Self::OrderNotFound => "order_not_found",
            Self::RouteNotFound => "route_not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::OrderNotPending => "order_not_pending",
            Self::Conflict => "conflict",
            Self::BodyTooLarge => "body_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::IdempotencyKeyReused => "idempotency_key_reused",
            Self::Throttled => "throttled",
            Self::Internal => "internal",
        }
    }

    /// The status every response with this code has.
    pub fn status(self) -> StatusCode {
        match self {
            Self::InvalidJson | Self::InvalidField | Self::InvalidIdempotencyKey => {
                StatusCode::BAD_REQUEST
            }
            Self::Unauthenticated => StatusCode::UNAUTHORIZED,
            Self::OrderNotFound | Self::RouteNotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::OrderNotPending | Self::Conflict => StatusCode::CONFLICT,
            Self::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::IdempotencyKeyReused => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Throttled => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An error response: stable machine code (and its status), human message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    /// The error code of the JSON body; it decides the status.
    pub code: ErrorCode,
    /// A message for people.
    pub message: String,
    /// The request field at fault, if one is.
    pub field: Option<String>,
    /// For a 405: the methods the path allows (the `Allow` header).
    pub allow: Option<&'static str>,
}

impl ApiError {
    fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            field: None,
            allow: None,
        }
    }

    fn field(code: ErrorCode, field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: Some(field.into()),
            ..Self::new(code, message)
        }
    }

    fn throttled() -> Self {
        Self::new(ErrorCode::Throttled, "the service is busy; retry later")
    }

    fn internal(error: &dyn std::error::Error) -> Self {
        // The cause goes to the log, never to the client.
        let detail = outbox_runtime::error_chain(error);
        tracing::error!(detail, "internal error");
        Self::new(ErrorCode::Internal, "internal error")
    }

    /// The HTTP status of the response.
    pub fn status(&self) -> StatusCode {
        self.code.status()
    }

    /// The JSON response.
    pub(crate) fn into_response(self) -> Response<Body> {
        let mut error = json!({"code": self.code.as_str(), "message": self.message});
        if let Some(field) = self.field {
            error["field"] = json!(field);
        }
        let mut response = json_response(self.code.status(), json!({ "error": error }).to_string());
        if self.code == ErrorCode::Throttled {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, RETRY_AFTER_SECONDS.into());
        }
        if let Some(allow) = self.allow {
            response
                .headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static(allow));
        }
        response
    }
}

/// The one mapping from a command's error to an HTTP status and code.
impl From<OrderError> for ApiError {
    fn from(e: OrderError) -> Self {
        match e {
            OrderError::NotFound => not_found(),
            OrderError::NotPending(status) => Self::new(
                ErrorCode::OrderNotPending,
                format!("order is {status}; only PENDING orders can be paid"),
            ),
            OrderError::KeyReused => key_reused(),
            OrderError::Conflict => Self::new(
                ErrorCode::Conflict,
                "the order is being changed concurrently, or a request with this idempotency key is in progress; retry",
            ),
            OrderError::Throttled => Self::throttled(),
            OrderError::Internal(e) => Self::internal(&e),
        }
    }
}

fn not_found() -> ApiError {
    ApiError::new(ErrorCode::OrderNotFound, "no such order")
}

fn key_reused() -> ApiError {
    ApiError::new(
        ErrorCode::IdempotencyKeyReused,
        "this Idempotency-Key was used for a different request",
    )
}

/// The orders API: the service, and who a request without a principal is
/// (nobody, unless set for a local run).
#[derive(Debug, Clone)]
pub struct Api<T = aws_sdk_dynamodb::Client> {
    service: OrderService<T>,
    local_caller: Option<Caller>,
}

impl<T: ItemTable> Api<T> {
    /// An API that answers 401 to every request without a principal.
    pub fn new(service: OrderService<T>) -> Self {
        Self {
            service,
            local_caller: None,
        }
    }

    /// Requests without a principal act as `caller`. For local runs only.
    pub fn with_local_caller(mut self, caller: Caller) -> Self {
        self.local_caller = Some(caller);
        self
    }

    /// [`Api::new`], with the local caller of `WRITER_LOCAL_CALLER` when it
    /// is set (an empty or invalid value is an error, not a silent 401).
    pub fn from_env(service: OrderService<T>) -> Result<Self, String> {
        match std::env::var(LOCAL_CALLER_ENV) {
            Err(_) => Ok(Self::new(service)),
            Ok(name) => {
                let caller = Caller::local(&name)
                    .ok_or_else(|| format!("{LOCAL_CALLER_ENV} must be a non-empty name"))?;
                tracing::warn!(
                    "{LOCAL_CALLER_ENV} is set: requests without a principal are accepted (local runs only)"
                );
                Ok(Self::new(service).with_local_caller(caller))
            }
        }
    }

    /// Routes one request. Never fails: every error is a response.
    pub async fn handle(&self, request: Request) -> Response<Body> {
        let method = request.method().clone();
        let response = self
            .route(&request)
            .await
            .unwrap_or_else(ApiError::into_response);
        tracing::info!(method = %method, status = response.status().as_u16(), "request handled");
        response
    }

    async fn route(&self, request: &Request) -> Result<Response<Body>, ApiError> {
        let method = request.method();
        let path = request.uri().path();
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let traceparent = header_str(request.headers(), "traceparent");
        let service = &self.service;
        // Match on the end of the path, so a stage prefix does not matter.
        let route = match segments.as_slice() {
            [.., "orders"] if method == Method::POST => Route::Create,
            [.., "orders", id, "payment"] if method == Method::POST => Route::Pay(id),
            [.., "orders", id] if method == Method::GET => Route::Get(id),
            [.., "orders"] | [.., "orders", _, "payment"] | [.., "orders", _] => {
                let allow = if matches!(segments.as_slice(), [.., "orders", _]) {
                    "GET"
                } else {
                    "POST"
                };
                return Err(ApiError {
                    allow: Some(allow),
                    ..ApiError::new(
                        ErrorCode::MethodNotAllowed,
                        format!("{method} is not allowed here; {allow} is"),
                    )
                });
            }
            _ => return Err(ApiError::new(ErrorCode::RouteNotFound, "no such route")),
        };
        let caller = self.caller(request)?;
        match route {
            Route::Create => create(service, &caller, request, traceparent).await,
            Route::Pay(id) => pay(service, &caller, request, id, traceparent).await,
            Route::Get(id) => get(service, &caller, id).await,
        }
    }

    /// The principal API Gateway authorized (`Caller::iam`: the Cognito
    /// identity, the role of an assumed-role session, or the IAM ARN; or
    /// the JWT's `sub`); else the local caller, if one is set; else 401.
    fn caller(&self, request: &Request) -> Result<Caller, ApiError> {
        let authorizer = match request.request_context_ref() {
            Some(RequestContext::ApiGatewayV2(context)) => context.authorizer.as_ref(),
            _ => None,
        };
        let iam = authorizer.and_then(|a| a.iam.as_ref()).and_then(|iam| {
            let cognito = iam
                .cognito_identity
                .as_ref()
                .and_then(|c| c.identity_id.as_deref());
            iam.user_arn.as_deref().map(|arn| (arn, cognito))
        });
        let jwt = authorizer
            .and_then(|a| a.jwt.as_ref())
            .and_then(|jwt| jwt.claims.get("sub"));
        // A request that carries a principal is that principal or nobody
        // (401): never the JWT or the local caller instead. The local
        // caller stands in only for requests without one.
        let principal = match (iam, jwt) {
            (Some((arn, cognito)), _) => Caller::iam(arn, cognito),
            (None, Some(sub)) => Caller::jwt(sub),
            (None, None) => self.local_caller.clone(),
        };
        principal.ok_or_else(|| {
            ApiError::new(
                ErrorCode::Unauthenticated,
                "the request carries no authenticated principal",
            )
        })
    }
}

enum Route<'a> {
    Create,
    Pay(&'a str),
    Get(&'a str),
}

async fn create(
    service: &OrderService<impl ItemTable>,
    caller: &Caller,
    request: &Request,
    traceparent: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let key = idempotency_key(request.headers())?;
    let body: CreateOrderRequest = json_body(request)?;
    let new = NewOrder::try_from(body)
        .map_err(|e| ApiError::field(ErrorCode::InvalidField, &e.field, e.to_string()))?;
    let outcome = service
        .create(caller, new, key.as_ref(), traceparent)
        .await?;
    Ok(reply_response(outcome, StatusCode::CREATED))
}

async fn pay(
    service: &OrderService<impl ItemTable>,
    caller: &Caller,
    request: &Request,
    id: &str,
    traceparent: Option<&str>,
) -> Result<Response<Body>, ApiError> {
    let key = idempotency_key(request.headers())?;
    // The payment takes no body; one that is sent must be an empty JSON
    // object (docs/openapi.yaml: `maxProperties: 0`).
    if !body_bytes(request.body()).is_empty() {
        let _: PaymentRequest = json_body(request)?;
    }
    let outcome = service.pay(caller, id, key.as_ref(), traceparent).await?;
    Ok(reply_response(outcome, StatusCode::OK))
}

async fn get(
    service: &OrderService<impl ItemTable>,
    caller: &Caller,
    id: &str,
) -> Result<Response<Body>, ApiError> {
    let order = service.get(caller, id).await?;
    Ok(order_response(StatusCode::OK, &order))
}

fn reply_response(outcome: Reply, status: StatusCode) -> Response<Body> {
    match outcome {
        Reply::Done(order) => {
            tracing::info!(order_id = %order.order_id, version = order.version, "order written");
            order_response(status, &order)
        }
        Reply::Replayed(stored) => {
            let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
            let mut response = json_response(status, stored.body);
            response.headers_mut().insert(
                "idempotent-replayed",
                header::HeaderValue::from_static("true"),
            );
            response
        }
    }
}

fn order_response(status: StatusCode, order: &Order) -> Response<Body> {
    match serde_json::to_string(order) {
        Ok(body) => json_response(status, body),
        Err(e) => ApiError::internal(&e).into_response(),
    }
}

fn json_response(status: StatusCode, body: String) -> Response<Body> {
    let mut response = Response::new(Body::Text(body));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn header_str<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

fn idempotency_key(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, ApiError> {
    match headers.get(IDEMPOTENCY_HEADER) {
        None => Ok(None),
        Some(value) => {
            let raw = value
                .to_str()
                .map_err(|_| invalid_key("Idempotency-Key must be printable ASCII"))?;
            IdempotencyKey::parse(raw).map(Some).map_err(invalid_key)
        }
    }
}

fn invalid_key(message: &str) -> ApiError {
    ApiError {
        field: Some("Idempotency-Key".into()),
        ..ApiError::new(ErrorCode::InvalidIdempotencyKey, message)
    }
}

fn body_bytes(body: &Body) -> &[u8] {
    match body {
        Body::Empty => &[],
        Body::Text(text) => text.as_bytes(),
        Body::Binary(bytes) => bytes,
        // `Body` is non-exhaustive upstream; treat anything new as empty.
        #[allow(unreachable_patterns)]
        _ => &[],
    }
}

/// Checks size and content type, then parses JSON into `T`, naming the
/// field at fault for type, range, missing and unknown-field errors.
fn json_body<T: serde::de::DeserializeOwned>(request: &Request) -> Result<T, ApiError> {
    let bytes = body_bytes(request.body());
    if bytes.len() > MAX_BODY_BYTES {
        return Err(ApiError::new(
            ErrorCode::BodyTooLarge,
            format!("body must be at most {MAX_BODY_BYTES} bytes"),
        ));
    }
    let json_type = header_str(request.headers(), "content-type")
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json"));
    if !json_type {
        return Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            "Content-Type must be application/json",
        ));
    }
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::new(
            ErrorCode::InvalidJson,
            "a JSON body is required",
        ));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        match inner.classify() {
            serde_json::error::Category::Data => {
                let message = strip_position(&inner.to_string());
                // A missing field is reported at its parent: name it.
                let field = match (message.split('`').nth(1), path.as_str()) {
                    (Some(name), ".") if message.starts_with("missing field") => name.to_owned(),
                    (Some(name), parent) if message.starts_with("missing field") => {
                        format!("{parent}.{name}")
                    }
                    _ => path,
                };
                ApiError::field(
                    ErrorCode::InvalidField,
                    &field,
                    format!("{field}: {message}"),
                )
            }
            _ => invalid_json(&inner),
        }
    })?;
    deserializer.end().map_err(|e| invalid_json(&e))?;
    Ok(value)
}

fn invalid_json(e: &serde_json::Error) -> ApiError {
    ApiError::new(
        ErrorCode::InvalidJson,
        format!("body is not valid JSON: {}", strip_position(&e.to_string())),
    )
}

fn strip_position(message: &str) -> String {
    match message.find(" at line ") {
        Some(i) => message[..i].to_owned(),
        None => message.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttling_is_503_with_retry_after() {
        let response = ApiError::from(OrderError::Throttled).into_response();
        assert_eq!(response.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(response.headers()[header::RETRY_AFTER], "1");
    }

    #[test]
    fn internal_errors_hide_their_detail() {
        let cause = crate::backend::BackendError::Event(outbox_core::OutboxError::InvalidEvent(
            "arn:aws:dynamodb:secret".into(),
        ));
        let response = ApiError::from(OrderError::Internal(cause)).into_response();
        assert_eq!(response.status(), StatusCode::INTERNAL_SERVER_ERROR);
        match response.body() {
            Body::Text(text) => assert!(!text.contains("secret")),
            other => panic!("{other:?}"),
        }
    }
}
