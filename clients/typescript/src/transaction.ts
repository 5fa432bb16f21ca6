/**
 * `OutboxTransaction`: your puts, updates, condition checks and deletes and
 * their outbox events in one `TransactWriteItems`, every limit checked
 * before the call; `OutboxSettings`: given, or read from the settings the
 * stack's functions record in the table.
 */

import {
  TransactionCanceledException,
  TransactWriteItemsCommand,
  paginateQuery,
  type AttributeValue,
  type ConditionCheck,
  type Delete,
  type DynamoDBClient,
  type Put,
  type TransactWriteItem,
  type Update,
} from "@aws-sdk/client-dynamodb";
import type { S3Client } from "@aws-sdk/client-s3";

import {
  ClaimCheck,
  DEFAULT_KEYS,
  DEFAULT_SHARDS,
  EVENT_IDS,
  EventLimits,
  MAX_TRANSACTION_ACTIONS,
  MAX_TRANSACTION_BYTES,
  MonotonicIds,
  itemSize,
  keySchemaFromVariables,
  storedItem,
  validateKeys,
  type Event,
  type KeySchema,
  type Offload,
} from "./contract.js";
import {
  ConditionFailed,
  Conflict,
  DuplicateItem,
  Empty,
  InvalidSettings,
  InvalidToken,
  NoPayloadStore,
  OutboxError,
  PayloadNotStored,
  Rejected,
  StackSettingsError,
  Throttled,
  TooLarge,
  TooManyActions,
  type FailedCondition,
} from "./errors.js";

const SETTINGS_PK = "OUTBOX_SETTINGS";
const STACK_SETTINGS_PREFIX = "STACK#";

/** Where outbox items go and how they are shaped. */
export interface OutboxSettings {
  table: string;
  limits: EventLimits;
  /** Shards of the pending index (`OUTBOX_SHARDS`, 1 to 256). */
  shards: number;
  keys: KeySchema;
  /**
   * The claim check of large events (the stack's `PAYLOAD_BUCKET`): such
   * an event is stored in S3 first; send with `sendWithPayloads`.
   */
  claimCheck?: ClaimCheck;
}

export const OutboxSettings = {
  /** Settings given explicitly (the default key schema unless `keys`). */
  of(
    table: string,
    limits: EventLimits,
    shards: number = DEFAULT_SHARDS,
    keys: KeySchema = { ...DEFAULT_KEYS },
    claimCheck?: ClaimCheck,
  ): OutboxSettings {
    if (!Number.isInteger(shards) || shards < 1 || shards > 256)
      throw new InvalidSettings(`OUTBOX_SHARDS=${shards} is invalid: 1 to 256`);
    const settings: OutboxSettings = { table, limits, shards, keys: validateKeys(keys) };
    if (claimCheck !== undefined) settings.claimCheck = claimCheck;
    return settings;
  },

  /** The settings a stack's variables give, read as its functions read them. */
  fromVariables(table: string, variables: Record<string, string | undefined>): OutboxSettings {
    const raw = variables.OUTBOX_SHARDS?.trim();
    if (raw && !/^\d+$/.test(raw)) throw new InvalidSettings(`OUTBOX_SHARDS=${JSON.stringify(raw)} is invalid: 1 to 256`);
    return OutboxSettings.of(
      table,
      EventLimits.fromVariables(variables),
      raw ? Number(raw) : DEFAULT_SHARDS,
      keySchemaFromVariables(variables),
      ClaimCheck.fromVariables(variables),
    );
  },

  /**
   * Reads the settings of the outbox stack publishing from `table` in
   * `region` (default: the client's) from the records its functions write
   * (one consistent `Query`; needs `dynamodb:Query`). Hold the result for
   * the life of the process. With several stacks in the region, name one
   * unless exactly one of them recorded within the last hour.
   */
  async fromStack(
    client: DynamoDBClient,
    table: string,
    options: { region?: string; stack?: string; partitionKey?: string; sortKey?: string } = {},
  ): Promise<OutboxSettings> {
    const region = options.region ?? (await client.config.region());
    if (!region) throw new StackSettingsError("no region: set the client's region or pass region");
    const sortKey = options.sortKey ?? "SK";
    const items: Record<string, AttributeValue>[] = [];
    try {
      const pages = paginateQuery(
        { client },
        {
          TableName: table,
          KeyConditionExpression: "#pk = :pk AND begins_with(#sk, :prefix)",
          ExpressionAttributeNames: { "#pk": options.partitionKey ?? "PK", "#sk": sortKey },
          ExpressionAttributeValues: { ":pk": { S: SETTINGS_PK }, ":prefix": { S: STACK_SETTINGS_PREFIX } },
          ConsistentRead: true,
        },
      );
      for await (const page of pages) items.push(...(page.Items ?? []));
    } catch (e) {
      throw new StackSettingsError(`cannot read the stack settings in ${table}: ${(e as Error).message}`);
    }
    const records = items.map((i) => record(i, sortKey)).filter((r): r is StackRecord => r !== undefined);
    return OutboxSettings.fromVariables(table, choose(records, region, options.stack, table).variables);
  },
};

interface StackRecord {
  region: string;
  stack: string;
  function: string;
  at: number;
  variables: Record<string, string>;
}

function record(item: Record<string, AttributeValue>, sortKey: string): StackRecord | undefined {
  const sk = item[sortKey]?.S ?? "";
  if (!sk.startsWith(STACK_SETTINGS_PREFIX)) return undefined;
  const variables: Record<string, string> = {};
  for (const [k, v] of Object.entries(item.variables?.M ?? {})) if (v.S !== undefined) variables[k] = v.S;
  const rest = sk.slice(STACK_SETTINGS_PREFIX.length);
  const first = rest.indexOf("#");
  if (first < 0) return undefined;
  const second = rest.indexOf("#", first + 1);
  const [region, stack, fn] =
    second < 0
      ? [rest.slice(0, first), variables.STACK_NAME ?? "", rest.slice(first + 1)]
      : [rest.slice(0, first), rest.slice(first + 1, second), rest.slice(second + 1)];
  const by = item.recordedBy?.S ?? "";
  const at = by.includes(" at ") ? Date.parse(by.slice(by.lastIndexOf(" at ") + 4)) : NaN;
  return { region, stack, function: fn, at: Number.isNaN(at) ? 0 : at, variables };
}

function choose(records: StackRecord[], region: string, wanted: string | undefined, table: string): StackRecord {
  if (records.length === 0)
    throw new StackSettingsError(
      `${table}: no outbox stack recorded its settings in the table (its publisher and sweeper record them when they start: have they run?)`,
    );
  const here = records.filter((r) => r.region === region);
  if (here.length === 0) {
    const found = [...new Set(records.map((r) => r.region))].sort().join(", ");
    throw new StackSettingsError(`${table}: the table holds the settings of outbox stacks in ${found} but none in ${region}`);
  }
  const best = new Map<string, StackRecord>();
  const rank = (r: StackRecord): [number, number] => [r.function === "sweeper" ? 1 : 0, r.at];
  for (const r of here) {
    const b = best.get(r.stack);
    const [x0, x1] = rank(r);
    const [y0, y1] = b ? rank(b) : [-1, -1];
    if (!b || x0 > y0 || (x0 === y0 && x1 > y1)) best.set(r.stack, r);
  }
  const names = [...best.keys()].sort().join(", ");
  if (wanted !== undefined) {
    const r = best.get(wanted);
    if (!r) throw new StackSettingsError(`${table}: no outbox stack named ${JSON.stringify(wanted)} recorded its settings in ${region} (recorded: ${names})`);
    return r;
  }
  const [only, ...others] = [...best.values()];
  if (only !== undefined && others.length === 0) return only;
  const live = [...best.values()].filter((r) => Date.now() - r.at < liveWithin(r.variables));
  const [alive, ...alsoLive] = live;
  if (alive !== undefined && alsoLive.length === 0) return alive;
  throw new StackSettingsError(`${table}: ${best.size} outbox stacks recorded their settings in ${region}: ${names}; name one (stack)`);
}

/**
 * How long after its last record a stack counts as live: three periods of
 * its `SWEEP_SCHEDULE` (a `cron(...)` counting as an hour), an hour at least
 * (the Rust writer's `RecordedSettings::live_within`).
 */
export function liveWithin(variables: Record<string, string>): number {
  const schedule = (variables.SWEEP_SCHEDULE ?? "").trim();
  let period = 300_000;
  if (schedule.startsWith("cron(") && schedule.endsWith(")")) period = 3_600_000;
  else {
    const m = /^rate\(\s*([1-9][0-9]*) (minute|minutes|hour|hours|day|days)\s*\)$/.exec(schedule);
    const units = { minute: 60_000, hour: 3_600_000, day: 86_400_000 };
    if (m?.[1] && m[2]) period = Number(m[1]) * units[m[2].replace(/s$/, "") as keyof typeof units];
  }
  return Math.max(3 * period, 3_600_000);
}

interface Action {
  label: string;
  item: TransactWriteItem;
  identity?: string;
  size: number;
}

type Kind = "Put" | "Update" | "ConditionCheck" | "Delete";

/**
 * One `TransactWriteItems` of your actions plus outbox events. Actions are
 * the SDK's shapes (`Put`, `Update`, `ConditionCheck`, `Delete`); each asks
 * for the old item when its condition fails (`ALL_OLD`). Errors of the
 * builder methods are kept and thrown by `build` and `send`, so calls chain.
 *
 * Each event's id is made when `event` is called: call it after the read
 * your conditions check, so ids increase with the order of writes.
 */
export class OutboxTransaction {
  private readonly actions: Action[] = [];
  private error: OutboxError | undefined;
  private token: string | undefined;
  readonly eventIds: string[] = [];
  /** The objects `sendWithPayloads` stores first: claim-checked events' whole envelopes. */
  readonly offloads: Offload[] = [];

  constructor(
    readonly settings: OutboxSettings,
    private readonly ids: MonotonicIds = EVENT_IDS,
  ) {}

  put(label: string, put: Put): this {
    return this.add(label, "Put", put);
  }
  update(label: string, update: Update): this {
    return this.add(label, "Update", update);
  }
  conditionCheck(label: string, check: ConditionCheck): this {
    return this.add(label, "ConditionCheck", check);
  }
  delete(label: string, del: Delete): this {
    return this.add(label, "Delete", del);
  }

  /**
   * Adds an outbox event, stored in the item collection `pk` (the
   * aggregate's partition key) as `<prefix><event id>`; its label is
   * `event:<event id>`.
   */
  event(pk: string, event: Event): this {
    return this.eventWithId(pk, event, this.ids.next());
  }

  /** The same with a given event id (the contract vectors). @internal */
  eventWithId(pk: string, event: Event, eventId: string): this {
    const s = this.settings;
    let item: Record<string, AttributeValue>;
    let offload: Offload | undefined;
    try {
      [item, offload] = storedItem(s.keys, s.limits, s.shards, pk, event, eventId, s.claimCheck);
    } catch (e) {
      if (!(e instanceof OutboxError)) throw e;
      this.error ??= e;
      return this;
    }
    if (offload !== undefined) this.offloads.push(offload);
    this.eventIds.push(eventId);
    return this.add(`event:${eventId}`, "Put", {
      TableName: s.table,
      Item: item,
      ConditionExpression: "attribute_not_exists(#outboxSk)",
      ExpressionAttributeNames: { "#outboxSk": s.keys.sortKey },
    });
  }

  /** Makes the call idempotent for ten minutes (`ClientRequestToken`). */
  idempotencyToken(token: string): this {
    if (token.length < 1 || token.length > 36) this.error ??= new InvalidToken("idempotency token must be 1 to 36 characters");
    else this.token = token;
    return this;
  }

  get length(): number {
    return this.actions.length;
  }

  private add(label: string, kind: Kind, action: Put | Update | ConditionCheck | Delete): this {
    const copy = structuredClone(action) as Put & Update;
    copy.ReturnValuesOnConditionCheckFailure ??= "ALL_OLD";
    const target = (kind === "Put" ? copy.Item : copy.Key) ?? {};
    const names = [this.settings.keys.partitionKey, this.settings.keys.sortKey];
    const identity = names.every((n) => n in target)
      ? (copy.TableName ?? "") + names.map((n) => "\0" + JSON.stringify(target[n])).join("")
      : undefined;
    const utf8 = (s: string | undefined) => Buffer.byteLength(s ?? "", "utf8");
    const size =
      itemSize(target) + utf8(copy.UpdateExpression) + utf8(copy.ConditionExpression) + itemSize(copy.ExpressionAttributeValues ?? {});
    const item: TransactWriteItem = { [kind]: copy };
    this.actions.push({ label, item, identity, size });
    return this;
  }

  /** Checks every limit; returns the `TransactItems` that `send` would send. */
  build(): TransactWriteItem[] {
    if (this.error) throw this.error;
    if (this.actions.length === 0) throw new Empty("the transaction has no actions");
    if (this.actions.length > MAX_TRANSACTION_ACTIONS) throw new TooManyActions(this.actions.length, MAX_TRANSACTION_ACTIONS);
    const total = this.actions.reduce((n, a) => n + a.size, 0);
    if (total > MAX_TRANSACTION_BYTES) throw new TooLarge(total, MAX_TRANSACTION_BYTES);
    const seen = new Map<string, string>();
    for (const a of this.actions) {
      if (a.identity === undefined) continue;
      const first = seen.get(a.identity);
      if (first !== undefined) throw new DuplicateItem(first, a.label);
      seen.set(a.identity, a.label);
    }
    return this.actions.map((a) => a.item);
  }

  /**
   * Sends the transaction (one `TransactWriteItems`); returns the ids of the
   * events written. A cancelled transaction throws `ConditionFailed` (with
   * each failed action's old item), `Conflict` or `Rejected`; nothing was
   * written. A transaction holding a claim-checked event throws
   * `NoPayloadStore`: see `sendWithPayloads`.
   */
  async send(client: DynamoDBClient): Promise<string[]> {
    const TransactItems = this.build();
    const first = this.offloads[0];
    if (first !== undefined) throw new NoPayloadStore(first.eventId);
    return this.commit(client, TransactItems);
  }

  /**
   * Stores the whole envelope of every claim-checked event with `s3` (one
   * `PutObject` each, in order, S3 checking its `ChecksumSHA256`), then
   * sends the transaction as `send` does. A failed upload throws
   * `PayloadNotStored` before anything is committed; a transaction
   * cancelled afterwards leaves orphan objects (the bucket's lifecycle rule
   * expires them), never an item without its object. `@aws-sdk/client-s3`
   * is an optional peer dependency, loaded only here.
   */
  async sendWithPayloads(client: DynamoDBClient, s3: S3Client): Promise<string[]> {
    const TransactItems = this.build();
    if (this.offloads.length > 0) {
      const { PutObjectCommand } = await import("@aws-sdk/client-s3");
      for (const o of this.offloads) {
        try {
          await s3.send(
            new PutObjectCommand({
              Bucket: o.payloadRef.bucket,
              Key: o.payloadRef.key,
              Body: o.body,
              ContentType: "application/json",
              ChecksumSHA256: Buffer.from(o.payloadRef.sha256, "hex").toString("base64"),
            }),
          );
        } catch (e) {
          throw new PayloadNotStored(o.eventId, e instanceof Error ? e.message : String(e), transient(e));
        }
      }
    }
    return this.commit(client, TransactItems);
  }

  private async commit(client: DynamoDBClient, TransactItems: TransactWriteItem[]): Promise<string[]> {
    try {
      await client.send(new TransactWriteItemsCommand({ TransactItems, ClientRequestToken: this.token }));
    } catch (e) {
      if (e instanceof TransactionCanceledException) throw this.cancelled(e);
      throw e;
    }
    return [...this.eventIds];
  }

  private cancelled(e: TransactionCanceledException): OutboxError {
    const reasons = e.CancellationReasons ?? [];
    const failed: FailedCondition[] = [];
    reasons.forEach((r, i) => {
      const action = this.actions[i];
      if (r.Code === "ConditionalCheckFailed" && action) failed.push({ index: i, label: action.label, item: r.Item });
    });
    if (failed.length > 0) return new ConditionFailed(failed);
    for (const [i, r] of reasons.entries()) {
      const action = this.actions[i];
      if (r.Code === "TransactionConflict" && action) return new Conflict(action.label);
      if (r.Code && ["ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded"].includes(r.Code))
        return new Throttled("request was throttled; retry later");
      if (r.Code && r.Code !== "None") return new Rejected(r.Code, r.Message ?? "");
    }
    return new Rejected("TransactionCanceled", e.message);
  }
}

/**
 * Whether an S3 call's failure may pass: throttling, a 5xx, or no answer
 * at all (the SDK's `$metadata` and `$retryable`).
 */
function transient(e: unknown): boolean {
  const err = e as { $metadata?: { httpStatusCode?: number }; $retryable?: unknown; name?: string };
  if (err.$metadata?.httpStatusCode === undefined) return true;
  return err.$metadata.httpStatusCode >= 500 || err.$retryable !== undefined || err.name === "SlowDown";
}
