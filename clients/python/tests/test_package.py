"""The package's own promises: its version is the workspace's, ids are
strictly increasing, and a cancelled transaction says which condition
failed."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from dynamodb_outbox import (
    ConditionFailed,
    EventLimits,
    MonotonicIds,
    OutboxSettings,
    OutboxTransaction,
)
from dynamodb_outbox._contract import ulid_ms

ROOT = Path(__file__).resolve().parents[3]


def test_the_version_is_the_workspaces() -> None:
    workspace = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["package"]["version"]
    package = tomllib.loads((ROOT / "clients/python/pyproject.toml").read_text())["project"]["version"]
    assert package == workspace


def test_ids_increase_within_a_millisecond_and_when_the_clock_steps_back() -> None:
    times = iter([1000, 1000, 1000, 999, 1001])
    ids = MonotonicIds(clock=lambda: next(times))
    made = [ids.next() for _ in range(5)]
    assert made == sorted(made) and len(set(made)) == 5
    assert [ulid_ms(i) for i in made] == [1000, 1000, 1000, 1000, 1001]


class _Canceled(Exception):
    def __init__(self, response: dict) -> None:
        super().__init__("cancelled")
        self.response = response


class _Client:
    """A boto3 client's shape for one cancelled call (the real call is
    tested against DynamoDB Local by the workspace's tests)."""

    class exceptions:  # noqa: N801
        TransactionCanceledException = _Canceled

    def transact_write_items(self, **request: object) -> None:
        raise _Canceled(
            {
                "CancellationReasons": [
                    {"Code": "ConditionalCheckFailed", "Item": {"PK": {"S": "ORDER#1"}}},
                    {"Code": "None"},
                ]
            }
        )


def test_a_cancelled_condition_names_its_action_and_the_old_item() -> None:
    settings = OutboxSettings("orders", EventLimits.eventbridge(), 8)
    tx = (
        OutboxTransaction(settings)
        .put("order", {"TableName": "orders", "Item": {"PK": {"S": "ORDER#1"}, "SK": {"S": "META"}}, "ConditionExpression": "attribute_not_exists(PK)"})
        .event("ORDER#1", "OrderCreated", "Order", "1", 1, {})
    )
    with pytest.raises(ConditionFailed) as refused:
        tx.send(_Client())
    failed = refused.value.failed_condition("order")
    assert failed is not None and failed.item == {"PK": {"S": "ORDER#1"}}
