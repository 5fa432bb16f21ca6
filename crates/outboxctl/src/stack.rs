//! The stack a command works on: its table, and the settings its functions
//! recorded there (key schema, home region, sink, ordering: the publisher
//! and the sweeper write their region's record at cold start,
//! `outbox_core::keys::stack_settings_key`), with the operator's
//! `--setting NAME=VALUE` on top. Every command but `replay` starts here,
//! so no command reads keys the stack does not write, and nothing has to
//! be exported.

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::KeyType;
use outbox_core::{keys, KeySchema};
use outbox_engine::Deadline;
use outbox_engine::PublishStore;
use outbox_runtime::CallError;
use outbox_runtime::DynamoStore;
use outbox_runtime::{Config, RecordedSettings};
use serde::Serialize;
use time::OffsetDateTime;

use crate::error::Error;
use crate::Operations;

/// Where the settings came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase", tag = "from")]
pub(crate) enum Origin {
    /// The region's record, written by `by`.
    Recorded {
        /// The record's region.
        region: String,
        /// The stack that wrote it (its `STACK_NAME`).
        stack: String,
        /// The function that wrote it, and when.
        by: String,
    },
    /// Nothing is recorded in the table: the process environment's
    /// variables (the keys may not be the stack's).
    Environment,
}

/// Outbox items under a key shape other than the stack's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct OtherKeys {
    /// The home region of those keys (`None`: keys without a region).
    pub home_region: Option<String>,
    /// Pending events under them (at least).
    pub pending: usize,
    /// Dead letters under them (at least).
    pub dead_letters: usize,
}

impl OtherKeys {
    /// One line for an operator.
    pub(crate) fn describe(&self) -> String {
        let keys = match &self.home_region {
            None => "keys without a region".to_owned(),
            Some(region) => format!("{region}'s regional keys"),
        };
        format!(
            "{} pending and {} dead letters under {keys}",
            self.pending, self.dead_letters
        )
    }
}

/// A stack's table and settings.
pub(crate) struct Stack {
    sdk: SdkConfig,
    table: String,
    config: Config,
    origin: Origin,
    /// Every region's records, this one's included.
    records: Vec<RecordedSettings>,
    /// The table's stream in this region (`LatestStreamArn`), if it has one.
    stream_arn: Option<String>,
}

impl Stack {
    /// Reads the settings recorded in `table` for the SDK's region:
    /// `DescribeTable` for its key names, then one `Query` of the settings
    /// records, and the stack chosen as a writer chooses it
    /// (`outbox_core::keys::choose_stack`: `wanted`, else the only stack
    /// of the region, else the only live one). `overrides`
    /// (`--setting NAME=VALUE`) win over the record. With no record at
    /// all, the process environment's variables, said on stderr; with
    /// records of other regions only, or of several stacks and none named,
    /// an error that names them.
    pub(crate) async fn load(
        sdk: &SdkConfig,
        table: &str,
        overrides: &[(String, String)],
        wanted: Option<&str>,
    ) -> Result<Self, Error> {
        let client = aws_sdk_dynamodb::Client::new(sdk);
        let described = client
            .describe_table()
            .table_name(table)
            .send()
            .await
            .map_err(|e| Error::AwsWhile {
                doing: format!("cannot read the table {table}"),
                source: CallError::of("DescribeTable", &e),
            })?;
        let stream_arn = described
            .table()
            .and_then(|t| t.latest_stream_arn())
            .map(str::to_owned);
        let mut probe = KeySchema::default();
        for key in described
            .table()
            .map(|t| t.key_schema())
            .unwrap_or_default()
        {
            match key.key_type() {
                KeyType::Hash => probe.partition_key = key.attribute_name().to_owned(),
                KeyType::Range => probe.sort_key = key.attribute_name().to_owned(),
                _ => {}
            }
        }
        let store =
            DynamoStore::new(client, table, outbox_runtime::DEFAULT_OUTBOX_SHARDS).with_keys(probe);
        let deadline = Deadline::after(std::time::Duration::from_secs(30));
        let records =
            store
                .recorded_settings(&deadline)
                .await
                .map_err(|source| Error::StoreWhile {
                    doing: "cannot read the stack's recorded settings".into(),
                    source,
                })?;
        let region = sdk.region().map(|r| r.to_string());
        let mut overrides = overrides.to_vec();
        overrides.push(("TABLE_NAME".into(), table.to_owned()));
        let chosen = keys::choose_stack(
            &records,
            region.as_deref().unwrap_or_default(),
            wanted,
            OffsetDateTime::now_utc(),
        );
        let (config, origin) = match chosen {
            Ok(record) => (
                Config::from_recorded(record, &overrides).map_err(|source| Error::Settings {
                    doing: format!("the recorded settings ({})", record.by),
                    source,
                })?,
                Origin::Recorded {
                    region: record.region.clone(),
                    stack: record.stack.clone(),
                    by: record.by.clone(),
                },
            ),
            Err(keys::StackChoiceError::NotRecorded) => {
                eprintln!(
                    "outboxctl: no settings are recorded in {table} (the stack's publisher and sweeper record theirs when they start: have they run?); using this environment's variables and defaults, which may not be the stack's"
                );
                let config = Config::from_lookup(|name| {
                    overrides
                        .iter()
                        .rev()
                        .find(|(k, _)| k == name)
                        .map(|(_, v)| v.clone())
                        .or_else(|| std::env::var(name).ok())
                })?;
                (config, Origin::Environment)
            }
            Err(e @ keys::StackChoiceError::OtherRegions { .. }) => {
                return Err(Error::Refused(format!(
                    "{table}: {e}: run in the stack's region (--region R)"
                )))
            }
            Err(e) => return Err(Error::Refused(format!("{table}: {e} with --stack NAME"))),
        };
        Ok(Self {
            sdk: sdk.clone(),
            table: table.to_owned(),
            config,
            origin,
            records,
            stream_arn,
        })
    }

    /// Every region's recorded settings.
    pub(crate) fn records(&self) -> &[RecordedSettings] {
        &self.records
    }

    /// The table's stream in this region, if it has one.
    pub(crate) fn stream_arn(&self) -> Option<&str> {
        self.stream_arn.as_deref()
    }

    /// The SDK configuration.
    pub(crate) fn sdk(&self) -> &SdkConfig {
        &self.sdk
    }

    /// The table.
    pub(crate) fn table(&self) -> &str {
        &self.table
    }

    /// The stack's configuration (the recorded one, overrides applied).
    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// The stack's key schema.
    pub(crate) fn keys(&self) -> &KeySchema {
        &self.config.keys
    }

    /// Where the settings came from.
    pub(crate) fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Whether the settings are the stack's own record.
    pub(crate) fn recorded(&self) -> bool {
        matches!(self.origin, Origin::Recorded { .. })
    }

    /// The store on the stack's table, keyed as the stack keys it.
    pub(crate) fn store(&self) -> DynamoStore {
        self.store_with(self.keys().clone())
    }

    fn store_with(&self, keys: KeySchema) -> DynamoStore {
        DynamoStore::new(
            aws_sdk_dynamodb::Client::new(&self.sdk),
            &self.table,
            self.config.outbox_shards,
        )
        .with_keys(keys)
    }

    /// The operator's operations on the stack's outbox.
    pub(crate) fn operations(&self) -> Operations<DynamoStore> {
        Operations::new(self.store()).parked_after(self.config.sweep_period)
    }

    /// Outbox items under other key shapes than the stack's: keys without
    /// a region when the stack has one, and the regional keys of every
    /// other region recorded in the table (and of the SDK's region when
    /// the settings are not recorded). Bounded reads of the two indexes
    /// per shape.
    pub(crate) async fn other_keys(&self, now: OffsetDateTime) -> Result<Vec<OtherKeys>, Error> {
        let mine = self.keys().home_region.clone();
        let mut shapes: Vec<Option<String>> = vec![None];
        shapes.extend(self.records.iter().map(|r| Some(r.region.clone())));
        if !self.recorded() {
            shapes.extend(self.sdk.region().map(|r| Some(r.to_string())));
        }
        shapes.sort();
        shapes.dedup();
        shapes.retain(|shape| shape != &mine);
        let mut found = Vec::new();
        for shape in shapes {
            let keys = self.keys().clone().with_home_region(shape.clone());
            let status = Operations::new(self.store_with(keys)).status(now).await?;
            if status.pending + status.dead_letters > 0 {
                found.push(OtherKeys {
                    home_region: shape,
                    pending: status.pending,
                    dead_letters: status.dead_letters,
                });
            }
        }
        Ok(found)
    }

    /// `status --scan`: every outbox item of the table (one paginated
    /// `Scan`, keys and four attributes projected) that is neither a dead
    /// letter nor under pending-index keys this stack's sweeper reads: no
    /// index keys, other names, a region with no stack, a shard out of range.
    /// Another recorded region's items count as that region's (its stack
    /// sweeps them), not here.
    pub(crate) async fn unsweepable(&self) -> Result<Unsweepable, Error> {
        let keys = self.keys();
        let regions: Vec<String> = self.records.iter().map(|r| r.region.clone()).collect();
        let client = aws_sdk_dynamodb::Client::new(&self.sdk);
        let mut pages = client
            .scan()
            .table_name(&self.table)
            .filter_expression("begins_with(#sk, :prefix)")
            .projection_expression("#pk, #sk, #ppk, #home, #dla")
            .expression_attribute_names("#pk", keys.partition_key.as_str())
            .expression_attribute_names("#sk", keys.sort_key.as_str())
            .expression_attribute_names("#ppk", keys.pending_partition_key.as_str())
            .expression_attribute_names("#home", outbox_core::keys::attr::HOME_REGION)
            .expression_attribute_names("#dla", outbox_core::keys::attr::DEAD_LETTERED_AT)
            .expression_attribute_values(
                ":prefix",
                aws_sdk_dynamodb::types::AttributeValue::S(keys.outbox_prefix.clone()),
            )
            .into_paginator()
            .items()
            .send();
        let mut found = Unsweepable::default();
        while let Some(item) = pages.next().await {
            let item = item.map_err(|e| Error::AwsWhile {
                doing: format!("cannot scan {}", self.table),
                source: CallError::of("Scan", &e),
            })?;
            found.scanned += 1;
            if item.contains_key(outbox_core::keys::attr::DEAD_LETTERED_AT) {
                continue;
            }
            let region = item
                .get(outbox_core::keys::attr::HOME_REGION)
                .and_then(|v| v.as_s().ok())
                .cloned();
            // Another recorded region's own item: its stack reads it.
            let schema = match &region {
                Some(r) if Some(r) != keys.home_region.as_ref() && regions.contains(r) => {
                    keys.clone().with_home_region(Some(r.clone()))
                }
                _ => keys.clone(),
            };
            let sweepable = item
                .get(keys.pending_partition_key.as_str())
                .and_then(|v| v.as_s().ok())
                .is_some_and(|pk| {
                    schema
                        .pending_shard(pk, region.as_deref(), u16::MAX)
                        .is_some()
                });
            if !sweepable {
                found.count += 1;
                if found.examples.len() < 10 {
                    if let Some(key) = keys.item_key(&item) {
                        found.examples.push(key.to_string());
                    }
                }
            }
        }
        Ok(found)
    }
}

/// Outbox items no stack's sweeper reads (`status --scan`).
#[derive(Debug, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Unsweepable {
    /// Outbox items scanned.
    pub scanned: usize,
    /// Of those, pending ones under keys no stack reads.
    pub count: usize,
    /// Up to 10 of their keys.
    pub examples: Vec<String>,
}
