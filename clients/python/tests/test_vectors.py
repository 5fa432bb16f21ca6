"""The contract vectors the Rust writer generates
(schemas/contract-vectors.v1.json), reproduced byte for byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dynamodb_outbox import (
    ClaimCheck,
    EventLimits,
    KeySchema,
    OutboxError,
    OutboxSettings,
    OutboxTransaction,
    shard_of,
)
from dynamodb_outbox._contract import Event

VECTORS = json.loads(
    (Path(__file__).resolve().parents[3] / "schemas" / "contract-vectors.v1.json").read_text(encoding="utf-8")
)


def settings_of(s: dict[str, Any]) -> OutboxSettings:
    sink = s["sink"]
    max_bytes = {"max_bytes": sink["maxBytes"]} if "maxBytes" in sink else {}
    if sink["kind"] == "sns":
        limits = EventLimits.sns(sink["fifo"], **max_bytes)
    elif sink["kind"] == "eventbridge-bus":
        limits = EventLimits.eventbridge_bus(sink["source"], **max_bytes)
    else:
        limits = EventLimits.eventbridge(sink["source"], **max_bytes)
    keys = KeySchema.from_variables(s["keys"] or {}).with_home_region(s["homeRegion"])
    claim = s.get("claimCheck")
    claim_check = ClaimCheck(claim["bucket"], claim["thresholdBytes"]) if claim else None
    return OutboxSettings(s["table"], limits, s["shards"], keys, claim_check)


def event_of(e: dict[str, Any]) -> Event:
    if "payloadText" in e:  # the writer's own key order
        payload = json.loads(e["payloadText"])
    elif "payloadPadding" in e:
        payload = {"pad": "x" * e["payloadPadding"]}
    else:
        payload = e["payload"]
    return Event(
        e["eventType"],
        e["aggregateType"],
        e["aggregateId"],
        e["aggregateVersion"],
        payload,
        e["schemaVersion"],
        e.get("traceparent"),
    )


@pytest.mark.parametrize("vector", VECTORS["events"], ids=lambda v: v["name"])
def test_event_vectors(vector: dict[str, Any]) -> None:
    expect = vector["expect"]
    try:
        settings = settings_of(vector["settings"])
        tx = OutboxTransaction(settings)._event(
            vector["event"]["pk"], event_of(vector["event"]), vector["event"]["eventId"]
        )
        actions = tx.build()
    except OutboxError as e:
        assert "error" in expect, f"refused with {e.code}: {e}"
        assert e.code == expect["error"]
        return
    assert "put" in expect, f"accepted; the Rust writer refuses with {expect.get('error')}"
    put = actions[0]["Put"]
    assert put == expect["put"]
    # Byte for byte: the envelope is the text the stack publishes.
    envelope = next(v["S"] for k, v in put["Item"].items() if k == "envelope")
    assert envelope.encode() == expect["put"]["Item"]["envelope"]["S"].encode()
    # A claim check: the object stored first, the whole envelope.
    objects = [o.payload_ref() for o in tx.offloads]
    assert objects == ([expect["object"]] if "object" in expect else [])


@pytest.mark.parametrize("vector", VECTORS["shards"], ids=lambda v: f"{v['aggregateId']}/{v['shards']}")
def test_shard_vectors(vector: dict[str, Any]) -> None:
    assert shard_of(vector["aggregateId"], vector["shards"]) == vector["shard"]


@pytest.mark.parametrize("vector", VECTORS["transactions"], ids=lambda v: v["name"])
def test_transaction_vectors(vector: dict[str, Any]) -> None:
    settings = OutboxSettings("orders", EventLimits.eventbridge("outbox.orders"), 8)
    tx = OutboxTransaction(settings)

    def put(i: int, pad: int = 0) -> dict[str, Any]:
        item = {"PK": {"S": f"ITEM#{i}"}, "SK": {"S": "META"}}
        if pad:
            item["pad"] = {"S": "x" * pad}
        return {"TableName": "orders", "Item": item}

    if vector.get("samePutTwice"):
        tx.put("a", put(1)).put("b", put(1))
    for i in range(vector["puts"]):
        tx.put(f"p{i}", put(i, vector.get("putPadding", 0)))
    for n in range(vector["events"]):
        tx.event("ORDER#o-tx", "OrderCreated", "Order", "o-tx", 1 + n, {})
    if "token" in vector:
        tx.idempotency_token(vector["token"])
    expect = vector["expect"]
    try:
        actions = tx.build()
    except OutboxError as e:
        assert e.code == expect.get("error"), str(e)
        return
    assert len(actions) == expect["actions"]


def test_limits_are_the_rust_writers() -> None:
    from dynamodb_outbox import _contract as c

    limits = VECTORS["limits"]
    assert (c.MAX_TRANSACTION_ACTIONS, c.MAX_TRANSACTION_BYTES, c.MAX_ITEM_BYTES) == (
        limits["maxTransactionActions"],
        limits["maxTransactionBytes"],
        limits["maxItemBytes"],
    )
    assert (c.EVENTBRIDGE_MAX_BYTES, c.SNS_MAX_BYTES, c.MAX_FIFO_GROUP_ID) == (
        limits["eventBridgeMaxBytes"],
        limits["snsMaxBytes"],
        limits["maxFifoGroupId"],
    )
    assert c.MAX_BUS_SYSTEM_ID == limits["maxBusSystemId"]
