//! AWS configuration for local runs: loopback endpoint, dummy credentials.

use aws_config::{Region, SdkConfig};

/// The local run is misconfigured.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("AWS_ENDPOINT_URL is not set: start the local AWS API with `make moto-start` or run through `make test`")]
    /// `AWS_ENDPOINT_URL` is not set.
    NoEndpoint,
    #[error(
        "AWS_ENDPOINT_URL={0} is not a loopback address; local runs may only reach 127.0.0.0/8"
    )]
    /// The endpoint is not on loopback.
    NotLoopback(String),
}

/// Whether `url` points at 127.0.0.0/8, `localhost` or `[::1]`. The URL is
/// taken apart as a client would: scheme, then the authority up to the first
/// `/`, `?` or `#`, whose host follows any `user:password@` (so
/// `http://127.0.0.1:80@example.com/` is example.com, not loopback).
pub fn is_loopback(url: &str) -> bool {
    let Some(rest) = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"))
    else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or("");
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        match v6.split_once(']') {
            Some((host, port)) if port.is_empty() || port.starts_with(':') => host,
            _ => return false,
        }
    } else {
        let (host, port) = host_port.split_once(':').unwrap_or((host_port, ""));
        if !port.chars().all(|c| c.is_ascii_digit()) {
            return false;
        }
        host
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::Ipv6Addr>()
            .is_ok_and(|ip| ip.is_loopback())
        || host
            .parse::<std::net::Ipv4Addr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The endpoint of the local AWS API, checked to be loopback.
pub fn endpoint() -> Result<String, LocalError> {
    let url = std::env::var("AWS_ENDPOINT_URL").map_err(|_| LocalError::NoEndpoint)?;
    if !is_loopback(&url) {
        return Err(LocalError::NotLoopback(url));
    }
    Ok(url)
}

/// An SDK configuration that can only reach the local endpoint: explicit
/// endpoint, static dummy credentials and a region, so no credential
/// provider ever probes an instance-metadata address.
pub async fn sdk_config() -> Result<SdkConfig, LocalError> {
    sdk_config_at(&endpoint()?).await
}

/// [`sdk_config`] for an explicit loopback endpoint (a fault proxy in
/// front of the local API, say), with the functions' retry and timeout
/// settings.
pub async fn sdk_config_at(endpoint: &str) -> Result<SdkConfig, LocalError> {
    if !is_loopback(endpoint) {
        return Err(LocalError::NotLoopback(endpoint.to_owned()));
    }
    Ok(outbox_core::aws::loader()
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test", "test", None, None, "local",
        ))
        .load()
        .await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_is_accepted() {
        assert!(is_loopback("http://127.0.0.1:5000"));
        assert!(is_loopback("http://127.8.9.10:1/x"));
        assert!(is_loopback("http://localhost:5000"));
        assert!(is_loopback("http://[::1]:5000"));
        assert!(!is_loopback("http://10.0.0.1:5000"));
        assert!(!is_loopback("https://dynamodb.us-east-1.amazonaws.com"));
        assert!(!is_loopback("http://127.0.0.1.example.com"));
        assert!(!is_loopback("http://169.254.169.254"));
        // A client reads the host after the user information.
        assert!(!is_loopback("http://127.0.0.1:80@example.com/"));
        assert!(!is_loopback("http://localhost@169.254.169.254/latest"));
        assert!(is_loopback("http://user:pw@127.0.0.1:5000/"));
        assert!(!is_loopback("http://127.0.0.1:80x/"));
        assert!(!is_loopback("http://[::1]evil.com/"));
        assert!(!is_loopback("127.0.0.1:5000"), "a scheme is required");
        assert!(is_loopback("http://127.0.0.1:5000?x=@example.com"));
    }
}
