/**
 * Idempotent batch upsert of seed users: a user already shared with the merchant under that id
 * is updated in place when its record differs (the person keeps one row even if other merchants
 * see it under other ids, and the filter columns and `updated_at` of every share of it follow),
 * and left alone, `updated_at` included, when it does not; a new one gets a `users` row and a
 * `user_shares` row carrying its `is_active` and `date_joined` (migration 0002) and `updated_at`.
 *
 * `updated_at` (migration 0005, docs/protocol.md#changed-since): one stamp per batch, taken after
 * locking the rows of every merchant whose shares the batch writes: its own, and the other
 * merchants a changed user is shared with (a changed record moves `updated_at` on every share of
 * it). So writers of one merchant take turns, and each batch's stamp is later than every stamp
 * committed before it for any of those merchants (the server's UTC time, or 1 µs past the latest
 * of their stamps when the clock is behind it). A listing that saw a stamp never misses a change
 * committed after it, whichever merchant's import made the change: the change carries a later
 * stamp. Merchants are locked in id order, all before anything else, so two writers never wait
 * on each other crosswise; a batch that finds a changed user shared with a merchant it did not
 * lock throws `SharingMerchantsFound` before writing, and `withSharingMerchants` runs its
 * transaction again with that merchant locked from the start.
 *
 * Written for millions of rows (docs/mysql.md#import): which ids exist is asked with one range read
 * per merchant (a batch in key order, the usual export, finds its range empty at once), and an `IN`
 * list only when the range holds many other users; the new users go in in bulk (`new-users.ts`).
 */
import { sql, type Transaction } from 'kysely';
import { compareCodePoints } from '../../order.js';
import type { SeedUser } from '../../seed/seed.js';
import { insertNewUsers, loadData, UserBatch, type IdAllocation } from './new-users.js';
import { userColumns } from './user-rows.js';
import { USER_FIELDS, USER_FIELD_MAX_LENGTH, type MerchantApiDatabase } from '../schema.js';
import { canonicalColumn } from '../sql-values.js';
import { nextChangeStamp } from '../statements/change-stamp.js';
import { subscribedEndpoints, userReference, writeEvents, type ShareChange } from '../webhooks/outbox-writes.js';
import { materializeEventsOf } from '../webhooks/event-records.js';
import { writePendingShareEvents, writeShareBatches } from '../webhooks/share-batches.js';

type Trx = Transaction<MerchantApiDatabase>;

/** Names a field too long for its column, or returns undefined. Values are never quoted. */
export function userFieldProblem(user: SeedUser): string | undefined {
  for (const field of USER_FIELDS) {
    const value = user[field];
    if (typeof value === 'string' && value.length > USER_FIELD_MAX_LENGTH && [...value].length > USER_FIELD_MAX_LENGTH) {
      return `${field}: longer than ${USER_FIELD_MAX_LENGTH} characters`;
    }
  }
  return undefined;
}

/**
 * Upserts one batch inside `trx`; a key repeated in the batch keeps its last record. `alsoLock`:
 * merchants to lock besides the batch's own, those a batch before found sharing its users
 * (`withSharingMerchants`). Throws `SharingMerchantsFound`, having written nothing, when a changed
 * user is shared with a merchant neither names.
 */
export async function upsertUsers(trx: Trx, batch: SeedUser[] | UserBatch, allocation: IdAllocation, alsoLock: ReadonlySet<string> = new Set()): Promise<UpsertCounts> {
  let prepared = batch instanceof UserBatch ? batch : undefined;
  if (!prepared) {
    prepared = new UserBatch();
    for (const user of batch as SeedUser[]) prepared.add(user);
  }
  const locked = new Set([...prepared.byMerchant.keys(), ...alsoLock]);
  const held = await lockMerchants(trx, locked);
  // A merchant deleted since the import checked it: its users have nowhere to go (the shares' LOAD
  // DATA may skip the foreign key checks, new-users.ts), so the batch stops here, having written nothing.
  for (const merchantId of prepared.byMerchant.keys()) if (!held.has(merchantId)) throw new Error(`Merchant ${merchantId} no longer exists: the batch is rolled back.`);
  const updates: Array<{ id: string; user: SeedUser }> = [];
  const news: SeedUser[] = [];
  for (const [merchantId, users] of prepared.byMerchant) {
    const idOf = await existingShares(trx, merchantId, [...users.keys()]);
    for (const [sharedUserId, user] of users) {
      const id = idOf.get(sharedUserId);
      if (id === undefined) news.push(user);
      else updates.push({ id, user });
    }
  }
  const changed = updates.length > 0 ? await changedUsers(trx, updates) : [];
  if (changed.length > 0) {
    const unlocked = (await sharingMerchants(trx, changed.map(({ id }) => id))).filter((id) => !locked.has(id));
    if (unlocked.length > 0) throw new SharingMerchantsFound(unlocked);
  }
  const stamp = await changeStamp(trx, locked);
  // Webhook events go into the outbox in this transaction (docs/webhooks.md#delivery): one per share changed.
  const subscribers = await subscribedEndpoints(trx, locked);
  // A batch that changes no existing user and shares many new ones with a merchant writes one outbox
  // row for them, expanded into events and deliveries by the dispatcher after the commit (share-batches.ts).
  const batched = changed.length === 0 && subscribers.size > 0 ? await writeShareBatches(trx, newSharesByMerchant(news), subscribers, stamp) : new Set<string>();
  const events = subscribers.size > 0 ? await shareChanges(trx, subscribers, batched.size === 0 ? news : news.filter((user) => !batched.has(user.merchant_id)), changed) : [];
  if (changed.length > 0) {
    const changedIds = changed.map(({ id }) => id);
    // Shares of these users that a batch row still names get their user.shared event now, before the
    // change takes them out of it; then, with the events of earlier changes that reference these
    // users, their record as it is, before it changes: any merchant's, endpoints or not (one indexed read when there are none).
    await writePendingShareEvents(trx, changedIds);
    await materializeEventsOf(trx, changedIds);
  }
  if (changed.length > 0) await updateUsers(trx, changed, stamp);
  if (news.length > 0) await insertNewUsers(trx, news, allocation, stamp, prepared.prepared(news.length));
  if (events.length > 0) await writeEvents(trx, events, stamp, subscribers, async (table, columns, chunks, rows) => (await loadData(trx, chunks, table, columns, rows, allocation)) !== undefined);
  return { inserted: news.length, updated: changed.length, unchanged: updates.length - changed.length, byMerchant: countsByMerchant(news, updates, changed) };
}

/** How many new shares `news` makes for each merchant. */
function newSharesByMerchant(news: readonly SeedUser[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const user of news) counts.set(user.merchant_id, (counts.get(user.merchant_id) ?? 0) + 1);
  return counts;
}

/** What one batch did, in all and by the merchant whose share each user was imported for. */
export interface UpsertCounts {
  inserted: number;
  updated: number;
  unchanged: number;
  byMerchant: Map<string, { inserted: number; updated: number; unchanged: number }>;
}

function countsByMerchant(news: readonly SeedUser[], updates: ReadonlyArray<{ user: SeedUser }>, changed: ReadonlyArray<{ user: SeedUser }>): UpsertCounts['byMerchant'] {
  const counts: UpsertCounts['byMerchant'] = new Map();
  const of = (merchantId: string) => {
    let entry = counts.get(merchantId);
    if (!entry) counts.set(merchantId, (entry = { inserted: 0, updated: 0, unchanged: 0 }));
    return entry;
  };
  for (const user of news) of(user.merchant_id).inserted++;
  for (const { user } of updates) of(user.merchant_id).unchanged++;
  for (const { user } of changed) {
    const entry = of(user.merchant_id);
    entry.updated++;
    entry.unchanged--;
  }
  return counts;
}

/**
 * Changed users are shared with merchants the transaction did not lock (their shares' `updated_at`
 * would move without their lock): it is rolled back and run again with them locked too.
 */
export class SharingMerchantsFound extends Error {
  override name = 'SharingMerchantsFound';
  constructor(readonly merchantIds: string[]) {
    super(`Changed users are shared with ${merchantIds.length} merchant(s) the batch did not lock; it is run again with them locked.`);
  }
}

/**
 * Runs `transaction` (one whole transaction of `upsertUsers` calls given `alsoLock`) until none of
 * them finds a merchant it did not lock: each time one does, that merchant joins `alsoLock` and the
 * transaction, rolled back, runs again. `alsoLock` is kept by the caller, so an import's later
 * batches lock those merchants from the start.
 */
export async function withSharingMerchants<T>(alsoLock: Set<string>, transaction: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await transaction();
    } catch (error) {
      // Each round adds a merchant, so the rounds end: at most one per merchant there is.
      if (!(error instanceof SharingMerchantsFound) || error.merchantIds.every((id) => alsoLock.has(id))) throw error;
      for (const id of error.merchantIds) alsoLock.add(id);
    }
  }
}

/** Locks the rows of `merchantIds`, in id order, so two writers never wait on each other crosswise; the ids of those that exist. */
async function lockMerchants(trx: Trx, merchantIds: ReadonlySet<string>): Promise<Set<string>> {
  if (merchantIds.size === 0) return new Set();
  const ids = [...merchantIds].sort(compareCodePoints);
  const { rows } = await sql<{ id: string }>`SELECT id FROM merchants WHERE id IN (${sql.join(ids)}) ORDER BY id FOR UPDATE`.execute(trx);
  return new Set(rows.map((row) => row.id));
}

/**
 * The merchants sharing the users `userIds`: a locking read, so it sees the latest shares, and no
 * share of these users can be added until the transaction ends.
 */
async function sharingMerchants(trx: Trx, userIds: string[]): Promise<string[]> {
  const found = new Set<string>();
  for (let i = 0; i < userIds.length; i += 1000) {
    const { rows } = await sql<{ merchant_id: string }>`SELECT merchant_id FROM user_shares WHERE user_id IN (${sql.join(userIds.slice(i, i + 1000))}) LOCK IN SHARE MODE`.execute(trx);
    for (const row of rows) found.add(row.merchant_id);
  }
  return [...found];
}

/**
 * The batch's `updated_at` (`DATETIME(6)` text), with the rows of `merchantIds` locked (every
 * merchant whose shares the batch writes): the latest of their `nextChangeStamp`s, so that it
 * sorts after every share and removal of each (a clock set back since).
 */
async function changeStamp(trx: Trx, merchantIds: ReadonlySet<string>): Promise<string> {
  if (merchantIds.size === 0) return (await sql<{ now: string }>`SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f') AS now`.execute(trx)).rows[0]!.now;
  let stamp = '';
  for (const id of merchantIds) {
    const next = await nextChangeStamp(trx, id);
    if (next > stamp) stamp = next;
  }
  return stamp;
}

/** The users of `updates` whose stored record differs from the new one (read by primary key). */
async function changedUsers(trx: Trx, updates: Array<{ id: string; user: SeedUser }>): Promise<ChangedUser[]> {
  const stored = new Map<string, Record<string, string | null>>();
  const dates = new Set<string>(['date_joined', 'deactivated_at', 'agreed_to_terms_and_conditions', 'agreed_to_marketing']);
  const columns = sql.join(USER_FIELDS.map((field) => (dates.has(field) ? sql`${canonicalColumn(field)} AS ${sql.ref(field)}` : sql.ref(field))));
  for (let i = 0; i < updates.length; i += 1000) {
    const ids = updates.slice(i, i + 1000).map(({ id }) => id);
    const { rows } = await sql<Record<string, string | null> & { id: string | number }>`SELECT id, ${columns} FROM users WHERE id IN (${sql.join(ids)})`.execute(trx);
    for (const row of rows) stored.set(String(row.id), row);
  }
  const changed: ChangedUser[] = [];
  for (const { id, user } of updates) {
    const row = stored.get(id);
    if (row === undefined || USER_FIELDS.some((field) => row[field] !== user[field])) changed.push({ id, user, wasActive: row === undefined || row.deactivated_at === null });
  }
  return changed;
}

/** A user whose record the batch changes, and whether it was active before. */
interface ChangedUser {
  id: string;
  user: SeedUser;
  wasActive: boolean;
}

/**
 * The webhook events of a batch, for the merchants in `subscribers`: `user.shared` for each new
 * share, and for each changed user one event per share of it, in that merchant's view (its
 * `shared_user_id`): `user.deactivated` when `deactivated_at` was just set, else `user.updated`.
 * Each references its share; the record is built from the user's row when sent, which this batch
 * leaves in the state of the change (migration 0010, `event-records.ts`).
 */
async function shareChanges(trx: Trx, subscribers: ReadonlyMap<string, unknown>, news: SeedUser[], changed: ChangedUser[]): Promise<ShareChange[]> {
  const changes: ShareChange[] = [];
  for (const user of news) if (subscribers.has(user.merchant_id)) changes.push(userReference(user.merchant_id, 'user.shared', user.shared_user_id));
  const merchants = [...subscribers.keys()];
  for (let i = 0; i < changed.length; i += 1000) {
    const chunk = changed.slice(i, i + 1000);
    const byId = new Map(chunk.map((change) => [change.id, change]));
    const { rows } = await sql<{ merchant_id: string; shared_user_id: string; user_id: string | number }>`SELECT merchant_id, shared_user_id, user_id FROM user_shares
      WHERE user_id IN (${sql.join(chunk.map(({ id }) => id))}) AND merchant_id IN (${sql.join(merchants)})`.execute(trx);
    for (const row of rows) {
      const change = byId.get(String(row.user_id))!;
      const type = change.wasActive && change.user.deactivated_at !== null ? 'user.deactivated' : 'user.updated';
      changes.push(userReference(row.merchant_id, type, row.shared_user_id));
    }
  }
  return changes;
}

/** The user ids of the shares that exist among `ids` of `merchantId`. */
async function existingShares(trx: Trx, merchantId: string, ids: string[]): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  let low = ids[0]!;
  let high = ids[0]!;
  for (const id of ids) {
    if (compareCodePoints(id, low) < 0) low = id;
    if (compareCodePoints(id, high) > 0) high = id;
  }
  // One range read: the batch's own ids plus, at most, as many others in between.
  const cap = 2 * ids.length;
  const inRange = await trx
    .selectFrom('user_shares')
    .select(['shared_user_id', 'user_id'])
    .where('merchant_id', '=', merchantId)
    .where('shared_user_id', '>=', low)
    .where('shared_user_id', '<=', high)
    .orderBy('shared_user_id')
    .limit(cap + 1)
    .execute();
  if (inRange.length <= cap) {
    const wanted = new Set(ids);
    for (const row of inRange) if (wanted.has(row.shared_user_id)) found.set(row.shared_user_id, String(row.user_id));
    return found;
  }
  for (let i = 0; i < ids.length; i += 1000) {
    const rows = await trx
      .selectFrom('user_shares')
      .select(['shared_user_id', 'user_id'])
      .where('merchant_id', '=', merchantId)
      .where('shared_user_id', 'in', ids.slice(i, i + 1000))
      .execute();
    for (const row of rows) found.set(row.shared_user_id, String(row.user_id));
  }
  return found;
}

/** Updates existing users in place, then the filter columns and `updated_at` of every share of each of them. */
async function updateUsers(trx: Trx, updates: ReadonlyArray<{ id: string; user: SeedUser }>, stamp: string): Promise<void> {
  const assignments = Object.fromEntries(USER_FIELDS.map((field) => [field, sql.raw(`VALUES(${field})`)]));
  for (let i = 0; i < updates.length; i += 1000) {
    const chunk = updates.slice(i, i + 1000);
    await trx
      .insertInto('users')
      .values(chunk.map(({ id, user }) => ({ id, ...userColumns(user) })))
      .onDuplicateKeyUpdate(assignments)
      .execute();
    await sql`UPDATE user_shares s INNER JOIN users u ON u.id = s.user_id
      SET s.is_active = (u.deactivated_at IS NULL), s.date_joined = u.date_joined, s.updated_at = ${stamp}
      WHERE s.user_id IN (${sql.join(chunk.map(({ id }) => id))})`.execute(trx);
  }
}
