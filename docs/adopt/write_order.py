"""Writes an order and its event in one DynamoDB transaction with the Python
writer package (clients/python, `dynamodb_outbox`). The stack publishes the
event exactly as it publishes the Rust writer's.

    python write_order.py --table T create ORDER_ID --total 12.50
    python write_order.py --table T pay ORDER_ID

Needs the package (with boto3) and the usual AWS configuration (region,
credentials, and for a local run AWS_ENDPOINT_URL_DYNAMODB). OUTBOX_SHARDS,
the key schema (PARTITION_KEY, SORT_KEY, OUTBOX_PREFIX, PENDING_INDEX_*),
HOME_REGION and the sink (SINK, EVENT_SOURCE, SNS_TOPIC_ARN,
MAX_EVENT_BYTES) are read from the same variables as the stack's functions,
with the same defaults; `OutboxSettings.from_stack(client, table)` reads
them from the table instead.
"""

import argparse
import os
import sys

import boto3

from dynamodb_outbox import OutboxSettings, OutboxTransaction


def settings(table):
    """The stack's settings, from the same variables as its functions."""
    return OutboxSettings.from_variables(table, os.environ)


def create(ddb, s, order_id, total):
    keys = s.keys
    pk = "ORDER#" + order_id
    order = {"orderId": order_id, "status": "PENDING", "total": total, "version": 1}
    tx = (
        OutboxTransaction(s)
        .put(
            "order",
            {
                "TableName": s.table,
                "Item": {
                    keys.partition_key: {"S": pk},
                    keys.sort_key: {"S": "META"},
                    "status": {"S": "PENDING"},
                    "total": {"N": str(total)},
                    "version": {"N": "1"},
                },
                "ConditionExpression": "attribute_not_exists(#pk)",
                "ExpressionAttributeNames": {"#pk": keys.partition_key},
            },
        )
        .event(pk, "OrderCreated", "Order", order_id, 1, order)
    )
    return tx.send(ddb)[0]


def pay(ddb, s, order_id):
    keys = s.keys
    pk = "ORDER#" + order_id
    key = {keys.partition_key: {"S": pk}, keys.sort_key: {"S": "META"}}
    current = ddb.get_item(TableName=s.table, Key=key, ConsistentRead=True).get("Item")
    if current is None:
        raise SystemExit(f"no order {order_id}")
    version = int(current["version"]["N"])
    order = {"orderId": order_id, "status": "PAID", "version": version + 1}
    # The event after the read the condition checks: its id is made now.
    tx = (
        OutboxTransaction(s)
        .update(
            "order",
            {
                "TableName": s.table,
                "Key": key,
                "UpdateExpression": "SET #s = :paid, #v = :next",
                "ConditionExpression": "#v = :version AND #s = :pending",
                "ExpressionAttributeNames": {"#s": "status", "#v": "version"},
                "ExpressionAttributeValues": {
                    ":paid": {"S": "PAID"},
                    ":pending": {"S": "PENDING"},
                    ":version": {"N": str(version)},
                    ":next": {"N": str(version + 1)},
                },
            },
        )
        .event(pk, "OrderPaid", "Order", order_id, version + 1, order)
    )
    return tx.send(ddb)[0]


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", required=True)
    commands = parser.add_subparsers(dest="command", required=True)
    created = commands.add_parser("create", help="a new order and its OrderCreated")
    created.add_argument("order_id")
    created.add_argument("--total", default="10.00")
    paid = commands.add_parser("pay", help="pays an order: OrderPaid")
    paid.add_argument("order_id")
    args = parser.parse_args(argv)
    ddb = boto3.client("dynamodb")
    s = settings(args.table)
    if args.command == "create":
        print(create(ddb, s, args.order_id, args.total))
    else:
        print(pay(ddb, s, args.order_id))


if __name__ == "__main__":
    main(sys.argv[1:])
