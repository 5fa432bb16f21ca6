"""Transactional outbox for DynamoDB, the writer's half, for the
dynamodb-outbox stack: your change and its events in one
``TransactWriteItems``; the stack's publisher sends them afterwards from what
was committed.

    import boto3
    from dynamodb_outbox import OutboxSettings, OutboxTransaction

    client = boto3.client("dynamodb")
    settings = OutboxSettings.from_stack(client, "orders")  # once per process
    (OutboxTransaction(settings)
        .put("order", {"TableName": "orders", "Item": order_item,
                       "ConditionExpression": "attribute_not_exists(PK)"})
        .event("ORDER#42", "OrderCreated", "Order", "42", 1, {"orderId": "42"})
        .send(client))

The item contract is ``schemas/outbox-item.v1.schema.json``; this package
reproduces ``schemas/contract-vectors.v1.json`` byte for byte."""

from ._contract import ClaimCheck, EventLimits, KeySchema, MonotonicIds, Offload, shard_of
from .errors import (
    ConditionFailed,
    Conflict,
    DuplicateItem,
    Empty,
    EventTooLarge,
    FailedCondition,
    InvalidEvent,
    InvalidSettings,
    InvalidToken,
    ItemTooLarge,
    NoPayloadStore,
    OutboxError,
    PayloadNotStored,
    PayloadTooLarge,
    Rejected,
    StackSettingsError,
    Throttled,
    TooLarge,
    TooManyActions,
    TransactionError,
)
from .transaction import OutboxSettings, OutboxTransaction

__all__ = [
    "ClaimCheck",
    "ConditionFailed",
    "Conflict",
    "DuplicateItem",
    "Empty",
    "EventLimits",
    "EventTooLarge",
    "FailedCondition",
    "InvalidEvent",
    "InvalidSettings",
    "InvalidToken",
    "ItemTooLarge",
    "KeySchema",
    "MonotonicIds",
    "NoPayloadStore",
    "Offload",
    "OutboxError",
    "OutboxSettings",
    "OutboxTransaction",
    "PayloadNotStored",
    "PayloadTooLarge",
    "Rejected",
    "StackSettingsError",
    "Throttled",
    "TooLarge",
    "TooManyActions",
    "TransactionError",
    "shard_of",
]
