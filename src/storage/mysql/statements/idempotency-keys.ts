/**
 * Idempotency keys on MySQL (docs/protocol.md#safe-retries; table `idempotency_keys`, migration
 * 0015): shared by every instance on the database, so a retry that reaches another instance gets
 * the same answer, and of two requests with one key at once, on any instances, exactly one runs.
 *
 * A claim is an `INSERT IGNORE` of the key (a second insert of it waits for the first to commit,
 * then inserts nothing), and only when the key was there, a transaction reading its row `FOR UPDATE`
 * and deciding: expired (taken anew), another request's (mismatch), answered, running within its
 * lease, or running past it (its instance died: taken over under a new token). Every time is the
 * handler's clock, written as `DATETIME(6)` text. Answers are sealed (src/storage/sql/answer-sealing.ts).
 */
import { sql, type Kysely } from 'kysely';
import { randomUUID } from 'node:crypto';
import type { ClaimOutcome, IdempotencyClaim, IdempotencyCompletion, IdempotencyRelease } from '../../idempotency.js';
import { openAnswer, sealAnswer } from '../../sql/answer-sealing.js';
import type { MasterKey } from '../../sql/key-sealing.js';
import { StorageUnavailableError } from '../../../errors.js';
import type { MerchantApiDatabase } from '../schema.js';
import { unixToSqlDatetime } from '../sql-values.js';
import { retryOnConflict } from '../write-conflicts.js';

type Db = Kysely<MerchantApiDatabase>;

/** Milliseconds since the epoch as `DATETIME(6)` text (UTC). */
function at(ms: number): string {
  return unixToSqlDatetime(ms / 1000);
}

/** `DATETIME(6)` text back to milliseconds since the epoch. */
function msOf(text: string): number {
  return Date.parse(`${text.replace(' ', 'T')}Z`);
}

interface HeldRow {
  fingerprint: string;
  claim_token: string | null;
  lease_until: string | null;
  expires_at: string;
  sealed_answer: string | null;
}

const FORMAT = '%Y-%m-%d %H:%i:%s.%f';

export async function claimIdempotencyKey(db: Db, masterKey: MasterKey, claim: IdempotencyClaim): Promise<ClaimOutcome> {
  const { merchantId, key, fingerprint, now, leaseMs, ttlMs } = claim;
  // A key released or pruned between the insert and the read is tried again: bounded.
  for (let attempt = 0; attempt < 4; attempt++) {
    const token = randomUUID();
    // The insert alone, in its own statement: it holds no lock after it, so the read below takes
    // its row's lock without first holding a shared one (two such upgrades would deadlock).
    const inserted = await retryOnConflict(() =>
      sql`INSERT IGNORE INTO idempotency_keys (merchant_id, idempotency_key, fingerprint, claim_token, lease_until, expires_at)
        VALUES (${merchantId}, ${key}, ${fingerprint}, ${token}, ${at(now + leaseMs)}, ${at(now + ttlMs)})`.execute(db),
    );
    if (Number(inserted.numAffectedRows ?? 0n) === 1) return { state: 'claimed', token };
    const decided = await retryOnConflict(() =>
      db.transaction().execute(async (trx): Promise<ClaimOutcome | { state: 'sealed'; sealed: string } | undefined> => {
        const { rows } = await sql<HeldRow>`SELECT fingerprint, claim_token, DATE_FORMAT(lease_until, ${FORMAT}) AS lease_until,
            DATE_FORMAT(expires_at, ${FORMAT}) AS expires_at, sealed_answer
          FROM idempotency_keys WHERE merchant_id = ${merchantId} AND idempotency_key = ${key} FOR UPDATE`.execute(trx);
        const row = rows[0];
        if (row === undefined) return undefined;
        if (msOf(row.expires_at) <= now) {
          // Expired but not pruned yet: the key starts again, as a new one.
          await sql`UPDATE idempotency_keys SET fingerprint = ${fingerprint}, claim_token = ${token}, lease_until = ${at(now + leaseMs)}, expires_at = ${at(now + ttlMs)},
              status = NULL, sealed_answer = NULL WHERE merchant_id = ${merchantId} AND idempotency_key = ${key}`.execute(trx);
          return { state: 'claimed', token };
        }
        if (row.fingerprint !== fingerprint) return { state: 'mismatch' };
        if (row.sealed_answer !== null) return { state: 'sealed', sealed: row.sealed_answer };
        const leaseUntil = row.lease_until === null ? 0 : msOf(row.lease_until);
        if (leaseUntil > now) return { state: 'running', retryAfterMs: leaseUntil - now };
        // Its instance died or outran the lease: this request takes the key, under a new token.
        await sql`UPDATE idempotency_keys SET claim_token = ${token}, lease_until = ${at(now + leaseMs)} WHERE merchant_id = ${merchantId} AND idempotency_key = ${key}`.execute(trx);
        return { state: 'claimed', token };
      }),
    );
    if (decided === undefined) continue;
    // Opened after the transaction: its lock is not held while the answer is decrypted.
    if (decided.state === 'sealed') return { state: 'completed', answer: await openAnswer(masterKey, merchantId, key, decided.sealed) };
    return decided;
  }
  throw new StorageUnavailableError('The idempotency key was released or pruned at every try of its claim.');
}

export async function completeIdempotencyKey(db: Db, masterKey: MasterKey, { merchantId, key, token, answer }: IdempotencyCompletion): Promise<void> {
  const sealed = await sealAnswer(masterKey, merchantId, key, answer);
  await retryOnConflict(() =>
    sql`UPDATE idempotency_keys SET claim_token = NULL, lease_until = NULL, status = ${answer.status}, sealed_answer = ${sealed}
      WHERE merchant_id = ${merchantId} AND idempotency_key = ${key} AND claim_token = ${token}`.execute(db),
  );
}

export async function releaseIdempotencyKey(db: Db, { merchantId, key, token }: IdempotencyRelease): Promise<void> {
  await retryOnConflict(() => sql`DELETE FROM idempotency_keys WHERE merchant_id = ${merchantId} AND idempotency_key = ${key} AND claim_token = ${token}`.execute(db));
}

/** Bounds of one prune of expired keys. */
export interface IdempotencyPruneOptions {
  /** Rows per statement (default 5000). */
  batchSize?: number;
  /** Statements per run (default 20): a larger backlog waits for the next run. */
  maxBatches?: number;
  /** The clock, milliseconds (default now). */
  now?: number;
}

/** Deletes the keys that expired, in bounded batches, oldest first; resolves to how many went. */
export async function pruneIdempotencyKeys(db: Kysely<any>, options: IdempotencyPruneOptions = {}): Promise<number> {
  const batchSize = options.batchSize ?? 5000;
  const maxBatches = options.maxBatches ?? 20;
  const before = at(options.now ?? Date.now());
  let deleted = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    const result = await sql`DELETE FROM idempotency_keys WHERE expires_at <= ${before} ORDER BY expires_at LIMIT ${batchSize}`.execute(db);
    const count = Number(result.numAffectedRows ?? 0n);
    deleted += count;
    if (count < batchSize) break;
  }
  return deleted;
}
