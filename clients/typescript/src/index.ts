/**
 * Transactional outbox for DynamoDB, the writer's half, for the
 * dynamodb-outbox stack: your change and its events in one
 * `TransactWriteItems`; the stack's publisher sends them afterwards from
 * what was committed. The item contract is
 * `schemas/outbox-item.v1.schema.json`; this package reproduces
 * `schemas/contract-vectors.v1.json` byte for byte.
 */

export {
  ClaimCheck,
  DEFAULT_KEYS,
  EventLimits,
  MonotonicIds,
  keySchemaFromVariables,
  shardOf,
  type Event,
  type KeySchema,
  type Offload,
  type PayloadRef,
} from "./contract.js";
export * from "./errors.js";
export { OutboxSettings, OutboxTransaction } from "./transaction.js";
