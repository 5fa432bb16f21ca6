//! Logging shared by the binaries (JSON lines on stdout), and the error
//! chain for one log field. AWS clients are built in [`crate::aws`].

use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

/// JSON logs on stdout, each line with its `level` and an RFC 3339
/// `timestamp` (what Lambda's log-level filter reads; a line without them
/// counts as INFO). The level comes from `RUST_LOG`, in the
/// `target=level,level` form that `tracing_subscriber::filter::Targets`
/// parses (no regular-expression engine in the functions,
/// docs/performance.md §4), else from Lambda's `AWS_LAMBDA_LOG_LEVEL` (the
/// templates' `LogLevel`: WARN unless set), else `info`. Never log payloads or personal data: log event ids, counts and
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
    let level = match LambdaLogLevel::parse(lambda_level) {
        LambdaLogLevel::Trace => LevelFilter::TRACE,
        LambdaLogLevel::Debug => LevelFilter::DEBUG,
        LambdaLogLevel::Info => LevelFilter::INFO,
        LambdaLogLevel::Warn => LevelFilter::WARN,
        LambdaLogLevel::Error | LambdaLogLevel::Fatal => LevelFilter::ERROR,
    };
    Targets::new().with_default(level)
}

/// A Lambda application log level (`AWS_LAMBDA_LOG_LEVEL`, the template's
/// `LogLevel`): what the log filter and the metric documents' `level` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LambdaLogLevel {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
    Fatal,
}

impl LambdaLogLevel {
    /// The level Lambda set, in any case; `Info` when it set none or one
    /// this does not know.
    pub(crate) fn parse(level: Option<&str>) -> Self {
        match level.map(str::to_ascii_uppercase).as_deref() {
            Some("TRACE") => Self::Trace,
            Some("DEBUG") => Self::Debug,
            Some("WARN") => Self::Warn,
            Some("ERROR") => Self::Error,
            Some("FATAL") => Self::Fatal,
            _ => Self::Info,
        }
    }

    /// Its name as Lambda writes it (`WARN`).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Trace => "TRACE",
            Self::Debug => "DEBUG",
            Self::Info => "INFO",
            Self::Warn => "WARN",
            Self::Error => "ERROR",
            Self::Fatal => "FATAL",
        }
    }
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

    #[test]
    fn rust_log_wins_then_the_lambda_level_then_info() {
        let f = log_filter(Some("warn,outbox_runtime=debug"), Some("ERROR"));
        assert!(f.would_enable("outbox_runtime::store", &Level::DEBUG));
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
