//! [`OutboxSettings`]: given, or learnt from the stack's recorded settings
//! in the table ([`OutboxSettings::from_stack`]), so that a writer and its
//! stack cannot drift apart.

use aws_sdk_dynamodb::types::AttributeValue;

use crate::keys::{self, RecordedSettings, StackChoiceError};
use crate::size::EventLimits;
use crate::ConfigError;

/// `OUTBOX_SHARDS` when a stack's record does not set it.
const DEFAULT_SHARDS: u16 = 8;

/// Where outbox items go and how they are shaped.
#[derive(Debug, Clone)]
pub struct OutboxSettings {
    /// The table holding the outbox items (the business items' table).
    pub table: String,
    /// What the configured sink accepts: each event is checked against it
    /// (its size as that sink counts it, an SNS FIFO group id) before the
    /// transaction is sent.
    pub limits: EventLimits,
    /// Shards of the pending index.
    pub shards: u16,
    /// Key attribute names of the tables the caller writes to, used to find
    /// two actions on one item. Defaults to the key schema's.
    pub key_attributes: Vec<String>,
    /// The outbox table's key schema (names, outbox prefix, home region).
    pub keys: keys::KeySchema,
    /// The claim check of large events (`PAYLOAD_BUCKET`): `None`, the
    /// default, refuses an event too large for an item or the sink.
    pub claim_check: Option<crate::claim::ClaimCheck>,
}

impl OutboxSettings {
    /// Settings for the sink whose limits are `limits` (say which:
    /// [`EventLimits::eventbridge`], [`EventLimits::sns`]; an event checked
    /// against another sink's limit could be committed and then refused by
    /// the stack's), with the default key schema. Prefer
    /// [`OutboxSettings::from_stack`], which takes all of them from the
    /// stack.
    pub fn new(table: impl Into<String>, limits: EventLimits, shards: u16) -> Self {
        Self {
            table: table.into(),
            limits,
            shards,
            key_attributes: vec![keys::PK.to_owned(), keys::SK.to_owned()],
            keys: keys::KeySchema::default(),
            claim_check: None,
        }
    }

    /// The same settings storing events too large for an item or the sink
    /// in S3 first ([`crate::claim`]); the transaction is then sent with
    /// [`OutboxTransaction::send_with_payloads`](crate::transaction::OutboxTransaction::send_with_payloads).
    pub fn with_claim_check(mut self, claim: crate::claim::ClaimCheck) -> Self {
        self.claim_check = Some(claim);
        self
    }

    /// The same settings for a table with the key schema `schema`.
    pub fn with_keys(mut self, schema: keys::KeySchema) -> Self {
        self.key_attributes = vec![schema.partition_key.clone(), schema.sort_key.clone()];
        self.keys = schema;
        self
    }

    /// The same settings checking events against `limits`.
    pub fn with_limits(mut self, limits: EventLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The settings a stack's recorded settings give for `table`: its key
    /// schema and home region, `OUTBOX_SHARDS`, its sink's limits and its
    /// claim check (`PAYLOAD_BUCKET`), read as its functions read them.
    pub fn from_record(
        table: impl Into<String>,
        record: &RecordedSettings,
    ) -> Result<Self, ConfigError> {
        let lookup = |name: &str| record.variable(name).map(str::to_owned);
        let shards = match lookup("OUTBOX_SHARDS") {
            None => DEFAULT_SHARDS,
            Some(raw) => ConfigError::bounded("OUTBOX_SHARDS", &raw, 1, 256)?,
        };
        let mut settings = Self::new(table, EventLimits::from_lookup(lookup)?, shards)
            .with_keys(keys::KeySchema::from_lookup(lookup)?);
        settings.claim_check = crate::claim::ClaimCheck::from_lookup(lookup)?;
        Ok(settings)
    }

    /// Reads the settings of the outbox stack publishing from `table` in
    /// the client's region: the stack settings records (a consistent `Query`, its
    /// pages) (`dynamodb:Query` on the table). Hold the result for the
    /// life of the process (it is the cache); read again after changing
    /// the stack. See [`FromStack`] for a table with other key names, a
    /// region or a stack to name.
    ///
    /// ```no_run
    /// # async fn f(client: aws_sdk_dynamodb::Client) -> Result<(), outbox_core::transaction::StackSettingsError> {
    /// use outbox_core::transaction::OutboxSettings;
    /// let settings = OutboxSettings::from_stack(&client, "orders").load().await?;
    /// # Ok(()) }
    /// ```
    pub fn from_stack<'a>(client: &'a aws_sdk_dynamodb::Client, table: &str) -> FromStack<'a> {
        FromStack {
            client,
            table: table.to_owned(),
            partition_key: keys::PK.to_owned(),
            sort_key: keys::SK.to_owned(),
            region: None,
            stack: None,
        }
    }
}

/// A read of a stack's recorded settings ([`OutboxSettings::from_stack`]).
#[derive(Debug, Clone)]
pub struct FromStack<'a> {
    client: &'a aws_sdk_dynamodb::Client,
    table: String,
    partition_key: String,
    sort_key: String,
    region: Option<String>,
    stack: Option<String>,
}

impl FromStack<'_> {
    /// The table's partition and sort key names, when they are not `PK` and
    /// `SK` (the stack's `PartitionKey` and `SortKey`).
    pub fn key_names(mut self, partition_key: &str, sort_key: &str) -> Self {
        self.partition_key = partition_key.to_owned();
        self.sort_key = sort_key.to_owned();
        self
    }

    /// The region whose stack to read (default: the client's).
    pub fn region(mut self, region: &str) -> Self {
        self.region = Some(region.to_owned());
        self
    }

    /// The stack to read (its `STACK_NAME`: the `NamePrefix` or the stack's
    /// name), when several recorded their settings in the table.
    pub fn stack(mut self, name: &str) -> Self {
        self.stack = Some(name.to_owned());
        self
    }

    /// Reads the records and chooses the stack ([`keys::choose_stack`]).
    pub async fn load(self) -> Result<OutboxSettings, StackSettingsError> {
        let region = self
            .region
            .clone()
            .or_else(|| self.client.config().region().map(|r| r.to_string()))
            .ok_or(StackSettingsError::NoRegion)?;
        let out = self
            .client
            .query()
            .table_name(&self.table)
            .key_condition_expression("#pk = :pk AND begins_with(#sk, :prefix)")
            .expression_attribute_names("#pk", &self.partition_key)
            .expression_attribute_names("#sk", &self.sort_key)
            .expression_attribute_values(":pk", AttributeValue::S(keys::SETTINGS_PK.to_owned()))
            .expression_attribute_values(
                ":prefix",
                AttributeValue::S(keys::STACK_SETTINGS_PREFIX.to_owned()),
            )
            .consistent_read(true)
            .into_paginator()
            .items()
            .send()
            .collect::<Result<Vec<_>, _>>()
            .await
            .map_err(|e| StackSettingsError::Read {
                table: self.table.clone(),
                code: aws_smithy_types::error::metadata::ProvideErrorMetadata::code(&e)
                    .unwrap_or("no code")
                    .to_owned(),
                message: aws_smithy_types::error::display::DisplayErrorContext(&e).to_string(),
            })?;
        let records: Vec<RecordedSettings> = out
            .iter()
            .filter_map(|item| RecordedSettings::from_item(item, &self.sort_key))
            .collect();
        let chosen = keys::choose_stack(
            &records,
            &region,
            self.stack.as_deref(),
            crate::now_utc_millis(),
        )
        .map_err(|source| StackSettingsError::Choice {
            table: self.table.clone(),
            source,
        })?;
        OutboxSettings::from_record(&self.table, chosen).map_err(|source| {
            StackSettingsError::Invalid {
                by: chosen.by.clone(),
                source,
            }
        })
    }
}

/// Why a stack's settings could not be read ([`FromStack::load`]).
#[derive(Debug, thiserror::Error)]
pub enum StackSettingsError {
    /// Neither the client nor the call names a region.
    #[error("no region: set the client's region or call .region(...)")]
    NoRegion,
    /// The `Query` failed.
    #[error("cannot read the stack settings in {table} ({code}): {message}")]
    Read {
        /// The table.
        table: String,
        /// The service's error code.
        code: String,
        /// The error, with its context.
        message: String,
    },
    /// No one stack's records could be chosen.
    #[error("{table}: {source}")]
    Choice {
        /// The table.
        table: String,
        /// Why.
        #[source]
        source: StackChoiceError,
    },
    /// The chosen record holds a setting the functions would refuse too.
    #[error("the recorded settings ({by}) are invalid: {source}")]
    Invalid {
        /// Who recorded them, and when.
        by: String,
        /// The setting.
        #[source]
        source: ConfigError,
    },
}
