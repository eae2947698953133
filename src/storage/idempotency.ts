/**
 * Idempotency keys as the storage contract names them (`Storage.claimIdempotencyKey` and the rest,
 * docs/protocol.md#safe-retries): a merchant's `Idempotency-Key` on a POST is claimed before the
 * handler runs, completed with the answer it gave, or released when that answer must not be kept
 * (a 5xx, a 429), so a retry of the same request answers the same bytes without running twice.
 *
 * Kept in the storage, so every instance on it sees the same keys. A claim is held for a lease: a
 * worker that died (an instance killed) leaves a claim that another may take once the lease ran
 * out, so a key is never stuck. Every time is the handler's clock (`now`, milliseconds), never the
 * backend's, so tests move it and every instance agrees with the one that wrote.
 */

/** What a stored answer holds: enough to answer the same bytes again. */
export interface StoredAnswer {
  status: number;
  /** The handler's own headers (`Content-Type`, `Location`, ...); never the per-request ones. */
  headers: Record<string, string>;
  /** The whole body, as sent. */
  body: string;
}

/** A claim of `key` for a request of `merchantId` (`Storage.claimIdempotencyKey`). */
export interface IdempotencyClaim {
  merchantId: string;
  /** The `Idempotency-Key` as sent (1-255 printable ASCII: checked by the API). */
  key: string;
  /** SHA-256 (hex) of the method, path and body: the same key with another request is a mismatch. */
  fingerprint: string;
  /** The handler's clock, milliseconds since the epoch. */
  now: number;
  /** How long the claim holds while its request runs; after it, another request may take it over. */
  leaseMs: number;
  /** How long, from the claim, the key and its answer are kept. */
  ttlMs: number;
}

/**
 * What a claim found:
 * - `claimed`: the key is this request's now; `token` names this claim in `complete` and `release`
 *   (a claim taken over after its lease ran out has another token, so a late worker changes nothing);
 * - `completed`: an earlier request with the same key and fingerprint answered this;
 * - `running`: another request with the key runs now (its lease ends in `retryAfterMs`);
 * - `mismatch`: the key was used for another request (another fingerprint) within its time.
 */
export type ClaimOutcome =
  | { state: 'claimed'; token: string }
  | { state: 'completed'; answer: StoredAnswer }
  | { state: 'running'; retryAfterMs: number }
  | { state: 'mismatch' };

/** Ends a claim with the answer to keep (`Storage.completeIdempotencyKey`). */
export interface IdempotencyCompletion {
  merchantId: string;
  key: string;
  token: string;
  answer: StoredAnswer;
}

/** Gives a claim up, so the next request with the key runs (`Storage.releaseIdempotencyKey`). */
export interface IdempotencyRelease {
  merchantId: string;
  key: string;
  token: string;
}

/** The operations of idempotency keys: optional, as a storage of an embedder's own may lack them. */
export const IDEMPOTENCY_OPERATIONS = ['claimIdempotencyKey', 'completeIdempotencyKey', 'releaseIdempotencyKey'] as const;
