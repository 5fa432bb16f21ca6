//! The local stack, mirroring `template.yaml`: what tests and the demo
//! create on the local AWS API.

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};
use aws_sdk_eventbridge::types::Target;
use aws_sdk_sqs::types::QueueAttributeName;
use outbox_core::{keys, KeySchema};

/// Provisioning failed: what, and why (for a failed AWS call, the
/// operation, its error code and the service's message).
#[derive(Debug, thiserror::Error)]
#[error("provisioning {what} failed: {message}")]
pub struct StackError {
    /// What was being provisioned.
    pub what: String,
    /// What failed.
    pub message: String,
}

fn fail(what: impl Into<String>) -> impl FnOnce(String) -> StackError {
    let what = what.into();
    move |message| StackError { what, message }
}

fn text<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

fn attr(name: &str) -> Result<AttributeDefinition, String> {
    AttributeDefinition::builder()
        .attribute_name(name)
        .attribute_type(ScalarAttributeType::S)
        .build()
        .map_err(text)
}

fn key(name: &str, kind: KeyType) -> Result<KeySchemaElement, String> {
    KeySchemaElement::builder()
        .attribute_name(name)
        .key_type(kind)
        .build()
        .map_err(text)
}

/// A `CreateTable` of `table` on demand, keyed as `schema` says.
fn keyed_table(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    schema: &KeySchema,
) -> Result<aws_sdk_dynamodb::operation::create_table::builders::CreateTableFluentBuilder, String> {
    Ok(client
        .create_table()
        .table_name(table)
        .billing_mode(BillingMode::PayPerRequest)
        .attribute_definitions(attr(&schema.partition_key)?)
        .attribute_definitions(attr(&schema.sort_key)?)
        .key_schema(key(&schema.partition_key, KeyType::Hash)?)
        .key_schema(key(&schema.sort_key, KeyType::Range)?))
}

/// Creates the outbox table: `PK`/`SK`, stream with `NEW_IMAGE`, the sparse
/// pending index (`GSI1`) and dead-letter index (`GSI2`), both projecting
/// all attributes, on-demand billing, TTL on `expiresAt`. Returns the
/// stream ARN.
pub async fn create_table(sdk: &SdkConfig, table: &str) -> Result<String, StackError> {
    create_table_with(sdk, table, &KeySchema::default(), &[]).await
}

/// The same table keyed and indexed as `schema` names it, plus `extra`
/// global secondary indexes of the application's own (name, partition key,
/// sort key; string keys, `ALL` projection).
pub async fn create_table_with(
    sdk: &SdkConfig,
    table: &str,
    schema: &KeySchema,
    extra: &[(&str, &str, &str)],
) -> Result<String, StackError> {
    create_table_streaming(sdk, table, schema, extra, StreamViewType::NewImage).await
}

/// The same, with the stream view type `view` (a global table's replicas
/// stream `NEW_AND_OLD_IMAGES`).
pub async fn create_table_streaming(
    sdk: &SdkConfig,
    table: &str,
    schema: &KeySchema,
    extra: &[(&str, &str, &str)],
    view: StreamViewType,
) -> Result<String, StackError> {
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let index = |name: &str, pk: &str, sk: &str| -> Result<GlobalSecondaryIndex, String> {
        GlobalSecondaryIndex::builder()
            .index_name(name)
            .key_schema(key(pk, KeyType::Hash)?)
            .key_schema(key(sk, KeyType::Range)?)
            .projection(
                Projection::builder()
                    .projection_type(ProjectionType::All)
                    .build(),
            )
            .build()
            .map_err(text)
    };
    let build = || -> Result<_, String> {
        let mut create = keyed_table(&client, table, schema)?
            .attribute_definitions(attr(&schema.pending_partition_key)?)
            .attribute_definitions(attr(&schema.pending_sort_key)?)
            .attribute_definitions(attr(&schema.dead_letter_partition_key)?)
            .attribute_definitions(attr(&schema.dead_letter_sort_key)?)
            .global_secondary_indexes(index(
                &schema.pending_index,
                &schema.pending_partition_key,
                &schema.pending_sort_key,
            )?)
            .global_secondary_indexes(index(
                &schema.dead_letter_index,
                &schema.dead_letter_partition_key,
                &schema.dead_letter_sort_key,
            )?);
        for (name, pk, sk) in extra {
            create = create
                .attribute_definitions(attr(pk)?)
                .attribute_definitions(attr(sk)?)
                .global_secondary_indexes(index(name, pk, sk)?);
        }
        Ok(create.stream_specification(
            StreamSpecification::builder()
                .stream_enabled(true)
                .stream_view_type(view)
                .build()
                .map_err(text)?,
        ))
    };
    let created = build()
        .map_err(fail(format!("table {table}")))?
        .send()
        .await;
    let description = match created {
        Ok(out) => out.table_description,
        // The SDK retried a create whose first attempt had succeeded (its
        // answer was late: a busy local API): the table is ours.
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) =>
        {
            client
                .describe_table()
                .table_name(table)
                .send()
                .await
                .map_err(|e| {
                    fail(format!("table {table}"))(outbox_runtime::error_line("DescribeTable", &e))
                })?
                .table
        }
        Err(e) => {
            return Err(fail(format!("table {table}"))(outbox_runtime::error_line(
                "CreateTable",
                &e,
            )))
        }
    };
    enable_ttl(&client, table, &schema.ttl_attribute).await?;
    description
        .as_ref()
        .and_then(|d| d.latest_stream_arn())
        .map(str::to_owned)
        .ok_or_else(|| fail(format!("table {table}"))("no stream ARN".into()))
}

/// A subscriber: an SQS queue that receives what a rule or subscription
/// delivers.
#[derive(Debug, Clone)]
pub struct Subscriber {
    /// The queue's URL.
    pub queue_url: String,
    /// The queue's ARN.
    pub queue_arn: String,
}

/// Creates an SQS queue (FIFO when `fifo`).
pub async fn create_queue(
    sdk: &SdkConfig,
    name: &str,
    fifo: bool,
) -> Result<Subscriber, StackError> {
    let attributes: &[(QueueAttributeName, String)] = if fifo {
        &[(QueueAttributeName::FifoQueue, String::from("true"))][..]
    } else {
        &[]
    };
    create_queue_with(sdk, name, attributes).await
}

/// Creates an SQS queue with `attributes`.
async fn create_queue_with(
    sdk: &SdkConfig,
    name: &str,
    attributes: &[(QueueAttributeName, String)],
) -> Result<Subscriber, StackError> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let mut request = sqs.create_queue().queue_name(name);
    for (attribute, value) in attributes {
        request = request.attributes(attribute.clone(), value);
    }
    let queue_url = request
        .send()
        .await
        .map_err(|e| fail(format!("queue {name}"))(outbox_runtime::error_line("CreateQueue", &e)))?
        .queue_url
        .ok_or_else(|| fail(format!("queue {name}"))("no queue URL".into()))?;
    let queue_arn = sqs
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| {
            fail(format!("queue {name}"))(outbox_runtime::error_line("GetQueueAttributes", &e))
        })?
        .attributes
        .and_then(|a| a.get(&QueueAttributeName::QueueArn).cloned())
        .ok_or_else(|| fail(format!("queue {name}"))("no queue ARN".into()))?;
    Ok(Subscriber {
        queue_url,
        queue_arn,
    })
}

/// Creates an event bus and a rule matching `source` that delivers to a new
/// SQS queue (the example subscriber of the template).
pub async fn create_bus(
    sdk: &SdkConfig,
    bus: &str,
    source: &str,
) -> Result<Subscriber, StackError> {
    let events = aws_sdk_eventbridge::Client::new(sdk);
    match events.create_event_bus().name(bus).send().await {
        Ok(_) => {}
        // A retried create whose first attempt succeeded: the bus is ours.
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_already_exists_exception()) => {}
        Err(e) => {
            return Err(fail(format!("bus {bus}"))(outbox_runtime::error_line(
                "CreateEventBus",
                &e,
            )))
        }
    }
    let subscriber = create_queue(sdk, &format!("{bus}-subscriber"), false).await?;
    route(
        sdk,
        bus,
        serde_json::json!({ "source": [source] }),
        &format!("{bus}-to-subscriber"),
        &subscriber,
    )
    .await?;
    Ok(subscriber)
}

/// The projector rule's event pattern, as `ProjectorRule` in template.yaml
/// has it (a test holds them equal): the order events of `source`.
pub fn projector_pattern(source: &str) -> serde_json::Value {
    serde_json::json!({
        "source": [source],
        "detail-type": ["OrderCreated", "OrderPaid"],
        "detail": { "aggregateType": ["Order"] }
    })
}

/// A rule on `bus` with `pattern` that delivers to `queue`.
async fn route(
    sdk: &SdkConfig,
    bus: &str,
    pattern: serde_json::Value,
    rule: &str,
    queue: &Subscriber,
) -> Result<(), StackError> {
    let events = aws_sdk_eventbridge::Client::new(sdk);
    events
        .put_rule()
        .name(rule)
        .event_bus_name(bus)
        .event_pattern(pattern.to_string())
        .send()
        .await
        .map_err(|e| fail(format!("rule {rule}"))(outbox_runtime::error_line("PutRule", &e)))?;
    let target = Target::builder()
        .id("queue")
        .arn(&queue.queue_arn)
        .build()
        .map_err(|e| fail(format!("rule {rule}"))(text(e)))?;
    events
        .put_targets()
        .rule(rule)
        .event_bus_name(bus)
        .targets(target)
        .send()
        .await
        .map_err(|e| fail(format!("rule {rule}"))(outbox_runtime::error_line("PutTargets", &e)))?;
    Ok(())
}

/// The read model's side of the local stack, as in `template.yaml`: its
/// table, the projector's queue fed by a rule on the bus, and that queue's
/// dead-letter queue.
#[derive(Debug, Clone)]
pub struct ReadModel {
    /// The read-model table.
    pub table: String,
    /// The projector's queue.
    pub queue: Subscriber,
    /// Its dead-letter queue.
    pub dead_letters: Subscriber,
}

/// Receives before a message moves to the projector's dead-letter queue
/// (the template's `maxReceiveCount`).
pub const PROJECTOR_MAX_RECEIVES: u32 = 5;

/// Creates the read-model table (`PK`/`SK`, on-demand, TTL on
/// `expiresAt` for the inbox records; no stream, no index), and the
/// projector's queue (visibility `visibility_seconds`; locally short, so
/// that a reported message comes back quickly) with its dead-letter queue,
/// fed by a rule on `bus` matching `source`.
pub async fn create_read_model(
    sdk: &SdkConfig,
    table: &str,
    bus: &str,
    source: &str,
    visibility_seconds: u32,
) -> Result<ReadModel, StackError> {
    let (queue, dead_letters) = read_model_queues(sdk, table, false, visibility_seconds).await?;
    route(
        sdk,
        bus,
        projector_pattern(source),
        &format!("{bus}-to-{table}"),
        &queue,
    )
    .await?;
    Ok(ReadModel {
        table: table.to_owned(),
        queue,
        dead_letters,
    })
}

/// The same read model behind a Custom Event Bus (the `eventbridge-bus`
/// sink): FIFO queues, fed by a FIFO subscriber of the bus `bus_arn`
/// through `events`, as `template.yaml`'s `ProjectorSubscriber` (whose
/// retry policy and `OnFailureConfiguration` the local bus does not
/// implement; it keeps an event it cannot deliver and tries it again).
pub async fn create_custom_bus_read_model(
    sdk: &SdkConfig,
    events: &aws_sdk_eventbridgev2::Client,
    table: &str,
    bus_arn: &str,
    visibility_seconds: u32,
) -> Result<ReadModel, StackError> {
    let (queue, dead_letters) = read_model_queues(sdk, table, true, visibility_seconds).await?;
    crate::bus::subscribe_fifo(
        events,
        bus_arn,
        &format!("{table}-projector"),
        &queue.queue_arn,
    )
    .await?;
    Ok(ReadModel {
        table: table.to_owned(),
        queue,
        dead_letters,
    })
}

/// The read-model table, the projector's queue (`visibility_seconds`, its
/// redrive policy) and its dead-letter queue, FIFO when `fifo`.
async fn read_model_queues(
    sdk: &SdkConfig,
    table: &str,
    fifo: bool,
    visibility_seconds: u32,
) -> Result<(Subscriber, Subscriber), StackError> {
    create_read_model_table(sdk, table).await?;
    let suffix = if fifo { ".fifo" } else { "" };
    let dead_letters = create_queue(sdk, &format!("{table}-projector-dlq{suffix}"), fifo).await?;
    let redrive = serde_json::json!({
        "deadLetterTargetArn": dead_letters.queue_arn,
        "maxReceiveCount": PROJECTOR_MAX_RECEIVES,
    })
    .to_string();
    let attributes = [
        (QueueAttributeName::RedrivePolicy, redrive),
        (
            QueueAttributeName::VisibilityTimeout,
            visibility_seconds.to_string(),
        ),
    ];
    let name = format!("{table}-projector{suffix}");
    let queue = if fifo {
        create_bus_fifo_queue(sdk, &name, &attributes).await?
    } else {
        create_queue_with(sdk, &name, &attributes).await?
    };
    Ok((queue, dead_letters))
}

/// An SQS FIFO queue a Custom Event Bus's FIFO subscriber delivers to:
/// content-based deduplication on (the subscriber sends no deduplication
/// id), and `attributes`.
pub(crate) async fn create_bus_fifo_queue(
    sdk: &SdkConfig,
    name: &str,
    attributes: &[(QueueAttributeName, String)],
) -> Result<Subscriber, StackError> {
    let fifo = [
        (QueueAttributeName::FifoQueue, "true".to_owned()),
        (
            QueueAttributeName::ContentBasedDeduplication,
            "true".to_owned(),
        ),
    ];
    let all: Vec<_> = fifo.into_iter().chain(attributes.iter().cloned()).collect();
    create_queue_with(sdk, name, &all).await
}

/// The read-model table alone: `PK`/`SK`, on-demand, TTL on `expiresAt`.
pub async fn create_read_model_table(sdk: &SdkConfig, table: &str) -> Result<(), StackError> {
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let request = keyed_table(&client, table, &KeySchema::default())
        .map_err(fail(format!("table {table}")))?;
    match request.send().await {
        Ok(_) => {}
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_in_use_exception()) => {}
        Err(e) => {
            return Err(fail(format!("table {table}"))(outbox_runtime::error_line(
                "CreateTable",
                &e,
            )))
        }
    }
    enable_ttl(&client, table, keys::TTL_ATTRIBUTE).await?;
    Ok(())
}

async fn enable_ttl(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
    attribute: &str,
) -> Result<(), StackError> {
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(attribute)
                .build()
                .map_err(|e| fail("ttl")(text(e)))?,
        )
        .send()
        .await
        .map_err(|e| fail("ttl")(outbox_runtime::error_line("UpdateTimeToLive", &e)))?;
    Ok(())
}

/// Every item of `table` (a paginated `Scan`): for printing and checking a
/// local stack, never for a deployed table's hot path.
pub async fn scan_all(
    client: &aws_sdk_dynamodb::Client,
    table: &str,
) -> Result<
    Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>>,
    outbox_runtime::CallError,
> {
    let mut pages = client
        .scan()
        .table_name(table)
        .into_paginator()
        .items()
        .send();
    let mut items = Vec::new();
    while let Some(item) = pages.next().await {
        items.push(item.map_err(|e| outbox_runtime::CallError::of("Scan", &e))?);
    }
    Ok(items)
}
