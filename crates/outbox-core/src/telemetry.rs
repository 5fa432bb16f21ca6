//! Logging and AWS client set-up shared by the three binaries.

/// JSON logs on stdout, level from `RUST_LOG` (default `info`). Never log
/// payloads or personal data: log event ids, counts and error codes.
pub fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .json()
        .with_env_filter(filter)
        .with_current_span(false)
        .with_target(false)
        .without_time()
        .try_init();
}

use std::time::Duration;

use aws_config::retry::RetryConfig;
use aws_config::timeout::TimeoutConfig;

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

/// The retry and timeout settings every client of ours uses, set explicitly
/// rather than left to the SDK's defaults (which have no attempt or
/// operation timeout: a hung call would hold an invocation until Lambda
/// kills it).
pub fn sdk_settings(loader: aws_config::ConfigLoader) -> aws_config::ConfigLoader {
    loader
        .retry_config(RetryConfig::standard().with_max_attempts(SDK_MAX_ATTEMPTS))
        .timeout_config(
            TimeoutConfig::builder()
                .connect_timeout(CONNECT_TIMEOUT)
                .operation_attempt_timeout(ATTEMPT_TIMEOUT)
                .operation_timeout(OPERATION_TIMEOUT)
                .build(),
        )
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
