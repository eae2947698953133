/**
 * The statements on `auth_failures` (migration 0003), for the shared throttle
 * (docs/security.md#sharing-the-counters-on-mysql). A failure is one
 * `INSERT ... ON DUPLICATE KEY UPDATE` per counter with the rules of
 * src/limits/throttle.ts written in SQL, so that InnoDB's row lock orders two
 * instances counting at once and no count is lost; the rows are then read
 * back, and what they say decides a block. The assignments of an upsert run
 * left to right, each seeing the columns set before it (MySQL's rule, and
 * MariaDB's unless SIMULTANEOUS_ASSIGNMENT is set, which our pool's sql_mode
 * never is): the order below is part of the logic.
 * `updated_at` only grows per row (one microsecond past its last value at
 * least), so a copy with the greater version is always the newer one.
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import { randomBytes, randomInt } from 'node:crypto';
import { CENSUS_STRIPES } from '../migrations/migration-0011.js';
import type { ReservationAnswer, ThrottleFailure, ThrottleRecord, ThrottleReservation, ThrottleRules } from '../../throttle-store.js';
import { RESERVATION_SECONDS } from '../../throttle-store.js';
import { isStorableId } from '../sql-values.js';
import { isShareableAddress } from './shareable-address.js';
import { retryOnConflict } from '../write-conflicts.js';

export { isShareableAddress };

/** A pair's count and doubling are forgotten a day after its last failure (the local throttle forgets by size only). */
export const PAIR_MEMORY_SECONDS = 86_400;
/** A reset row outlives its last change this long, so every instance reads the reset before it is pruned. */
const RESET_VISIBLE_SECONDS = 60;

/**
 * `blocked_until` of a row whose block an operator lifted (`liftThrottleBlocks`): read as not blocked
 * and `lifted`, so every instance drops its copy of the block. The next change of the row sets
 * it back to 0 (`GREATEST(blocked_until, 0)`), so only the lift itself says so.
 */
export const LIFTED = -1;

/** Every column of a record, the version formatted by the server (no driver setting can cut its microseconds). */
const RECORD_COLUMNS = sql.raw(`scope, address, merchant_id, failures, window_start, blocks, blocked_until,
  DATE_FORMAT(updated_at, '%Y-%m-%d %H:%i:%s.%f') AS version`);
const NEXT_VERSION = sql.raw('GREATEST(updated_at + INTERVAL 1 MICROSECOND, UTC_TIMESTAMP(6))');

interface RecordRow {
  scope: 'address' | 'pair';
  address: string;
  merchant_id: string;
  failures: number | string;
  window_start: number | string;
  blocks: number | string;
  blocked_until: number | string;
  version: string;
}

function toRecord(row: RecordRow): ThrottleRecord {
  return {
    scope: row.scope,
    address: row.address,
    merchantId: row.scope === 'pair' ? row.merchant_id : undefined,
    failures: Number(row.failures),
    windowStart: Number(row.window_start),
    blocks: Number(row.blocks),
    // BIGINT arrives as text with bigNumberStrings. Negative: lifted by an operator (LIFTED).
    blockedUntil: Math.max(0, Number(row.blocked_until)),
    lifted: Number(row.blocked_until) < 0,
    version: row.version,
  };
}

/**
 * Counts one failure of the address, and of the pair when the merchant exists; answers both rows as
 * they are now. A row not yet in the census (new, or written by a reservation) is admitted to it
 * (`admitToCensus`); `full` is told when one could not be: the row went, and is not answered.
 */
export async function recordFailure(db: Kysely<any>, { address, merchantId, now, reserved }: ThrottleFailure, rules: ThrottleRules, full?: () => void): Promise<ThrottleRecord[]> {
  if (!isShareableAddress(address)) return [];
  // Each upsert alone: one that lost a conflict (a deadlock of a burst, or another Galera node's write) changed nothing and runs again.
  await retryOnConflict(() => addressUpsert(address, now, rules, reserved?.address === true).execute(db));
  const pair = merchantId !== undefined && isStorableId(merchantId);
  if (pair) await retryOnConflict(() => pairUpsert(address, merchantId, now, rules, reserved?.pair === true).execute(db));
  const { rows } = await sql<RecordRow & { census_stripe: number | null }>`SELECT ${RECORD_COLUMNS}, census_stripe FROM auth_failures
    WHERE scope IN ('address', 'pair') AND address = ${address} AND merchant_id IN ('', ${pair ? merchantId : ''})`.execute(db);
  const kept: RecordRow[] = [];
  for (const row of rows) {
    if (row.census_stripe !== null || (await retryOnConflict(() => admitToCensus(db, row, rules.maxEntries)))) kept.push(row);
  }
  if (kept.length < rows.length) full?.();
  // A row refused is gone: its counts are this instance's own (a record of them would set its count back to 1).
  return kept.map(toRecord);
}

/**
 * The census of `auth_failures` (migration 0011, docs/scaling.md#the-throttles-keys): each row the
 * throttle keeps for more than a reservation's seconds is counted in one of `CENSUS_STRIPES`
 * stripes, drawn at random, each admitting at most its share of `maxEntries`, so the table holds at
 * most `maxEntries` such rows whatever the number of addresses, and new rows of many addresses at
 * once wait on sixteen locks, not one. In one transaction: the row is claimed (locked), then its
 * stripe counts it, or the row goes (the failure stays counted by each instance alone). Answers
 * whether it was admitted (a row another instance admitted meanwhile, or that is gone, is).
 */
async function admitToCensus(db: Kysely<any>, row: RecordRow, maxEntries: number): Promise<boolean> {
  const stripe = randomInt(CENSUS_STRIPES);
  const share = Math.max(1, Math.floor(maxEntries / CENSUS_STRIPES));
  const key = sql`scope = ${row.scope} AND address = ${row.address} AND merchant_id = ${row.merchant_id}`;
  return db.transaction().execute(async (trx) => {
    const claimed = await sql`UPDATE auth_failures SET census_stripe = ${stripe} WHERE ${key} AND census_stripe IS NULL`.execute(trx);
    if (Number(claimed.numAffectedRows ?? 0n) === 0) return true;
    const counted = await sql`UPDATE auth_failures_census SET held = held + 1 WHERE stripe = ${stripe} AND held < ${share}`.execute(trx);
    if (Number(counted.numAffectedRows ?? 0n) === 1) return true;
    await sql`DELETE FROM auth_failures WHERE ${key}`.execute(trx);
    return false;
  });
}

/**
 * The address's failures in its window; the window starts again at the first
 * failure after it ended, and at a block.
 */
function addressUpsert(address: string, now: number, r: ThrottleRules, reserved: boolean): RawBuilder<unknown> {
  const first = firstFailure(1 >= r.addressFailures, now + r.addressBlockSeconds);
  const keep = Math.max(first.blockedUntil, now + r.addressWindowSeconds) - now;
  // The count this failure makes: 1 when the window had ended.
  const count = sql`IF(${now} >= window_start + ${r.addressWindowSeconds}, 1, failures + 1)`;
  return sql`INSERT INTO auth_failures (scope, address, merchant_id, failures, window_start, blocks, blocked_until, updated_at, expires_at)
    VALUES ('address', ${address}, '', ${first.failures}, ${now}, 0, ${first.blockedUntil}, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ${keep} SECOND)
    ON DUPLICATE KEY UPDATE
      ${giveBack(reserved)}
      blocked_until = IF(${count} >= ${r.addressFailures}, ${now} + ${r.addressBlockSeconds}, GREATEST(blocked_until, 0)),
      failures = IF(${count} >= ${r.addressFailures}, 0, ${count}),
      window_start = IF(failures = 0 OR ${now} >= window_start + ${r.addressWindowSeconds}, ${now}, window_start),
      updated_at = ${NEXT_VERSION},
      expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL (GREATEST(blocked_until, window_start + ${r.addressWindowSeconds}) - ${now}) SECOND)`;
}

/**
 * The pair's consecutive failures; at the limit a block of
 * pairBlockSeconds * 2^blocks (at most pairMaxBlockSeconds) and the count
 * starts again. `blocks` stops at 32: the cap is reached long before.
 */
function pairUpsert(address: string, merchantId: string, now: number, r: ThrottleRules, reserved: boolean): RawBuilder<unknown> {
  const first = firstFailure(1 >= r.pairFailures, now + Math.min(r.pairMaxBlockSeconds, r.pairBlockSeconds));
  const keep = Math.max(first.blockedUntil - now, PAIR_MEMORY_SECONDS);
  const reached = sql`failures + 1 >= ${r.pairFailures}`;
  return sql`INSERT INTO auth_failures (scope, address, merchant_id, failures, window_start, blocks, blocked_until, updated_at, expires_at)
    VALUES ('pair', ${address}, ${merchantId}, ${first.failures}, ${now}, ${first.blocks}, ${first.blockedUntil}, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL ${keep} SECOND)
    ON DUPLICATE KEY UPDATE
      ${giveBack(reserved)}
      blocked_until = IF(${reached}, ${now} + LEAST(${r.pairMaxBlockSeconds}, ${r.pairBlockSeconds} * POW(2, blocks)), GREATEST(blocked_until, 0)),
      blocks = IF(${reached}, LEAST(blocks + 1, 32), blocks),
      failures = IF(${reached}, 0, failures + 1),
      updated_at = ${NEXT_VERSION},
      expires_at = GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL GREATEST(blocked_until - ${now}, ${PAIR_MEMORY_SECONDS}) SECOND)`;
}

/** The reserved check a failure ends, given back in the statement that counts it (the first assignment: it reads nothing the others set). */
function giveBack(reserved: boolean): RawBuilder<unknown> {
  return reserved ? sql`reserved = GREATEST(reserved - 1, 0),` : sql``;
}

/**
 * Reserves key checks before their keys are compared (docs/security.md#ten-checks-even-all-at-once):
 * one upsert of the address's row, and of the pair's when the claimed merchant exists (a pair row
 * is never written for an id nobody holds), each granted under its own limit in the row's lock:
 * the failures counted plus the checks reserved, plus these, within the limit, and no block. A
 * granted row takes this call's random `reservation`, read back to learn the answer; when only one
 * of the two rows was granted, it is given back (the read runs in the statement's transaction, so
 * no other grant rewrites `reservation` before it, and locks, so it sees a pair row another
 * transaction created since this one's snapshot). A row created here has the oldest `updated_at`,
 * so the instances reading changes do not take it for a failure.
 */
export async function reserveChecks(db: Kysely<any>, { address, merchantId, addressCount, pairCount, forced, now }: ThrottleReservation, rules: ThrottleRules): Promise<ReservationAnswer> {
  if (!isShareableAddress(address)) return { granted: true, records: [] };
  const merchant = merchantId !== undefined && isStorableId(merchantId) && pairCount + (forced?.pair ?? 0) > 0 ? merchantId : '';
  // Per row: the checks counted whatever the limits say (already started), and the ones asked for.
  const force = sql`IF(scope = 'address', ${forced?.address ?? 0}, ${forced?.pair ?? 0})`;
  const want = sql`IF(scope = 'address', ${addressCount}, ${pairCount})`;
  const token = randomBytes(6).readUIntBE(0, 6);
  const until = now + RESERVATION_SECONDS;
  const live = sql`IF(reserved_until < ${now}, 0, reserved)`;
  const counted = sql`IF(scope = 'address' AND ${now} >= window_start + ${rules.addressWindowSeconds}, 0, failures)`;
  const limit = sql`IF(scope = 'address', ${rules.addressFailures}, ${rules.pairFailures})`;
  const row = (scope: 'address' | 'pair', count: number, forcedCount: number) =>
    sql`SELECT ${scope} AS w_scope, ${address} AS w_address, ${scope === 'address' ? '' : merchant} AS w_merchant_id, 0 AS w_failures, ${now} AS w_window_start,
      0 AS w_blocks, 0 AS w_blocked_until, TIMESTAMP'2000-01-01 00:00:00' AS w_updated_at, UTC_TIMESTAMP(6) + INTERVAL ${RESERVATION_SECONDS + 1} SECOND AS w_expires_at,
      ${count + forcedCount} AS w_reserved, ${until} AS w_reserved_until, ${token} AS w_reservation`;
  const pairRow = merchant === '' ? sql`` : sql`UNION ALL ${row('pair', pairCount, forced?.pair ?? 0)} FROM merchants WHERE id = ${merchant}`;
  // In one transaction: the rows stay locked until the answer is read, so no other grant rewrites `reservation` before.
  const allGranted = await retryOnConflict(() => db.transaction().execute(async (trx) => {
    await sql`INSERT INTO auth_failures (scope, address, merchant_id, failures, window_start, blocks, blocked_until, updated_at, expires_at, reserved, reserved_until, reservation)
    SELECT * FROM (${row('address', addressCount, forced?.address ?? 0)} ${pairRow}) AS wanted
    ON DUPLICATE KEY UPDATE
      reservation = IF(blocked_until <= ${now} AND ${counted} + ${live} + ${force} + ${want} <= ${limit}, VALUES(reservation), reservation),
      reserved = ${live} + ${force} + IF(reservation = VALUES(reservation), ${want}, 0),
      reserved_until = IF(reservation = VALUES(reservation) OR ${force} > 0, ${until}, reserved_until),
      expires_at = IF(reservation = VALUES(reservation) OR ${force} > 0, GREATEST(expires_at, UTC_TIMESTAMP(6) + INTERVAL ${RESERVATION_SECONDS + 1} SECOND), expires_at)`.execute(trx);
    const { rows } = await sql<{ scope: 'address' | 'pair'; granted: number | string }>`SELECT scope, reservation = ${token} AS granted FROM auth_failures
    WHERE address = ${address} AND ((scope = 'address' AND merchant_id = '') OR (scope = 'pair' AND merchant_id = ${merchant})) FOR UPDATE`.execute(trx);
    const granted = new Set(rows.filter((r) => Number(r.granted) === 1).map((r) => r.scope));
    const wanted = merchant !== '' && rows.some((r) => r.scope === 'pair') ? ['address', 'pair'] : ['address'];
    if (wanted.every((scope) => granted.has(scope as 'address' | 'pair'))) return true;
    // The forced checks stay counted; only what was asked for and granted goes back.
    if (granted.size > 0) await releaseChecks(trx, { address, merchantId: merchant, addressCount: granted.has('address') ? addressCount : 0, pairCount: granted.has('pair') ? pairCount : 0, now });
    return false;
  }));
  return { granted: allGranted, records: [] };
}

/** Gives back reserved checks that ended without a failure. */
export async function releaseChecks(db: Kysely<any>, { address, merchantId, addressCount, pairCount }: ThrottleReservation): Promise<void> {
  if (!isShareableAddress(address)) return;
  const merchant = merchantId !== undefined && isStorableId(merchantId) ? merchantId : '';
  await sql`UPDATE auth_failures SET reserved = GREATEST(reserved - IF(scope = 'address', ${addressCount}, ${pairCount}), 0)
    WHERE address = ${address} AND ((scope = 'address' AND merchant_id = '') OR (scope = 'pair' AND merchant_id = ${merchant}))`.execute(db);
}

/** A counter's first row: blocked at once when its limit is 1. */
function firstFailure(blocks: boolean, blockedUntil: number) {
  return blocks ? { failures: 0, blocks: 1, blockedUntil } : { failures: 1, blocks: 0, blockedUntil: 0 };
}

/** The pair's count and doubling start again (a block in force stays); answers the row, if there is one. */
export async function resetPair(db: Kysely<any>, address: string, merchantId: string, now: number): Promise<ThrottleRecord[]> {
  if (!isShareableAddress(address) || !isStorableId(merchantId)) return [];
  const where = sql`scope = 'pair' AND address = ${address} AND merchant_id = ${merchantId}`;
  const updated = await retryOnConflict(() =>
    sql`UPDATE auth_failures SET blocked_until = GREATEST(blocked_until, 0), failures = 0, blocks = 0, updated_at = ${NEXT_VERSION},
    expires_at = UTC_TIMESTAMP(6) + INTERVAL GREATEST(blocked_until - ${now}, ${RESET_VISIBLE_SECONDS}) SECOND
    WHERE ${where}`.execute(db),
  );
  if (updated.numAffectedRows === 0n) return [];
  const { rows } = await sql<RecordRow>`SELECT ${RECORD_COLUMNS} FROM auth_failures WHERE ${where}`.execute(db);
  return rows.map(toRecord);
}

/**
 * Rows changed at or after `since` less `overlapMicros` (`since` undefined: the server's now),
 * oldest change first, at most `limit`: a range of `auth_failures_changes`. A row outside the
 * census with a first failure and no block is left out: it is admitted within milliseconds of its
 * change (read then, inside the overlap) or refused and deleted, and the counts of a refused row
 * are the instances' own, so a record of it (a count of 1, each time it is written again) would
 * set theirs back. Its later counts and blocks are read, so the rows of an instance of a version
 * before migration 0011 (a rolling upgrade) still spread.
 */
export async function selectChanges(db: Kysely<any>, since: string | undefined, overlapMicros: number, limit: number): Promise<ThrottleRecord[]> {
  const { rows } = await sql<RecordRow>`SELECT ${RECORD_COLUMNS} FROM auth_failures
    WHERE updated_at >= COALESCE(CAST(${since ?? null} AS DATETIME(6)), UTC_TIMESTAMP(6)) - INTERVAL ${overlapMicros} MICROSECOND
      AND (census_stripe IS NOT NULL OR failures > 1 OR blocked_until <> 0)
    ORDER BY updated_at LIMIT ${limit}`.execute(db);
  return rows.map(toRecord);
}

/** Rows blocked after `now`, the longest blocks first, at most `limit`: a range of `auth_failures_blocked`. */
export async function selectActiveBlocks(db: Kysely<any>, now: number, limit: number): Promise<ThrottleRecord[]> {
  const { rows } = await sql<RecordRow>`SELECT ${RECORD_COLUMNS} FROM auth_failures
    WHERE blocked_until > ${now} ORDER BY blocked_until DESC LIMIT ${limit}`.execute(db);
  return rows.map(toRecord);
}

/** A block as `throttle list` shows it. */
export interface ThrottleBlock {
  scope: 'address' | 'pair';
  address: string;
  merchant_id: string | null;
  /** Unix seconds (the servers' clock). */
  blocked_until: number;
  /** Blocks of the pair so far (the next one lasts twice as long). */
  blocks: number;
}

/** The blocks in force at `now` (Unix seconds), the longest first, at most `limit`. */
export async function listThrottleBlocks(db: Kysely<any>, now: number, limit: number): Promise<ThrottleBlock[]> {
  const records = await selectActiveBlocks(db, now, limit);
  return records.map((r) => ({ scope: r.scope, address: r.address, merchant_id: r.merchantId ?? null, blocked_until: r.blockedUntil, blocks: r.blocks }));
}

/**
 * Lifts the blocks of a stored address: the address's own and every pair of it, or with
 * `merchantId` that pair only; their counts and doubling start again. Each row is marked
 * `LIFTED` with a new version, so every instance reading the changes drops the block within
 * its poll interval (throttle-store.ts). Resolves to the rows changed.
 */
export async function liftThrottleBlocks(db: Kysely<any>, address: string, merchantId: string | undefined): Promise<number> {
  const which = merchantId === undefined ? sql`address = ${address}` : sql`scope = 'pair' AND address = ${address} AND merchant_id = ${merchantId}`;
  const result = await sql`UPDATE auth_failures SET blocked_until = ${LIFTED}, failures = 0, blocks = 0, updated_at = ${NEXT_VERSION},
    expires_at = UTC_TIMESTAMP(6) + INTERVAL ${RESET_VISIBLE_SECONDS} SECOND
    WHERE ${which}`.execute(db);
  return Number(result.numAffectedRows ?? 0n);
}

/**
 * Deletes rows that mean nothing any more, about `batchSize` at a time, at most `maxBatches`
 * transactions; resolves to the count. Each batch gives its rows back to their census stripes in
 * the same transaction (rows locked, then the stripes: the order `admitToCensus` takes them in).
 */
export async function pruneAuthFailures(db: Kysely<any>, batchSize: number, maxBatches: number): Promise<number> {
  let deleted = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    const count = await retryOnConflict(() => pruneBatch(db, batchSize));
    deleted += count;
    if (count < batchSize) break;
  }
  return deleted;
}

const TIME_TEXT = sql.raw(`'%Y-%m-%d %H:%i:%s.%f'`);

async function pruneBatch(db: Kysely<any>, batchSize: number): Promise<number> {
  return db.transaction().execute(async (trx) => {
    // One instant for the whole batch, and the expiry of its last row: the statements below see the same rows.
    const { rows: [at] } = await sql<{ now: string }>`SELECT DATE_FORMAT(UTC_TIMESTAMP(6), ${TIME_TEXT}) AS now`.execute(trx);
    const before = sql`expires_at < CAST(${at!.now} AS DATETIME(6))`;
    // The batch's last row in the expiry index's order (expires_at, then the primary key): rows of one expiry are cut too.
    const { rows: [last] } = await sql<{ cut: string; scope: string; address: string; merchant_id: string }>`SELECT DATE_FORMAT(expires_at, ${TIME_TEXT}) AS cut, scope, address, merchant_id
      FROM auth_failures WHERE ${before} ORDER BY expires_at, scope, address, merchant_id LIMIT 1 OFFSET ${batchSize - 1}`.execute(trx);
    const ended = last
      ? sql`${before} AND (expires_at, scope, address, merchant_id) <= (CAST(${last.cut} AS DATETIME(6)), ${last.scope}, ${last.address}, ${last.merchant_id})`
      : before;
    const { rows: stripes } = await sql<{ stripe: number | null; n: number | string }>`SELECT census_stripe AS stripe, COUNT(*) AS n FROM auth_failures
      WHERE ${ended} GROUP BY census_stripe FOR UPDATE`.execute(trx);
    const result = await sql`DELETE FROM auth_failures WHERE ${ended}`.execute(trx);
    for (const { stripe, n } of stripes) {
      if (stripe !== null) await sql`UPDATE auth_failures_census SET held = GREATEST(held - ${Number(n)}, 0) WHERE stripe = ${stripe}`.execute(trx);
    }
    return Number(result.numAffectedRows ?? 0n);
  });
}

/** Rows the census counts now, for tests and `throttle` reports: the sum of its stripes. */
export async function censusHeld(db: Kysely<any>): Promise<number> {
  const { rows } = await sql<{ held: number | string | null }>`SELECT SUM(held) AS held FROM auth_failures_census`.execute(db);
  return Number(rows[0]?.held ?? 0);
}
