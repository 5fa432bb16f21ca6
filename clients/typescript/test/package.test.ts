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

test("values with toJSON are written as JSON.stringify writes them; a BigInt is refused", async () => {
  const { envelopeJson } = await import("../src/contract.js");
  const { InvalidEvent } = await import("../src/errors.js");
  const at = new Date(Date.UTC(2026, 11, 1, 10, 0, 0));
  const text = envelopeJson(
    { eventType: "E", aggregateType: "A", aggregateId: "1", aggregateVersion: 1, payload: { at } },
    "01M8RGR08004HMASW9NF6YY093",
  );
  assert.ok(text.endsWith(`"payload":{"at":"2026-12-01T10:00:00.000Z"}}`), text);
  assert.throws(
    () => envelopeJson({ eventType: "E", aggregateType: "A", aggregateId: "1", aggregateVersion: 1, payload: { n: 1n } }, "01M8RGR08004HMASW9NF6YY093"),
    InvalidEvent,
  );
});

test("a stack is live for three sweep periods, an hour at least", async () => {
  const { liveWithin } = await import("../src/transaction.js");
  assert.equal(liveWithin({}), 3_600_000);
  assert.equal(liveWithin({ SWEEP_SCHEDULE: "rate(30 minutes)" }), 5_400_000);
  assert.equal(liveWithin({ SWEEP_SCHEDULE: "cron(0 * * * ? *)" }), 10_800_000);
});

test("throttling in the reasons is retryable", async () => {
  const { Throttled } = await import("../src/errors.js");
  const cancelled = new TransactionCanceledException({ message: "cancelled", $metadata: {}, CancellationReasons: [{ Code: "ThrottlingError" }] });
  const client = { send: async () => Promise.reject(cancelled) } as unknown as DynamoDBClient;
  const tx = new OutboxTransaction(OutboxSettings.of("orders", EventLimits.eventbridge(), 8)).event("ORDER#1", {
    eventType: "OrderCreated", aggregateType: "Order", aggregateId: "1", aggregateVersion: 1, payload: {},
  });
  await assert.rejects(tx.send(client), (e: unknown) => e instanceof Throttled && e.retryable);
});
