"""The outbox item contract (docs/adopt.md, schemas/outbox-item.v1.schema.json):
event ids, the key schema, the sinks' limits, the envelope and the item, as
the Rust writer makes them. ``tests/test_vectors.py`` holds this module to
the contract vectors the Rust writer generates."""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from .errors import EventTooLarge, InvalidEvent, InvalidSettings, ItemTooLarge, PayloadTooLarge

MAX_ITEM_BYTES = 400 * 1024
# The claim check (the Rust writer's outbox_core::claim).
CLAIM_THRESHOLD_BYTES = MAX_ITEM_BYTES - 16 * 1024
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024
PAYLOAD_PREFIX = "outbox/"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
MAX_TRANSACTION_BYTES = 4 * 1024 * 1024
MAX_TRANSACTION_ACTIONS = 100
EVENTBRIDGE_MAX_BYTES = 1024 * 1024
SNS_MAX_BYTES = 256 * 1024
MAX_FIFO_GROUP_ID = 128
MAX_BUS_SYSTEM_ID = 128
DEFAULT_EVENT_SOURCE = "outbox.orders"
DEFAULT_SHARDS = 8

# --- event ids ---------------------------------------------------------------

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def _encode(value: int) -> str:
    return "".join(_CROCKFORD[(value >> (5 * (25 - i))) & 31] for i in range(26))


def ulid_of(ms: int, randomness: int) -> str:
    """The ULID of a millisecond and 80 random bits."""
    return _encode((ms << 80) | randomness)


def ulid_ms(ulid: str) -> int:
    """The millisecond of a ULID."""
    value = 0
    for c in ulid:
        value = (value << 5) | _CROCKFORD.index(c)
    return value >> 80


class MonotonicIds:
    """The process's event ids: strictly increasing, so events made in one
    millisecond (several of one transaction, a burst) still sort in creation
    order in the pending index; a clock that steps back does not undo it."""

    def __init__(self, clock: Callable[[], int] | None = None) -> None:
        self._clock = clock or (lambda: time.time_ns() // 1_000_000)
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_random = 0

    def reset(self) -> None:
        """Forgets the last id (a forked child starts its own sequence)."""
        with self._lock:
            self._last_ms, self._last_random = -1, 0

    def next(self) -> str:
        with self._lock:
            ms = self._clock()
            if ms > self._last_ms:
                self._last_ms, self._last_random = ms, int.from_bytes(os.urandom(10), "big")
            elif self._last_random + 1 < 1 << 80:
                self._last_random += 1
            else:  # 2^80 ids in one millisecond: the next one
                self._last_ms, self._last_random = self._last_ms + 1, int.from_bytes(os.urandom(10), "big")
            return ulid_of(self._last_ms, self._last_random)


EVENT_IDS = MonotonicIds()
# A forked child must not continue its parent's sequence: the two would make
# the same id in one millisecond.
os.register_at_fork(after_in_child=EVENT_IDS.reset)


def setting(variables: Mapping[str, str], name: str) -> str | None:
    """A stack variable as its functions read it: unset or blank is
    ``None``, any other value is taken as it is (not stripped)."""
    value = variables.get(name)
    return value if value is not None and value.strip() else None


def rfc3339_ms(ms: int) -> str:
    """RFC 3339 in UTC as the Rust writer prints it: seconds, then the
    millisecond fraction without trailing zeros (none when zero), then Z."""
    at = datetime.fromtimestamp(ms // 1000, tz=UTC)
    fraction = f"{ms % 1000:03d}".rstrip("0")
    return at.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + "Z"


# --- key schema --------------------------------------------------------------

VARIABLES = (
    "PARTITION_KEY",
    "SORT_KEY",
    "OUTBOX_PREFIX",
    "PENDING_INDEX",
    "PENDING_INDEX_PARTITION_KEY",
    "PENDING_INDEX_SORT_KEY",
    "DEAD_LETTER_INDEX",
    "DEAD_LETTER_INDEX_PARTITION_KEY",
    "DEAD_LETTER_INDEX_SORT_KEY",
    "TTL_ATTRIBUTE",
)

_ITEM_ATTRIBUTES = frozenset(
    "eventId homeRegion eventType aggregateId aggregateVersion heldBehind heldSince envelope "
    "createdAt traceparent attempts nextAttemptAt lastError deadLetteredAt deadLetterReason "
    "claimToken claimedUntil keysRepairedAt shardsHighWater variables recordedBy recordedSince".split()
)
_REGION = re.compile(r"^[a-z0-9-]{1,32}$")
_INDEX = re.compile(r"^[A-Za-z0-9_.-]{3,255}$")


@dataclass(frozen=True)
class KeySchema:
    """The table's names for the outbox (the stack's ``PartitionKey``,
    ``SortKey``, ``OutboxPrefix``, index parameters) and its home region
    (``None``: no regional keys, ``HOME_REGION_RULE=off``)."""

    partition_key: str = "PK"
    sort_key: str = "SK"
    outbox_prefix: str = "OUTBOX#"
    pending_index: str = "GSI1"
    pending_partition_key: str = "GSI1PK"
    pending_sort_key: str = "GSI1SK"
    dead_letter_index: str = "GSI2"
    dead_letter_partition_key: str = "GSI2PK"
    dead_letter_sort_key: str = "GSI2SK"
    ttl_attribute: str = "expiresAt"
    home_region: str | None = None

    @classmethod
    def from_variables(cls, variables: Mapping[str, str]) -> KeySchema:
        """From the stack's variables (``PARTITION_KEY``, …, ``HOME_REGION``,
        ``HOME_REGION_RULE``), as its functions read them."""
        names: dict[str, str] = {}
        for name, variable in zip(_FIELDS, VARIABLES, strict=True):
            value = setting(variables, variable)
            if value is not None:
                names[name] = value
        rule = setting(variables, "HOME_REGION_RULE") or "on"
        if rule not in ("on", "off"):
            raise InvalidSettings(f"HOME_REGION_RULE={rule!r} is invalid: on or off")
        region = setting(variables, "HOME_REGION") if rule == "on" else None
        return replace(cls(), **names, home_region=region).validated()

    def with_home_region(self, region: str | None) -> KeySchema:
        return replace(self, home_region=region).validated()

    def validated(self) -> KeySchema:
        def invalid(name: str, value: str, reason: str) -> InvalidSettings:
            return InvalidSettings(f"{name}={value!r} is invalid: {reason}")

        attributes = [
            ("PARTITION_KEY", self.partition_key),
            ("SORT_KEY", self.sort_key),
            ("PENDING_INDEX_PARTITION_KEY", self.pending_partition_key),
            ("PENDING_INDEX_SORT_KEY", self.pending_sort_key),
            ("DEAD_LETTER_INDEX_PARTITION_KEY", self.dead_letter_partition_key),
            ("DEAD_LETTER_INDEX_SORT_KEY", self.dead_letter_sort_key),
            ("TTL_ATTRIBUTE", self.ttl_attribute),
        ]
        for i, (name, value) in enumerate(attributes):
            if not 1 <= len(value.encode()) <= 255:
                raise invalid(name, value, "an attribute name is 1 to 255 bytes")
            if value in _ITEM_ATTRIBUTES:
                raise invalid(name, value, "the outbox item has an attribute of that name")
            for other, v in attributes[:i]:
                if v == value:
                    raise invalid(name, value, f"{other} has the same name")
        for name, value in (("PENDING_INDEX", self.pending_index), ("DEAD_LETTER_INDEX", self.dead_letter_index)):
            if not _INDEX.fullmatch(value):
                raise invalid(name, value, "an index name is 3 to 255 characters of letters, digits, '_', '.' and '-'")
        if self.pending_index == self.dead_letter_index:
            raise invalid("DEAD_LETTER_INDEX", self.dead_letter_index, "PENDING_INDEX has the same name")
        p = self.outbox_prefix
        if not 1 <= len(p) <= 64 or "!" in p or "~" in p:
            raise invalid("OUTBOX_PREFIX", p, "a prefix is 1 to 64 characters, without '!' or '~'")
        if self.home_region is not None and not _REGION.fullmatch(self.home_region):
            raise invalid("HOME_REGION", self.home_region, "a region is 1 to 32 lower-case letters, digits and '-'")
        return self

    def renames(self) -> dict[str, str]:
        """The item's default names to this table's."""
        return {
            "PK": self.partition_key,
            "SK": self.sort_key,
            "GSI1PK": self.pending_partition_key,
            "GSI1SK": self.pending_sort_key,
        }

    def pending_pk(self, shard: int) -> str:
        region = f"{self.home_region}#" if self.home_region else ""
        return f"{self.outbox_prefix}{region}{shard}"


_FIELDS = (
    "partition_key",
    "sort_key",
    "outbox_prefix",
    "pending_index",
    "pending_partition_key",
    "pending_sort_key",
    "dead_letter_index",
    "dead_letter_partition_key",
    "dead_letter_sort_key",
    "ttl_attribute",
)


def shard_of(aggregate_id: str, shards: int) -> int:
    """FNV-1a (64 bits) of the aggregate id's UTF-8 bytes, modulo ``shards``."""
    h = 0xCBF29CE484222325
    for byte in aggregate_id.encode():
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h % max(shards, 1)


# --- sinks' limits -----------------------------------------------------------


@dataclass(frozen=True)
class EventLimits:
    """What the stack's sink accepts: each event is checked against it before
    the transaction is sent. ``kind`` is ``eventbridge`` (``source``: the
    stack's ``EVENT_SOURCE``), ``eventbridge-bus`` (a Custom Event Bus,
    ``source`` likewise) or ``sns`` (``fifo``: a FIFO topic)."""

    kind: str
    max_bytes: int
    source: str = ""
    fifo: bool = False

    @classmethod
    def eventbridge(cls, source: str = DEFAULT_EVENT_SOURCE, max_bytes: int = EVENTBRIDGE_MAX_BYTES) -> EventLimits:
        return cls("eventbridge", max_bytes, source=source)

    @classmethod
    def eventbridge_bus(cls, source: str = DEFAULT_EVENT_SOURCE, max_bytes: int = EVENTBRIDGE_MAX_BYTES) -> EventLimits:
        return cls("eventbridge-bus", max_bytes, source=source)

    @classmethod
    def sns(cls, fifo: bool, max_bytes: int = SNS_MAX_BYTES) -> EventLimits:
        return cls("sns", max_bytes, fifo=fifo)

    @classmethod
    def from_variables(cls, variables: Mapping[str, str]) -> EventLimits:
        """From the stack's ``SINK``, ``EVENT_SOURCE``, ``SNS_TOPIC_ARN`` and
        ``MAX_EVENT_BYTES``, as its functions read them."""

        def get(name: str) -> str | None:
            return setting(variables, name)

        def max_bytes(default: int) -> int:
            raw = get("MAX_EVENT_BYTES")
            if raw is None:
                return default
            # As the Rust writer parses it: trimmed, an optional `+`, ASCII digits.
            digits = raw.strip()
            if re.fullmatch(r"\+?[0-9]+", digits) is None or not 1024 <= int(digits) <= EVENTBRIDGE_MAX_BYTES:
                raise InvalidSettings(f"MAX_EVENT_BYTES={raw!r} is invalid: 1024 to {EVENTBRIDGE_MAX_BYTES}")
            return int(digits)

        def source() -> str:
            value = get("EVENT_SOURCE") or DEFAULT_EVENT_SOURCE
            if len(value.encode()) > 256:  # bytes, as the Rust writer counts
                raise InvalidSettings(f"EVENT_SOURCE={value!r} is invalid: longer than 256 characters")
            if value.startswith("aws."):  # both buses refuse every entry of it
                reason = "the aws. prefix is reserved for AWS services"
                raise InvalidSettings(f"EVENT_SOURCE={value!r} is invalid: {reason}")
            return value

        sink = get("SINK") or "eventbridge"
        if sink == "eventbridge":
            return cls.eventbridge(source(), max_bytes(EVENTBRIDGE_MAX_BYTES))
        if sink == "eventbridge-bus":
            return cls.eventbridge_bus(source(), max_bytes(EVENTBRIDGE_MAX_BYTES))
        if sink == "sns":
            topic = get("SNS_TOPIC_ARN")
            if topic is None:
                raise InvalidSettings("SNS_TOPIC_ARN is required but not set")
            return cls.sns(topic.endswith(".fifo"), max_bytes(SNS_MAX_BYTES))
        raise InvalidSettings(f"SINK={sink!r} is invalid: expected `eventbridge`, `eventbridge-bus` or `sns`")

    def entry_size(self, event_type: str, event_id: str, envelope: str) -> int:
        """The entry's size as the sink counts it."""
        if self.kind == "sns":
            body = len(envelope.encode())
            attributes = [("eventType", event_type), ("eventId", event_id)]
            return body + sum(len(n.encode()) + len("String") + len(v.encode()) for n, v in attributes)
        entry = len(self.source.encode()) + len(event_type.encode()) + len(envelope.encode())
        if self.kind == "eventbridge-bus":
            # Its DeduplicationId (the event id) and its EventGroupId (the
            # aggregate id) counted at its largest.
            return entry + len(event_id.encode()) + MAX_BUS_SYSTEM_ID
        return entry

    def check_aggregate_id(self, aggregate_id: str) -> None:
        if self.kind == "eventbridge-bus" and not 0 < len(aggregate_id.encode()) <= MAX_BUS_SYSTEM_ID:
            raise InvalidEvent(f"aggregateId must be 1 to {MAX_BUS_SYSTEM_ID} bytes to be an event group id")
        if self.kind == "sns" and self.fifo:
            ok = 0 < len(aggregate_id.encode()) <= MAX_FIFO_GROUP_ID and all("!" <= c <= "~" for c in aggregate_id)
            if not ok:
                raise InvalidEvent(
                    f"aggregateId must be 1 to {MAX_FIFO_GROUP_ID} letters, digits or punctuation"
                    " to be an SNS FIFO message group id"
                )


# --- envelope and item -------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9._-]{1,128}$")
_HEX = re.compile(r"^[0-9a-f]+$")


def is_valid_traceparent(value: str) -> bool:
    """``00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>``, ids not all
    zero, version not ``ff``."""
    parts = value.split("-")
    if len(parts) != 4:
        return False
    version, trace, parent, flags = parts

    def hexn(s: str, n: int) -> bool:
        return len(s) == n and bool(_HEX.fullmatch(s))

    return (
        hexn(version, 2)
        and version != "ff"
        and hexn(trace, 32)
        and trace.strip("0") != ""
        and hexn(parent, 16)
        and parent.strip("0") != ""
        and hexn(flags, 2)
    )


def _json(value: Any) -> str:
    # serde_json's output: no spaces, non-ASCII as it is, object keys sorted
    # by their UTF-8 bytes (= code points), NaN refused.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False)


@dataclass(frozen=True)
class Event:
    """One outbox event: what happened to which aggregate, and its state."""

    event_type: str
    aggregate_type: str
    aggregate_id: str
    aggregate_version: int
    payload: Any
    schema_version: int = 1
    traceparent: str | None = None
    event_id: str = field(default="")

    def checked(self) -> Event:
        for name, value in (("eventType", self.event_type), ("aggregateType", self.aggregate_type)):
            if not _NAME.fullmatch(value):
                raise InvalidEvent(f"{name} must be 1 to 128 characters of letters, digits, '.', '_' or '-'")
        if not 1 <= len(self.aggregate_id.encode()) <= 256:
            raise InvalidEvent("aggregateId must be 1 to 256 bytes")
        if self.traceparent is not None and not is_valid_traceparent(self.traceparent):
            raise InvalidEvent("traceparent is not a W3C traceparent value")

        def integer(v: Any, top: int) -> bool:
            return isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= top

        if not integer(self.aggregate_version, 2**53 - 1) or not integer(self.schema_version, 2**32 - 1):
            raise InvalidEvent("aggregateVersion and schemaVersion are positive integers")
        return self

    def envelope_json(self, payload_ref: Mapping[str, Any] | None = None) -> str:
        """The envelope as the Rust writer writes it (envelope.v1.schema.json's
        field order), published byte for byte; with ``payload_ref``, a claim
        check's stub (``payload`` null, then ``payloadRef``)."""
        fields: list[tuple[str, Any]] = [
            ("eventId", self.event_id),
            ("eventType", self.event_type),
            ("schemaVersion", self.schema_version),
            ("aggregateType", self.aggregate_type),
            ("aggregateId", self.aggregate_id),
            ("aggregateVersion", self.aggregate_version),
            ("occurredAt", rfc3339_ms(ulid_ms(self.event_id))),
        ]
        if self.traceparent is not None:
            fields.append(("traceparent", self.traceparent))
        try:
            if payload_ref is None:
                fields.append(("payload", json.loads(_json(self.payload))))
            else:
                fields += [("payload", None), ("payloadRef", dict(payload_ref))]
            return "{" + ",".join(f"{_json(k)}:{_json(v)}" for k, v in fields) + "}"
        except (TypeError, ValueError) as e:
            raise InvalidEvent(f"payload is not JSON: {e}") from e


def _number_size(n: str) -> int:
    digits = sum(c.isdigit() for c in n.split("e")[0].split("E")[0])
    return (digits + 1) // 2 + 1


def _value_size(value: Mapping[str, Any]) -> int:
    ((kind, v),) = value.items()
    if kind == "S":
        return len(v.encode())
    if kind == "N":
        return _number_size(v)
    if kind == "B":
        return len(v)
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in v)
    if kind == "NS":
        return sum(_number_size(n) for n in v)
    if kind == "BS":
        return sum(len(b) for b in v)
    if kind == "L":
        return 3 + sum(1 + _value_size(e) for e in v)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + _value_size(e) for k, e in v.items())
    return 64


def item_size(item: Mapping[str, Mapping[str, Any]]) -> int:
    """A DynamoDB item's size (low-level attribute values) by the documented
    rules, as the Rust writer counts it."""
    return sum(len(k.encode()) + _value_size(v) for k, v in item.items())


@dataclass(frozen=True)
class ClaimCheck:
    """The claim check of events too large for an item or the sink
    (``PAYLOAD_BUCKET``, ``PAYLOAD_THRESHOLD_BYTES``; docs/events.md, "Large
    events"): such an event's whole envelope is stored in the bucket first,
    at ``outbox/<eventId>/<sha256>``, and its item holds a stub."""

    bucket: str
    threshold: int = CLAIM_THRESHOLD_BYTES

    def __post_init__(self) -> None:
        if not _BUCKET.fullmatch(self.bucket):
            raise InvalidSettings(
                f"PAYLOAD_BUCKET={self.bucket!r} is invalid: not an S3 bucket name"
                " (3 to 63 lowercase letters, digits, dots and hyphens)"
            )
        if not isinstance(self.threshold, int) or not 1024 <= self.threshold <= CLAIM_THRESHOLD_BYTES:
            raise InvalidSettings(
                f"PAYLOAD_THRESHOLD_BYTES={self.threshold} is invalid: 1024 to {CLAIM_THRESHOLD_BYTES}"
            )

    @classmethod
    def from_variables(cls, variables: Mapping[str, str]) -> ClaimCheck | None:
        """From the stack's ``PAYLOAD_BUCKET`` (none: off) and
        ``PAYLOAD_THRESHOLD_BYTES``, as its functions read them."""
        bucket = setting(variables, "PAYLOAD_BUCKET")
        if bucket is None:
            return None
        raw = setting(variables, "PAYLOAD_THRESHOLD_BYTES")
        if raw is None:
            return cls(bucket.strip())
        digits = raw.strip()
        if re.fullmatch(r"\+?[0-9]+", digits) is None:
            raise InvalidSettings(f"PAYLOAD_THRESHOLD_BYTES={raw!r} is invalid: 1024 to {CLAIM_THRESHOLD_BYTES}")
        return cls(bucket.strip(), int(digits))


@dataclass(frozen=True)
class Offload:
    """An object a transaction stores before it commits: an event's whole
    envelope (``body``), at ``key`` in ``bucket``."""

    event_id: str
    bucket: str
    key: str
    sha256: str
    body: bytes

    def payload_ref(self) -> dict[str, Any]:
        return {"bucket": self.bucket, "key": self.key, "sha256": self.sha256, "size": len(self.body)}


def outbox_item(keys: KeySchema, limits: EventLimits, shards: int, pk: str, event: Event) -> dict[str, Any]:
    """The outbox item of ``event`` in the item collection ``pk``, in
    low-level attribute values with the table's names, checked against the
    sink's limits and DynamoDB's item limit."""
    return stored_item(keys, limits, shards, pk, event, None)[0]


def stored_item(
    keys: KeySchema, limits: EventLimits, shards: int, pk: str, event: Event, claim: ClaimCheck | None
) -> tuple[dict[str, Any], Offload | None]:
    """:func:`outbox_item`, with the claim check ``claim``: an event whose
    item would be larger than its threshold, or whose entry the sink would
    refuse for its size, becomes a stub item and the :class:`Offload` to
    store before the transaction (the Rust writer's ``claim_checked``)."""
    event.checked()
    limits.check_aggregate_id(event.aggregate_id)
    envelope = event.envelope_json()
    try:
        body = envelope.encode()
    except UnicodeEncodeError as e:  # a lone surrogate: no UTF-8, no DynamoDB string
        raise InvalidEvent(f"the event is not valid Unicode: {e.reason}") from e
    if claim is None:
        return _item(keys, limits, shards, pk, event, envelope, None), None
    if limits.entry_size(event.event_type, event.event_id, envelope) <= limits.max_bytes:
        try:
            item = _item(keys, limits, shards, pk, event, envelope, None)
            if item_size(item) <= claim.threshold:
                return item, None
        except ItemTooLarge:
            pass
    if len(body) > MAX_PAYLOAD_BYTES:
        raise PayloadTooLarge(event.event_id, len(body), MAX_PAYLOAD_BYTES)
    sha256 = hashlib.sha256(body).hexdigest()
    offload = Offload(event.event_id, claim.bucket, f"{PAYLOAD_PREFIX}{event.event_id}/{sha256}", sha256, body)
    stub = event.envelope_json(offload.payload_ref())
    return _item(keys, limits, shards, pk, event, stub, offload.payload_ref()), offload


def _item(
    keys: KeySchema,
    limits: EventLimits,
    shards: int,
    pk: str,
    event: Event,
    envelope: str,
    payload_ref: Mapping[str, Any] | None,
) -> dict[str, Any]:
    entry = limits.entry_size(event.event_type, event.event_id, envelope)
    if entry > limits.max_bytes:
        raise EventTooLarge(event.event_id, entry, limits.max_bytes)
    item: dict[str, Any] = {
        "PK": {"S": pk},
        "SK": {"S": keys.outbox_prefix + event.event_id},
        "eventId": {"S": event.event_id},
        "eventType": {"S": event.event_type},
        "aggregateId": {"S": event.aggregate_id},
        "aggregateVersion": {"N": str(event.aggregate_version)},
        "envelope": {"S": envelope},
        "createdAt": {"S": rfc3339_ms(ulid_ms(event.event_id))},
        "attempts": {"N": "0"},
        "GSI1PK": {"S": keys.pending_pk(shard_of(event.aggregate_id, shards))},
        "GSI1SK": {"S": event.event_id},
    }
    if payload_ref is not None:
        item["payloadRef"] = {
            "M": {
                "bucket": {"S": payload_ref["bucket"]},
                "key": {"S": payload_ref["key"]},
                "sha256": {"S": payload_ref["sha256"]},
                "size": {"N": str(payload_ref["size"])},
            }
        }
    if event.traceparent is not None:
        item["traceparent"] = {"S": event.traceparent}
    if keys.home_region is not None:
        item["homeRegion"] = {"S": keys.home_region}
    renames = keys.renames()
    item = {renames.get(k, k): v for k, v in item.items()}
    size = item_size(item)
    if size > MAX_ITEM_BYTES:
        raise ItemTooLarge(event.event_id, size, MAX_ITEM_BYTES)
    return item
