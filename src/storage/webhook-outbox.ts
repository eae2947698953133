/**
 * The webhook outbox as a storage holds it (docs/webhooks.md#delivery): endpoints, the events
 * written with the change that made them, and one delivery per event and endpoint. A storage
 * implements `WebhookOutbox`; the dispatcher of `src/webhooks/` claims what is due, sends it and
 * records each attempt through it, knowing nothing of tables. Event `data` is stored as JSON text
 * (`userEventData`), so every attempt of an event sends the same bytes.
 */
import { randomBytes } from 'node:crypto';
import { USER_RECORD_KEYS, type ChangedUserRecord } from './contract.js';

export type { WebhookEndpointSummary } from './webhook-endpoints.js';

/** A delivery claimed for sending: everything one attempt needs, the secrets opened. */
export interface DueDelivery {
  id: string;
  eventId: string;
  endpointId: string;
  merchantId: string;
  url: string;
  type: string;
  /** When the event happened (the body's `timestamp`), canonical. */
  eventTimestamp: string;
  /** The event's `data`, JSON text. */
  data: string;
  /** Attempts made before this one. */
  attempts: number;
  /** The secrets that sign: the current one first, then one still valid during a rotation. */
  secrets: string[];
  /** How long every attempt to this endpoint has failed, in ms, or undefined when the last one succeeded. */
  failingForMs?: number;
  /** The claim: only its holder records the attempt. */
  claimToken: string;
}

/** What became of one attempt, as the dispatcher decided. */
export interface AttemptRecord {
  delivery: DueDelivery;
  /** `delivered`; `retry` at `nextAttemptAt`; `failed` for good (schedule used up). */
  outcome: 'delivered' | 'retry' | 'failed';
  nextAttemptAt?: Date;
  status?: number;
  error?: string;
  /** At most 256 bytes of the answer. */
  responseBody?: string;
  durationMs: number;
  /** Disable the endpoint too (410 Gone, or failing for too long); its pending deliveries stop. */
  disableEndpoint?: 'gone' | 'failing';
}

/** What the dispatcher's metrics and `/healthz` show of the outbox. */
export interface OutboxStats {
  pending: number;
  /** How long the oldest due delivery has waited past its time, in ms (0 when none is due); a disabled merchant's held ones are not late. */
  oldestDueAgeMs: number;
}

export interface ClaimOptions {
  /** Most deliveries claimed this round. */
  limit: number;
  /** How long the claim holds before another instance may take the deliveries again (its holder died). */
  leaseMs: number;
  /** Most deliveries of one endpoint claimed and not yet recorded, across instances. */
  maxInFlightPerEndpoint: number;
  /**
   * How many more deliveries of a merchant this claim may take (the dispatcher's share per merchant
   * less what it sends for it now); a merchant with none left is skipped, its deliveries left
   * pending for others. Undefined: no bound per merchant.
   */
  merchantRoom?: (merchantId: string) => number;
}

/** The outbox operations the dispatcher needs. */
export interface WebhookOutbox {
  /**
   * Claims due deliveries, endpoints taking turns so no merchant's backlog delays another's. A
   * disabled merchant's are held: never claimed until it is active again (docs/webhooks.md#a-disabled-merchant).
   */
  claimDue(options: ClaimOptions): Promise<DueDelivery[]>;
  /** Records one attempt; ignored when the claim was lost (the lease ran out and another instance took it). */
  recordAttempt(record: AttemptRecord): Promise<void>;
  /**
   * Deletes finished deliveries and events created before `before`, and a disabled merchant's
   * pending ones as old (cancelled as `merchant_disabled` first); returns how many deliveries went.
   */
  prune(before: Date): Promise<number>;
  stats(): Promise<OutboxStats>;
}

/**
 * An event's `data` for a user: the 14 keys in the API's order, then `updated_at`, as JSON text:
 * byte for byte what `changedUserJson` of `src/listing/user-json.ts` writes (a test holds them together).
 */
export function userEventData(record: ChangedUserRecord): string {
  const ordered: Record<string, string | null> = {};
  for (const key of USER_RECORD_KEYS) ordered[key] = record[key];
  ordered.updated_at = record.updated_at;
  return JSON.stringify(ordered);
}

/** `user.unshared`'s data: the merchant's id of the user and when the share went; nothing else of the person. */
export function unsharedEventData(sharedUserId: string, unsharedAt: string): string {
  return JSON.stringify({ shared_user_id: sharedUserId, unshared_at: unsharedAt });
}

let sequence = 0;
/** Random bytes for event ids, taken 18 at a time from a block: one call to the generator per 512 ids. */
let randomBlock = Buffer.alloc(0);
let randomOffset = 0;

function randomPart(): string {
  if (randomOffset + 18 > randomBlock.length) {
    randomBlock = randomBytes(18 * 512);
    randomOffset = 0;
  }
  randomOffset += 18;
  return randomBlock.toString('base64url', randomOffset - 18, randomOffset);
}

/**
 * A new event id, the same form on every storage: `evt_`, the time in ms and a counter as hex
 * (ordered, as KSUIDs are: an import's events go in at the end of the primary key instead of all
 * over it), then 18 random bytes, base64url: 40 characters, unguessable. `at`: the time of the
 * change in ms, when the event is written after it (an import batch expanded by the dispatcher).
 */
export function newEventId(at: number = Date.now()): string {
  sequence = (sequence + 1) % 0x1000000;
  return `evt_${at.toString(16).padStart(12, '0')}${sequence.toString(16).padStart(6, '0')}${randomPart()}`;
}
