/**
 * The outbox item contract (docs/adopt.md, schemas/outbox-item.v1.schema.json):
 * event ids, the key schema, the sinks' limits, the envelope and the item,
 * as the Rust writer makes them. `test/vectors.test.ts` holds this module to
 * the contract vectors the Rust writer generates.
 */

import { createHash, randomBytes } from "node:crypto";
import type { AttributeValue } from "@aws-sdk/client-dynamodb";

import { EventTooLarge, InvalidEvent, InvalidSettings, ItemTooLarge, PayloadTooLarge } from "./errors.js";

export const MAX_ITEM_BYTES = 400 * 1024;
/** The claim check (the Rust writer's `outbox_core::claim`). */
export const CLAIM_THRESHOLD_BYTES = MAX_ITEM_BYTES - 16 * 1024;
export const MAX_PAYLOAD_BYTES = 8 * 1024 * 1024;
export const PAYLOAD_PREFIX = "outbox/";
export const MAX_TRANSACTION_BYTES = 4 * 1024 * 1024;
export const MAX_TRANSACTION_ACTIONS = 100;
export const EVENTBRIDGE_MAX_BYTES = 1024 * 1024;
export const SNS_MAX_BYTES = 256 * 1024;
export const MAX_FIFO_GROUP_ID = 128;
export const MAX_BUS_SYSTEM_ID = 128;
export const DEFAULT_EVENT_SOURCE = "outbox.orders";
export const DEFAULT_SHARDS = 8;

const utf8 = (s: string): number => Buffer.byteLength(s, "utf8");

// --- event ids ---------------------------------------------------------------

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** The ULID of a millisecond and 80 random bits. */
export function ulidOf(ms: bigint, randomness: bigint): string {
  const value = (ms << 80n) | randomness;
  let out = "";
  for (let i = 25; i >= 0; i--) out += CROCKFORD.charAt(Number((value >> BigInt(5 * i)) & 31n));
  return out;
}

/** The millisecond of a ULID. */
export function ulidMs(ulid: string): number {
  let value = 0n;
  for (const c of ulid) value = (value << 5n) | BigInt(CROCKFORD.indexOf(c));
  return Number(value >> 80n);
}

const random80 = (): bigint => BigInt("0x" + randomBytes(10).toString("hex"));

/**
 * The process's event ids: strictly increasing, so events made in one
 * millisecond still sort in creation order in the pending index; a clock
 * that steps back does not undo it.
 */
export class MonotonicIds {
  private lastMs = -1n;
  private lastRandom = 0n;
  constructor(private readonly clock: () => number = () => Date.now()) {}

  next(): string {
    const ms = BigInt(this.clock());
    if (ms > this.lastMs) {
      this.lastMs = ms;
      this.lastRandom = random80();
    } else if (this.lastRandom + 1n < 1n << 80n) {
      this.lastRandom += 1n;
    } else {
      this.lastMs += 1n;
      this.lastRandom = random80();
    }
    return ulidOf(this.lastMs, this.lastRandom);
  }
}

export const EVENT_IDS = new MonotonicIds();

/**
 * RFC 3339 in UTC as the Rust writer prints it: seconds, then the
 * millisecond fraction without trailing zeros (none when zero), then Z.
 */
export function rfc3339Ms(ms: number): string {
  const iso = new Date(ms - (ms % 1000)).toISOString().slice(0, 19);
  const fraction = String(ms % 1000).padStart(3, "0").replace(/0+$/, "");
  return iso + (fraction ? `.${fraction}` : "") + "Z";
}

// --- key schema --------------------------------------------------------------

export const VARIABLES = [
  "PARTITION_KEY",
  "SORT_KEY",
  "OUTBOX_PREFIX",
  "PENDING_INDEX",
  "PENDING_INDEX_PARTITION_KEY",
  "PENDING_INDEX_SORT_KEY",
  "DEAD_LETTER_INDEX",
  "DEAD_LETTER_INDEX_PARTITION_KEY",
  "DEAD_LETTER_INDEX_SORT_KEY",
  "TTL_ATTRIBUTE",
] as const;

const FIELDS = [
  "partitionKey",
  "sortKey",
  "outboxPrefix",
  "pendingIndex",
  "pendingPartitionKey",
  "pendingSortKey",
  "deadLetterIndex",
  "deadLetterPartitionKey",
  "deadLetterSortKey",
  "ttlAttribute",
] as const;

const ITEM_ATTRIBUTES = new Set(
  (
    "eventId homeRegion eventType aggregateId aggregateVersion heldBehind heldSince envelope " +
    "createdAt traceparent attempts nextAttemptAt lastError deadLetteredAt deadLetterReason " +
    "claimToken claimedUntil keysRepairedAt shardsHighWater variables recordedBy recordedSince"
  ).split(" "),
);

/** The table's names for the outbox and its home region (`undefined`: no regional keys). */
export interface KeySchema {
  partitionKey: string;
  sortKey: string;
  outboxPrefix: string;
  pendingIndex: string;
  pendingPartitionKey: string;
  pendingSortKey: string;
  deadLetterIndex: string;
  deadLetterPartitionKey: string;
  deadLetterSortKey: string;
  ttlAttribute: string;
  homeRegion?: string;
}

export const DEFAULT_KEYS: Readonly<KeySchema> = Object.freeze({
  partitionKey: "PK",
  sortKey: "SK",
  outboxPrefix: "OUTBOX#",
  pendingIndex: "GSI1",
  pendingPartitionKey: "GSI1PK",
  pendingSortKey: "GSI1SK",
  deadLetterIndex: "GSI2",
  deadLetterPartitionKey: "GSI2PK",
  deadLetterSortKey: "GSI2SK",
  ttlAttribute: "expiresAt",
});

type Variables = Record<string, string | undefined>;
const get = (variables: Variables, name: string): string | undefined => {
  const v = variables[name]?.trim();
  return v ? v : undefined;
};

/** The key schema from the stack's variables, as its functions read them. */
export function keySchemaFromVariables(variables: Variables): KeySchema {
  const schema: KeySchema = { ...DEFAULT_KEYS };
  VARIABLES.forEach((name, i) => {
    const v = get(variables, name);
    const field = FIELDS[i];
    if (v !== undefined && field !== undefined) schema[field] = v;
  });
  const rule = get(variables, "HOME_REGION_RULE") ?? "on";
  if (rule !== "on" && rule !== "off") throw new InvalidSettings(`HOME_REGION_RULE=${JSON.stringify(rule)} is invalid: on or off`);
  const region = rule === "on" ? get(variables, "HOME_REGION") : undefined;
  if (region !== undefined) schema.homeRegion = region;
  return validateKeys(schema);
}

/** Checks every name as the stack's functions do. */
export function validateKeys(k: KeySchema): KeySchema {
  const invalid = (name: string, value: string, reason: string) =>
    new InvalidSettings(`${name}=${JSON.stringify(value)} is invalid: ${reason}`);
  const attributes: [string, string][] = [
    ["PARTITION_KEY", k.partitionKey],
    ["SORT_KEY", k.sortKey],
    ["PENDING_INDEX_PARTITION_KEY", k.pendingPartitionKey],
    ["PENDING_INDEX_SORT_KEY", k.pendingSortKey],
    ["DEAD_LETTER_INDEX_PARTITION_KEY", k.deadLetterPartitionKey],
    ["DEAD_LETTER_INDEX_SORT_KEY", k.deadLetterSortKey],
    ["TTL_ATTRIBUTE", k.ttlAttribute],
  ];
  attributes.forEach(([name, value], i) => {
    if (utf8(value) < 1 || utf8(value) > 255) throw invalid(name, value, "an attribute name is 1 to 255 bytes");
    if (ITEM_ATTRIBUTES.has(value)) throw invalid(name, value, "the outbox item has an attribute of that name");
    const other = attributes.slice(0, i).find(([, v]) => v === value);
    if (other) throw invalid(name, value, `${other[0]} has the same name`);
  });
  for (const [name, value] of [
    ["PENDING_INDEX", k.pendingIndex],
    ["DEAD_LETTER_INDEX", k.deadLetterIndex],
  ] as const) {
    if (!/^[A-Za-z0-9_.-]{3,255}$/.test(value))
      throw invalid(name, value, "an index name is 3 to 255 characters of letters, digits, '_', '.' and '-'");
  }
  if (k.pendingIndex === k.deadLetterIndex) throw invalid("DEAD_LETTER_INDEX", k.deadLetterIndex, "PENDING_INDEX has the same name");
  const p = k.outboxPrefix;
  const chars = Array.from(p).length;
  if (chars < 1 || chars > 64 || p.includes("!") || p.includes("~"))
    throw invalid("OUTBOX_PREFIX", p, "a prefix is 1 to 64 characters, without '!' or '~'");
  if (k.homeRegion !== undefined && !/^[a-z0-9-]{1,32}$/.test(k.homeRegion))
    throw invalid("HOME_REGION", k.homeRegion, "a region is 1 to 32 lower-case letters, digits and '-'");
  return k;
}

export function pendingPk(k: KeySchema, shard: number): string {
  return `${k.outboxPrefix}${k.homeRegion ? `${k.homeRegion}#` : ""}${shard}`;
}

/** FNV-1a (64 bits) of the aggregate id's UTF-8 bytes, modulo `shards`. */
export function shardOf(aggregateId: string, shards: number): number {
  let h = 0xcbf29ce484222325n;
  for (const byte of Buffer.from(aggregateId, "utf8")) {
    h = ((h ^ BigInt(byte)) * 0x100000001b3n) & 0xffffffffffffffffn;
  }
  return Number(h % BigInt(Math.max(shards, 1)));
}

// --- sinks' limits -----------------------------------------------------------

/** What the stack's sink accepts: each event is checked against it first. */
export type EventLimits =
  | { kind: "eventbridge"; source: string; maxBytes: number }
  | { kind: "eventbridge-bus"; source: string; maxBytes: number }
  | { kind: "sns"; fifo: boolean; maxBytes: number };

export const EventLimits = {
  eventbridge(source: string = DEFAULT_EVENT_SOURCE, maxBytes: number = EVENTBRIDGE_MAX_BYTES): EventLimits {
    return { kind: "eventbridge", source, maxBytes };
  },
  /** A Custom Event Bus (`SINK=eventbridge-bus`). */
  eventbridgeBus(source: string = DEFAULT_EVENT_SOURCE, maxBytes: number = EVENTBRIDGE_MAX_BYTES): EventLimits {
    return { kind: "eventbridge-bus", source, maxBytes };
  },
  sns(fifo: boolean, maxBytes: number = SNS_MAX_BYTES): EventLimits {
    return { kind: "sns", fifo, maxBytes };
  },
  /** From the stack's `SINK`, `EVENT_SOURCE`, `SNS_TOPIC_ARN`, `MAX_EVENT_BYTES`. */
  fromVariables(variables: Variables): EventLimits {
    const max = (fallback: number): number => {
      const raw = get(variables, "MAX_EVENT_BYTES");
      if (raw === undefined) return fallback;
      // As the Rust writer parses it: trimmed, an optional `+`, ASCII digits.
      const digits = raw.trim();
      const n = /^\+?[0-9]+$/.test(digits) ? Number(digits) : NaN;
      if (!(n >= 1024 && n <= EVENTBRIDGE_MAX_BYTES))
        throw new InvalidSettings(`MAX_EVENT_BYTES=${JSON.stringify(raw)} is invalid: 1024 to ${EVENTBRIDGE_MAX_BYTES}`);
      return n;
    };
    const source = (): string => {
      const value = get(variables, "EVENT_SOURCE") ?? DEFAULT_EVENT_SOURCE;
      // Bytes, as the Rust writer counts them.
      if (utf8(value) > 256) throw new InvalidSettings(`EVENT_SOURCE is invalid: longer than 256 characters`);
      // Both buses refuse every entry of it.
      if (value.startsWith("aws."))
        throw new InvalidSettings(`EVENT_SOURCE=${JSON.stringify(value)} is invalid: the aws. prefix is reserved for AWS services`);
      return value;
    };
    const sink = get(variables, "SINK") ?? "eventbridge";
    if (sink === "eventbridge") return EventLimits.eventbridge(source(), max(EVENTBRIDGE_MAX_BYTES));
    if (sink === "eventbridge-bus") return EventLimits.eventbridgeBus(source(), max(EVENTBRIDGE_MAX_BYTES));
    if (sink === "sns") {
      const topic = get(variables, "SNS_TOPIC_ARN");
      if (topic === undefined) throw new InvalidSettings("SNS_TOPIC_ARN is required but not set");
      return EventLimits.sns(topic.endsWith(".fifo"), max(SNS_MAX_BYTES));
    }
    throw new InvalidSettings(
      `SINK=${JSON.stringify(sink)} is invalid: expected \`eventbridge\`, \`eventbridge-bus\` or \`sns\``,
    );
  },
};

/** The entry's size as the sink counts it. */
export function entrySize(limits: EventLimits, eventType: string, eventId: string, envelope: string): number {
  if (limits.kind === "sns") {
    const attributes: [string, string][] = [
      ["eventType", eventType],
      ["eventId", eventId],
    ];
    return utf8(envelope) + attributes.reduce((n, [k, v]) => n + utf8(k) + "String".length + utf8(v), 0);
  }
  const entry = utf8(limits.source) + utf8(eventType) + utf8(envelope);
  // A Custom Event Bus: its DeduplicationId (the event id) and its
  // EventGroupId (the aggregate id) counted at its largest.
  return limits.kind === "eventbridge-bus" ? entry + utf8(eventId) + MAX_BUS_SYSTEM_ID : entry;
}

function checkAggregateId(limits: EventLimits, aggregateId: string): void {
  if (limits.kind === "eventbridge-bus" && !(utf8(aggregateId) > 0 && utf8(aggregateId) <= MAX_BUS_SYSTEM_ID))
    throw new InvalidEvent(`aggregateId must be 1 to ${MAX_BUS_SYSTEM_ID} bytes to be an event group id`);
  if (limits.kind === "sns" && limits.fifo) {
    const ok =
      utf8(aggregateId) > 0 &&
      utf8(aggregateId) <= MAX_FIFO_GROUP_ID &&
      Array.from(aggregateId).every((c) => c >= "!" && c <= "~");
    if (!ok)
      throw new InvalidEvent(
        `aggregateId must be 1 to ${MAX_FIFO_GROUP_ID} letters, digits or punctuation to be an SNS FIFO message group id`,
      );
  }
}

// --- envelope and item -------------------------------------------------------

/** `00-<32 hex>-<16 hex>-<2 hex>`, ids not all zero, version not `ff`. */
export function isValidTraceparent(value: string): boolean {
  const [version, trace, parent, flags, ...rest] = value.split("-");
  if (version === undefined || trace === undefined || parent === undefined || flags === undefined || rest.length > 0)
    return false;
  const hex = (s: string, n: number) => s.length === n && /^[0-9a-f]+$/.test(s);
  return (
    hex(version, 2) &&
    version !== "ff" &&
    hex(trace, 32) &&
    /[^0]/.test(trace) &&
    hex(parent, 16) &&
    /[^0]/.test(parent) &&
    hex(flags, 2)
  );
}

/** Compares by code points (= UTF-8 byte order), as serde_json sorts keys. */
function byCodePoint(a: string, b: string): number {
  const x = Array.from(a, (c) => c.codePointAt(0) ?? 0);
  const y = Array.from(b, (c) => c.codePointAt(0) ?? 0);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const [p, q] = [x[i] ?? 0, y[i] ?? 0];
    if (p !== q) return p - q;
  }
  return x.length - y.length;
}

/** serde_json's text: no spaces, object keys sorted by code point. */
function json(value: unknown): string {
  // As JSON.stringify: a value with toJSON (a Date, a Buffer, a decimal) is
  // written as what toJSON returns.
  if (value !== null && typeof value === "object" && typeof (value as { toJSON?: unknown }).toJSON === "function") {
    return json((value as { toJSON: () => unknown }).toJSON());
  }
  if (typeof value === "bigint") throw new InvalidEvent("payload is not JSON: a BigInt (pass it as a string)");
  if (value === null || typeof value !== "object") {
    if (typeof value === "number" && !Number.isFinite(value)) throw new InvalidEvent("payload is not JSON: a number that is not finite");
    // undefined, a function or a symbol: JSON.stringify gives no text.
    const text = JSON.stringify(value) as string | undefined;
    if (text === undefined) throw new InvalidEvent("payload is not JSON");
    return text;
  }
  if (Array.isArray(value)) return "[" + value.map((v) => (v === undefined ? "null" : json(v))).join(",") + "]";
  const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
  entries.sort(([a], [b]) => byCodePoint(a, b));
  return "{" + entries.map(([k, v]) => JSON.stringify(k) + ":" + json(v)).join(",") + "}";
}

/** One outbox event: what happened to which aggregate, and its state. */
export interface Event {
  eventType: string;
  aggregateType: string;
  aggregateId: string;
  aggregateVersion: number;
  payload: unknown;
  schemaVersion?: number;
  traceparent?: string;
}

const NAME = /^[A-Za-z0-9._-]{1,128}$/;

function check(e: Event): void {
  for (const [name, value] of [
    ["eventType", e.eventType],
    ["aggregateType", e.aggregateType],
  ] as const) {
    if (!NAME.test(value)) throw new InvalidEvent(`${name} must be 1 to 128 characters of letters, digits, '.', '_' or '-'`);
  }
  if (utf8(e.aggregateId) < 1 || utf8(e.aggregateId) > 256) throw new InvalidEvent("aggregateId must be 1 to 256 bytes");
  if (e.traceparent !== undefined && !isValidTraceparent(e.traceparent))
    throw new InvalidEvent("traceparent is not a W3C traceparent value");
  const positive = (n: number | undefined, top: number) => n === undefined || (Number.isSafeInteger(n) && n >= 1 && n <= top);
  if (!positive(e.aggregateVersion, Number.MAX_SAFE_INTEGER) || !positive(e.schemaVersion, 2 ** 32 - 1))
    throw new InvalidEvent("aggregateVersion and schemaVersion are positive integers");
}

/** The envelope as the Rust writer writes it, published byte for byte. */
export function envelopeJson(e: Event, eventId: string, payloadRef?: PayloadRef): string {
  const fields: [string, unknown][] = [
    ["eventId", eventId],
    ["eventType", e.eventType],
    ["schemaVersion", e.schemaVersion ?? 1],
    ["aggregateType", e.aggregateType],
    ["aggregateId", e.aggregateId],
    ["aggregateVersion", e.aggregateVersion],
    ["occurredAt", rfc3339Ms(ulidMs(eventId))],
  ];
  if (e.traceparent !== undefined) fields.push(["traceparent", e.traceparent]);
  // A claim check's stub: `payload` null, then `payloadRef`.
  if (payloadRef === undefined) fields.push(["payload", e.payload]);
  else fields.push(["payload", null], ["payloadRef", payloadRef]);
  return "{" + fields.map(([k, v]) => JSON.stringify(k) + ":" + json(v)).join(",") + "}";
}

function numberSize(n: string): number {
  const digits = (n.split(/[eE]/)[0] ?? "").replace(/[^0-9]/g, "").length;
  return Math.ceil(digits / 2) + 1;
}

function valueSize(v: AttributeValue): number {
  if (v.S !== undefined) return utf8(v.S);
  if (v.N !== undefined) return numberSize(v.N);
  if (v.B !== undefined) return v.B.length;
  if (v.BOOL !== undefined || v.NULL !== undefined) return 1;
  if (v.SS !== undefined) return v.SS.reduce((n, s) => n + utf8(s), 0);
  if (v.NS !== undefined) return v.NS.reduce((n, s) => n + numberSize(s), 0);
  if (v.BS !== undefined) return v.BS.reduce((n, b) => n + b.length, 0);
  if (v.L !== undefined) return 3 + v.L.reduce((n, e) => n + 1 + valueSize(e), 0);
  if (v.M !== undefined) return 3 + Object.entries(v.M).reduce((n, [k, e]) => n + 1 + utf8(k) + valueSize(e), 0);
  return 64;
}

/** A DynamoDB item's size by the documented rules, as the Rust writer counts it. */
export function itemSize(item: Record<string, AttributeValue>): number {
  return Object.entries(item).reduce((n, [k, v]) => n + utf8(k) + valueSize(v), 0);
}

/**
 * The outbox item of `event` (id `eventId`) in the item collection `pk`,
 * with the table's names, checked against the sink's limits and DynamoDB's
 * item limit.
 */
/**
 * The claim check of events too large for an item or the sink
 * (`PAYLOAD_BUCKET`, `PAYLOAD_THRESHOLD_BYTES`; docs/events.md, "Large
 * events"): such an event's whole envelope is stored in the bucket first,
 * at `outbox/<eventId>/<sha256>`, and its item holds a stub.
 */
export interface ClaimCheck {
  bucket: string;
  threshold: number;
}

export const ClaimCheck = {
  of(bucket: string, threshold: number = CLAIM_THRESHOLD_BYTES): ClaimCheck {
    if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket))
      throw new InvalidSettings(
        `PAYLOAD_BUCKET=${JSON.stringify(bucket)} is invalid: not an S3 bucket name (3 to 63 lowercase letters, digits, dots and hyphens)`,
      );
    if (!Number.isInteger(threshold) || threshold < 1024 || threshold > CLAIM_THRESHOLD_BYTES)
      throw new InvalidSettings(`PAYLOAD_THRESHOLD_BYTES=${threshold} is invalid: 1024 to ${CLAIM_THRESHOLD_BYTES}`);
    return { bucket, threshold };
  },
  /** From the stack's `PAYLOAD_BUCKET` (none: off) and `PAYLOAD_THRESHOLD_BYTES`. */
  fromVariables(variables: Variables): ClaimCheck | undefined {
    const bucket = get(variables, "PAYLOAD_BUCKET");
    if (bucket === undefined) return undefined;
    const raw = get(variables, "PAYLOAD_THRESHOLD_BYTES");
    if (raw === undefined) return ClaimCheck.of(bucket.trim());
    const digits = raw.trim();
    if (!/^\+?[0-9]+$/.test(digits))
      throw new InvalidSettings(`PAYLOAD_THRESHOLD_BYTES=${JSON.stringify(raw)} is invalid: 1024 to ${CLAIM_THRESHOLD_BYTES}`);
    return ClaimCheck.of(bucket.trim(), Number(digits));
  },
};

/** Where a claim-checked event's whole envelope is (the item's `payloadRef`). */
export interface PayloadRef {
  bucket: string;
  key: string;
  sha256: string;
  size: number;
}

/** An object a transaction stores before it commits: an event's whole envelope. */
export interface Offload {
  eventId: string;
  payloadRef: PayloadRef;
  body: Buffer;
}

export function outboxItem(
  keys: KeySchema,
  limits: EventLimits,
  shards: number,
  pk: string,
  event: Event,
  eventId: string,
): Record<string, AttributeValue> {
  return storedItem(keys, limits, shards, pk, event, eventId, undefined)[0];
}

/**
 * `outboxItem` with the claim check `claim`: an event whose item would be
 * larger than its threshold, or whose entry the sink would refuse for its
 * size, becomes a stub item and the `Offload` to store before the
 * transaction (the Rust writer's `claim_checked`).
 */
export function storedItem(
  keys: KeySchema,
  limits: EventLimits,
  shards: number,
  pk: string,
  event: Event,
  eventId: string,
  claim: ClaimCheck | undefined,
): [Record<string, AttributeValue>, Offload | undefined] {
  check(event);
  checkAggregateId(limits, event.aggregateId);
  const envelope = envelopeJson(event, eventId);
  if (claim === undefined) return [item(keys, limits, shards, pk, event, eventId, envelope, undefined), undefined];
  if (entrySize(limits, event.eventType, eventId, envelope) <= limits.maxBytes) {
    try {
      const whole = item(keys, limits, shards, pk, event, eventId, envelope, undefined);
      if (itemSize(whole) <= claim.threshold) return [whole, undefined];
    } catch (e) {
      if (!(e instanceof ItemTooLarge)) throw e;
    }
  }
  const body = Buffer.from(envelope, "utf8");
  if (body.length > MAX_PAYLOAD_BYTES) throw new PayloadTooLarge(eventId, body.length, MAX_PAYLOAD_BYTES);
  const sha256 = createHash("sha256").update(body).digest("hex");
  const payloadRef: PayloadRef = { bucket: claim.bucket, key: `${PAYLOAD_PREFIX}${eventId}/${sha256}`, sha256, size: body.length };
  const stub = envelopeJson(event, eventId, payloadRef);
  return [item(keys, limits, shards, pk, event, eventId, stub, payloadRef), { eventId, payloadRef, body }];
}

function item(
  keys: KeySchema,
  limits: EventLimits,
  shards: number,
  pk: string,
  event: Event,
  eventId: string,
  envelope: string,
  payloadRef: PayloadRef | undefined,
): Record<string, AttributeValue> {
  const entry = entrySize(limits, event.eventType, eventId, envelope);
  if (entry > limits.maxBytes) throw new EventTooLarge(eventId, entry, limits.maxBytes);
  const at = rfc3339Ms(ulidMs(eventId));
  const item: Record<string, AttributeValue> = {
    [keys.partitionKey]: { S: pk },
    [keys.sortKey]: { S: keys.outboxPrefix + eventId },
    eventId: { S: eventId },
    eventType: { S: event.eventType },
    aggregateId: { S: event.aggregateId },
    aggregateVersion: { N: String(event.aggregateVersion) },
    envelope: { S: envelope },
    createdAt: { S: at },
    attempts: { N: "0" },
    [keys.pendingPartitionKey]: { S: pendingPk(keys, shardOf(event.aggregateId, shards)) },
    [keys.pendingSortKey]: { S: eventId },
  };
  if (payloadRef !== undefined)
    item.payloadRef = {
      M: {
        bucket: { S: payloadRef.bucket },
        key: { S: payloadRef.key },
        sha256: { S: payloadRef.sha256 },
        size: { N: String(payloadRef.size) },
      },
    };
  if (event.traceparent !== undefined) item.traceparent = { S: event.traceparent };
  if (keys.homeRegion !== undefined) item.homeRegion = { S: keys.homeRegion };
  const size = itemSize(item);
  if (size > MAX_ITEM_BYTES) throw new ItemTooLarge(eventId, size, MAX_ITEM_BYTES);
  return item;
}
