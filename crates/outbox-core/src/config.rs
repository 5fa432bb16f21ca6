//! Configuration from the environment, with errors that name the variable.

use std::time::Duration;

/// A configuration variable is missing or cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("environment variable {0} is required but not set")]
    Missing(&'static str),
    #[error("environment variable {name}={value:?} is invalid: {reason}")]
    Invalid {
        name: &'static str,
        value: String,
        reason: String,
    },
}

/// Where published events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkConfig {
    /// `SINK=eventbridge` (the default): `PutEvents` on `EVENT_BUS_NAME`.
    EventBridge { bus_name: String },
    /// `SINK=sns`: `PublishBatch` on `SNS_TOPIC_ARN` (FIFO when it ends in `.fifo`).
    Sns { topic_arn: String },
}

/// Everything the three functions read from their environment.
///
/// | variable | default | used by |
/// |---|---|---|
/// | `TABLE_NAME` | required | all |
/// | `EVENT_SOURCE` | `outbox.orders` | writer (size check), publisher, sweeper |
/// | `EVENT_BUS_NAME` | `default` | publisher, sweeper |
/// | `SINK` | `eventbridge` | publisher, sweeper |
/// | `SNS_TOPIC_ARN` | required when `SINK=sns` | publisher, sweeper |
/// | `OUTBOX_SHARDS` | `8` (1–256) | writer, sweeper |
/// | `IDEMPOTENCY_TTL_SECONDS` | `86400` | writer |
/// | `STRANDED_AFTER_SECONDS` | `86400` | sweeper |
/// | `MAX_ATTEMPTS` | `12` | sweeper |
/// | `SWEEP_PAGE_SIZE` | `100` (1–1000) | sweeper |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub table_name: String,
    pub event_source: String,
    pub sink: SinkConfig,
    pub outbox_shards: u16,
    pub idempotency_ttl: Duration,
    pub stranded_after: Duration,
    pub max_attempts: u32,
    pub sweep_page_size: i32,
}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Reads configuration through `lookup` (the environment in production,
    /// a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &'static str| lookup(name).filter(|v| !v.trim().is_empty());
        let table_name = get("TABLE_NAME").ok_or(ConfigError::Missing("TABLE_NAME"))?;
        let event_source = get("EVENT_SOURCE").unwrap_or_else(|| "outbox.orders".to_owned());
        if event_source.len() > 256 {
            return Err(invalid(
                "EVENT_SOURCE",
                &event_source,
                "longer than 256 characters",
            ));
        }
        let sink = match get("SINK").as_deref().unwrap_or("eventbridge") {
            "eventbridge" => SinkConfig::EventBridge {
                bus_name: get("EVENT_BUS_NAME").unwrap_or_else(|| "default".to_owned()),
            },
            "sns" => SinkConfig::Sns {
                topic_arn: get("SNS_TOPIC_ARN").ok_or(ConfigError::Missing("SNS_TOPIC_ARN"))?,
            },
            other => return Err(invalid("SINK", other, "expected `eventbridge` or `sns`")),
        };
        Ok(Self {
            table_name,
            event_source,
            sink,
            outbox_shards: number(&get, "OUTBOX_SHARDS", 8, 1, 256)?,
            idempotency_ttl: Duration::from_secs(number(
                &get,
                "IDEMPOTENCY_TTL_SECONDS",
                86_400,
                60,
                31_536_000,
            )?),
            stranded_after: Duration::from_secs(number(
                &get,
                "STRANDED_AFTER_SECONDS",
                86_400,
                0,
                31_536_000,
            )?),
            max_attempts: number(&get, "MAX_ATTEMPTS", 12, 1, 1_000)?,
            sweep_page_size: number(&get, "SWEEP_PAGE_SIZE", 100, 1, 1_000)?,
        })
    }
}

fn invalid(name: &'static str, value: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        name,
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

fn number<T>(
    get: &impl Fn(&'static str) -> Option<String>,
    name: &'static str,
    default: T,
    min: T,
    max: T,
) -> Result<T, ConfigError>
where
    T: std::str::FromStr + PartialOrd + std::fmt::Display + Copy,
{
    let Some(raw) = get(name) else {
        return Ok(default);
    };
    let value: T = raw
        .trim()
        .parse()
        .map_err(|_| invalid(name, &raw, "not a whole number"))?;
    if value < min || value > max {
        return Err(invalid(
            name,
            &raw,
            &format!("must be between {min} and {max}"),
        ));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults() {
        let c = config(&[("TABLE_NAME", "t")]).unwrap();
        assert_eq!(c.table_name, "t");
        assert_eq!(c.event_source, "outbox.orders");
        assert_eq!(
            c.sink,
            SinkConfig::EventBridge {
                bus_name: "default".into()
            }
        );
        assert_eq!(c.outbox_shards, 8);
        assert_eq!(c.stranded_after, Duration::from_secs(86_400));
        assert_eq!(c.max_attempts, 12);
    }

    #[test]
    fn errors_name_the_variable() {
        assert_eq!(config(&[]), Err(ConfigError::Missing("TABLE_NAME")));
        assert_eq!(
            config(&[("TABLE_NAME", "t"), ("SINK", "sns")]),
            Err(ConfigError::Missing("SNS_TOPIC_ARN"))
        );
        let e = config(&[("TABLE_NAME", "t"), ("OUTBOX_SHARDS", "0")]).unwrap_err();
        assert!(e.to_string().contains("OUTBOX_SHARDS"), "{e}");
        let e = config(&[("TABLE_NAME", "t"), ("MAX_ATTEMPTS", "many")]).unwrap_err();
        assert!(e.to_string().contains("MAX_ATTEMPTS"), "{e}");
        let e = config(&[("TABLE_NAME", "t"), ("SINK", "kafka")]).unwrap_err();
        assert!(e.to_string().contains("SINK"), "{e}");
    }

    #[test]
    fn sns_sink() {
        let c = config(&[
            ("TABLE_NAME", "t"),
            ("SINK", "sns"),
            ("SNS_TOPIC_ARN", "arn:x"),
        ])
        .unwrap();
        assert_eq!(
            c.sink,
            SinkConfig::Sns {
                topic_arn: "arn:x".into()
            }
        );
    }
}
