#!/usr/bin/env bash
# The writer packages as published: `python -m build` (a wheel and an
# sdist) and `npm pack` (a tarball), each installed from its built file into
# a clean environment (a new venv; a new npm project), which writes one
# order and its event into DynamoDB Local and reads both back. Run under
# infra/local/with-local.sh (loopback endpoints, dummy credentials).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
version=${1:?usage: clients-check.sh VERSION}
: "${AWS_ENDPOINT_URL_DYNAMODB:?run under infra/local/with-local.sh}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Python: build, then install the wheel alone (boto3 from the pins).
"$root/.venv-clients/bin/python" -m build --outdir "$work/dist" "$root/clients/python" >"$work/build.log" 2>&1 \
  || { cat "$work/build.log" >&2; exit 1; }
wheel="$work/dist/dynamodb_outbox-$version-py3-none-any.whl"
test -f "$wheel" || { echo "clients-check: no $wheel" >&2; ls "$work/dist" >&2; exit 1; }
test -f "$work/dist/dynamodb_outbox-$version.tar.gz"
python3 -m venv "$work/py"
"$work/py/bin/pip" install --quiet --disable-pip-version-check "$wheel" -c "$root/clients/python/constraints-test.txt"
table="clients-check-$$-$(date +%s)"
"$work/py/bin/python" - "$table" <<'PY'
import sys, boto3
from dynamodb_outbox import EventLimits, OutboxSettings, OutboxTransaction

table = sys.argv[1]
client = boto3.client("dynamodb")
client.create_table(TableName=table, BillingMode="PAY_PER_REQUEST",
    AttributeDefinitions=[{"AttributeName": "PK", "AttributeType": "S"}, {"AttributeName": "SK", "AttributeType": "S"}],
    KeySchema=[{"AttributeName": "PK", "KeyType": "HASH"}, {"AttributeName": "SK", "KeyType": "RANGE"}])
settings = OutboxSettings(table, EventLimits.eventbridge(), 8)
ids = (OutboxTransaction(settings)
    .put("order", {"TableName": table, "Item": {"PK": {"S": "ORDER#1"}, "SK": {"S": "META"}}})
    .event("ORDER#1", "OrderCreated", "Order", "1", 1, {"orderId": "1"})
    .send(client))
items = client.query(TableName=table, KeyConditionExpression="PK = :pk",
    ExpressionAttributeValues={":pk": {"S": "ORDER#1"}}, ConsistentRead=True)["Items"]
assert sorted(i["SK"]["S"] for i in items) == ["META", "OUTBOX#" + ids[0]], items
client.delete_table(TableName=table)
print(f"clients-check: the Python wheel wrote an order and its event {ids[0]}")
PY

# TypeScript: build and pack, then install the tarball into a new project.
(cd "$root/clients/typescript" && npm run --silent build && npm pack --silent --pack-destination "$work" >/dev/null)
tarball="$work/dynamodb-outbox-$version.tgz"
test -f "$tarball" || { echo "clients-check: no $tarball" >&2; ls "$work" >&2; exit 1; }
mkdir "$work/ts" && cd "$work/ts"
npm init -y >/dev/null
npm pkg set type=module >/dev/null
npm install --no-audit --no-fund --loglevel=error "$tarball" >/dev/null
node - "$table-ts" <<'JS'
import { CreateTableCommand, DeleteTableCommand, DynamoDBClient, QueryCommand, waitUntilTableExists } from "@aws-sdk/client-dynamodb";
import { EventLimits, OutboxSettings, OutboxTransaction } from "dynamodb-outbox";
const table = process.argv[2];
const client = new DynamoDBClient({});
await client.send(new CreateTableCommand({ TableName: table, BillingMode: "PAY_PER_REQUEST",
  AttributeDefinitions: [{ AttributeName: "PK", AttributeType: "S" }, { AttributeName: "SK", AttributeType: "S" }],
  KeySchema: [{ AttributeName: "PK", KeyType: "HASH" }, { AttributeName: "SK", KeyType: "RANGE" }] }));
await waitUntilTableExists({ client, maxWaitTime: 30 }, { TableName: table });
const settings = OutboxSettings.of(table, EventLimits.eventbridge(), 8);
const [id] = await new OutboxTransaction(settings)
  .put("order", { TableName: table, Item: { PK: { S: "ORDER#1" }, SK: { S: "META" } } })
  .event("ORDER#1", { eventType: "OrderCreated", aggregateType: "Order", aggregateId: "1", aggregateVersion: 1, payload: { orderId: "1" } })
  .send(client);
const { Items } = await client.send(new QueryCommand({ TableName: table, KeyConditionExpression: "PK = :pk",
  ExpressionAttributeValues: { ":pk": { S: "ORDER#1" } }, ConsistentRead: true }));
const sks = Items.map((i) => i.SK.S).sort();
if (JSON.stringify(sks) !== JSON.stringify(["META", `OUTBOX#${id}`])) throw new Error(JSON.stringify(sks));
await client.send(new DeleteTableCommand({ TableName: table }));
console.log(`clients-check: the npm tarball wrote an order and its event ${id}`);
JS
