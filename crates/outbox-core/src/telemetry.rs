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

/// Loads the AWS configuration the usual way (environment, profile, role).
/// `AWS_ENDPOINT_URL` points every client at a local emulator.
pub async fn aws_config() -> aws_config::SdkConfig {
    aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await
}
