//! The local stack, mirroring `template.yaml`: what tests and the demo
//! create on the local AWS API.

use aws_config::SdkConfig;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType, Projection,
    ProjectionType, ScalarAttributeType, StreamSpecification, StreamViewType,
    TimeToLiveSpecification,
};
use aws_sdk_eventbridge::types::Target;
use outbox_core::keys;

/// Provisioning failed.
#[derive(Debug, thiserror::Error)]
#[error("provisioning {what} failed: {message}")]
pub struct StackError {
    pub what: String,
    pub message: String,
}

fn fail(what: impl Into<String>) -> impl FnOnce(String) -> StackError {
    let what = what.into();
    move |message| StackError { what, message }
}

fn text<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

/// Creates the outbox table: `PK`/`SK`, stream with `NEW_IMAGE`, the sparse
/// pending index (`GSI1`) and dead-letter index (`GSI2`), both projecting
/// all attributes, on-demand billing, TTL on `expiresAt`. Returns the
/// stream ARN.
pub async fn create_table(sdk: &SdkConfig, table: &str) -> Result<String, StackError> {
    let client = aws_sdk_dynamodb::Client::new(sdk);
    let attr = |name: &str| {
        AttributeDefinition::builder()
            .attribute_name(name)
            .attribute_type(ScalarAttributeType::S)
            .build()
            .map_err(text)
    };
    let key = |name: &str, kind: KeyType| {
        KeySchemaElement::builder()
            .attribute_name(name)
            .key_type(kind)
            .build()
            .map_err(text)
    };
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
        Ok(client
            .create_table()
            .table_name(table)
            .billing_mode(BillingMode::PayPerRequest)
            .attribute_definitions(attr(keys::PK)?)
            .attribute_definitions(attr(keys::SK)?)
            .attribute_definitions(attr(keys::PENDING_PK)?)
            .attribute_definitions(attr(keys::PENDING_SK)?)
            .attribute_definitions(attr(keys::DEAD_PK)?)
            .attribute_definitions(attr(keys::DEAD_SK)?)
            .key_schema(key(keys::PK, KeyType::Hash)?)
            .key_schema(key(keys::SK, KeyType::Range)?)
            .global_secondary_indexes(index(
                keys::PENDING_INDEX,
                keys::PENDING_PK,
                keys::PENDING_SK,
            )?)
            .global_secondary_indexes(index(
                keys::DEAD_LETTER_INDEX,
                keys::DEAD_PK,
                keys::DEAD_SK,
            )?)
            .stream_specification(
                StreamSpecification::builder()
                    .stream_enabled(true)
                    .stream_view_type(StreamViewType::NewImage)
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
                .map_err(|e| fail(format!("table {table}"))(text(e)))?
                .table
        }
        Err(e) => return Err(fail(format!("table {table}"))(text(e))),
    };
    client
        .update_time_to_live()
        .table_name(table)
        .time_to_live_specification(
            TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name(keys::TTL_ATTRIBUTE)
                .build()
                .map_err(|e| fail("ttl")(text(e)))?,
        )
        .send()
        .await
        .map_err(|e| fail("ttl")(text(e)))?;
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
    pub queue_url: String,
    pub queue_arn: String,
}

/// Creates an SQS queue (FIFO when `fifo`).
pub async fn create_queue(
    sdk: &SdkConfig,
    name: &str,
    fifo: bool,
) -> Result<Subscriber, StackError> {
    let sqs = aws_sdk_sqs::Client::new(sdk);
    let mut request = sqs.create_queue().queue_name(name);
    if fifo {
        request = request.attributes(aws_sdk_sqs::types::QueueAttributeName::FifoQueue, "true");
    }
    let queue_url = request
        .send()
        .await
        .map_err(|e| fail(format!("queue {name}"))(text(e)))?
        .queue_url
        .ok_or_else(|| fail(format!("queue {name}"))("no queue URL".into()))?;
    let queue_arn = sqs
        .get_queue_attributes()
        .queue_url(&queue_url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::QueueArn)
        .send()
        .await
        .map_err(|e| fail(format!("queue {name}"))(text(e)))?
        .attributes
        .and_then(|a| {
            a.get(&aws_sdk_sqs::types::QueueAttributeName::QueueArn)
                .cloned()
        })
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
        Err(e) => return Err(fail(format!("bus {bus}"))(text(e))),
    }
    let subscriber = create_queue(sdk, &format!("{bus}-subscriber"), false).await?;
    let rule = format!("{bus}-to-subscriber");
    events
        .put_rule()
        .name(&rule)
        .event_bus_name(bus)
        .event_pattern(serde_json::json!({ "source": [source] }).to_string())
        .send()
        .await
        .map_err(|e| fail(format!("rule {rule}"))(text(e)))?;
    let target = Target::builder()
        .id("subscriber")
        .arn(&subscriber.queue_arn)
        .build()
        .map_err(|e| fail(format!("rule {rule}"))(text(e)))?;
    events
        .put_targets()
        .rule(&rule)
        .event_bus_name(bus)
        .targets(target)
        .send()
        .await
        .map_err(|e| fail(format!("rule {rule}"))(text(e)))?;
    Ok(subscriber)
}

/// Creates an SNS FIFO topic (`<name>.fifo`) with an SQS FIFO queue
/// subscribed with raw delivery. Returns the topic ARN and the queue.
pub async fn create_fifo_topic(
    sdk: &SdkConfig,
    name: &str,
) -> Result<(String, Subscriber), StackError> {
    let sns = aws_sdk_sns::Client::new(sdk);
    let topic_arn = sns
        .create_topic()
        .name(format!("{name}.fifo"))
        .attributes("FifoTopic", "true")
        .send()
        .await
        .map_err(|e| fail(format!("topic {name}"))(text(e)))?
        .topic_arn
        .ok_or_else(|| fail(format!("topic {name}"))("no topic ARN".into()))?;
    let queue = create_queue(sdk, &format!("{name}-subscriber.fifo"), true).await?;
    sns.subscribe()
        .topic_arn(&topic_arn)
        .protocol("sqs")
        .endpoint(&queue.queue_arn)
        .attributes("RawMessageDelivery", "true")
        .send()
        .await
        .map_err(|e| fail(format!("subscription {name}"))(text(e)))?;
    Ok((topic_arn, queue))
}
