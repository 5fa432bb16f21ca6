//! AWS client construction and error classification: the one place every
//! binary, the CLI and the tests get their SDK configuration from.
//!
//! # Retries: one layer per kind of failure
//! - A whole call (any SDK operation) is retried by the SDK itself:
//!   standard mode (token bucket, exponential backoff with jitter),
//!   [`SDK_MAX_ATTEMPTS`] attempts, each cut at `ATTEMPT_TIMEOUT`, the
//!   whole operation at `OPERATION_TIMEOUT`. Nothing of ours retries a
//!   whole call on top of that.
//! - What the SDK cannot see, because the call succeeded, is retried by
//!   `outbox_engine::RetryPolicy`: `BatchWriteItem`'s unprocessed items and
//!   the failed entries of a `PutEvents`/`PublishBatch` answer.
//! - Errors are classified from the SDK's error metadata
//!   ([`ProvideErrorMetadata::code`]), never from `Debug` text.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::http::Response as HttpResponse;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use aws_smithy_types::retry::ProvideErrorKind;
#[cfg(any(feature = "eventbridge", feature = "eventbridge-bus", feature = "sns"))]
use outbox_engine::SendCounter;

/// The SDK's own attempts per call (standard retry mode).
pub const SDK_MAX_ATTEMPTS: u32 = 3;
/// Connecting to an AWS endpoint.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// One HTTP attempt: a call that hangs is abandoned and retried.
pub(crate) const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// One operation, its retries included.
pub(crate) const OPERATION_TIMEOUT: Duration = Duration::from_secs(12);

/// The HTTP client (`http_client`) and the retry and timeout settings
/// every client of ours uses, set explicitly rather than left to the SDK's
/// defaults (which have no attempt or operation timeout: a hung call would
/// hold an invocation until Lambda kills it).
pub(crate) fn settings(loader: aws_config::ConfigLoader) -> aws_config::ConfigLoader {
    loader
        .http_client(http_client())
        .retry_config(RetryConfig::standard().with_max_attempts(SDK_MAX_ATTEMPTS))
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .operation_timeout(OPERATION_TIMEOUT)
                .build(),
        )
}

/// The default loader (environment, profile, role) with `settings` (explicit retry and timeout settings, the HTTP client).
pub fn loader() -> aws_config::ConfigLoader {
    settings(aws_config::defaults(aws_config::BehaviorVersion::latest()))
}

/// Loads the AWS configuration the usual way with `settings` (explicit retry and timeout settings, the HTTP client).
/// `AWS_ENDPOINT_URL` (and `AWS_ENDPOINT_URL_<SERVICE>`) point clients at a
/// local emulator.
pub async fn load() -> aws_config::SdkConfig {
    loader().load().await
}

/// The HTTP client of every AWS client: the SDK's own (hyper and rustls,
/// connection pooling, the connect timeout of [`settings`]) with rustls on
/// `ring`, or on `aws-lc-rs` with the `tls-aws-lc` feature (post-quantum
/// hybrid key exchange preferred; about 1.2 MB more per function,
/// docs/performance.md §4).
pub(crate) fn http_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    #[cfg(feature = "tls-aws-lc")]
    let mode = CryptoMode::AwsLc;
    #[cfg(not(feature = "tls-aws-lc"))]
    let mode = CryptoMode::Ring;
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(mode))
        .build_https()
}

/// Counts the attempts the SDK transmits for one call into the relay's
/// [`SendCounter`]: a sink call's entries are sent once per attempt, so
/// the relay charges each of them with every attempt, including one whose
/// answer was lost to the attempt timeout (the service may have accepted
/// it).
#[cfg(any(feature = "eventbridge", feature = "eventbridge-bus", feature = "sns"))]
#[derive(Debug)]
pub(crate) struct CountSends(pub(crate) SendCounter);

#[cfg(any(feature = "eventbridge", feature = "eventbridge-bus", feature = "sns"))]
impl aws_smithy_runtime_api::client::interceptors::Intercept for CountSends {
    fn name(&self) -> &'static str {
        "CountSends"
    }

    fn read_before_transmit(
        &self,
        _context: &aws_smithy_runtime_api::client::interceptors::context::BeforeTransmitInterceptorContextRef<'_>,
        _runtime_components: &aws_smithy_runtime_api::client::runtime_components::RuntimeComponents,
        _cfg: &mut aws_smithy_types::config_bag::ConfigBag,
    ) -> Result<(), aws_smithy_runtime_api::box_error::BoxError> {
        self.0.record();
        Ok(())
    }
}

/// The SDK's retry settings for one call that may send at most `sends`
/// attempts (at least 1, at most [`SDK_MAX_ATTEMPTS`]).
#[cfg(any(feature = "eventbridge", feature = "eventbridge-bus", feature = "sns"))]
pub(crate) fn retry_for_sends(sends: u32) -> RetryConfig {
    RetryConfig::standard().with_max_attempts(sends.clamp(1, SDK_MAX_ATTEMPTS))
}

/// The code of a failed call: the service's own error code from the SDK's
/// error metadata; `InternalServerError` for a 5xx without one; otherwise
/// the kind of transport failure (`Timeout`, `DispatchFailure`,
/// `ResponseError`).
pub fn error_code<E: ProvideErrorMetadata>(error: &SdkError<E, HttpResponse>) -> String {
    match error {
        SdkError::TimeoutError(_) => "Timeout".into(),
        SdkError::DispatchFailure(_) => "DispatchFailure".into(),
        SdkError::ResponseError(_) => "ResponseError".into(),
        SdkError::ServiceError(service) => match service.err().code() {
            Some(code) if code != "Unknown" => code.to_owned(),
            _ if service.raw().status().is_server_error() => "InternalServerError".into(),
            _ => "Unknown".into(),
        },
        _ => "ConstructionFailure".into(),
    }
}

/// Whether a whole call that failed (after the SDK's own attempts) failed
/// for a reason a later try may clear, as the SDK's retry classifiers see
/// it: a timeout, a failure to send or to read the answer, an error the
/// service models as retryable, a throttling or transient code
/// ([`outbox_core::codes::is_transient`], the SDK's lists and ours), a 5xx, or a
/// 429 whatever its code says.
pub fn is_retryable<E>(error: &SdkError<E, HttpResponse>) -> bool
where
    E: ProvideErrorMetadata + ProvideErrorKind,
{
    match error {
        SdkError::TimeoutError(_) | SdkError::DispatchFailure(_) | SdkError::ResponseError(_) => {
            true
        }
        SdkError::ServiceError(service) => {
            let status = service.raw().status();
            service.err().retryable_error_kind().is_some()
                || status.is_server_error()
                || status.as_u16() == 429
                || ProvideErrorMetadata::code(service.err())
                    .is_some_and(outbox_core::codes::is_transient)
        }
        _ => false,
    }
}

/// What a failed call says besides its code: the service's message, or
/// for a call that never reached it (no credentials, an expired SSO
/// session, a refused connection) the innermost cause.
pub(crate) fn error_message<E>(error: &SdkError<E, HttpResponse>) -> Option<String>
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let message = match error {
        SdkError::ServiceError(service) => service.err().message().map(str::to_owned),
        SdkError::DispatchFailure(_) | SdkError::ConstructionFailure(_) => {
            let mut text = String::new();
            let mut source = std::error::Error::source(error);
            while let Some(e) = source {
                text = e.to_string();
                source = e.source();
            }
            Some(text)
        }
        _ => None,
    };
    // One line: a credential chain's report lists each provider on its own.
    message
        .map(|m| m.lines().map(str::trim).collect::<Vec<_>>().join("; "))
        .filter(|m| !m.is_empty())
}

/// A failed AWS call outside the store port, typed: the operation, the
/// service's error code (or the kind of transport failure, [`error_code`])
/// and its message. It reads as [`error_line`] does.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{operation}: {code}{}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
pub struct CallError {
    /// The API operation (`ReceiveMessage`).
    pub operation: String,
    /// The service's error code, or the transport failure's kind.
    pub code: String,
    /// The service's message, or the innermost cause of a failure to send.
    pub message: Option<String>,
}

impl CallError {
    /// The failure of `operation`, from the SDK's error metadata.
    pub fn of<E>(operation: &str, error: &SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        Self {
            operation: operation.to_owned(),
            code: error_code(error),
            message: error_message(error),
        }
    }
}

/// A failed call as one readable line: `Operation: Code: message`, the
/// code and message from the SDK's error metadata (`error_message`).
pub fn error_line<E>(operation: &str, error: &SdkError<E, HttpResponse>) -> String
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    CallError::of(operation, error).to_string()
}

#[cfg(test)]
mod tests {
    /// The HTTP client speaks TLS to an `https` endpoint (local tests and
    /// the demo use `http` endpoints, so nothing else exercises it): a
    /// loopback listener receives a TLS ClientHello, and the call fails
    /// with an error rather than a panic (no crypto provider, say).
    #[tokio::test]
    async fn https_endpoints_get_a_tls_client_hello() {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hello = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut head = [0u8; 6];
            socket.read_exact(&mut head).await.unwrap();
            head
        });
        let sdk = super::loader()
            .endpoint_url(format!("https://127.0.0.1:{port}"))
            .region(aws_config::Region::new("us-east-1"))
            .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
                "test", "test", None, None, "test",
            ))
            .retry_config(aws_config::retry::RetryConfig::disabled())
            .load()
            .await;
        let call = aws_sdk_dynamodb::Client::new(&sdk).list_tables().send();
        let (result, head) = tokio::join!(call, hello);
        let error = result.expect_err("nothing answers the handshake");
        assert_eq!(super::error_code(&error), "DispatchFailure");
        let head = head.unwrap();
        // A TLS record (0x16: handshake) whose first message is a ClientHello (0x01).
        assert_eq!((head[0], head[5]), (0x16, 0x01), "{head:?}");
    }
}
