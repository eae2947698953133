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
 * Written for millions of rows (docs/mysql.md#import):
 * - which ids exist is asked with one range read per merchant (a batch in key order, the usual
 *   export, finds its range empty at once), and an `IN` list only when the range holds many
 *   other users;
 * - new users go in with `LOAD DATA LOCAL INFILE` from memory (`infile.ts`), two statements a
 *   batch, checked for the row count and for warnings (LOCAL turns errors into warnings); where
 *   the server or the pool refuses LOCAL INFILE, with multi-row INSERTs.
 * Ids: one LOAD DATA or multi-row INSERT gets consecutive AUTO_INCREMENT values when
 * `innodb_autoinc_lock_mode` is 0 or 1 (MySQL/MariaDB documented behaviour); under mode 2 new
 * users are inserted one at a time.
 */
import { sql, type Insertable, type Kysely, type Transaction } from 'kysely';
import { compareCodePoints } from '../../order.js';
import type { SeedUser } from '../../seed/seed.js';
import { InfileWriter, registerInfile, releaseInfile } from './infile.js';
import { USER_FIELDS, USER_FIELD_MAX_LENGTH, type MerchantApiDatabase, type UsersTable } from '../schema.js';
import { canonicalColumn, mysqlErrorCode, toSqlDatetime } from '../sql-values.js';

type Trx = Transaction<MerchantApiDatabase>;

/** How the server hands out AUTO_INCREMENT values, and how bulk writes work on this pool. */
export interface IdAllocation {
  /** True when a multi-row INSERT gets consecutive ids (innodb_autoinc_lock_mode 0 or 1). */
  consecutive: boolean;
  /** `auto_increment_increment` (1 unless replication spreads ids). */
  step: bigint;
  /**
   * Whether LOAD DATA LOCAL INFILE works here: undefined until the first bulk write finds out,
   * then remembered for the rest of the import. Set false to use multi-row INSERTs only.
   */
  localInfile?: boolean;
}

/** Reads the server's id allocation once per import. */
export async function readIdAllocation(db: Trx | Kysely<MerchantApiDatabase>): Promise<IdAllocation> {
  const { rows } = await sql<{ mode: string | number; step: string | number }>`SELECT @@innodb_autoinc_lock_mode AS mode, @@auto_increment_increment AS step`.execute(db);
  const row = rows[0];
  return { consecutive: Number(row?.mode ?? 2) < 2, step: BigInt(row?.step ?? 1) };
}

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
 * A batch of users with its LOAD DATA text written as the users are added, on the guess that all
 * of them are new (a first import): the text is ready when the batch is written, off the path
 * between the database's answers. A key repeated in the batch keeps its last record.
 */
export class UserBatch {
  /** The users by merchant and id, the last record of a repeated key. */
  readonly byMerchant = new Map<string, Map<string, SeedUser>>();
  readonly #users = new InfileWriter();
  readonly #shares = new InfileWriter();
  #count = 0;
  #repeated = false;

  get size(): number {
    return this.#count;
  }

  add(user: SeedUser): void {
    let users = this.byMerchant.get(user.merchant_id);
    if (!users) this.byMerchant.set(user.merchant_id, (users = new Map()));
    if (users.has(user.shared_user_id)) this.#repeated = true;
    users.set(user.shared_user_id, user);
    // The share's user_id is its row number here; LOAD DATA turns it into the id (see loadShares).
    this.#users.row(userValues(user));
    this.#shares.row(shareValues(user, this.#count));
    this.#count++;
  }

  /** The prepared text, when every user of the batch is new: all `users`, once each, in order. */
  prepared(news: number): { users: Buffer[]; shares: Buffer[] } | undefined {
    return !this.#repeated && news === this.#count ? { users: this.#users.finish(), shares: this.#shares.finish() } : undefined;
  }
}

/**
 * Upserts one batch inside `trx`; a key repeated in the batch keeps its last record. `alsoLock`:
 * merchants to lock besides the batch's own, those a batch before found sharing its users
 * (`withSharingMerchants`). Throws `SharingMerchantsFound`, having written nothing, when a changed
 * user is shared with a merchant neither names.
 */
export async function upsertUsers(trx: Trx, batch: SeedUser[] | UserBatch, allocation: IdAllocation, alsoLock: ReadonlySet<string> = new Set()): Promise<{ inserted: number; updated: number; unchanged: number }> {
  let prepared = batch instanceof UserBatch ? batch : undefined;
  if (!prepared) {
    prepared = new UserBatch();
    for (const user of batch as SeedUser[]) prepared.add(user);
  }
  const locked = new Set([...prepared.byMerchant.keys(), ...alsoLock]);
  await lockMerchants(trx, locked);
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
  if (changed.length > 0) await updateUsers(trx, changed, stamp);
  if (news.length > 0) await insertNewUsers(trx, news, allocation, stamp, prepared.prepared(news.length));
  return { inserted: news.length, updated: changed.length, unchanged: updates.length - changed.length };
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

/** Locks the rows of `merchantIds`, in id order, so two writers never wait on each other crosswise. */
async function lockMerchants(trx: Trx, merchantIds: ReadonlySet<string>): Promise<void> {
  if (merchantIds.size === 0) return;
  const ids = [...merchantIds].sort(compareCodePoints);
  await sql`SELECT id FROM merchants WHERE id IN (${sql.join(ids)}) ORDER BY id FOR UPDATE`.execute(trx);
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
 * merchant whose shares the batch writes): the server's UTC time, or 1 µs past the latest stamp of
 * those merchants if that is not earlier (a clock set back).
 */
async function changeStamp(trx: Trx, merchantIds: ReadonlySet<string>): Promise<string> {
  if (merchantIds.size === 0) return (await sql<{ now: string }>`SELECT DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f') AS now`.execute(trx)).rows[0]!.now;
  let stamp = '';
  for (const id of merchantIds) {
    // A locking read: the latest committed stamp, not the transaction's snapshot.
    const { rows } = await sql<{ stamp: string }>`SELECT DATE_FORMAT(GREATEST(UTC_TIMESTAMP(6), COALESCE(MAX(updated_at) + INTERVAL 1 MICROSECOND, UTC_TIMESTAMP(6))), '%Y-%m-%d %H:%i:%s.%f') AS stamp
      FROM user_shares WHERE merchant_id = ${id} LOCK IN SHARE MODE`.execute(trx);
    if (rows[0]!.stamp > stamp) stamp = rows[0]!.stamp;
  }
  return stamp;
}

/** The users of `updates` whose stored record differs from the new one (read by primary key). */
async function changedUsers(trx: Trx, updates: Array<{ id: string; user: SeedUser }>): Promise<Array<{ id: string; user: SeedUser }>> {
  const stored = new Map<string, Record<string, string | null>>();
  const dates = new Set<string>(['date_joined', 'deactivated_at', 'agreed_to_terms_and_conditions', 'agreed_to_marketing']);
  const columns = sql.join(USER_FIELDS.map((field) => (dates.has(field) ? sql`${canonicalColumn(field)} AS ${sql.ref(field)}` : sql.ref(field))));
  for (let i = 0; i < updates.length; i += 1000) {
    const ids = updates.slice(i, i + 1000).map(({ id }) => id);
    const { rows } = await sql<Record<string, string | null> & { id: string | number }>`SELECT id, ${columns} FROM users WHERE id IN (${sql.join(ids)})`.execute(trx);
    for (const row of rows) stored.set(String(row.id), row);
  }
  return updates.filter(({ id, user }) => {
    const row = stored.get(id);
    return row === undefined || USER_FIELDS.some((field) => row[field] !== user[field]);
  });
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
async function updateUsers(trx: Trx, updates: Array<{ id: string; user: SeedUser }>, stamp: string): Promise<void> {
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

async function insertNewUsers(trx: Trx, users: SeedUser[], allocation: IdAllocation, stamp: string, prepared?: { users: Buffer[]; shares: Buffer[] }): Promise<void> {
  if (!allocation.consecutive) {
    // Interleaved allocation (lock mode 2) may hand one statement scattered ids: one row at a time, exact ids.
    const ids: bigint[] = [];
    for (const user of users) {
      const result = await trx.insertInto('users').values(userColumns(user)).executeTakeFirstOrThrow();
      ids.push(result.insertId!);
    }
    await insertShares(trx, users, ids, stamp);
    return;
  }
  const text = prepared ?? loadDataText(users);
  const first = await loadUsers(trx, text.users, users.length, allocation);
  if (first === undefined) {
    await insertShares(trx, users, await insertUsers(trx, users, allocation), stamp);
    return;
  }
  await loadShares(trx, text.shares, users.length, first, allocation, stamp);
}

const USER_COLUMN_LIST = USER_FIELDS.join(', ');

/** The LOAD DATA text of `users`, all new, in order. */
function loadDataText(users: SeedUser[]): { users: Buffer[]; shares: Buffer[] } {
  const usersFile = new InfileWriter();
  const sharesFile = new InfileWriter();
  users.forEach((user, i) => {
    usersFile.row(userValues(user));
    sharesFile.row(shareValues(user, i));
  });
  return { users: usersFile.finish(), shares: sharesFile.finish() };
}

/** LOAD DATA of the new users; their first id, or undefined when LOCAL INFILE is not available. */
async function loadUsers(trx: Trx, text: Buffer[], rows: number, allocation: IdAllocation): Promise<bigint | undefined> {
  if (allocation.localInfile === false) return undefined;
  const loaded = await loadData(trx, text, 'users', USER_COLUMN_LIST, rows, allocation);
  return loaded === undefined ? undefined : BigInt(loaded);
}

/** LOAD DATA of the shares: row number `@row` of the batch gets the user id `first + @row * step`, each the batch's stamp. */
async function loadShares(trx: Trx, text: Buffer[], rows: number, first: bigint, allocation: IdAllocation, stamp: string): Promise<void> {
  // The stamp is `DATETIME(6)` text the server wrote (digits, '-', ':', '.', ' '): safe to inline.
  const set = `user_id = ${first} + @row * ${allocation.step}, updated_at = '${stamp}'`;
  await loadData(trx, text, 'user_shares', 'merchant_id, shared_user_id, @row, is_active, date_joined', rows, allocation, set);
}

/**
 * One LOAD DATA LOCAL INFILE of `chunks` into `table (columns) SET set`. Resolves to
 * LAST_INSERT_ID() after it, or undefined (and `allocation.localInfile = false`) when the server
 * or the pool refuses LOCAL INFILE. Throws when fewer rows went in or anything was warned about:
 * LOCAL makes the server skip duplicates and cut values with a warning instead of failing.
 */
async function loadData(trx: Trx, chunks: Buffer[], table: string, columns: string, rows: number, allocation: IdAllocation, set?: string): Promise<string | undefined> {
  const name = registerInfile(chunks);
  let result;
  try {
    // The format InfileWriter writes: tab-separated, backslash escapes, \N for NULL, one row a line.
    const format = String.raw`FIELDS TERMINATED BY '\t' ESCAPED BY '\\' LINES TERMINATED BY '\n'`;
    result = await sql.raw(`LOAD DATA LOCAL INFILE '${name}' INTO TABLE ${table} CHARACTER SET utf8mb4 ${format} (${columns})${set ? ` SET ${set}` : ''}`).execute(trx);
  } catch (error) {
    if (allocation.localInfile !== true && localInfileRefused(error)) {
      allocation.localInfile = false;
      return undefined;
    }
    throw error;
  } finally {
    releaseInfile(name);
  }
  allocation.localInfile = true;
  const { rows: [after] } = await sql<{ id: string | number; warnings: string | number }>`SELECT LAST_INSERT_ID() AS id, @@warning_count AS warnings`.execute(trx);
  if (result.numAffectedRows !== BigInt(rows) || Number(after?.warnings ?? 0) > 0) {
    throw new Error(`LOAD DATA into ${table} wrote ${result.numAffectedRows ?? 0} of ${rows} rows with ${after?.warnings ?? '?'} warning(s) (a duplicate key, or a value that does not fit): the batch is rolled back.`);
  }
  return String(after!.id);
}

/** True for the errors that mean "no LOCAL INFILE here" (server setting, client flag, pool without our factory). */
function localInfileRefused(error: unknown): boolean {
  const errno = (error as { errno?: unknown } | null)?.errno;
  const code = mysqlErrorCode(error);
  return errno === 1148 || errno === 3948 || code === 'ER_NOT_ALLOWED_COMMAND' || /LOCAL INFILE|streamFactory/i.test((error as Error | null)?.message ?? '');
}

/** Multi-row INSERTs of the new users (2000 a statement, within max_allowed_packet); their ids. */
async function insertUsers(trx: Trx, users: SeedUser[], allocation: IdAllocation): Promise<bigint[]> {
  const ids: bigint[] = [];
  for (let i = 0; i < users.length; i += 2000) {
    const chunk = users.slice(i, i + 2000);
    // One statement gets consecutive ids: its first id, then one step each.
    const result = await trx.insertInto('users').values(chunk.map(userColumns)).executeTakeFirstOrThrow();
    const first = result.insertId;
    if (first === undefined || result.numInsertedOrUpdatedRows !== BigInt(chunk.length)) throw new Error('The users INSERT did not report its ids.');
    for (let j = 0n; j < BigInt(chunk.length); j++) ids.push(first + j * allocation.step);
  }
  return ids;
}

async function insertShares(trx: Trx, users: SeedUser[], ids: bigint[], stamp: string): Promise<void> {
  for (let i = 0; i < users.length; i += 5000) {
    await trx
      .insertInto('user_shares')
      .values(
        users.slice(i, i + 5000).map((user, j) => ({
          merchant_id: user.merchant_id,
          shared_user_id: user.shared_user_id,
          user_id: ids[i + j]!.toString(),
          is_active: user.deactivated_at === null ? 1 : 0,
          date_joined: toSqlDatetime(user.date_joined),
          updated_at: stamp,
        })),
      )
      .execute();
  }
}

type UserColumns = Omit<Insertable<UsersTable>, 'id'>;

function userColumns(user: SeedUser): UserColumns {
  return {
    first_name: user.first_name,
    last_name: user.last_name,
    email_address: user.email_address,
    street: user.street,
    zip_code: user.zip_code,
    city: user.city,
    state: user.state,
    country: user.country,
    preferred_language: user.preferred_language,
    date_joined: toSqlDatetime(user.date_joined),
    deactivated_at: user.deactivated_at === null ? null : toSqlDatetime(user.deactivated_at),
    agreed_to_terms_and_conditions: user.agreed_to_terms_and_conditions === null ? null : toSqlDatetime(user.agreed_to_terms_and_conditions),
    agreed_to_marketing: user.agreed_to_marketing === null ? null : toSqlDatetime(user.agreed_to_marketing),
  };
}

/** A share's LOAD DATA values: its user is the `row`-th of the batch (see loadShares). */
function shareValues(user: SeedUser, row: number): (string | number)[] {
  return [user.merchant_id, user.shared_user_id, row, user.deactivated_at === null ? 1 : 0, loadDatetime(user.date_joined)];
}

/** The `users` columns of USER_FIELDS, in that order, as LOAD DATA values. */
function userValues(u: SeedUser): (string | null)[] {
  return [u.first_name, u.last_name, u.email_address, u.street, u.zip_code, u.city, u.state, u.country, u.preferred_language, loadDatetime(u.date_joined), loadDatetime(u.deactivated_at), loadDatetime(u.agreed_to_terms_and_conditions), loadDatetime(u.agreed_to_marketing)];
}

/** `2019-12-12T12:19:17.193961+00:00` -> `2019-12-12T12:19:17.193961`, which DATETIME(6) takes as it is (UTC). */
function loadDatetime<T extends string | null>(canonical: T): T {
  return (canonical === null ? null : canonical.slice(0, 26)) as T;
}
