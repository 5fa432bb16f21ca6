// The package's own promise beside the vectors: a cancelled transaction says
// which condition failed, with the item as it was (the real call is tested
// against DynamoDB Local by the workspace's tests).

import assert from "node:assert/strict";
import { test } from "node:test";
import { TransactionCanceledException, type DynamoDBClient } from "@aws-sdk/client-dynamodb";

import { ConditionFailed, EventLimits, OutboxSettings, OutboxTransaction } from "../src/index.js";

test("a cancelled condition names its action and the old item", async () => {
  const cancelled = new TransactionCanceledException({
    message: "Transaction cancelled",
    $metadata: {},
    CancellationReasons: [{ Code: "ConditionalCheckFailed", Item: { PK: { S: "ORDER#1" } } }, { Code: "None" }],
  });
  const client = { send: async () => Promise.reject(cancelled) } as unknown as DynamoDBClient;
  const tx = new OutboxTransaction(OutboxSettings.of("orders", EventLimits.eventbridge(), 8))
    .put("order", { TableName: "orders", Item: { PK: { S: "ORDER#1" }, SK: { S: "META" } }, ConditionExpression: "attribute_not_exists(PK)" })
    .event("ORDER#1", { eventType: "OrderCreated", aggregateType: "Order", aggregateId: "1", aggregateVersion: 1, payload: {} });
  await assert.rejects(tx.send(client), (e: unknown) => {
    assert.ok(e instanceof ConditionFailed);
    assert.deepEqual(e.failedCondition("order")?.item, { PK: { S: "ORDER#1" } });
    return true;
  });
});
