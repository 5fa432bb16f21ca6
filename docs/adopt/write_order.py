"""Writes an order and its event in one DynamoDB transaction, following only
the outbox item contract in docs/adopt.md. The stack publishes the event
exactly as it publishes the Rust writer's.

    python write_order.py --table T create ORDER_ID --total 12.50
    python write_order.py --table T pay ORDER_ID

Needs boto3 and the usual AWS configuration (region, credentials, and for a
local run AWS_ENDPOINT_URL_DYNAMODB). OUTBOX_SHARDS and the key schema
(PARTITION_KEY, SORT_KEY, OUTBOX_PREFIX, PENDING_INDEX_PARTITION_KEY,
PENDING_INDEX_SORT_KEY) are read from the same variables as the stack's
functions, with the same defaults.
"""

import argparse
import json
import os
import secrets
import sys
import threading
import time
from datetime import datetime, timezone

import boto3

# docs/adopt.md, "The outbox item" and "Your table's names".
PK = os.environ.get("PARTITION_KEY") or "PK"
SK = os.environ.get("SORT_KEY") or "SK"
OUTBOX_PREFIX = os.environ.get("OUTBOX_PREFIX") or "OUTBOX#"
PENDING_PK = os.environ.get("PENDING_INDEX_PARTITION_KEY") or "GSI1PK"
PENDING_SK = os.environ.get("PENDING_INDEX_SORT_KEY") or "GSI1SK"
CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

_last = (0, 0)
_lock = threading.Lock()


def new_event_id():
    """A ULID, strictly greater than the previous one of this process (two
    events of one aggregate in one millisecond keep their order)."""
    global _last
    with _lock:
        ms = int(time.time() * 1000)
        last_ms, last_rand = _last
        if ms <= last_ms:
            ms, rand = last_ms, last_rand + 1
            if rand >= 1 << 80:
                ms, rand = ms + 1, secrets.randbits(79)
        else:
            rand = secrets.randbits(79)
        _last = (ms, rand)
    value = (ms << 80) | rand
    return "".join(CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


def event_time(event_id):
    """The ULID's time, RFC 3339 UTC with milliseconds (`occurredAt`)."""
    ms = 0
    for ch in event_id[:10]:
        ms = ms * 32 + CROCKFORD.index(ch)
    t = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def shard_of(aggregate_id, shards):
    """FNV-1a (64 bit) of the aggregate id's UTF-8 bytes, modulo the shards."""
    h = 0xCBF29CE484222325
    for byte in aggregate_id.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h % shards


def envelope(event_type, aggregate_type, aggregate_id, version, payload):
    event_id = new_event_id()
    return {
        "eventId": event_id,
        "eventType": event_type,
        "schemaVersion": 1,
        "aggregateType": aggregate_type,
        "aggregateId": aggregate_id,
        "aggregateVersion": version,
        "occurredAt": event_time(event_id),
        "payload": payload,
    }


def outbox_item(pk, env, shards):
    """The outbox item of `env`, in the item collection `pk`."""
    return {
        PK: {"S": pk},
        SK: {"S": OUTBOX_PREFIX + env["eventId"]},
        "eventId": {"S": env["eventId"]},
        "eventType": {"S": env["eventType"]},
        "aggregateId": {"S": env["aggregateId"]},
        "aggregateVersion": {"N": str(env["aggregateVersion"])},
        "envelope": {"S": json.dumps(env, separators=(",", ":"))},
        "createdAt": {"S": env["occurredAt"]},
        "attempts": {"N": "0"},
        PENDING_PK: {"S": OUTBOX_PREFIX + str(shard_of(env["aggregateId"], shards))},
        PENDING_SK: {"S": env["eventId"]},
    }


def put_event(table, pk, env, shards):
    """The transaction's action that adds the event."""
    return {
        "Put": {
            "TableName": table,
            "Item": outbox_item(pk, env, shards),
            "ConditionExpression": "attribute_not_exists(#sk)",
            "ExpressionAttributeNames": {"#sk": SK},
        }
    }


def create(ddb, table, shards, order_id, total):
    pk = "ORDER#" + order_id
    order = {"orderId": order_id, "status": "PENDING", "total": total, "version": 1}
    env = envelope("OrderCreated", "Order", order_id, 1, order)
    ddb.transact_write_items(
        TransactItems=[
            {
                "Put": {
                    "TableName": table,
                    "Item": {
                        PK: {"S": pk},
                        SK: {"S": "META"},
                        "status": {"S": "PENDING"},
                        "total": {"N": str(total)},
                        "version": {"N": "1"},
                    },
                    "ConditionExpression": "attribute_not_exists(#pk)",
                    "ExpressionAttributeNames": {"#pk": PK},
                }
            },
            put_event(table, pk, env, shards),
        ]
    )
    return env["eventId"]


def pay(ddb, table, shards, order_id):
    pk = "ORDER#" + order_id
    current = ddb.get_item(
        TableName=table, Key={PK: {"S": pk}, SK: {"S": "META"}}, ConsistentRead=True
    ).get("Item")
    if current is None:
        raise SystemExit(f"no order {order_id}")
    version = int(current["version"]["N"])
    order = {"orderId": order_id, "status": "PAID", "version": version + 1}
    env = envelope("OrderPaid", "Order", order_id, version + 1, order)
    ddb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": table,
                    "Key": {PK: {"S": pk}, SK: {"S": "META"}},
                    "UpdateExpression": "SET #s = :paid, #v = :next",
                    "ConditionExpression": "#v = :version AND #s = :pending",
                    "ExpressionAttributeNames": {"#s": "status", "#v": "version"},
                    "ExpressionAttributeValues": {
                        ":paid": {"S": "PAID"},
                        ":pending": {"S": "PENDING"},
                        ":version": {"N": str(version)},
                        ":next": {"N": str(version + 1)},
                    },
                }
            },
            put_event(table, pk, env, shards),
        ]
    )
    return env["eventId"]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", required=True)
    parser.add_argument("--shards", type=int, default=int(os.environ.get("OUTBOX_SHARDS", "8")))
    commands = parser.add_subparsers(dest="command", required=True)
    created = commands.add_parser("create", help="a new order and its OrderCreated")
    created.add_argument("order_id")
    created.add_argument("--total", default="10.00")
    paid = commands.add_parser("pay", help="pays an order: OrderPaid")
    paid.add_argument("order_id")
    args = parser.parse_args(argv)
    ddb = boto3.client("dynamodb")
    if args.command == "create":
        print(create(ddb, args.table, args.shards, args.order_id, args.total))
    else:
        print(pay(ddb, args.table, args.shards, args.order_id))


if __name__ == "__main__":
    main(sys.argv[1:])
