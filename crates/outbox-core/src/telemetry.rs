//! Logging and AWS client set-up shared by the binaries.

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// JSON logs on stdout. The level comes from `RUST_LOG`, in the
/// `target=level,level` form that `tracing_subscriber::filter::Targets`
/// parses (no regular-expression engine in the functions,
/// docs/performance.md §4), else from Lambda's `AWS_LAMBDA_LOG_LEVEL`, else
/// `info`. Never log payloads or personal data: log event ids, counts and
/// error codes.
pub fn init_logging() {
    let filter = log_filter(
        std::env::var("RUST_LOG").ok().as_deref(),
        std::env::var("AWS_LAMBDA_LOG_LEVEL").ok().as_deref(),
    );
    let _ = tracing_subscriber::fmt()
        .json()
        .with_current_span(false)
        .with_target(false)
        .without_time()
        .with_ansi(false)
        .finish()
        .with(filter)
        .try_init();
}

/// The filter of [`init_logging`]: `rust_log` if it parses, else the Lambda
/// log level (`TRACE`…`FATAL`), else `info`.
pub(crate) fn log_filter(rust_log: Option<&str>, lambda_level: Option<&str>) -> Targets {
    if let Some(targets) = rust_log
        .filter(|s| !s.trim().is_empty())
        .and_then(|s| s.parse::<Targets>().ok())
    {
        return targets;
    }
    let level = match lambda_level.map(str::to_ascii_uppercase).as_deref() {
        Some("TRACE") => LevelFilter::TRACE,
        Some("DEBUG") => LevelFilter::DEBUG,
        Some("WARN") => LevelFilter::WARN,
        Some("ERROR") | Some("FATAL") => LevelFilter::ERROR,
        _ => LevelFilter::INFO,
    };
    Targets::new().with_default(level)
}

/// The SDK's own retries: standard mode (token bucket, exponential backoff
/// with jitter), 3 attempts. Our in-call retries come on top and are bounded
/// by the invocation's deadline.
pub const SDK_MAX_ATTEMPTS: u32 = 3;
/// Connecting to an AWS endpoint.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// One HTTP attempt: a call that hangs is abandoned and retried.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
/// One operation, its retries included.
pub const OPERATION_TIMEOUT: Duration = Duration::from_secs(12);

/// The HTTP client ([`http_client`]) and the retry and timeout settings
/// every client of ours uses, set explicitly
/// rather than left to the SDK's defaults (which have no attempt or
/// operation timeout: a hung call would hold an invocation until Lambda
/// kills it).
pub fn sdk_settings(loader: aws_config::ConfigLoader) -> aws_config::ConfigLoader {
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

/// The HTTP client of every AWS client: the SDK's own (hyper and rustls,
/// connection pooling, the connect timeout of [`sdk_settings`]) with rustls
/// on `ring`, or on `aws-lc-rs` with the `tls-aws-lc` feature
/// (post-quantum hybrid key exchange preferred; about 1.2 MB more per
/// function, docs/performance.md §4).
pub fn http_client() -> aws_smithy_runtime_api::client::http::SharedHttpClient {
    use aws_smithy_http_client::tls::{rustls_provider::CryptoMode, Provider};
    #[cfg(feature = "tls-aws-lc")]
    let mode = CryptoMode::AwsLc;
    #[cfg(not(feature = "tls-aws-lc"))]
    let mode = CryptoMode::Ring;
    aws_smithy_http_client::Builder::new()
        .tls_provider(Provider::Rustls(mode))
        .build_https()
}

/// Loads the AWS configuration the usual way (environment, profile, role)
/// with [`sdk_settings`]. `AWS_ENDPOINT_URL` points every client at a local
/// emulator.
pub async fn aws_config() -> aws_config::SdkConfig {
    sdk_settings(aws_config::defaults(aws_config::BehaviorVersion::latest()))
        .load()
        .await
}

/// An error and its sources, `outer: inner: …`, for one log field: errors
/// that keep their cause (`#[source]`) print only their own part.
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut chain = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        chain.push_str(": ");
        chain.push_str(&e.to_string());
        source = e.source();
    }
    chain
}

#[cfg(test)]
mod tests {
    use super::log_filter;
    use tracing::Level;

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
        let sdk = super::sdk_settings(aws_config::defaults(aws_config::BehaviorVersion::latest()))
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
        assert!(result.is_err(), "nothing answers the handshake");
        let head = head.unwrap();
        // A TLS record (0x16: handshake) whose first message is a ClientHello (0x01).
        assert_eq!((head[0], head[5]), (0x16, 0x01), "{head:?}");
    }

    #[test]
    fn rust_log_wins_then_the_lambda_level_then_info() {
        let f = log_filter(Some("warn,outbox_core=debug"), Some("ERROR"));
        assert!(f.would_enable("outbox_core::store", &Level::DEBUG));
        assert!(!f.would_enable("publisher", &Level::INFO));
        let f = log_filter(None, Some("debug"));
        assert!(f.would_enable("publisher", &Level::DEBUG));
        let f = log_filter(Some("not a filter=="), Some("WARN"));
        assert!(!f.would_enable("publisher", &Level::INFO));
        assert!(f.would_enable("publisher", &Level::WARN));
        let f = log_filter(None, None);
        assert!(f.would_enable("publisher", &Level::INFO));
        assert!(!f.would_enable("publisher", &Level::DEBUG));
    }
}
