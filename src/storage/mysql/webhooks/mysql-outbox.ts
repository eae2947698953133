/**
 * The webhook outbox on MySQL (docs/webhooks.md#delivery), for the dispatcher every `serve`
 * instance runs. A claim is one transaction: the endpoints with due deliveries (one loose index
 * read of `webhook_deliveries_due`), then for each, its row locked with `SKIP LOCKED` (an endpoint
 * another instance is claiming for is skipped this round) and its deliveries in flight counted (a
 * range of the same index: a claimed row's `next_attempt_at` is its lease's end), at most its share
 * of the round's due ids (`FOR UPDATE SKIP LOCKED`, by primary key), which are then updated: a claim
 * token, and `next_attempt_at` moved to the end of the lease; they are read back by those ids. So a
 * claim reads what it takes and what is in flight, however large the outbox. Endpoints take
 * turns, so a merchant with 10,000 due deliveries delays another's first one by one round at most;
 * a merchant at the dispatcher's share of its slots is passed over (`MerchantRoom`, below).
 * A claim whose instance died is due again when its lease ends; one whose instance lives is sent
 * once, since only the holder of the token records it.
 *
 * A disabled merchant's deliveries wait (docs/webhooks.md#a-disabled-merchant): its endpoints are
 * left out of the claim, and a delivery whose merchant was disabled between the claim and the read
 * of what was claimed is given back unsent. After `merchant enable` they are sent as any due
 * delivery; those older than the retention are cancelled by the prune (`merchant_disabled`).
 */
import { randomBytes } from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import { openApiKey, type MasterKey } from '../../sql/key-sealing.js';
import type { AttemptRecord, ClaimOptions, DueDelivery, OutboxStats, WebhookOutbox } from '../../webhook-outbox.js';
import type { MerchantApiDatabase } from '../schema.js';
import { eventDataFromRow, recordColumns } from './event-records.js';
import { expandShareBatches, pendingShareBatches } from './share-batches.js';

type Db = Kysely<MerchantApiDatabase>;

/** A deadlock or lock wait timeout: the transaction was rolled back and may run again. */
function isDeadlock(error: unknown): boolean {
  const errno = (error as { errno?: number }).errno;
  return errno === 1213 || errno === 1205;
}

/**
 * The endpoints whose merchant is disabled: among `endpointIds` when given, else all of them. Their
 * deliveries are held, neither claimed nor counted as late. A plain read: the claim gives back what
 * it read of a merchant disabled meanwhile.
 */
async function heldEndpoints(db: Db | Transaction<MerchantApiDatabase>, endpointIds?: readonly string[]): Promise<Set<string>> {
  const held = new Set<string>();
  if (endpointIds === undefined) {
    const { rows } = await sql<{ id: string }>`SELECT p.id FROM webhook_endpoints p INNER JOIN merchants m ON m.id = p.merchant_id WHERE m.status <> 'active'`.execute(db);
    for (const row of rows) held.add(row.id);
    return held;
  }
  for (let i = 0; i < endpointIds.length; i += 1000) {
    const { rows } = await sql<{ id: string }>`SELECT p.id FROM webhook_endpoints p INNER JOIN merchants m ON m.id = p.merchant_id
      WHERE p.id IN (${sql.join(endpointIds.slice(i, i + 1000))}) AND m.status <> 'active'`.execute(db);
    for (const row of rows) held.add(row.id);
  }
  return held;
}

/** `Date` → `DATETIME(6)` text in UTC. */
function sqlTime(date: Date): string {
  return `${date.toISOString().slice(0, 23).replace('T', ' ')}000`;
}

/**
 * What a claim may still take per merchant (`ClaimOptions.merchantRoom` less what it took), by
 * endpoint: the endpoints' merchants are read (by primary key, no lock) only when the dispatcher
 * bounds merchants, and only for as many due endpoints as the claim goes through.
 */
class MerchantRoom {
  readonly #merchantOf = new Map<string, string>();
  readonly #taken = new Map<string, number>();
  constructor(readonly merchantRoom: ClaimOptions['merchantRoom']) {}

  /** Up to `limit` of `endpoints`, in their order, whose merchant has room; read `limit` at a time. */
  async endpointsWithRoom(trx: Transaction<MerchantApiDatabase>, endpoints: string[], limit: number): Promise<string[]> {
    const chosen: string[] = [];
    const step = Math.max(limit, 100);
    for (let from = 0; from < endpoints.length && chosen.length < limit; from += step) {
      const slice = endpoints.slice(from, from + step);
      const { rows } = await sql<{ id: string; merchant_id: string }>`SELECT id, merchant_id FROM webhook_endpoints WHERE id IN (${sql.join(slice)})`.execute(trx);
      for (const row of rows) this.#merchantOf.set(row.id, row.merchant_id);
      for (const endpointId of slice) if (chosen.length < limit && this.of(endpointId) > 0) chosen.push(endpointId);
    }
    return chosen;
  }

  /** What the claim may still take of this endpoint's merchant. */
  of(endpointId: string): number {
    const merchantId = this.#merchantOf.get(endpointId);
    if (this.merchantRoom === undefined) return Number.POSITIVE_INFINITY;
    if (merchantId === undefined) return 0;
    return this.merchantRoom(merchantId) - (this.#taken.get(merchantId) ?? 0);
  }

  took(endpointId: string, n: number): void {
    const merchantId = this.#merchantOf.get(endpointId);
    if (merchantId !== undefined) this.#taken.set(merchantId, (this.#taken.get(merchantId) ?? 0) + n);
  }
}

export class MysqlWebhookOutbox implements WebhookOutbox {
  readonly #db: Db;
  readonly #masterKey: MasterKey;
  /** Opened secrets by their sealed text: a JWE is opened once per process, not once per attempt. */
  readonly #opened = new Map<string, string>();

  constructor(options: { db: Db; masterKey: MasterKey }) {
    this.#db = options.db;
    this.#masterKey = options.masterKey;
  }

  async claimDue(options: ClaimOptions): Promise<DueDelivery[]> {
    // An import batch's outbox row becomes events and deliveries here, one bounded step a round
    // (share-batches.ts): the claim below may take them at once.
    await expandShareBatches(this.#db);
    // Two instances claiming at once may deadlock on the gaps of the due index: the loser tries again.
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#claim(options);
      } catch (error) {
        if (attempt >= 3 || !isDeadlock(error)) throw error;
      }
    }
  }

  async #claim(options: ClaimOptions): Promise<DueDelivery[]> {
    const token = randomBytes(16).toString('base64url');
    const claimedIds: (string | number)[] = [];
    const claimed = await this.#db.transaction().execute(async (trx) => {
      const { rows: due } = await sql<{ endpoint_id: string; first_due: string }>`SELECT endpoint_id, MIN(next_attempt_at) AS first_due FROM webhook_deliveries
        WHERE state = 'pending' GROUP BY endpoint_id HAVING MIN(next_attempt_at) <= UTC_TIMESTAMP(6)`.execute(trx);
      if (due.length === 0) return 0;
      // A disabled merchant's endpoints wait: left out before the round is shared, so they take no one's turn.
      const held = await heldEndpoints(trx, due.map((row) => row.endpoint_id));
      // Shuffled: instances claiming at once start at different endpoints; each endpoint gets a share of the round.
      const shuffled = due.map((row) => row.endpoint_id).filter((id) => !held.has(id)).sort(() => Math.random() - 0.5);
      // The dispatcher's share per merchant (ClaimOptions.merchantRoom): endpoints of a merchant at its share are passed over.
      const room = new MerchantRoom(options.merchantRoom);
      const endpoints = options.merchantRoom === undefined ? shuffled.slice(0, options.limit) : await room.endpointsWithRoom(trx, shuffled, options.limit);
      if (endpoints.length === 0) return 0;
      const share = Math.max(1, Math.ceil(options.limit / endpoints.length));
      const micros = Math.round(options.leaseMs * 1000);
      let total = 0;
      for (const endpointId of endpoints) {
        if (total >= options.limit) break;
        if (room.of(endpointId) <= 0) continue;
        const { rows: locked } = await sql<{ id: string }>`SELECT id FROM webhook_endpoints WHERE id = ${endpointId} AND status = 'enabled' FOR UPDATE SKIP LOCKED`.execute(trx);
        if (locked.length === 0) continue;
        // In flight: claimed rows, whose `next_attempt_at` is their lease's end, so a range of the due
        // index between now and one lease ahead (leased_until has no index: filtering on it alone
        // read every pending row of the endpoint, a third of a million after a large import). A row
        // of that range without a lease is a retry due soon; at most maxInFlight matches are read.
        const { rows: flying } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM (SELECT 1 FROM webhook_deliveries
          WHERE endpoint_id = ${endpointId} AND state = 'pending' AND next_attempt_at > UTC_TIMESTAMP(6)
            AND next_attempt_at <= UTC_TIMESTAMP(6) + INTERVAL ${micros} MICROSECOND AND leased_until > UTC_TIMESTAMP(6)
          LIMIT ${options.maxInFlightPerEndpoint}) flying`.execute(trx);
        const take = Math.min(share, options.maxInFlightPerEndpoint - Number(flying[0]!.n), options.limit - total, room.of(endpointId));
        if (take <= 0) continue;
        const { rows: ids } = await sql<{ id: string | number }>`SELECT id FROM webhook_deliveries
          WHERE endpoint_id = ${endpointId} AND state = 'pending' AND next_attempt_at <= UTC_TIMESTAMP(6)
          ORDER BY next_attempt_at LIMIT ${take} FOR UPDATE SKIP LOCKED`.execute(trx);
        if (ids.length === 0) continue;
        await sql`UPDATE webhook_deliveries SET claim_token = ${token},
          leased_until = UTC_TIMESTAMP(6) + INTERVAL ${micros} MICROSECOND, next_attempt_at = UTC_TIMESTAMP(6) + INTERVAL ${micros} MICROSECOND
          WHERE id IN (${sql.join(ids.map((row) => row.id))})`.execute(trx);
        claimedIds.push(...ids.map((row) => row.id));
        room.took(endpointId, ids.length);
        total += ids.length;
      }
      return total;
    });
    if (claimed === 0) return [];
    const { rows } = await sql<{
      id: string | number;
      event_id: string;
      endpoint_id: string;
      merchant_id: string;
      attempts: number;
      type: string;
      data: string | null;
      shared_user_id: string | null;
      user_found: number | string | null;
      event_at: string;
      url: string;
      sealed_secret: string;
      previous_sealed_secret: string | null;
      previous_valid: number | null;
      failing_ms: string | number | null;
      merchant_status: string | null;
    } & Record<string, unknown>>`SELECT d.id, d.event_id, d.endpoint_id, d.merchant_id, d.attempts, e.type, e.data, e.shared_user_id, u.id IS NOT NULL AS user_found, ${recordColumns('u')},
        (SELECT m.status FROM merchants m WHERE m.id = d.merchant_id) AS merchant_status,
        DATE_FORMAT(e.created_at, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS event_at,
        p.url, p.sealed_secret, p.previous_sealed_secret, p.previous_expires_at > UTC_TIMESTAMP(6) AS previous_valid,
        FLOOR(TIMESTAMPDIFF(MICROSECOND, p.failing_since, UTC_TIMESTAMP(6)) / 1000) AS failing_ms
      FROM webhook_deliveries d
      INNER JOIN webhook_events e ON e.id = d.event_id
      INNER JOIN webhook_endpoints p ON p.id = d.endpoint_id
      LEFT JOIN user_shares s ON e.data IS NULL AND s.merchant_id = e.merchant_id AND s.shared_user_id = e.shared_user_id
      LEFT JOIN users u ON u.id = s.user_id
      WHERE d.id IN (${sql.join(claimedIds)}) AND d.claim_token = ${token} AND d.state = 'pending'
      ORDER BY d.id`.execute(this.#db);
    const deliveries: DueDelivery[] = [];
    for (const row of rows) {
      // The merchant was disabled since the claim: given back unsent, to wait with the others.
      if (row.merchant_status !== 'active') {
        await sql`UPDATE webhook_deliveries SET claim_token = NULL, leased_until = NULL, next_attempt_at = UTC_TIMESTAMP(6) WHERE id = ${row.id} AND claim_token = ${token}`.execute(this.#db);
        continue;
      }
      // An event that references its share: the record from the user's row, unchanged since the
      // change (a change writes it into the event first: event-records.ts), so every attempt
      // sends the same bytes. The share gone (its merchant being deleted): nothing to send.
      let data = row.data;
      if (data === null) {
        if (Number(row.user_found) !== 1 || row.shared_user_id === null) {
          await sql`UPDATE webhook_deliveries SET state = 'cancelled', claim_token = NULL, leased_until = NULL, last_error = 'share_gone' WHERE id = ${row.id} AND claim_token = ${token}`.execute(this.#db);
          continue;
        }
        data = eventDataFromRow(row, row.shared_user_id, row.event_at);
      }
      const secrets: string[] = [];
      try {
        secrets.push(await this.#open(row.merchant_id, row.sealed_secret));
        if (row.previous_sealed_secret !== null && Number(row.previous_valid) === 1) secrets.push(await this.#open(row.merchant_id, row.previous_sealed_secret));
      } catch {
        // A secret that does not open (another MASTER_KEY, an altered row) holds back only its own
        // delivery: noted on it, and claimed again when the lease ends.
        await sql`UPDATE webhook_deliveries SET last_error = 'secret_unreadable' WHERE id = ${row.id} AND claim_token = ${token}`.execute(this.#db);
        continue;
      }
      deliveries.push({
        id: String(row.id),
        eventId: row.event_id,
        endpointId: row.endpoint_id,
        merchantId: row.merchant_id,
        url: row.url,
        type: row.type,
        eventTimestamp: row.event_at,
        data,
        attempts: Number(row.attempts),
        secrets,
        ...(row.failing_ms !== null ? { failingForMs: Number(row.failing_ms) } : {}),
        claimToken: token,
      });
    }
    return deliveries;
  }

  async recordAttempt(record: AttemptRecord): Promise<void> {
    const { delivery } = record;
    const state = record.outcome === 'delivered' ? 'delivered' : record.outcome === 'failed' ? 'failed' : 'pending';
    const next = record.nextAttemptAt ? sqlTime(record.nextAttemptAt) : null;
    const update = (db: Db | Transaction<MerchantApiDatabase>) =>
      sql`UPDATE webhook_deliveries SET state = ${state}, attempts = attempts + 1,
          next_attempt_at = COALESCE(${next}, next_attempt_at), claim_token = NULL, leased_until = NULL,
          last_attempt_at = UTC_TIMESTAMP(6), last_status = ${record.status ?? null}, last_error = ${record.error ?? null},
          last_response = ${record.responseBody === undefined ? null : Buffer.from(record.responseBody, 'utf8').subarray(0, 256)}
        WHERE id = ${delivery.id} AND claim_token = ${delivery.claimToken}`.execute(db);
    // The usual case, a delivery to an endpoint that was not failing: the endpoint's row stays as it
    // is, so one statement, and attempts to one endpoint never queue on its row.
    if (record.outcome === 'delivered' && delivery.failingForMs === undefined && record.disableEndpoint === undefined) {
      await update(this.#db);
      return;
    }
    // Locks in the claim's order, the endpoint's row before its deliveries', so the two never wait crosswise;
    // a deadlock all the same (a claim's range lock) is tried again: the record must not wait for the lease.
    for (let attempt = 1; ; attempt++) {
      try {
        await this.#db.transaction().execute(async (trx) => {
          const { rows: held } = await sql<{ id: string }>`SELECT p.id FROM webhook_endpoints p
            WHERE p.id = ${delivery.endpointId} FOR UPDATE`.execute(trx);
          if (held.length === 0) return;
          const result = await update(trx);
          // The lease ran out and another instance holds the delivery now: its record counts, not this one.
          if (Number(result.numAffectedRows ?? 0) === 0) return;
          if (record.outcome === 'delivered') {
            await sql`UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ${delivery.endpointId} AND failing_since IS NOT NULL`.execute(trx);
          } else if (delivery.failingForMs === undefined) {
            await sql`UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, UTC_TIMESTAMP(6)) WHERE id = ${delivery.endpointId}`.execute(trx);
          }
          if (record.disableEndpoint !== undefined) {
            await sql`UPDATE webhook_endpoints SET status = 'disabled', disabled_reason = ${record.disableEndpoint}, updated_at = UTC_TIMESTAMP(6) WHERE id = ${delivery.endpointId}`.execute(trx);
            await sql`UPDATE webhook_deliveries SET state = 'cancelled', claim_token = NULL, leased_until = NULL WHERE endpoint_id = ${delivery.endpointId} AND state = 'pending'`.execute(trx);
          }
        });
        return;
      } catch (error) {
        if (attempt >= 5 || !isDeadlock(error)) throw error;
      }
    }
  }

  async prune(before: Date): Promise<number> {
    const cutoff = sqlTime(before);
    let deleted = 0;
    // Along each primary key, oldest first (migration 0010 dropped the indexes on created_at):
    // delivery ids grow and event ids begin with the time, so the rows before the cutoff come
    // first. Each delete is bounded by the first id at or after the cutoff (a plain read that
    // stops there), so it never scans, nor locks, the recent rows the dispatchers work on. A row
    // written out of order (a transaction that committed late) waits for the next prune.
    const deliveriesUpTo = await this.#firstIdFrom('webhook_deliveries', cutoff);
    // A disabled merchant's deliveries wait for `merchant enable` as long as the retention; older
    // ones are cancelled here, and so deleted below with the finished ones. Bounded steps along one
    // endpoint's pending rows (`webhook_deliveries_due`, which holds the id: rows after the cutoff's
    // first id are passed over in the index, not read), so a held backlog costs little each time.
    for (const endpointId of await heldEndpoints(this.#db)) {
      for (;;) {
        const result = await sql`UPDATE webhook_deliveries SET state = 'cancelled', claim_token = NULL, leased_until = NULL, last_error = 'merchant_disabled'
          WHERE endpoint_id = ${endpointId} AND state = 'pending' AND ${deliveriesUpTo === undefined ? sql`1 = 1` : sql`id < ${deliveriesUpTo}`} AND created_at < ${cutoff} LIMIT 5000`.execute(this.#db);
        if (Number(result.numAffectedRows ?? 0) < 5000) break;
      }
    }
    // In bounded steps: a week of a busy outbox is not one statement's undo log.
    for (;;) {
      const result = await sql`DELETE FROM webhook_deliveries WHERE ${deliveriesUpTo === undefined ? sql`1 = 1` : sql`id < ${deliveriesUpTo}`}
        AND created_at < ${cutoff} AND state <> 'pending' ORDER BY id LIMIT 5000`.execute(this.#db);
      const n = Number(result.numAffectedRows ?? 0);
      deleted += n;
      if (n < 5000) break;
    }
    const eventsUpTo = await this.#firstIdFrom('webhook_events', cutoff);
    for (;;) {
      const result = await sql`DELETE FROM webhook_events WHERE ${eventsUpTo === undefined ? sql`1 = 1` : sql`id < ${eventsUpTo}`} AND created_at < ${cutoff}
        AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = webhook_events.id) ORDER BY id LIMIT 5000`.execute(this.#db);
      if (Number(result.numAffectedRows ?? 0) < 5000) break;
    }
    return deleted;
  }

  /** The first id (primary key order) of a row created at or after `cutoff`; undefined when every row is older. */
  async #firstIdFrom(table: 'webhook_deliveries' | 'webhook_events', cutoff: string): Promise<string | undefined> {
    const { rows } = await sql<{ id: string | number }>`SELECT id FROM ${sql.table(table)} WHERE created_at >= ${cutoff} ORDER BY id LIMIT 1`.execute(this.#db);
    return rows[0] === undefined ? undefined : String(rows[0].id);
  }

  async stats(): Promise<OutboxStats> {
    // Per endpoint, along `webhook_deliveries_due`: the pending rows and the first time one is due.
    const { rows } = await sql<{ endpoint_id: string; n: number | string; waited_ms: number | string | null }>`SELECT endpoint_id, COUNT(*) AS n,
        FLOOR(TIMESTAMPDIFF(MICROSECOND, MIN(next_attempt_at), UTC_TIMESTAMP(6)) / 1000) AS waited_ms
      FROM webhook_deliveries WHERE state = 'pending' GROUP BY endpoint_id`.execute(this.#db);
    // A disabled merchant's deliveries are pending, but held, not late: they do not age the outbox.
    const held = rows.length === 0 ? new Set<string>() : await heldEndpoints(this.#db, rows.map((row) => row.endpoint_id));
    // An import batch not expanded yet (share-batches.ts): its deliveries are due since its commit.
    const batches = await pendingShareBatches(this.#db);
    let pending = batches.deliveries;
    let oldestDueAgeMs = batches.oldestMs;
    for (const row of rows) {
      pending += Number(row.n);
      if (row.waited_ms !== null && !held.has(row.endpoint_id)) oldestDueAgeMs = Math.max(oldestDueAgeMs, Number(row.waited_ms));
    }
    return { pending, oldestDueAgeMs };
  }

  async #open(merchantId: string, sealed: string): Promise<string> {
    let secret = this.#opened.get(sealed);
    if (secret === undefined) {
      secret = await openApiKey(this.#masterKey, merchantId, sealed);
      if (this.#opened.size >= 10_000) this.#opened.clear();
      this.#opened.set(sealed, secret);
    }
    return secret;
  }
}
