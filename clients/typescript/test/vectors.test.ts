// The contract vectors the Rust writer generates
// (schemas/contract-vectors.v1.json), reproduced byte for byte.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  ClaimCheck,
  DEFAULT_KEYS,
  EventLimits,
  OutboxError,
  OutboxSettings,
  OutboxTransaction,
  keySchemaFromVariables,
  shardOf,
  type Event,
} from "../src/index.js";
import * as contract from "../src/contract.js";

const root = new URL("../../../../", import.meta.url);
const vectors = JSON.parse(readFileSync(new URL("schemas/contract-vectors.v1.json", root), "utf8"));

// The vectors: untyped JSON.
type Json = any;

function settingsOf(s: Json): OutboxSettings {
  const sink = s.sink;
  const limits =
    sink.kind === "sns"
      ? EventLimits.sns(sink.fifo, sink.maxBytes ?? undefined)
      : sink.kind === "eventbridge-bus"
        ? EventLimits.eventbridgeBus(sink.source, sink.maxBytes ?? undefined)
        : EventLimits.eventbridge(sink.source, sink.maxBytes ?? undefined);
  const keys = keySchemaFromVariables(s.keys ?? {});
  if (s.homeRegion) keys.homeRegion = s.homeRegion;
  const claim = s.claimCheck ? ClaimCheck.of(s.claimCheck.bucket, s.claimCheck.thresholdBytes) : undefined;
  return OutboxSettings.of(s.table, limits, s.shards, keys, claim);
}

function eventOf(e: Json): Event {
  return {
    eventType: e.eventType,
    aggregateType: e.aggregateType,
    aggregateId: e.aggregateId,
    aggregateVersion: e.aggregateVersion,
    payload:
      e.payloadText !== undefined
        ? JSON.parse(e.payloadText) // the writer's own key order
        : e.payloadPadding !== undefined
          ? { pad: "x".repeat(e.payloadPadding) }
          : e.payload,
    schemaVersion: e.schemaVersion,
    traceparent: e.traceparent ?? undefined,
  };
}

for (const vector of vectors.events) {
  test(`event: ${vector.name}`, () => {
    const expect = vector.expect;
    let put: Json;
    let objects: Json[];
    try {
      const tx = new OutboxTransaction(settingsOf(vector.settings)).eventWithId(
        vector.event.pk,
        eventOf(vector.event),
        vector.event.eventId,
      );
      put = tx.build()[0]?.Put;
      objects = tx.offloads.map((o) => o.payloadRef);
    } catch (e) {
      if (!(e instanceof OutboxError)) throw e;
      assert.equal(e.code, expect.error, `refused with ${e.code}: ${e.message}`);
      return;
    }
    assert.ok(expect.put, `accepted; the Rust writer refuses with ${expect.error}`);
    assert.deepEqual(put, expect.put);
    assert.ok(Buffer.from(put.Item.envelope.S).equals(Buffer.from(expect.put.Item.envelope.S)), "envelope byte for byte");
    // A claim check: the object stored first, the whole envelope.
    assert.deepEqual(objects, expect.object ? [expect.object] : []);
  });
}

test("shards", () => {
  for (const v of vectors.shards) assert.equal(shardOf(v.aggregateId, v.shards), v.shard, `${v.aggregateId}/${v.shards}`);
});

for (const vector of vectors.transactions) {
  test(`transaction: ${vector.name}`, () => {
    const tx = new OutboxTransaction(OutboxSettings.of("orders", EventLimits.eventbridge("outbox.orders"), 8, { ...DEFAULT_KEYS }));
    const put = (i: number, pad = 0) => ({
      TableName: "orders",
      Item: { PK: { S: `ITEM#${i}` }, SK: { S: "META" }, ...(pad ? { pad: { S: "x".repeat(pad) } } : {}) },
    });
    if (vector.samePutTwice) tx.put("a", put(1)).put("b", put(1));
    for (let i = 0; i < vector.puts; i++) tx.put(`p${i}`, put(i, vector.putPadding ?? 0));
    for (let n = 0; n < vector.events; n++)
      tx.event("ORDER#o-tx", { eventType: "OrderCreated", aggregateType: "Order", aggregateId: "o-tx", aggregateVersion: 1 + n, payload: {} });
    if (vector.token !== undefined) tx.idempotencyToken(vector.token);
    try {
      assert.equal(tx.build().length, vector.expect.actions);
    } catch (e) {
      if (!(e instanceof OutboxError)) throw e;
      assert.equal(e.code, vector.expect.error, e.message);
    }
  });
}

test("limits are the Rust writer's", () => {
  const l = vectors.limits;
  assert.deepEqual(
    [contract.MAX_TRANSACTION_ACTIONS, contract.MAX_TRANSACTION_BYTES, contract.MAX_ITEM_BYTES, contract.EVENTBRIDGE_MAX_BYTES, contract.SNS_MAX_BYTES, contract.MAX_FIFO_GROUP_ID, contract.MAX_BUS_SYSTEM_ID],
    [l.maxTransactionActions, l.maxTransactionBytes, l.maxItemBytes, l.eventBridgeMaxBytes, l.snsMaxBytes, l.maxFifoGroupId, l.maxBusSystemId],
  );
});

test("the version is the workspace's", () => {
  const cargo = readFileSync(new URL("Cargo.toml", root), "utf8");
  const workspace = /\[workspace\.package\][^[]*?version = "([^"]+)"/.exec(cargo)?.[1];
  const pkg = JSON.parse(readFileSync(new URL("clients/typescript/package.json", root), "utf8"));
  assert.equal(pkg.version, workspace);
});

test("ids increase within a millisecond and when the clock steps back", () => {
  const times = [1000, 1000, 1000, 999, 1001];
  const ids = new contract.MonotonicIds(() => times.shift() ?? 0);
  const made = [1, 2, 3, 4, 5].map(() => ids.next());
  assert.deepEqual([...made].sort(), made);
  assert.equal(new Set(made).size, 5);
  assert.deepEqual(made.map(contract.ulidMs), [1000, 1000, 1000, 1000, 1001]);
});
