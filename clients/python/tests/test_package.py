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
    def __init__(self, response: dict[str, object]) -> None:
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
        .put(
            "order",
            {
                "TableName": "orders",
                "Item": {"PK": {"S": "ORDER#1"}, "SK": {"S": "META"}},
                "ConditionExpression": "attribute_not_exists(PK)",
            },
        )
        .event("ORDER#1", "OrderCreated", "Order", "1", 1, {})
    )
    with pytest.raises(ConditionFailed) as refused:
        tx.send(_Client())
    failed = refused.value.failed_condition("order")
    assert failed is not None and failed.item == {"PK": {"S": "ORDER#1"}}


def test_names_regions_and_versions_are_checked_whole() -> None:
    from typing import Any

    from dynamodb_outbox import InvalidEvent, InvalidSettings, KeySchema

    settings = OutboxSettings("orders", EventLimits.eventbridge(), 8)
    bad: list[tuple[str, Any, Any]] = [
        ("OrderCreated\n", 1, 1),  # a trailing newline is no name
        ("OrderCreated", 1.5, 1),
        ("OrderCreated", True, 1),
        ("OrderCreated", 1, 2.0),
    ]
    for event_type, version, schema_version in bad:
        tx = OutboxTransaction(settings).event(
            "ORDER#1", event_type, "Order", "1", version, {}, schema_version=schema_version
        )
        with pytest.raises(InvalidEvent):
            tx.build()
    with pytest.raises(InvalidSettings):
        KeySchema().with_home_region("eu-west-1\n")
    with pytest.raises(InvalidSettings):
        OutboxSettings("orders", EventLimits.eventbridge(), 8.0)  # type: ignore[arg-type]


def test_throttling_in_the_reasons_is_retryable() -> None:
    from dynamodb_outbox import Throttled

    class Client(_Client):
        def transact_write_items(self, **request: object) -> None:
            raise _Canceled({"CancellationReasons": [{"Code": "ThrottlingError"}, {"Code": "None"}]})

    tx = OutboxTransaction(OutboxSettings("orders", EventLimits.eventbridge(), 8)).event(
        "ORDER#1", "OrderCreated", "Order", "1", 1, {}
    )
    with pytest.raises(Throttled) as refused:
        tx.send(Client())
    assert refused.value.retryable


def test_a_stack_is_live_for_three_sweep_periods_an_hour_at_least() -> None:
    from datetime import timedelta

    from dynamodb_outbox.transaction import _live_within

    assert _live_within({}) == timedelta(hours=1)
    assert _live_within({"SWEEP_SCHEDULE": "rate(30 minutes)"}) == timedelta(minutes=90)
    assert _live_within({"SWEEP_SCHEDULE": "cron(0 * * * ? *)"}) == timedelta(hours=3)


def test_the_sink_is_read_from_the_variables_as_the_rust_writer_reads_it() -> None:
    from dynamodb_outbox import InvalidEvent, InvalidSettings
    from dynamodb_outbox._contract import EVENTBRIDGE_MAX_BYTES

    bus = EventLimits.from_variables({"SINK": "eventbridge-bus", "EVENT_SOURCE": "shop.orders"})
    assert bus == EventLimits("eventbridge-bus", EVENTBRIDGE_MAX_BYTES, source="shop.orders")
    assert EventLimits.from_variables({"SINK": "eventbridge-bus"}).source == "outbox.orders"
    assert EventLimits.from_variables({"SINK": "eventbridge-bus", "MAX_EVENT_BYTES": "2048"}).max_bytes == 2048
    # The classic entry, its deduplication id (the event id) and 128 bytes
    # for its event group.
    assert bus.entry_size("Type", "01J", "{}") == 11 + 4 + 2 + 3 + 128
    assert EventLimits.eventbridge("shop.orders").entry_size("Type", "01J", "{}") == 11 + 4 + 2
    # An event group id: 1 to 128 bytes of any characters.
    for group in ("has space", "é" * 64, "a" * 128):
        bus.check_aggregate_id(group)
    for group in ("", "é" * 65, "東" * 43, "a" * 129):
        with pytest.raises(InvalidEvent, match="event group id"):
            bus.check_aggregate_id(group)
    with pytest.raises(InvalidSettings, match="EVENT_SOURCE"):
        EventLimits.from_variables({"SINK": "eventbridge-bus", "EVENT_SOURCE": "é" * 129})  # 258 bytes
    with pytest.raises(InvalidSettings, match="MAX_EVENT_BYTES"):
        EventLimits.from_variables({"SINK": "eventbridge-bus", "MAX_EVENT_BYTES": "1023"})
    # Parsed as the Rust writer parses it: trimmed, an optional `+`, ASCII digits only.
    for raw in (" 2048", "+2048", "2048 "):
        assert EventLimits.from_variables({"MAX_EVENT_BYTES": raw}).max_bytes == 2048
    for raw in ("²", "١٠٢٤", "2e3", "-2048", "20 48"):
        with pytest.raises(InvalidSettings, match="MAX_EVENT_BYTES"):
            EventLimits.from_variables({"MAX_EVENT_BYTES": raw})
    for sink in ("eventbridge", "eventbridge-bus"):
        with pytest.raises(InvalidSettings, match="aws. prefix"):
            EventLimits.from_variables({"SINK": sink, "EVENT_SOURCE": "aws.orders"})
    with pytest.raises(InvalidSettings) as refused:
        EventLimits.from_variables({"SINK": "eventbridgev2"})
    assert "expected `eventbridge`, `eventbridge-bus` or `sns`" in str(refused.value)


def test_a_custom_event_bus_counts_the_event_id_and_the_group_in_an_entry() -> None:
    from typing import Any

    from dynamodb_outbox import EventTooLarge, InvalidEvent

    classic = OutboxSettings("orders", EventLimits.eventbridge(max_bytes=1024), 8)
    bus = OutboxSettings("orders", EventLimits.eventbridge_bus(max_bytes=1024), 8)

    def order(settings: OutboxSettings, pad: int, aggregate_id: str = "1") -> list[dict[str, Any]]:
        tx = OutboxTransaction(settings).event("ORDER#1", "OrderCreated", "Order", aggregate_id, 1, {"pad": "x" * pad})
        return tx.build()

    envelope = order(classic, 0)[0]["Put"]["Item"]["envelope"]["S"]
    # 60 bytes under the limit as a classic entry (the time's fraction moves
    # it by 4 at most), 94 over as the bus's.
    pad = 1024 - 60 - EventLimits.eventbridge().entry_size("OrderCreated", "", envelope)
    order(classic, pad)
    with pytest.raises(EventTooLarge):
        order(bus, pad)
    with pytest.raises(InvalidEvent):
        order(bus, 0, "東" * 43)
    order(bus, 0, "o 1 ✓")
