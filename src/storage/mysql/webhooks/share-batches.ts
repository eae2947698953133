/**
 * One outbox row per import batch (migration 0018, docs/webhooks.md#delivery). An import batch
 * that shares at least `SHARE_BATCH_FROM` new users with a merchant whose endpoints receive
 * `user.shared` writes, in its transaction, one row of `webhook_share_batches` for that merchant
 * (its stamp, the endpoints receiving `user.shared` at that moment, the number of shares) instead
 * of an event row and a delivery row per user and endpoint, about as much writing as the users
 * themselves. The batch's new shares are those of the merchant whose `updated_at` is the stamp:
 * each batch's stamp is later than every stamp before it for its merchants (`changeStamp`,
 * user-upsert.ts), and a batch that writes such a row changes no existing user, so no other share
 * carries it. The dispatcher expands the row after the commit (`expandShareBatches`, called by every
 * claim of `MysqlWebhookOutbox`): at most `EXPANSION_STEP` shares a step, in `shared_user_id` order,
 * each step one transaction that writes their events (type `user.shared`, referencing the share,
 * `created_at` the stamp, ids carrying the stamp's time) and one delivery per endpoint, and moves
 * the row's cursor or deletes the row. So a crash anywhere loses nothing (the row stays until its
 * last step commits) and repeats nothing (a step commits with its cursor, or not at all): every
 * event is written once, with the id and the body it would have had written in the batch.
 *
 * Until a step expands a share, nothing of its event is listed (`webhook deliveries`, the API):
 * a batch's deliveries appear once a dispatcher has expanded it. `stats()` counts them as pending
 * and as due since the stamp, so `/healthz` shows an import nobody dispatches.
 *
 * Three things change a pending share and must not lose its event:
 * - an import that changes its user: it first writes the `user.shared` event of every still
 *   pending share of those users (`writePendingShareEvents`, with the batch's row locked, which
 *   the expansion holds through its step), then `materializeEventsOf` writes the record as it was
 *   into them, as for any event of an earlier change; the share's new `updated_at` takes it out of
 *   the batch;
 * - an erasure: `lockShareBatches` (which writes the rows) makes it wait for a step in progress,
 *   and later steps pass the rows over until it commits; the share it deletes is not expanded after, and an event expanded
 *   before goes with the others (`eraseWebhookEvents`);
 * - the deletion of the merchant: its rows go with it (foreign key).
 * A step takes the merchant's row, then its batch row, both `SKIP LOCKED`: a merchant whose import
 * holds its row is passed over (the import is never made to wait) and expanded once the import has
 * let go. An import takes its merchants' rows before any batch row, so it and a step never wait on
 * each other crosswise. On Galera, where those locks are each node's own, the batch row is what
 * orders them: a step, an import's `writePendingShareEvents` and an erasure all write it, so of
 * two concurrent ones on two nodes one fails certification and runs again.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import { newEventId } from '../../webhook-outbox.js';
import type { MerchantApiDatabase } from '../schema.js';
import { isWriteConflict } from '../write-conflicts.js';

type Db = Kysely<MerchantApiDatabase> | Transaction<MerchantApiDatabase>;

/** New shares of one merchant in one batch from which one batch row is written (below, an event row each: as quick, and listed at once). */
export const SHARE_BATCH_FROM = 500;

/** Shares one expansion step turns into events (deliveries: as many times the batch's endpoints, at most 10). */
export const EXPANSION_STEP = 2000;

const STAMP = '%Y-%m-%d %H:%i:%s.%f';

/**
 * Writes one batch row per merchant of `newShares` (its count of new shares stamped `stamp` in
 * this transaction) that has at least `SHARE_BATCH_FROM` of them and endpoints receiving
 * `user.shared` in `subscribers`. Returns the merchants written for: their new shares need no event
 * row now. Only for a batch that changes no existing user (else its changed shares carry the stamp too).
 */
export async function writeShareBatches(
  trx: Transaction<MerchantApiDatabase>,
  newShares: ReadonlyMap<string, number>,
  subscribers: ReadonlyMap<string, ReadonlyArray<{ id: string; events: ReadonlySet<string> }>>,
  stamp: string,
): Promise<Set<string>> {
  const written = new Set<string>();
  for (const [merchantId, shares] of newShares) {
    if (shares < SHARE_BATCH_FROM) continue;
    const receivers = (subscribers.get(merchantId) ?? []).filter((endpoint) => endpoint.events.has('user.shared')).map((endpoint) => endpoint.id);
    if (receivers.length === 0) continue;
    try {
      // One transaction calling upsertUsers twice with one stamp would name the same shares twice: added up.
      await sql`INSERT INTO webhook_share_batches (merchant_id, stamp, endpoints, shares) VALUES (${merchantId}, ${stamp}, ${receivers.join(',')}, ${shares})
        ON DUPLICATE KEY UPDATE shares = shares + VALUES(shares)`.execute(trx);
    } catch (error) {
      // A schema before migration 0018 (an import run ahead of `migrate`): the events go in one by one, as
      // before. A failed statement leaves the transaction as it was.
      if (noTable(error)) return written;
      throw error;
    }
    written.add(merchantId);
  }
  return written;
}

/** ER_NO_SUCH_TABLE: the schema is older than migration 0018. */
function noTable(error: unknown): boolean {
  return (error as { errno?: number } | null)?.errno === 1146;
}

interface PendingShare {
  merchantId: string;
  sharedUserId: string;
}

/**
 * Writes the events of `shares` (all of one batch, stamped `stamp`) and a delivery for each of the
 * batch's `endpoints` that still exists: pending, or cancelled for an endpoint disabled since (as a
 * disable would have done to a delivery written by the batch: `redeliver` sends it). Returns how many events.
 */
async function writeSharedEvents(trx: Transaction<MerchantApiDatabase>, shares: readonly PendingShare[], stamp: string, endpoints: string): Promise<number> {
  if (shares.length === 0) return 0;
  const ids = endpoints.split(',').filter((id) => id !== '');
  // Live endpoints only, as the batch row was written with (`subscribedEndpoints`): said again here, so no row can reach a test endpoint.
  const { rows: found } = ids.length === 0 ? { rows: [] } : await sql<{ id: string; status: string }>`SELECT id, status FROM webhook_endpoints WHERE id IN (${sql.join(ids)}) AND mode = 'live'`.execute(trx);
  // A removed endpoint's deliveries went with it: it gets none, and without one an event is not kept.
  if (found.length === 0) return 0;
  const at = Date.parse(`${stamp.replace(' ', 'T')}Z`);
  for (let i = 0; i < shares.length; i += 1000) {
    const chunk = shares.slice(i, i + 1000).map((share) => ({ ...share, eventId: newEventId(at) }));
    await sql`INSERT INTO webhook_events (id, merchant_id, shared_user_id, type, data, created_at)
      VALUES ${sql.join(chunk.map((e) => sql`(${e.eventId}, ${e.merchantId}, ${e.sharedUserId}, 'user.shared', NULL, ${stamp})`))}`.execute(trx);
    const deliveries = chunk.flatMap((e) => found.map((endpoint) => sql`(${e.eventId}, ${endpoint.id}, ${e.merchantId}, ${endpoint.status === 'enabled' ? 'pending' : 'cancelled'}, ${stamp}, ${stamp})`));
    for (let j = 0; j < deliveries.length; j += 1000) {
      await sql`INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, state, next_attempt_at, created_at) VALUES ${sql.join(deliveries.slice(j, j + 1000))}`.execute(trx);
    }
  }
  return shares.length;
}

/**
 * One step of the batch `batch`: its next `max` shares expanded, its cursor moved or its row
 * deleted, in `trx`. Undefined when its merchant or its row is held by another transaction (an
 * import, an erasure, another dispatcher): passed over this time.
 */
async function expandStep(trx: Transaction<MerchantApiDatabase>, batch: { id: string; merchant_id: string }, max: number): Promise<number | undefined> {
  const { rows: merchant } = await sql`SELECT id FROM merchants WHERE id = ${batch.merchant_id} FOR UPDATE SKIP LOCKED`.execute(trx);
  if (merchant.length === 0) return undefined;
  const { rows: held } = await sql<{ stamp: string; endpoints: string; after: string | null }>`SELECT DATE_FORMAT(stamp, ${STAMP}) AS stamp, endpoints, expanded_through AS after
    FROM webhook_share_batches WHERE id = ${batch.id} FOR UPDATE SKIP LOCKED`.execute(trx);
  const row = held[0];
  if (row === undefined) return undefined;
  // The shares' index in order, from the cursor: read after both locks, so no change of them is under way.
  const { rows: shares } = await sql<{ shared_user_id: string }>`SELECT shared_user_id FROM user_shares FORCE INDEX (user_shares_updated)
    WHERE merchant_id = ${batch.merchant_id} AND updated_at = ${row.stamp} ${row.after === null ? sql`` : sql`AND shared_user_id > ${row.after}`}
    ORDER BY shared_user_id LIMIT ${max}`.execute(trx);
  await writeSharedEvents(trx, shares.map((share) => ({ merchantId: batch.merchant_id, sharedUserId: share.shared_user_id })), row.stamp, row.endpoints);
  if (shares.length < max) await sql`DELETE FROM webhook_share_batches WHERE id = ${batch.id}`.execute(trx);
  else await sql`UPDATE webhook_share_batches SET expanded_through = ${shares[shares.length - 1]!.shared_user_id}, expanded = expanded + ${shares.length} WHERE id = ${batch.id}`.execute(trx);
  return shares.length;
}

/**
 * One bounded step of expansion: the oldest batch row that no other transaction holds, at most
 * `maxShares` of its shares. Returns how many shares were expanded and whether a batch row was
 * stepped (false: none waiting, or all held right now). A step that lost a write conflict (a
 * deadlock, a Galera certification failure) did nothing and is tried at the next call.
 */
export async function expandShareBatches(db: Kysely<MerchantApiDatabase>, options: { maxShares?: number } = {}): Promise<{ stepped: boolean; shares: number }> {
  const max = options.maxShares ?? EXPANSION_STEP;
  let waiting: Array<{ id: string; merchant_id: string }>;
  try {
    ({ rows: waiting } = await sql<{ id: string; merchant_id: string }>`SELECT id, merchant_id FROM webhook_share_batches ORDER BY id LIMIT 20`.execute(db));
  } catch (error) {
    // `serve` started ahead of `migrate` (it warns and starts): nothing to expand, and the claims go on.
    if (noTable(error)) return { stepped: false, shares: 0 };
    throw error;
  }
  for (const batch of waiting) {
    try {
      const shares = await db.transaction().execute((trx) => expandStep(trx, { id: String(batch.id), merchant_id: batch.merchant_id }, max));
      if (shares !== undefined) return { stepped: true, shares };
    } catch (error) {
      if (!isWriteConflict(error)) throw error;
    }
  }
  return { stepped: false, shares: 0 };
}

/** Expands every batch row there is (migration 0018's down, tests), waiting for rows held by others. */
export async function expandAllShareBatches(db: Kysely<any>, options: { maxShares?: number } = {}): Promise<number> {
  let total = 0;
  for (;;) {
    const { stepped, shares } = await expandShareBatches(db, options);
    total += shares;
    if (stepped) continue;
    const { rows } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM webhook_share_batches`.execute(db);
    if (Number(rows[0]!.n) === 0) return total;
    // Held by an import or another expander: their transactions are short, try again shortly.
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * Called by an import in the transaction that is about to change the users `userIds`, before
 * `materializeEventsOf`: writes the `user.shared` event of each share of theirs that a batch row
 * still names (its batch's stamp, not expanded yet), with its deliveries, and counts it out of the
 * batch (`left_early`). The batch rows are locked first: a step in progress is waited for, and a
 * later one sees the shares moved out of the batch by the change. Returns how many events.
 */
export async function writePendingShareEvents(trx: Transaction<MerchantApiDatabase>, userIds: readonly string[]): Promise<number> {
  let written = 0;
  for (let i = 0; i < userIds.length; i += 1000) {
    const { rows } = await sql<{ batch_id: string | number; endpoints: string; stamp: string; merchant_id: string; shared_user_id: string }>`SELECT b.id AS batch_id, b.endpoints,
        DATE_FORMAT(b.stamp, ${STAMP}) AS stamp, s.merchant_id, s.shared_user_id
      FROM user_shares s INNER JOIN webhook_share_batches b ON b.merchant_id = s.merchant_id AND b.stamp = s.updated_at
      WHERE s.user_id IN (${sql.join(userIds.slice(i, i + 1000))}) AND (b.expanded_through IS NULL OR s.shared_user_id > b.expanded_through)
      FOR UPDATE`.execute(trx).catch((error: unknown) => {
      // Before migration 0018 no share is pending in a batch row.
      if (noTable(error)) return { rows: [] };
      throw error;
    });
    const byBatch = new Map<string, { stamp: string; endpoints: string; shares: PendingShare[] }>();
    for (const row of rows) {
      const key = String(row.batch_id);
      const entry = byBatch.get(key) ?? { stamp: row.stamp, endpoints: row.endpoints, shares: [] };
      entry.shares.push({ merchantId: row.merchant_id, sharedUserId: row.shared_user_id });
      byBatch.set(key, entry);
    }
    for (const [batchId, entry] of byBatch) {
      written += await writeSharedEvents(trx, entry.shares, entry.stamp, entry.endpoints);
      await sql`UPDATE webhook_share_batches SET left_early = left_early + ${entry.shares.length} WHERE id = ${batchId}`.execute(trx);
    }
  }
  return written;
}

/**
 * Locks the batch rows of `merchantId` (an erasure, before it reads the share's events): a step
 * expanding them now is waited for, so its events are seen and erased, and one after it does not
 * find the share. Written, not only locked (`erasures`): on Galera a lock is its node's own, and
 * a written row makes an erasure and a step on two nodes conflict at certification (the loser runs again).
 */
export async function lockShareBatches(trx: Transaction<MerchantApiDatabase>, merchantId: string): Promise<void> {
  await sql`UPDATE webhook_share_batches SET erasures = erasures + 1 WHERE merchant_id = ${merchantId}`.execute(trx).catch((error: unknown) => {
    if (!noTable(error)) throw error;
  });
}

/**
 * What the batch rows hold, for `stats()`: the deliveries they will make (shares left times
 * endpoints; of the oldest 1000 rows, so the read stays bounded) and how long ago the oldest of an
 * active merchant was committed (ms).
 */
export async function pendingShareBatches(db: Db): Promise<{ deliveries: number; oldestMs: number }> {
  // A disabled merchant's rows wait as its deliveries do: pending, not late (mysql-outbox.ts).
  const { rows } = await sql<{ left: number | string; endpoints: string; age: number | string | null }>`SELECT CAST(b.shares AS SIGNED) - b.expanded - b.left_early AS ${sql.ref('left')}, b.endpoints,
      CASE WHEN m.status = 'active' THEN FLOOR(TIMESTAMPDIFF(MICROSECOND, b.stamp, UTC_TIMESTAMP(6)) / 1000) END AS age
    FROM webhook_share_batches b INNER JOIN merchants m ON m.id = b.merchant_id ORDER BY b.id LIMIT 1000`.execute(db).catch((error: unknown) => {
      if (noTable(error)) return { rows: [] };
      throw error;
    });
  let deliveries = 0;
  let oldestMs = 0;
  for (const row of rows) {
    deliveries += Math.max(0, Number(row.left)) * row.endpoints.split(',').length;
    if (row.age !== null) oldestMs = Math.max(oldestMs, Number(row.age));
  }
  return { deliveries, oldestMs };
}
