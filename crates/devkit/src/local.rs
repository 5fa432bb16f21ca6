//! AWS configuration for local runs: loopback endpoint, dummy credentials.

use aws_config::{Region, SdkConfig};

/// The region of every local run (`AWS_REGION` in infra/local/with-local.sh
/// and the local Lambda environments).
pub const REGION: &str = "us-east-1";

/// The local run is misconfigured.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("AWS_ENDPOINT_URL is not set: run through `infra/local/with-local.sh`, `make test` or `make demo`")]
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

/// The variable naming the endpoint of every service without its own.
pub(crate) const ENDPOINT_ENV: &str = "AWS_ENDPOINT_URL";
/// The variable naming DynamoDB's endpoint (DynamoDB Local).
pub(crate) const DYNAMODB_ENDPOINT_ENV: &str = "AWS_ENDPOINT_URL_DYNAMODB";
/// The variable naming DynamoDB Streams' endpoint (DynamoDB Local).
pub(crate) const STREAMS_ENDPOINT_ENV: &str = "AWS_ENDPOINT_URL_DYNAMODB_STREAMS";

fn loopback_var(name: &str) -> Result<Option<String>, LocalError> {
    match std::env::var(name) {
        Ok(url) if is_loopback(&url) => Ok(Some(url)),
        Ok(url) => Err(LocalError::NotLoopback(format!("{name}={url}"))),
        Err(_) => Ok(None),
    }
}

/// The endpoint of the local AWS API for every service without its own
/// (the moto server: EventBridge, SNS, SQS), checked to be loopback, as is
/// every other `AWS_ENDPOINT_URL_*` variable set.
pub fn endpoint() -> Result<String, LocalError> {
    for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("AWS_ENDPOINT_URL_")) {
        loopback_var(&name)?;
    }
    loopback_var(ENDPOINT_ENV)?.ok_or(LocalError::NoEndpoint)
}

/// The endpoint of DynamoDB (DynamoDB Local): `AWS_ENDPOINT_URL_DYNAMODB`,
/// else [`endpoint`].
pub fn dynamodb_endpoint() -> Result<String, LocalError> {
    let fallback = endpoint()?;
    Ok(loopback_var(DYNAMODB_ENDPOINT_ENV)?.unwrap_or(fallback))
}

/// The endpoint of DynamoDB Streams: `AWS_ENDPOINT_URL_DYNAMODB_STREAMS`,
/// else [`dynamodb_endpoint`].
pub fn streams_endpoint() -> Result<String, LocalError> {
    let fallback = dynamodb_endpoint()?;
    Ok(loopback_var(STREAMS_ENDPOINT_ENV)?.unwrap_or(fallback))
}

/// The endpoint variables of the local run, for a process this one starts
/// (a function under test, say): each service where it is now.
pub fn endpoint_env() -> Result<Vec<(String, String)>, LocalError> {
    Ok(vec![
        (ENDPOINT_ENV.to_owned(), endpoint()?),
        (DYNAMODB_ENDPOINT_ENV.to_owned(), dynamodb_endpoint()?),
        (STREAMS_ENDPOINT_ENV.to_owned(), streams_endpoint()?),
    ])
}

/// The endpoint variables that send every service to `url` (a fault proxy
/// in front of the local servers), for a process this one starts.
pub fn endpoint_env_at(url: &str) -> Vec<(String, String)> {
    [ENDPOINT_ENV, DYNAMODB_ENDPOINT_ENV, STREAMS_ENDPOINT_ENV]
        .iter()
        .map(|name| ((*name).to_owned(), url.to_owned()))
        .collect()
}

/// The per-service endpoints of an [`SdkConfig`], in place of the
/// environment's: a client of DynamoDB or DynamoDB Streams reads its
/// endpoint here, every other client the configuration's own.
#[derive(Debug)]
struct ServiceEndpoints {
    dynamodb: String,
    streams: String,
    /// The local Custom Event Bus, when [`crate::bus::ENDPOINT_ENV`] names one.
    bus: Option<String>,
}

/// The local Custom Event Bus the environment names, on loopback only.
fn bus_endpoint() -> Result<Option<String>, LocalError> {
    loopback_var(crate::bus::ENDPOINT_ENV)
}

impl aws_types::service_config::LoadServiceConfig for ServiceEndpoints {
    fn load_config(&self, key: aws_types::service_config::ServiceConfigKey<'_>) -> Option<String> {
        if key.env() != ENDPOINT_ENV {
            return None;
        }
        match key.service_id() {
            "DynamoDB" => Some(self.dynamodb.clone()),
            "DynamoDB Streams" => Some(self.streams.clone()),
            "EventBridgeV2" => self.bus.clone(),
            _ => None,
        }
    }
}

/// An SDK configuration that can only reach the local servers: DynamoDB
/// and DynamoDB Streams at [`dynamodb_endpoint`] and [`streams_endpoint`],
/// every other service at [`endpoint`]; static dummy credentials and a
/// region, so no credential provider ever probes an instance-metadata
/// address; the functions' retry and timeout settings.
pub async fn sdk_config() -> Result<SdkConfig, LocalError> {
    let endpoints = ServiceEndpoints {
        dynamodb: dynamodb_endpoint()?,
        streams: streams_endpoint()?,
        bus: bus_endpoint()?,
    };
    Ok(configured(&endpoint()?, endpoints).await)
}

/// [`sdk_config`] with every service at one loopback endpoint (a fault
/// proxy in front of the local servers, say), whatever the environment's
/// per-service endpoints say.
pub async fn sdk_config_at(endpoint: &str) -> Result<SdkConfig, LocalError> {
    if !is_loopback(endpoint) {
        return Err(LocalError::NotLoopback(endpoint.to_owned()));
    }
    let endpoints = ServiceEndpoints {
        dynamodb: endpoint.to_owned(),
        streams: endpoint.to_owned(),
        bus: bus_endpoint()?,
    };
    Ok(configured(endpoint, endpoints).await)
}

/// [`sdk_config`] as another region of a global table sees it: DynamoDB
/// and DynamoDB Streams at `dynamodb` (that region's replica server, on
/// loopback), every other service at the same moto server (which keeps each
/// region's buses, topics and queues apart), the region `region`.
pub async fn sdk_config_in_region(region: &str, dynamodb: &str) -> Result<SdkConfig, LocalError> {
    if !is_loopback(dynamodb) {
        return Err(LocalError::NotLoopback(dynamodb.to_owned()));
    }
    let endpoints = ServiceEndpoints {
        dynamodb: dynamodb.to_owned(),
        streams: dynamodb.to_owned(),
        bus: bus_endpoint()?,
    };
    Ok(configured(&endpoint()?, endpoints)
        .await
        .into_builder()
        .region(Region::new(region.to_owned()))
        .build())
}

async fn configured(endpoint: &str, endpoints: ServiceEndpoints) -> SdkConfig {
    // The endpoint is set on the loaded configuration, not on the loader:
    // a loader's endpoint counts as set in code, which every client takes
    // as is, never asking the per-service endpoints.
    outbox_runtime::sdk_config_loader()
        .region(Region::new(REGION))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new(
            "test", "test", None, None, "local",
        ))
        .load()
        .await
        .into_builder()
        .endpoint_url(endpoint)
        .service_config(endpoints)
        .build()
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
