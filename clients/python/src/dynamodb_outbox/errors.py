"""Why an outbox write was refused. Each error carries the ``code`` the Rust
writer gives the same refusal (``schemas/contract-vectors.v1.json``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class OutboxError(Exception):
    """Base of every refusal of this package. ``code`` names the kind."""

    code = "OutboxError"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidSettings(OutboxError):
    """A setting (key name, prefix, region, shard count, sink) the stack's
    functions would refuse too."""

    code = "InvalidSettings"


class InvalidEvent(OutboxError):
    """The event breaks a rule: its type or aggregate type is not a name, its
    aggregate id is empty or too long (or no SNS FIFO group id), its
    traceparent is not W3C."""

    code = "InvalidEvent"


class EventTooLarge(OutboxError):
    """The sink would refuse the entry for its size."""

    code = "EventTooLarge"

    def __init__(self, event_id: str, size: int, limit: int) -> None:
        super().__init__(
            f"event {event_id} would be a {size}-byte entry for the configured sink; its limit is {limit} bytes"
        )
        self.event_id, self.size, self.limit = event_id, size, limit


class ItemTooLarge(OutboxError):
    """The outbox item would exceed DynamoDB's 400 KB item limit."""

    code = "ItemTooLarge"

    def __init__(self, event_id: str, size: int, limit: int) -> None:
        super().__init__(f"outbox item for event {event_id} would be {size} bytes; the DynamoDB limit is {limit} bytes")
        self.event_id, self.size, self.limit = event_id, size, limit


class PayloadTooLarge(OutboxError):
    """The event's envelope is larger than a claim check takes (8 MiB)."""

    code = "PayloadTooLarge"

    def __init__(self, event_id: str, size: int, limit: int) -> None:
        super().__init__(f"event {event_id} is {size} bytes; a claim check takes at most {limit}")
        self.event_id, self.size, self.limit = event_id, size, limit


class TransactionError(OutboxError):
    """The transaction was not committed: nothing was written. ``retryable``:
    whether the same call may succeed later (a conflict, throttling)."""

    code = "TransactionError"
    retryable = False


class Empty(TransactionError):
    code = "Empty"


class TooManyActions(TransactionError):
    code = "TooManyActions"

    def __init__(self, count: int, limit: int) -> None:
        super().__init__(f"the transaction has {count} actions; DynamoDB allows {limit}")
        self.count, self.limit = count, limit


class TooLarge(TransactionError):
    code = "TooLarge"

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"the transaction is about {size} bytes; DynamoDB allows {limit}")
        self.size, self.limit = size, limit


class DuplicateItem(TransactionError):
    code = "DuplicateItem"

    def __init__(self, first: str, second: str) -> None:
        super().__init__(f"actions `{first}` and `{second}` write the same item")
        self.first, self.second = first, second


class InvalidToken(TransactionError):
    code = "InvalidToken"


@dataclass
class FailedCondition:
    """One condition that failed: the action's position and label, and the
    item as it was (``ALL_OLD``, low-level attribute values) when it
    existed."""

    index: int
    label: str
    item: dict[str, Any] | None = field(default=None)


class ConditionFailed(TransactionError):
    """A condition failed: which actions, with the items that failed them."""

    code = "ConditionFailed"

    def __init__(self, failed: list[FailedCondition]) -> None:
        super().__init__("condition failed on " + ", ".join(f.label for f in failed))
        self.failed = failed

    def failed_condition(self, label: str) -> FailedCondition | None:
        return next((f for f in self.failed if f.label == label), None)


class Conflict(TransactionError):
    """Another transaction was writing the same item: retry."""

    code = "Conflict"
    retryable = True

    def __init__(self, label: str) -> None:
        super().__init__(f"transaction conflicted with another one on `{label}`; retry")
        self.label = label


class Throttled(TransactionError):
    """DynamoDB throttled the call: retry later."""

    code = "Throttled"
    retryable = True


class Rejected(TransactionError):
    """Cancelled for another reason (``code`` of the cancellation reason in
    ``reason``)."""

    code = "Rejected"

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"DynamoDB rejected the transaction: {reason}: {message}")
        self.reason = reason


class NoPayloadStore(TransactionError):
    """An event is claim-checked (stored in S3 first) and the transaction was
    sent without an S3 client: use ``send_with_payloads``."""

    code = "NoPayloadStore"

    def __init__(self, event_id: str) -> None:
        super().__init__(
            f"event {event_id} is stored in S3 first (a claim check): send the transaction with send_with_payloads"
        )
        self.event_id = event_id


class PayloadNotStored(TransactionError):
    """A claim-checked event's object could not be stored: nothing was
    committed (objects stored before it are orphans the bucket's lifecycle
    rule expires)."""

    code = "PayloadNotStored"

    def __init__(self, event_id: str, reason: str, retryable: bool = False) -> None:
        super().__init__(f"the payload of event {event_id} was not stored in S3: {reason}")
        self.event_id = event_id
        # Throttling, a 5xx or the connection: the same call may succeed later.
        self.retryable = retryable


class StackSettingsError(OutboxError):
    """The stack's recorded settings could not be read or chosen."""

    code = "StackSettingsError"
