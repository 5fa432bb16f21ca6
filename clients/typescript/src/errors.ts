/**
 * Why an outbox write was refused. Each error's `code` is the one the Rust
 * writer gives the same refusal (`schemas/contract-vectors.v1.json`).
 */

import type { AttributeValue } from "@aws-sdk/client-dynamodb";

/** Base of every refusal of this package; `code` names the kind. */
export class OutboxError extends Error {
  readonly code: string = "OutboxError";
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A setting the stack's functions would refuse too. */
export class InvalidSettings extends OutboxError {
  override readonly code = "InvalidSettings";
}

/** The event breaks a rule (a name, an aggregate id, a traceparent). */
export class InvalidEvent extends OutboxError {
  override readonly code = "InvalidEvent";
}

/** The sink would refuse the entry for its size. */
export class EventTooLarge extends OutboxError {
  override readonly code = "EventTooLarge";
  constructor(
    readonly eventId: string,
    readonly size: number,
    readonly limit: number,
  ) {
    super(`event ${eventId} would be a ${size}-byte entry for the configured sink; its limit is ${limit} bytes`);
  }
}

/** The event's envelope is larger than a claim check takes (8 MiB). */
export class PayloadTooLarge extends OutboxError {
  override readonly code = "PayloadTooLarge";
  constructor(
    readonly eventId: string,
    readonly size: number,
    readonly limit: number,
  ) {
    super(`event ${eventId} is ${size} bytes; a claim check takes at most ${limit}`);
  }
}

/** The outbox item would exceed DynamoDB's 400 KB item limit. */
export class ItemTooLarge extends OutboxError {
  override readonly code = "ItemTooLarge";
  constructor(
    readonly eventId: string,
    readonly size: number,
    readonly limit: number,
  ) {
    super(`outbox item for event ${eventId} would be ${size} bytes; the DynamoDB limit is ${limit} bytes`);
  }
}

/** The transaction was not committed: nothing was written. */
export class TransactionError extends OutboxError {
  override readonly code: string = "TransactionError";
  /** Whether the same call may succeed later (a conflict, throttling). */
  readonly retryable: boolean = false;
}

export class Empty extends TransactionError {
  override readonly code = "Empty";
}

export class TooManyActions extends TransactionError {
  override readonly code = "TooManyActions";
  constructor(
    readonly count: number,
    readonly limit: number,
  ) {
    super(`the transaction has ${count} actions; DynamoDB allows ${limit}`);
  }
}

export class TooLarge extends TransactionError {
  override readonly code = "TooLarge";
  constructor(
    readonly size: number,
    readonly limit: number,
  ) {
    super(`the transaction is about ${size} bytes; DynamoDB allows ${limit}`);
  }
}

export class DuplicateItem extends TransactionError {
  override readonly code = "DuplicateItem";
  constructor(
    readonly first: string,
    readonly second: string,
  ) {
    super(`actions \`${first}\` and \`${second}\` write the same item`);
  }
}

export class InvalidToken extends TransactionError {
  override readonly code = "InvalidToken";
}

/** One condition that failed, with the item as it was (`ALL_OLD`). */
export interface FailedCondition {
  index: number;
  label: string;
  item?: Record<string, AttributeValue>;
}

/** A condition failed: which actions, with the items that failed them. */
export class ConditionFailed extends TransactionError {
  override readonly code = "ConditionFailed";
  constructor(readonly failed: FailedCondition[]) {
    super(`condition failed on ${failed.map((f) => f.label).join(", ")}`);
  }
  failedCondition(label: string): FailedCondition | undefined {
    return this.failed.find((f) => f.label === label);
  }
}

/** Another transaction was writing the same item: retry. */
export class Conflict extends TransactionError {
  override readonly code = "Conflict";
  override readonly retryable = true;
  constructor(readonly label: string) {
    super(`transaction conflicted with another one on \`${label}\`; retry`);
  }
}

/** DynamoDB throttled the call: retry later. */
export class Throttled extends TransactionError {
  override readonly code = "Throttled";
  override readonly retryable = true;
}

/** Cancelled for another reason. */
/**
 * An event is claim-checked (stored in S3 first) and the transaction was
 * sent without an S3 client: use `sendWithPayloads`.
 */
export class NoPayloadStore extends TransactionError {
  override readonly code = "NoPayloadStore";
  constructor(readonly eventId: string) {
    super(`event ${eventId} is stored in S3 first (a claim check): send the transaction with sendWithPayloads`);
  }
}

/**
 * A claim-checked event's object could not be stored: nothing was
 * committed (objects stored before it are orphans the bucket's lifecycle
 * rule expires).
 */
export class PayloadNotStored extends TransactionError {
  override readonly code = "PayloadNotStored";
  /** Throttling, a 5xx or the connection: the same call may succeed later. */
  override readonly retryable: boolean;
  constructor(
    readonly eventId: string,
    reason: string,
    retryable = false,
  ) {
    super(`the payload of event ${eventId} was not stored in S3: ${reason}`);
    this.retryable = retryable;
  }
}

export class Rejected extends TransactionError {
  override readonly code = "Rejected";
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(`DynamoDB rejected the transaction: ${reason}: ${message}`);
  }
}

/** The stack's recorded settings could not be read or chosen. */
export class StackSettingsError extends OutboxError {
  override readonly code = "StackSettingsError";
}
