//! Configuration from the environment, with errors that name the variable.

use std::time::Duration;

use outbox_core::ConfigError;
use outbox_engine::{Backoff, Ordering, SweepSettings, DEFAULT_SEND_CONCURRENCY};

/// `OUTBOX_SHARDS` when it is not set.
pub const DEFAULT_OUTBOX_SHARDS: u16 = 8;

/// Where published events go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkConfig {
    /// `SINK=eventbridge` (the default): `PutEvents` on `EVENT_BUS_NAME`.
    EventBridge {
        /// The bus.
        bus_name: String,
    },
    /// `SINK=sns`: `PublishBatch` on `SNS_TOPIC_ARN` (FIFO when it ends in `.fifo`).
    Sns {
        /// The topic.
        topic_arn: String,
    },
    /// `SINK=eventbridge-bus`: a Custom Event Bus's `PutEvents` (the
    /// `eventbridgev2` API) on `EVENT_BUS_ARN`, each event in its
    /// aggregate's event group and deduplicated by its id.
    EventBridgeBus {
        /// The bus's ARN.
        bus_arn: String,
    },
}

/// The sink settings the publisher and the sweeper run with (from their
/// recorded settings, [`outbox_core::keys::RecordedSettings`]), for the operator's republishes
/// (`outboxctl`): a republish with another bus or source than the stack's
/// would be accepted by the service and matched by no rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SinkSettings {
    /// `eventbridge`, `eventbridge-bus` or `sns` (`SINK`).
    pub sink: String,
    /// The bus name (`EVENT_BUS_NAME`), the bus ARN (`EVENT_BUS_ARN`) or
    /// the topic ARN (`SNS_TOPIC_ARN`).
    pub target: String,
    /// `EVENT_SOURCE`.
    pub source: String,
    /// Whether the topic is FIFO (its ARN ends in `.fifo`).
    pub fifo: bool,
}

impl SinkSettings {
    /// The settings of `config`.
    pub fn of(config: &Config) -> Self {
        let (sink, target) = match &config.sink {
            SinkConfig::EventBridge { bus_name } => ("eventbridge", bus_name.clone()),
            SinkConfig::Sns { topic_arn } => ("sns", topic_arn.clone()),
            SinkConfig::EventBridgeBus { bus_arn } => ("eventbridge-bus", bus_arn.clone()),
        };
        Self {
            sink: sink.to_owned(),
            fifo: sink == "sns" && target.ends_with(".fifo"),
            target,
            source: config.event_source.clone(),
        }
    }

    /// The environment variables that give a [`Config`] these settings.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let target = match self.sink.as_str() {
            "sns" => "SNS_TOPIC_ARN",
            "eventbridge-bus" => "EVENT_BUS_ARN",
            _ => "EVENT_BUS_NAME",
        };
        vec![
            ("SINK", self.sink.clone()),
            (target, self.target.clone()),
            ("EVENT_SOURCE", self.source.clone()),
        ]
    }
}

/// Every variable a function's settings come from: [`Config`]'s, the
/// [`outbox_core::keys::KeySchema`]'s (`KeySchema::VARIABLES`, listed once
/// in the core), the stack's name and the log filter (and the two Lambda
/// sets from the templates' `LoggingConfig`). The publisher and the sweeper
/// record those they are given ([`recorded_variables`]); the templates set no
/// other.
pub const VARIABLES: &[&str] = &concat::<
    { BEFORE_KEYS.len() },
    { AFTER_KEYS.len() },
    { BEFORE_KEYS.len() + 10 + AFTER_KEYS.len() },
>(
    BEFORE_KEYS,
    outbox_core::keys::KeySchema::VARIABLES,
    AFTER_KEYS,
);

/// [`VARIABLES`] before the key schema's.
const BEFORE_KEYS: [&str; 19] = [
    "TABLE_NAME",
    "EVENT_SOURCE",
    "SINK",
    "EVENT_BUS_NAME",
    "EVENT_BUS_ARN",
    "SNS_TOPIC_ARN",
    "OUTBOX_SHARDS",
    "IDEMPOTENCY_TTL_SECONDS",
    "STRANDED_AFTER_SECONDS",
    "MAX_ATTEMPTS",
    "RETRY_BASE_SECONDS",
    "SWEEP_PAGE_SIZE",
    "SWEEP_SCHEDULE",
    "RECHECK_AFTER_SECONDS",
    "SEND_CONCURRENCY",
    "MAX_EVENT_BYTES",
    "ORDERING",
    // The claim check (outbox_core::claim), recorded for the writers.
    "PAYLOAD_BUCKET",
    "PAYLOAD_THRESHOLD_BYTES",
];

/// [`VARIABLES`] after the key schema's.
const AFTER_KEYS: [&str; 8] = [
    "HOME_REGION_RULE",
    "HOME_REGION",
    "STACK_NAME",
    // Which metrics the documents declare (crate::metrics::CORE_METRICS).
    "DETAILED_METRICS",
    // The CloudFormation stack's id: a stack renamed (`NamePrefix`) is
    // still the same stack to the one-stack-per-table check.
    "STACK_ID",
    "RUST_LOG",
    // Set by Lambda from the function's LoggingConfig (the templates'
    // LogLevel): the log filter's and the metric documents' level.
    "AWS_LAMBDA_LOG_FORMAT",
    "AWS_LAMBDA_LOG_LEVEL",
];

/// `a`, the key schema's ten variables, then `c`, at compile time.
const fn concat<const A: usize, const C: usize, const N: usize>(
    a: [&'static str; A],
    keys: [&'static str; 10],
    c: [&'static str; C],
) -> [&'static str; N] {
    assert!(A + 10 + C == N, "VARIABLES: wrong length");
    let mut out = [""; N];
    let mut i = 0;
    while i < A {
        out[i] = a[i];
        i += 1;
    }
    let mut k = 0;
    while k < 10 {
        out[A + k] = keys[k];
        k += 1;
    }
    let mut j = 0;
    while j < C {
        out[A + 10 + j] = c[j];
        j += 1;
    }
    out
}

/// The variables of [`VARIABLES`] that `lookup` sets (to something other
/// than blanks): what a function records in its stack settings record
/// ([`outbox_core::keys::RecordedSettings`]).
pub fn recorded_variables(
    lookup: impl Fn(&str) -> Option<String>,
) -> std::collections::BTreeMap<String, String> {
    VARIABLES
        .iter()
        .filter_map(|name| {
            lookup(name)
                .filter(|v| !v.trim().is_empty())
                .map(|v| ((*name).to_owned(), v))
        })
        .collect()
}

/// Everything the three functions read from their environment.
///
/// | variable | default | used by |
/// |---|---|---|
/// | `TABLE_NAME` | required | all |
/// | `EVENT_SOURCE` | `outbox.orders` | writer (size check), publisher, sweeper |
/// | `EVENT_BUS_NAME` | `default` | publisher, sweeper |
/// | `SINK` | `eventbridge` (or `eventbridge-bus`, `sns`) | publisher, sweeper |
/// | `EVENT_BUS_ARN` | required when `SINK=eventbridge-bus` | publisher, sweeper |
/// | `SNS_TOPIC_ARN` | required when `SINK=sns` | publisher, sweeper |
/// | `OUTBOX_SHARDS` | `8` (1–256) | writer, sweeper |
/// | `IDEMPOTENCY_TTL_SECONDS` | `86400` | writer |
/// | `STRANDED_AFTER_SECONDS` | `86400` | sweeper |
/// | `MAX_ATTEMPTS` | `12` | sweeper |
/// | `RETRY_BASE_SECONDS` | `60` (1–3600) | sweeper (first persisted backoff; doubles to 6 h) |
/// | `SWEEP_PAGE_SIZE` | `100` (1–1000) | sweeper |
/// | `RECHECK_AFTER_SECONDS` | `60` (0–86400) | publisher: a batch with a record older than this (or the first batch of a process, or one with a record it has seen) is checked against the table before it is sent |
/// | `SEND_CONCURRENCY` | `5` (1–10) | publisher, sweeper: sink calls in flight at once in one batch (sweeper: in one shard), each for other aggregates; a kill repeats at most the events of the calls in flight, the delete batches beside them and fewer than 25 more |
/// | `SWEEP_SCHEDULE` | `rate(5 minutes)` (the template's `SweepSchedule`) | sweeper: an aggregate held longer than its period is parked; a `cron(...)` schedule counts as one hour |
/// | `MAX_EVENT_BYTES` | 1 MB (either EventBridge bus) or 256 KiB (SNS); 1 KiB–1 MB; with SNS at most the topic's `MaximumMessageSize` (checked at cold start) | writer (size check), publisher, sweeper (batches) |
/// | `ORDERING` | `strict` for an SNS FIFO topic and a Custom Event Bus, `relaxed` otherwise | publisher, sweeper |
/// | `PARTITION_KEY`, `SORT_KEY`, `OUTBOX_PREFIX`, `PENDING_INDEX`, `PENDING_INDEX_PARTITION_KEY`, `PENDING_INDEX_SORT_KEY`, `DEAD_LETTER_INDEX`, `DEAD_LETTER_INDEX_PARTITION_KEY`, `DEAD_LETTER_INDEX_SORT_KEY`, `TTL_ATTRIBUTE` | `PK`, `SK`, `OUTBOX#`, `GSI1`, `GSI1PK`, `GSI1SK`, `GSI2`, `GSI2PK`, `GSI2SK`, `expiresAt` | all ([`outbox_core::keys::KeySchema`]) |
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `TABLE_NAME`: the outbox table.
    pub table_name: String,
    /// `EVENT_SOURCE`: the events' source (EventBridge).
    pub event_source: String,
    /// `SINK` and its target.
    pub sink: SinkConfig,
    /// `OUTBOX_SHARDS`: shards of the pending and dead-letter indexes.
    pub outbox_shards: u16,
    /// `IDEMPOTENCY_TTL_SECONDS`: how long an idempotency record replays.
    pub idempotency_ttl: Duration,
    /// `STRANDED_AFTER_SECONDS`: the age at which the sweeper takes an item.
    pub stranded_after: Duration,
    /// `MAX_ATTEMPTS`: sweeper attempts before an item is dead-lettered.
    pub max_attempts: u32,
    /// The sweeper's first persisted backoff (it doubles up to 6 hours).
    pub retry_base: Duration,
    /// `SWEEP_PAGE_SIZE`: items per page of the pending index.
    pub sweep_page_size: i32,
    /// The period of `SWEEP_SCHEDULE`: an aggregate held longer than this
    /// is parked (strict ordering).
    pub sweep_period: Duration,
    /// `RECHECK_AFTER_SECONDS`: the publisher checks a batch with a record
    /// older than this against the table before sending it.
    pub recheck_after: Duration,
    /// `SEND_CONCURRENCY`: sink calls in flight at once (publisher: in one
    /// batch; sweeper: in one shard), each for other aggregates.
    pub send_concurrency: usize,
    /// Largest event entry (and sink call) the sink accepts, in bytes.
    pub max_event_bytes: usize,
    /// `ORDERING`: whether an aggregate's event waits for every older one.
    pub ordering: Ordering,
    /// The table's key schema (`PARTITION_KEY`, `SORT_KEY`,
    /// `OUTBOX_PREFIX`, the two indexes, `TTL_ATTRIBUTE`:
    /// [`outbox_core::keys::KeySchema`]).
    pub keys: outbox_core::keys::KeySchema,
}

/// The period of the template's default sweep schedule, `rate(5 minutes)`.
pub(crate) const DEFAULT_SWEEP_PERIOD: Duration = Duration::from_secs(300);

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// The configuration a stack's recorded settings give, `overrides` on
    /// top.
    pub fn from_recorded(
        record: &outbox_core::keys::RecordedSettings,
        overrides: &[(String, String)],
    ) -> Result<Self, ConfigError> {
        Self::from_lookup(|name| {
            overrides
                .iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .or_else(|| record.variables.get(name).cloned())
        })
    }

    /// Reads configuration through `lookup` (the environment in production,
    /// a map in tests).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let get = |name: &'static str| lookup(name).filter(|v| !v.trim().is_empty());
        let table_name = get("TABLE_NAME").ok_or(ConfigError::Missing("TABLE_NAME"))?;
        // The sink's limits, as the writer reads them from the same
        // variables (`SINK` and `SNS_TOPIC_ARN` checked there first).
        let limits = outbox_core::size::EventLimits::from_lookup(&lookup)?;
        let event_source = match &limits {
            outbox_core::size::EventLimits::EventBridge { source, .. }
            | outbox_core::size::EventLimits::EventBridgeBus { source, .. } => source.clone(),
            outbox_core::size::EventLimits::Sns { .. } => get("EVENT_SOURCE")
                .unwrap_or_else(|| outbox_core::size::DEFAULT_EVENT_SOURCE.to_owned()),
        };
        // Checked for SNS too (EventBridge's is checked with its limits):
        // the value is recorded, and a republish to a bus would use it.
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
            "eventbridge-bus" => SinkConfig::EventBridgeBus {
                bus_arn: get("EVENT_BUS_ARN").ok_or(ConfigError::Missing("EVENT_BUS_ARN"))?,
            },
            other => {
                return Err(invalid(
                    "SINK",
                    other,
                    "expected `eventbridge`, `eventbridge-bus` or `sns`",
                ))
            }
        };
        // A sink that keeps each aggregate's order (an SNS FIFO topic, a
        // Custom Event Bus's FIFO subscribers) is worth its order only if
        // the relay publishes in order: strict by default there.
        let fifo = match &sink {
            SinkConfig::Sns { topic_arn } => topic_arn.ends_with(".fifo"),
            SinkConfig::EventBridgeBus { .. } => true,
            SinkConfig::EventBridge { .. } => false,
        };
        let ordering = match get("ORDERING").as_deref() {
            None if fifo => Ordering::Strict,
            None => Ordering::Relaxed,
            Some("strict") => Ordering::Strict,
            Some("relaxed") => Ordering::Relaxed,
            Some(other) => {
                return Err(invalid("ORDERING", other, "expected `strict` or `relaxed`"))
            }
        };
        // Read by the metrics themselves (once a process); refused here, at
        // cold start, rather than read as `false`.
        if let Err(value) =
            crate::metrics::Declared::parse(lookup(crate::metrics::DETAILED_METRICS_VAR).as_deref())
        {
            return Err(invalid(
                crate::metrics::DETAILED_METRICS_VAR,
                &value,
                "expected `true` or `false`",
            ));
        }
        // The claim check (`PAYLOAD_BUCKET`, `PAYLOAD_THRESHOLD_BYTES`) is
        // the writers' setting, recorded for them; the publisher and the
        // sweeper read each event's object where its `payloadRef` says. A
        // bad value is still refused here, at cold start.
        outbox_core::claim::ClaimCheck::from_lookup(&lookup)?;
        Ok(Self {
            keys: outbox_core::keys::KeySchema::from_lookup(&lookup)?,
            table_name,
            event_source,
            ordering,
            outbox_shards: number(&get, "OUTBOX_SHARDS", DEFAULT_OUTBOX_SHARDS, 1, 256)?,
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
            retry_base: Duration::from_secs(number(&get, "RETRY_BASE_SECONDS", 60, 1, 3_600)?),
            sweep_page_size: number(&get, "SWEEP_PAGE_SIZE", 100, 1, 1_000)?,
            recheck_after: Duration::from_secs(number(
                &get,
                "RECHECK_AFTER_SECONDS",
                60,
                0,
                86_400,
            )?),
            send_concurrency: number(&get, "SEND_CONCURRENCY", DEFAULT_SEND_CONCURRENCY, 1, 10)?,
            sweep_period: match get("SWEEP_SCHEDULE") {
                None => DEFAULT_SWEEP_PERIOD,
                Some(schedule) => {
                    outbox_core::keys::schedule_period(&schedule).ok_or_else(|| {
                        invalid(
                            "SWEEP_SCHEDULE",
                            &schedule,
                            "expected `rate(<n> <minutes|hours|days>)` or `cron(...)`",
                        )
                    })?
                }
            },
            max_event_bytes: limits.max_bytes(),
            sink,
        })
    }

    /// What the configured sink accepts (the writer's size check).
    pub(crate) fn event_limits(&self) -> outbox_core::size::EventLimits {
        match &self.sink {
            SinkConfig::EventBridge { .. } => outbox_core::size::EventLimits::EventBridge {
                source: self.event_source.clone(),
                max_bytes: self.max_event_bytes,
            },
            SinkConfig::Sns { topic_arn } => outbox_core::size::EventLimits::Sns {
                fifo: topic_arn.ends_with(".fifo"),
                max_bytes: self.max_event_bytes,
            },
            SinkConfig::EventBridgeBus { .. } => outbox_core::size::EventLimits::EventBridgeBus {
                source: self.event_source.clone(),
                max_bytes: self.max_event_bytes,
            },
        }
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
    match get(name) {
        None => Ok(default),
        Some(raw) => ConfigError::bounded(name, &raw, min, max),
    }
}

/// The transaction settings of a function's configuration (the writer's).
impl From<&Config> for outbox_core::transaction::OutboxSettings {
    fn from(config: &Config) -> Self {
        Self::new(
            &config.table_name,
            config.event_limits(),
            config.outbox_shards,
        )
        .with_keys(config.keys.clone())
    }
}

/// The sweep's settings from the function's configuration.
impl From<&Config> for SweepSettings {
    fn from(config: &Config) -> Self {
        Self {
            stranded_after: config.stranded_after,
            max_attempts: config.max_attempts,
            page_size: config.sweep_page_size,
            backoff: Backoff {
                base: config.retry_base,
                ..Backoff::PERSISTED
            },
            count_limit: 1_000,
            // An event id is made before its transaction commits (and its
            // stream record arrives), by up to the writer's retries;
            // arrival times are rounded to the second, and clocks differ a
            // little.
            window_lead: Duration::from_secs(300),
            window_lag: Duration::from_secs(2),
            ordering: config.ordering,
            sweep_period: config.sweep_period,
            settle_empty_windows: true,
            send_concurrency: config.send_concurrency,
        }
    }
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
        assert_eq!(c.retry_base, Duration::from_secs(60));
        assert_eq!(c.max_event_bytes, 1024 * 1024);
        let quick = config(&[("TABLE_NAME", "t"), ("RETRY_BASE_SECONDS", "1")]).unwrap();
        assert_eq!(quick.retry_base, Duration::from_secs(1));
        assert!(config(&[("TABLE_NAME", "t"), ("RETRY_BASE_SECONDS", "0")]).is_err());
    }

    #[test]
    fn the_event_limit_follows_the_sink_and_is_a_setting() {
        let sns = config(&[
            ("TABLE_NAME", "t"),
            ("SINK", "sns"),
            ("SNS_TOPIC_ARN", "arn:t.fifo"),
        ])
        .unwrap();
        assert_eq!(sns.max_event_bytes, 256 * 1024);
        assert!(matches!(
            sns.event_limits(),
            outbox_core::size::EventLimits::Sns { fifo: true, max_bytes } if max_bytes == 256 * 1024
        ));
        let set = config(&[("TABLE_NAME", "t"), ("MAX_EVENT_BYTES", "300000")]).unwrap();
        assert_eq!(set.event_limits().max_bytes(), 300_000);
        let e = config(&[("TABLE_NAME", "t"), ("MAX_EVENT_BYTES", "2000000")]).unwrap_err();
        assert!(e.to_string().contains("MAX_EVENT_BYTES"), "{e}");
    }

    #[test]
    fn the_sweep_period_comes_from_the_schedule() {
        let period = |s: &str| config(&[("TABLE_NAME", "t"), ("SWEEP_SCHEDULE", s)]);
        assert_eq!(
            config(&[("TABLE_NAME", "t")]).unwrap().sweep_period,
            DEFAULT_SWEEP_PERIOD
        );
        for (schedule, seconds) in [
            ("rate(5 minutes)", 300),
            ("rate(1 minute)", 60),
            ("rate(2 hours)", 7_200),
            ("rate(1 day)", 86_400),
            ("cron(0/10 * * * ? *)", 3_600),
        ] {
            assert_eq!(
                period(schedule).unwrap().sweep_period,
                Duration::from_secs(seconds),
                "{schedule}"
            );
        }
        for bad in [
            "rate(0 minutes)",
            "rate(5 weeks)",
            "every 5 minutes",
            "rate(x minutes)",
        ] {
            let e = period(bad).unwrap_err();
            assert!(e.to_string().contains("SWEEP_SCHEDULE"), "{e}");
        }
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
    fn custom_event_bus_sink() {
        assert_eq!(
            config(&[("TABLE_NAME", "t"), ("SINK", "eventbridge-bus")]),
            Err(ConfigError::Missing("EVENT_BUS_ARN"))
        );
        let arn = "arn:aws:events:us-east-1:000000000000:event-busv2/b/abcdefghij0123456789abcde";
        let vars = [
            ("TABLE_NAME", "t"),
            ("SINK", "eventbridge-bus"),
            ("EVENT_BUS_ARN", arn),
        ];
        let c = config(&vars).unwrap();
        assert_eq!(
            c.sink,
            SinkConfig::EventBridgeBus {
                bus_arn: arn.into()
            }
        );
        // Its FIFO subscribers keep the order the relay publishes in.
        assert_eq!(c.ordering, Ordering::Strict);
        let relaxed = config(&[vars[0], vars[1], vars[2], ("ORDERING", "relaxed")]).unwrap();
        assert_eq!(relaxed.ordering, Ordering::Relaxed);
        assert!(matches!(
            c.event_limits(),
            outbox_core::size::EventLimits::EventBridgeBus { ref source, max_bytes }
                if source == "outbox.orders" && max_bytes == 1024 * 1024
        ));
        let settings = SinkSettings::of(&c);
        assert_eq!(
            (settings.sink.as_str(), settings.fifo),
            ("eventbridge-bus", false)
        );
        assert!(settings.env().contains(&("EVENT_BUS_ARN", arn.to_owned())));
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
