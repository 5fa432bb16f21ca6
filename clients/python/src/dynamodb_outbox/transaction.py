"""``OutboxTransaction``: your puts, updates, condition checks and deletes
and their outbox events in one ``TransactWriteItems``, every limit checked
before the call; ``OutboxSettings``: given, or read from the settings the
stack's functions record in the table."""

from __future__ import annotations

import base64
import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from . import errors
from ._contract import (
    DEFAULT_SHARDS,
    EVENT_IDS,
    MAX_TRANSACTION_ACTIONS,
    MAX_TRANSACTION_BYTES,
    ClaimCheck,
    Event,
    EventLimits,
    KeySchema,
    MonotonicIds,
    Offload,
    item_size,
    stored_item,
)

SETTINGS_PK = "OUTBOX_SETTINGS"
STACK_SETTINGS_PREFIX = "STACK#"


@dataclass(frozen=True)
class OutboxSettings:
    """Where outbox items go and how they are shaped: the table, the sink's
    limits, the pending index's shard count (``OUTBOX_SHARDS``) and the key
    schema. Prefer :meth:`from_stack`, which takes all of them from the
    stack, so a writer and its stack cannot drift apart. ``claim_check``
    (the stack's ``PAYLOAD_BUCKET``) stores events too large for an item or
    the sink in S3 first: send such a transaction with
    :meth:`OutboxTransaction.send_with_payloads`."""

    table: str
    limits: EventLimits
    shards: int = DEFAULT_SHARDS
    keys: KeySchema = field(default_factory=KeySchema)
    claim_check: ClaimCheck | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.shards, int) or isinstance(self.shards, bool) or not 1 <= self.shards <= 256:
            raise errors.InvalidSettings(f"OUTBOX_SHARDS={self.shards} is invalid: 1 to 256")

    @classmethod
    def from_variables(cls, table: str, variables: Mapping[str, str]) -> OutboxSettings:
        """The settings a stack's variables give (``OUTBOX_SHARDS``, the
        sink's, the key names, the home region), read as its functions read
        them."""
        raw = (variables.get("OUTBOX_SHARDS") or "").strip()
        if raw and not raw.isdigit():
            raise errors.InvalidSettings(f"OUTBOX_SHARDS={raw!r} is invalid: 1 to 256")
        return cls(
            table,
            EventLimits.from_variables(variables),
            int(raw) if raw else DEFAULT_SHARDS,
            KeySchema.from_variables(variables),
            ClaimCheck.from_variables(variables),
        )

    @classmethod
    def from_stack(
        cls,
        client: Any,
        table: str,
        *,
        region: str | None = None,
        stack: str | None = None,
        partition_key: str = "PK",
        sort_key: str = "SK",
    ) -> OutboxSettings:
        """Reads the settings of the outbox stack publishing from ``table``
        in ``region`` (default: the client's) from the records its functions
        write (``OUTBOX_SETTINGS`` / ``STACK#<region>#<stack>#<function>``;
        one consistent ``Query``, needs ``dynamodb:Query``). Hold the result
        for the life of the process. With several stacks in the region,
        name one (``stack``) unless exactly one of them recorded within the
        last hour; the Rust writer then also picks the one in service, this
        package refuses."""
        region = region or client.meta.region_name
        if not region:
            raise errors.StackSettingsError("no region: set the client's region or pass region=")
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = dict(
            TableName=table,
            KeyConditionExpression="#pk = :pk AND begins_with(#sk, :prefix)",
            ExpressionAttributeNames={"#pk": partition_key, "#sk": sort_key},
            ExpressionAttributeValues={":pk": {"S": SETTINGS_PK}, ":prefix": {"S": STACK_SETTINGS_PREFIX}},
            ConsistentRead=True,
        )
        try:
            for page in client.get_paginator("query").paginate(**kwargs):
                items.extend(page.get("Items", []))
        except Exception as e:  # botocore's ClientError and transport errors
            raise errors.StackSettingsError(f"cannot read the stack settings in {table}: {e}") from e
        records = [r for r in (_record(i, sort_key) for i in items) if r]
        chosen = _choose(records, region, stack, table)
        return cls.from_variables(table, chosen["variables"])


def _record(item: Mapping[str, Any], sort_key: str) -> dict[str, Any] | None:
    sk = item.get(sort_key, {}).get("S", "")
    if not sk.startswith(STACK_SETTINGS_PREFIX):
        return None
    variables = {k: v["S"] for k, v in item.get("variables", {}).get("M", {}).items() if "S" in v}
    parts = sk[len(STACK_SETTINGS_PREFIX) :].split("#", 2)
    if len(parts) == 3:
        region, stack, function = parts
    elif len(parts) == 2:
        (region, function), stack = parts, variables.get("STACK_NAME", "")
    else:
        return None
    by = item.get("recordedBy", {}).get("S", "")
    at = None
    if " at " in by:
        try:
            at = datetime.fromisoformat(by.rsplit(" at ", 1)[1].replace("Z", "+00:00"))
        except ValueError:
            at = None
    return {"region": region, "stack": stack, "function": function, "at": at, "variables": variables}


def _choose(records: list[dict[str, Any]], region: str, wanted: str | None, table: str) -> dict[str, Any]:
    if not records:
        raise errors.StackSettingsError(
            f"{table}: no outbox stack recorded its settings in the table"
            " (its publisher and sweeper record them when they start: have they run?)"
        )
    here = [r for r in records if r["region"] == region]
    if not here:
        found = ", ".join(sorted({r["region"] for r in records}))
        raise errors.StackSettingsError(
            f"{table}: the table holds the settings of outbox stacks in {found} but none in {region}"
        )
    best: dict[str, dict[str, Any]] = {}
    epoch = datetime.min.replace(tzinfo=UTC)
    for r in here:  # per stack: the sweeper's, the latest
        rank = (r["function"] == "sweeper", r["at"] or epoch)
        b = best.get(r["stack"])
        if b is None or rank > (b["function"] == "sweeper", b["at"] or epoch):
            best[r["stack"]] = r
    if wanted is not None:
        if wanted not in best:
            raise errors.StackSettingsError(
                f"{table}: no outbox stack named {wanted!r} recorded its settings in {region}"
                f" (recorded: {', '.join(sorted(best))})"
            )
        return best[wanted]
    if len(best) == 1:
        return next(iter(best.values()))
    now = datetime.now(UTC)
    live = [r for r in best.values() if r["at"] and now - r["at"] < _live_within(r["variables"])]
    if len(live) == 1:
        return live[0]
    raise errors.StackSettingsError(
        f"{table}: {len(best)} outbox stacks recorded their settings in {region}:"
        f" {', '.join(sorted(best))}; name one (stack=)"
    )


def _live_within(variables: Mapping[str, str]) -> timedelta:
    """How long after its last record a stack counts as live: three periods
    of its ``SWEEP_SCHEDULE`` (a ``cron(...)`` counting as an hour), an hour
    at least (the Rust writer's ``RecordedSettings::live_within``)."""
    schedule = (variables.get("SWEEP_SCHEDULE") or "").strip()
    period = timedelta(minutes=5)
    if schedule.startswith("cron(") and schedule.endswith(")"):
        period = timedelta(hours=1)
    else:
        m = re.fullmatch(r"rate\(\s*([1-9][0-9]*) (minute|minutes|hour|hours|day|days)\s*\)", schedule)
        if m:
            unit = {"minute": 60, "hour": 3600, "day": 86400}[m.group(2).rstrip("s")]
            period = timedelta(seconds=int(m.group(1)) * unit)
    return max(3 * period, timedelta(hours=1))


_ACTIONS = ("Put", "Update", "ConditionCheck", "Delete")


@dataclass
class _Action:
    label: str
    item: dict[str, Any]
    identity: str | None
    size: int


class OutboxTransaction:
    """One ``TransactWriteItems`` of your actions plus outbox events.

    Actions are boto3's low-level shapes (``{"TableName": ..., "Item": {"PK":
    {"S": ...}}, ...}``). Errors of the builder methods are kept and raised by
    :meth:`build` and :meth:`send`, so calls chain. Every action asks for the
    old item when its condition fails (``ALL_OLD``), so
    :class:`~dynamodb_outbox.errors.ConditionFailed` says which condition
    failed and on what, without another read.

    Each event's id is made when :meth:`event` is called: call it after the
    read your conditions check, so ids increase with the order of writes.
    """

    def __init__(self, settings: OutboxSettings, *, ids: MonotonicIds | None = None) -> None:
        self.settings = settings
        self._ids = ids or EVENT_IDS
        self._actions: list[_Action] = []
        self._error: errors.OutboxError | None = None
        self._token: str | None = None
        self.event_ids: list[str] = []
        self.offloads: list[Offload] = []

    def put(self, label: str, put: Mapping[str, Any]) -> OutboxTransaction:
        return self._add(label, "Put", put)

    def update(self, label: str, update: Mapping[str, Any]) -> OutboxTransaction:
        return self._add(label, "Update", update)

    def condition_check(self, label: str, check: Mapping[str, Any]) -> OutboxTransaction:
        return self._add(label, "ConditionCheck", check)

    def delete(self, label: str, delete: Mapping[str, Any]) -> OutboxTransaction:
        return self._add(label, "Delete", delete)

    def event(
        self,
        pk: str,
        event_type: str,
        aggregate_type: str,
        aggregate_id: str,
        aggregate_version: int,
        payload: Any,
        *,
        schema_version: int = 1,
        traceparent: str | None = None,
    ) -> OutboxTransaction:
        """Adds an outbox event, stored in the item collection ``pk`` (the
        aggregate's partition key) as ``<prefix><event id>``; its label is
        ``event:<event id>``."""
        ev = Event(event_type, aggregate_type, aggregate_id, aggregate_version, payload, schema_version, traceparent)
        return self._event(pk, ev, self._ids.next())

    def _event(self, pk: str, ev: Event, event_id: str) -> OutboxTransaction:
        ev = Event(**{**ev.__dict__, "event_id": event_id})
        s = self.settings
        try:
            item, offload = stored_item(s.keys, s.limits, s.shards, pk, ev, s.claim_check)
        except errors.OutboxError as e:
            self._error = self._error or e
            return self
        if offload is not None:
            self.offloads.append(offload)
        put = {
            "TableName": s.table,
            "Item": item,
            "ConditionExpression": "attribute_not_exists(#outboxSk)",
            "ExpressionAttributeNames": {"#outboxSk": s.keys.sort_key},
        }
        self.event_ids.append(event_id)
        return self._add(f"event:{event_id}", "Put", put)

    def idempotency_token(self, token: str) -> OutboxTransaction:
        """Makes the call idempotent for ten minutes (``ClientRequestToken``)."""
        if not 1 <= len(token) <= 36:
            self._error = self._error or errors.InvalidToken("idempotency token must be 1 to 36 characters")
        else:
            self._token = token
        return self

    def __len__(self) -> int:
        return len(self._actions)

    def _add(self, label: str, kind: str, action: Mapping[str, Any]) -> OutboxTransaction:
        copied: dict[str, Any] = dict(copy.deepcopy(action))
        copied.setdefault("ReturnValuesOnConditionCheckFailure", "ALL_OLD")
        target = copied.get("Item") if kind == "Put" else copied.get("Key")
        target = target or {}
        identity = None
        key_names = (self.settings.keys.partition_key, self.settings.keys.sort_key)
        if all(n in target for n in key_names):
            identity = copied.get("TableName", "") + "".join("\0" + repr(target[n]) for n in key_names)
        values = copied.get("ExpressionAttributeValues") or {}
        size = (
            item_size(target)
            + len(copied.get("UpdateExpression", "").encode())
            + len(copied.get("ConditionExpression", "").encode())
            + item_size(values)
        )
        self._actions.append(_Action(label, {kind: copied}, identity, size))
        return self

    def build(self) -> list[dict[str, Any]]:
        """Checks every limit; returns the ``TransactItems`` that
        :meth:`send` would send."""
        if self._error is not None:
            raise self._error
        if not self._actions:
            raise errors.Empty("the transaction has no actions")
        if len(self._actions) > MAX_TRANSACTION_ACTIONS:
            raise errors.TooManyActions(len(self._actions), MAX_TRANSACTION_ACTIONS)
        total = sum(a.size for a in self._actions)
        if total > MAX_TRANSACTION_BYTES:
            raise errors.TooLarge(total, MAX_TRANSACTION_BYTES)
        seen: dict[str, str] = {}
        for a in self._actions:
            if a.identity is not None:
                if a.identity in seen:
                    raise errors.DuplicateItem(seen[a.identity], a.label)
                seen[a.identity] = a.label
        return [a.item for a in self._actions]

    def send(self, client: Any) -> list[str]:
        """Sends the transaction (one ``TransactWriteItems``) with a boto3
        DynamoDB client; returns the ids of the events written. A cancelled
        transaction raises :class:`~dynamodb_outbox.errors.ConditionFailed`
        (with each failed action's old item), ``Conflict`` or ``Rejected``;
        nothing was written. A transaction holding a claim-checked event
        raises :class:`~dynamodb_outbox.errors.NoPayloadStore`: see
        :meth:`send_with_payloads`."""
        items = self.build()
        if self.offloads:
            raise errors.NoPayloadStore(self.offloads[0].event_id)
        return self._commit(client, items)

    def send_with_payloads(self, client: Any, s3: Any) -> list[str]:
        """Stores the whole envelope of every claim-checked event with the
        boto3 S3 client ``s3`` (one ``PutObject`` each, in order, S3 checking
        its ``ChecksumSHA256``), then sends the transaction as :meth:`send`
        does. A failed upload raises
        :class:`~dynamodb_outbox.errors.PayloadNotStored` before anything is
        committed; a transaction cancelled afterwards leaves orphan objects
        (the bucket's lifecycle rule expires them), never an item without
        its object."""
        items = self.build()
        for o in self.offloads:
            try:
                s3.put_object(
                    Bucket=o.bucket,
                    Key=o.key,
                    Body=o.body,
                    ContentType="application/json",
                    ChecksumSHA256=base64.b64encode(bytes.fromhex(o.sha256)).decode(),
                )
            except Exception as e:  # botocore's ClientError and transport errors
                raise errors.PayloadNotStored(o.event_id, str(e), _transient(e)) from e
        return self._commit(client, items)

    def _commit(self, client: Any, items: list[dict[str, Any]]) -> list[str]:
        request: dict[str, Any] = {"TransactItems": items}
        if self._token is not None:
            request["ClientRequestToken"] = self._token
        try:
            client.transact_write_items(**request)
        except client.exceptions.TransactionCanceledException as e:
            raise self._cancelled(e.response) from e
        return list(self.event_ids)

    def _cancelled(self, response: Mapping[str, Any]) -> errors.TransactionError:
        reasons = response.get("CancellationReasons") or []
        failed = [
            errors.FailedCondition(i, self._actions[i].label, r.get("Item"))
            for i, r in enumerate(reasons)
            if r.get("Code") == "ConditionalCheckFailed" and i < len(self._actions)
        ]
        if failed:
            return errors.ConditionFailed(failed)
        for i, r in enumerate(reasons):
            code = r.get("Code")
            if code == "TransactionConflict" and i < len(self._actions):
                return errors.Conflict(self._actions[i].label)
            if code in ("ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"):
                return errors.Throttled("request was throttled; retry later")
            if code not in (None, "None"):
                return errors.Rejected(code, r.get("Message", ""))
        message = response.get("Error", {}).get("Message", "")
        return errors.Rejected("TransactionCanceled", message)


def _transient(e: Exception) -> bool:
    """Whether an S3 call's failure may pass: throttling, a 5xx, or no
    answer at all (botocore's connection and timeout errors)."""
    response = getattr(e, "response", None)
    if not isinstance(response, Mapping):
        return True
    code = str(response.get("Error", {}).get("Code", ""))
    status = int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
    return status >= 500 or code in ("SlowDown", "Throttling", "ThrottlingException", "RequestTimeout")
