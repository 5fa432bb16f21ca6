//! What a command could not do, by kind. AWS failures keep the operation,
//! the AWS error code and the service's message (`StoreError`,
//! `CallError`), so the one line `outboxctl` prints names them.

use outbox_core::ConfigError;
use outbox_engine::SinkError;
use outbox_engine::StoreError;
use outbox_runtime::CallError;

use crate::operations::OpsError;

/// A command's error; `outboxctl` prints it as one line and exits 1.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Arguments that do not go together, or that name nothing.
    #[error("{0}")]
    Usage(String),
    /// Standard output could not be written (a closed pipe).
    #[error("could not write the output: {0}")]
    Write(#[from] std::io::Error),
    /// Refused before anything changed: a sink that disagrees with the
    /// stack's recorded one, settings of another region only, nothing
    /// recorded to take a setting from, a region name that is not one.
    #[error("{0}")]
    Refused(String),
    /// A status or dead-letter operation failed, or found nothing.
    #[error(transparent)]
    Ops(#[from] OpsError),
    /// A store call failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A store call failed while doing `doing`.
    #[error("{doing}: {source}")]
    StoreWhile {
        /// What the command was doing.
        doing: String,
        /// The store's error.
        #[source]
        source: StoreError,
    },
    /// Another AWS call failed.
    #[error(transparent)]
    Aws(#[from] CallError),
    /// An AWS call failed while doing `doing`.
    #[error("{doing}: {source}")]
    AwsWhile {
        /// What the command was doing.
        doing: String,
        /// The call's error.
        #[source]
        source: CallError,
    },
    /// The stack's settings cannot be used.
    #[error("{doing}: {source}")]
    Settings {
        /// Whose settings.
        doing: String,
        /// What is wrong with them.
        #[source]
        source: ConfigError,
    },
    /// The sink cannot be reached or is not there.
    #[error(transparent)]
    Sink(#[from] SinkError),
    /// The command ran, but did not do everything it was asked (what was
    /// done and what was not is printed above).
    #[error("{0}")]
    Incomplete(String),
    /// The output could not be written.
    #[error("cannot write the output: {0}")]
    Output(#[from] serde_json::Error),
}

impl From<ConfigError> for Error {
    fn from(source: ConfigError) -> Self {
        Self::Settings {
            doing: "the settings".into(),
            source,
        }
    }
}
