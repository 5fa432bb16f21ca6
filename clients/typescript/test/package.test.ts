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

test("the sink is read from the variables as the Rust writer reads it", async () => {
  const { entrySize, EVENTBRIDGE_MAX_BYTES } = await import("../src/contract.js");
  const { InvalidSettings } = await import("../src/errors.js");
  const bus = EventLimits.fromVariables({ SINK: "eventbridge-bus", EVENT_SOURCE: "shop.orders" });
  assert.deepEqual(bus, { kind: "eventbridge-bus", source: "shop.orders", maxBytes: EVENTBRIDGE_MAX_BYTES });
  assert.deepEqual(EventLimits.fromVariables({ SINK: "eventbridge-bus" }), EventLimits.eventbridgeBus("outbox.orders"));
  assert.equal(EventLimits.fromVariables({ SINK: "eventbridge-bus", MAX_EVENT_BYTES: "2048" }).maxBytes, 2048);
  // The classic entry, its deduplication id (the event id) and 128 bytes for
  // its event group; UTF-8 bytes, not UTF-16 units.
  assert.equal(entrySize(bus, "Type", "01J", "{}"), 11 + 4 + 2 + 3 + 128);
  assert.equal(entrySize(bus, "Type", "01J", '"é"'), 11 + 4 + 4 + 3 + 128);
  assert.equal(entrySize(EventLimits.eventbridge("shop.orders"), "Type", "01J", "{}"), 11 + 4 + 2);
  assert.throws(() => EventLimits.fromVariables({ SINK: "eventbridge-bus", EVENT_SOURCE: "é".repeat(129) }), /EVENT_SOURCE/);
  assert.throws(() => EventLimits.fromVariables({ SINK: "eventbridge-bus", MAX_EVENT_BYTES: "1023" }), /MAX_EVENT_BYTES/);
  // Parsed as the Rust writer parses it: trimmed, an optional `+`, ASCII digits only.
  for (const raw of [" 2048", "+2048", "2048 "]) assert.equal(EventLimits.fromVariables({ MAX_EVENT_BYTES: raw }).maxBytes, 2048);
  for (const raw of ["²", "١٠٢٤", "2e3", "-2048", "20 48"])
    assert.throws(() => EventLimits.fromVariables({ MAX_EVENT_BYTES: raw }), /MAX_EVENT_BYTES/);
  for (const SINK of ["eventbridge", "eventbridge-bus"])
    assert.throws(() => EventLimits.fromVariables({ SINK, EVENT_SOURCE: "aws.orders" }), /aws\. prefix/);
  assert.throws(
    () => EventLimits.fromVariables({ SINK: "eventbridgev2" }),
    (e: unknown) => e instanceof InvalidSettings && e.message.includes("expected `eventbridge`, `eventbridge-bus` or `sns`"),
  );
});

test("a Custom Event Bus counts the event id and the group in an entry; a group is 1 to 128 bytes", async () => {
  const { entrySize } = await import("../src/contract.js");
  const { EventTooLarge, InvalidEvent } = await import("../src/errors.js");
  const classic = OutboxSettings.of("orders", EventLimits.eventbridge(undefined, 1024), 8);
  const bus = OutboxSettings.of("orders", EventLimits.eventbridgeBus(undefined, 1024), 8);
  const order = (settings: OutboxSettings, pad: number, aggregateId = "1") =>
    new OutboxTransaction(settings)
      .event("ORDER#1", { eventType: "OrderCreated", aggregateType: "Order", aggregateId, aggregateVersion: 1, payload: { pad: "x".repeat(pad) } })
      .build();
  const envelope = order(classic, 0)[0]?.Put?.Item?.envelope?.S ?? "";
  // 60 bytes under the limit as a classic entry (the time's fraction moves it
  // by 4 at most), 94 over as the bus's.
  const pad = 1024 - 60 - entrySize(EventLimits.eventbridge(), "OrderCreated", "", envelope);
  order(classic, pad);
  assert.throws(() => order(bus, pad), EventTooLarge);
  for (const group of ["has space", "o 1 ✓", "é".repeat(64), "🚀".repeat(32)]) order(bus, 0, group);
  for (const group of ["東".repeat(43), "é".repeat(65), "🚀".repeat(33), "a".repeat(129)])
    assert.throws(() => order(bus, 0, group), (e: unknown) => e instanceof InvalidEvent && /event group id/.test(e.message), group);
});
