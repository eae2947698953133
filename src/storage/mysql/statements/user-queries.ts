/**
 * The user reads (docs/protocol.md#users). One user is a point lookup on the primary key of
 * `user_shares (merchant_id, shared_user_id)`. A page follows the plan of `../user-pages.ts`,
 * every statement an index range read of bounded size (never OFFSET over users, never a sort
 * of more than `SEEK_LIMIT` index entries), with the filter columns that `user_shares` carries
 * (migration 0002):
 * - id order: `PRIMARY (merchant_id, shared_user_id)`, or with `active`
 *   `user_shares_active (merchant_id, is_active, shared_user_id, date_joined)`; a date filter is
 *   checked on the index entries, and bounded by `SCAN_BUDGET` when the range is large;
 * - date ranges (counted, read for a small range, or listed in `order=date_joined`):
 *   `user_shares_joined (merchant_id, is_active, date_joined, shared_user_id)`, one range per
 *   `is_active` value, merged;
 * - `order=updated_at` (migration 0005): `user_shares_updated (merchant_id, updated_at,
 *   shared_user_id, is_active, date_joined)`, one range from `updated_since` or the position, the
 *   other filters checked on the index entries, bounded by `SCAN_BUDGET` when there are any.
 * Index hints make the plans fixed: the optimizer's estimates cannot turn a bounded read into a
 * scan. `utf8mb4_nopad_bin` makes id order the code-point order the API promises. Users are
 * joined for the page's rows only.
 */
import { sql, type CompiledQuery, type Kysely, type RawBuilder } from 'kysely';
import type { ChangedUserRecord, UserFilter, UserPageQuery, UserRecord, UserRecordPage } from '../../contract.js';
import { DEFAULT_PAGE_PLAN, hasDateFilter, type PagePlan } from '../../user-pages.js';
import type { MerchantApiDatabase } from '../schema.js';
import { canonicalColumn, toSqlDatetime } from '../sql-values.js';
import { StatementBatcher, type BatchOptions, type Waiting } from '../../sql/statement-batcher.js';
import { statementRunner, type RunStatement } from './statement-runner.js';

/** Told about each statement a page runs, before it runs (the bench EXPLAINs them). */
export type StatementTrace = (query: CompiledQuery) => void;

type Db = Kysely<MerchantApiDatabase>;

interface UserRow {
  shared_user_id: string;
  first_name: string;
  last_name: string;
  email_address: string;
  street: string;
  zip_code: string;
  city: string;
  state: string | null;
  country: string;
  preferred_language: string;
  date_joined: string;
  deactivated_at: string | null;
  agreed_to_terms_and_conditions: string | null;
  agreed_to_marketing: string | null;
}

// The record's 14 keys from `s` (the share) and `u` (the user), timestamps formatted by the server.
const COLUMNS = sql.join([
  sql`s.shared_user_id`,
  sql`u.first_name`,
  sql`u.last_name`,
  sql`u.email_address`,
  sql`u.street`,
  sql`u.zip_code`,
  sql`u.city`,
  sql`u.state`,
  sql`u.country`,
  sql`u.preferred_language`,
  sql`${canonicalColumn('u.date_joined')} AS date_joined`,
  sql`${canonicalColumn('u.deactivated_at')} AS deactivated_at`,
  sql`${canonicalColumn('u.agreed_to_terms_and_conditions')} AS agreed_to_terms_and_conditions`,
  sql`${canonicalColumn('u.agreed_to_marketing')} AS agreed_to_marketing`,
]);

/** One page of `query` (see the file comment and `../user-pages.ts`). */
export async function selectUserPage(db: Db, query: UserPageQuery, trace?: StatementTrace, plan: PagePlan = DEFAULT_PAGE_PLAN): Promise<UserRecordPage> {
  const limit = Math.floor(query.limit);
  const run = async <R>(statement: RawBuilder<R>): Promise<R[]> => {
    const compiled = statement.compile(db);
    trace?.(compiled);
    return (await db.executeQuery(compiled)).rows;
  };
  if (query.order === 'date_joined') return toRecords(await run(joinedOrderPage(query, limit)));
  if (query.order === 'updated_at') {
    if (!filtersEntries(query.filter)) return toChangedRecords(await run(updatedOrderPage(query, limit)));
    // Filters checked on the entries: examine at most scanBudget of them, up to the scanBudget-th.
    const [bound] = await run(updatedScanBound(query, plan.scanBudget));
    const page: UserRecordPage = toChangedRecords(await run(updatedOrderPage(query, limit, bound)));
    if (bound !== undefined && page.length < limit) {
      page.resumeAfter = bound.shared_user_id;
      page.resumeAfterUpdated = bound.updated_at;
    }
    return page;
  }
  if (!hasDateFilter(query.filter)) return toRecords(await run(idOrderPage(query, limit)));
  const [counted] = await run(countJoinedRange(query, plan.seekLimit));
  if (Number(counted?.n ?? 0) <= plan.seekLimit) return toRecords(await run(smallRangePage(query, limit)));
  // A large range: examine at most scanBudget users in id order, up to the scanBudget-th.
  const [bound] = await run(scanBound(query, plan.scanBudget));
  const page: UserRecordPage = toRecords(await run(idOrderPage(query, limit, bound?.shared_user_id)));
  if (bound !== undefined && page.length < limit) page.resumeAfter = bound.shared_user_id;
  return page;
}

let userByKey: string | undefined;

/**
 * The single-user statement's text, compiled once (`?` for the merchant and the shared id): a
 * point lookup on both primary keys. `bench:mysql` runs the same text as its raw reference.
 */
export function userByKeySql(db: Db): string {
  return (userByKey ??= sql`SELECT ${COLUMNS} FROM user_shares s INNER JOIN users u ON u.id = s.user_id
    WHERE s.merchant_id = ${''} AND s.shared_user_id = ${''}`.compile(db).sql);
}

/** The user `sharedUserId` as shared with `merchantId`, by primary key, as a prepared statement where the pool allows. */
export async function selectUser(db: Db, merchantId: string, sharedUserId: string): Promise<UserRecord | undefined> {
  const { rows } = await statementRunner(db)<UserRow>(userByKeySql(db), [merchantId, sharedUserId]);
  return rows[0] && toRecord(rows[0]);
}

/** Statement sizes of a batched read: a batch is padded (repeating its last key) to the next, so few texts are prepared. */
const BATCH_SIZES = [2, 4, 8, 16, 32] as const;
const usersByKey = new Map<number, string>();

/** The batched read's text for `size` keys: a range read of exactly those keys on both primary keys. */
export function usersByKeySql(db: Db, size: number): string {
  let text = usersByKey.get(size);
  if (text === undefined) {
    const pairs = sql.join(Array.from({ length: size }, () => sql`(${''}, ${''})`));
    text = sql`SELECT s.merchant_id AS merchant_id, ${COLUMNS} FROM user_shares s FORCE INDEX (PRIMARY) INNER JOIN users u FORCE INDEX (PRIMARY) ON u.id = s.user_id
      WHERE (s.merchant_id, s.shared_user_id) IN (${pairs})`.compile(db).sql;
    usersByKey.set(size, text);
  }
  return text;
}

interface UserKey {
  merchantId: string;
  sharedUserId: string;
}

// A lone surrogate goes over the wire as U+FFFD, so its row would not match it in JS: such a key is read alone.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const keyOf = (merchantId: string, sharedUserId: string) => `${merchantId.length}:${merchantId}${sharedUserId}`;

/**
 * Single-user reads, those that wait for MySQL together in one statement (`statement-batcher.ts`):
 * each read answered from the batch's rows by its key, which the columns' binary collation makes
 * an exact comparison of code points, as in SQL.
 */
export class UserReader {
  readonly #db: Db;
  readonly #run: RunStatement;
  readonly #batcher: StatementBatcher<UserKey, UserRecord | undefined>;

  /** Defaults: 4 statements in flight, 32 users each, 10000 waiting. */
  constructor(db: Db, options: Partial<BatchOptions> = {}) {
    this.#db = db;
    this.#run = statementRunner(db);
    this.#batcher = new StatementBatcher((batch) => this.#read(batch), { concurrency: 4, maxBatch: BATCH_SIZES[BATCH_SIZES.length - 1]!, maxWaiting: 10_000, database: 'MySQL', ...options });
  }

  read(merchantId: string, sharedUserId: string): Promise<UserRecord | undefined> {
    if (LONE_SURROGATE.test(merchantId) || LONE_SURROGATE.test(sharedUserId)) return selectUser(this.#db, merchantId, sharedUserId);
    return this.#batcher.add({ merchantId, sharedUserId });
  }

  async #read(batch: Waiting<UserKey, UserRecord | undefined>[]): Promise<void> {
    if (batch.length === 1) {
      const [only] = batch as [Waiting<UserKey, UserRecord | undefined>];
      only.resolve(await selectUser(this.#db, only.item.merchantId, only.item.sharedUserId));
      return;
    }
    const size = BATCH_SIZES.find((each) => each >= batch.length) ?? batch.length;
    const parameters: string[] = [];
    for (let i = 0; i < size; i++) {
      const { item } = batch[Math.min(i, batch.length - 1)]!;
      parameters.push(item.merchantId, item.sharedUserId);
    }
    const { rows } = await this.#run<UserRow & { merchant_id: string }>(usersByKeySql(this.#db, size), parameters);
    const found = new Map<string, UserRow>();
    for (const row of rows) found.set(keyOf(row.merchant_id, row.shared_user_id), row);
    for (const { item, resolve } of batch) {
      const row = found.get(keyOf(item.merchantId, item.sharedUserId));
      resolve(row && toRecord(row));
    }
  }
}

/** Which `is_active` values the filter keeps: one, or both. */
function activeValues(filter: UserFilter): number[] {
  return filter.active === undefined ? [0, 1] : [filter.active ? 1 : 0];
}

/** The date bounds on `s.date_joined` of `filter` (exclusive), as SQL conditions. */
function dateConditions(filter: UserFilter, table = 's'): RawBuilder<unknown>[] {
  const column = sql.ref(`${table}.date_joined`);
  const conditions: RawBuilder<unknown>[] = [];
  if (filter.joinedAfter !== undefined) conditions.push(sql`${column} > ${toSqlDatetime(filter.joinedAfter)}`);
  if (filter.joinedBefore !== undefined) conditions.push(sql`${column} < ${toSqlDatetime(filter.joinedBefore)}`);
  return conditions;
}

const and = (conditions: RawBuilder<unknown>[]) => sql.join(conditions, sql` AND `);

/**
 * Id order on PRIMARY, or on `user_shares_active` with `active`: the range after `after` (and up
 * to `upTo`, inclusive), date bounds checked on the index entries, users joined for `limit` rows.
 */
function idOrderPage({ merchantId, filter, after }: UserPageQuery, limit: number, upTo?: string): RawBuilder<UserRow> {
  const index = filter.active === undefined ? sql.raw('PRIMARY') : sql.raw('user_shares_active');
  const conditions = [sql`s.merchant_id = ${merchantId}`];
  if (filter.active !== undefined) conditions.push(sql`s.is_active = ${filter.active ? 1 : 0}`);
  if (after !== undefined) conditions.push(sql`s.shared_user_id > ${after}`);
  if (upTo !== undefined) conditions.push(sql`s.shared_user_id <= ${upTo}`);
  conditions.push(...dateConditions(filter));
  return sql<UserRow>`SELECT ${COLUMNS} FROM user_shares s FORCE INDEX (${index}) INNER JOIN users u ON u.id = s.user_id
    WHERE ${and(conditions)} ORDER BY s.shared_user_id LIMIT ${limit}`;
}

/** The `budget`-th user after `after` in id order (within `active`): where a scan stops. */
function scanBound({ merchantId, filter, after }: UserPageQuery, budget: number): RawBuilder<{ shared_user_id: string }> {
  const index = filter.active === undefined ? sql.raw('PRIMARY') : sql.raw('user_shares_active');
  const conditions = [sql`merchant_id = ${merchantId}`];
  if (filter.active !== undefined) conditions.push(sql`is_active = ${filter.active ? 1 : 0}`);
  if (after !== undefined) conditions.push(sql`shared_user_id > ${after}`);
  return sql<{ shared_user_id: string }>`SELECT shared_user_id FROM user_shares FORCE INDEX (${index})
    WHERE ${and(conditions)} ORDER BY shared_user_id LIMIT 1 OFFSET ${budget - 1}`;
}

/** How many users the date range holds, counted on `user_shares_joined` up to `seekLimit + 1`. */
function countJoinedRange({ merchantId, filter }: UserPageQuery, seekLimit: number): RawBuilder<{ n: string | number }> {
  const conditions = [sql`merchant_id = ${merchantId}`, sql`is_active IN (${sql.join(activeValues(filter))})`, ...dateConditions(filter, 'user_shares')];
  return sql<{ n: string | number }>`SELECT COUNT(*) AS n FROM (SELECT 1 FROM user_shares FORCE INDEX (user_shares_joined)
    WHERE ${and(conditions)} LIMIT ${seekLimit + 1}) AS r`;
}

/** A range of at most `SEEK_LIMIT` users: read from `user_shares_joined`, ordered by id, `limit` joined. */
function smallRangePage({ merchantId, filter, after }: UserPageQuery, limit: number): RawBuilder<UserRow> {
  const conditions = [sql`merchant_id = ${merchantId}`, sql`is_active IN (${sql.join(activeValues(filter))})`, ...dateConditions(filter, 'user_shares')];
  if (after !== undefined) conditions.push(sql`shared_user_id > ${after}`);
  return sql<UserRow>`SELECT ${COLUMNS} FROM (SELECT shared_user_id FROM user_shares FORCE INDEX (user_shares_joined)
      WHERE ${and(conditions)} ORDER BY shared_user_id LIMIT ${limit}) AS p
    INNER JOIN user_shares s ON s.merchant_id = ${merchantId} AND s.shared_user_id = p.shared_user_id
    INNER JOIN users u ON u.id = s.user_id
    ORDER BY p.shared_user_id`;
}

/**
 * `order=date_joined`: per `is_active` value, the next `limit` entries of `user_shares_joined`
 * after the position `(afterJoined, after)` inside the date bounds; merged, `limit` joined.
 */
function joinedOrderPage({ merchantId, filter, after, afterJoined }: UserPageQuery, limit: number): RawBuilder<UserRow> {
  const branches = activeValues(filter).map((active) => {
    const conditions = [sql`merchant_id = ${merchantId}`, sql`is_active = ${active}`, ...dateConditions(filter, 'user_shares')];
    if (afterJoined !== undefined) {
      const joined = toSqlDatetime(afterJoined);
      // Two ranges of the index: the rest of the position's timestamp, then every later one.
      conditions.push(sql`(date_joined > ${joined} OR (date_joined = ${joined} AND shared_user_id > ${after ?? ''}))`);
    }
    return sql`(SELECT shared_user_id, date_joined FROM user_shares FORCE INDEX (user_shares_joined)
      WHERE ${and(conditions)} ORDER BY date_joined, shared_user_id LIMIT ${limit})`;
  });
  return sql<UserRow>`SELECT ${COLUMNS} FROM (${sql.join(branches, sql` UNION ALL `)}) AS p
    INNER JOIN user_shares s ON s.merchant_id = ${merchantId} AND s.shared_user_id = p.shared_user_id
    INNER JOIN users u ON u.id = s.user_id
    ORDER BY p.date_joined, p.shared_user_id LIMIT ${limit}`;
}

/** True when the filter keeps fewer than every entry of an `updated_at` range (active or dates). */
function filtersEntries(filter: UserFilter): boolean {
  return filter.active !== undefined || hasDateFilter(filter);
}

/** Where an `order=updated_at` listing starts: `updated_since` (inclusive) and after the position `(afterUpdated, after)`. */
function updatedStart({ filter, after, afterUpdated }: UserPageQuery, table = 'user_shares'): RawBuilder<unknown>[] {
  const updated = sql.ref(`${table}.updated_at`);
  const id = sql.ref(`${table}.shared_user_id`);
  const conditions: RawBuilder<unknown>[] = [];
  if (filter.updatedSince !== undefined) conditions.push(sql`${updated} >= ${toSqlDatetime(filter.updatedSince)}`);
  if (afterUpdated !== undefined) {
    const position = toSqlDatetime(afterUpdated);
    // Two ranges of the index: the rest of the position's timestamp, then every later one.
    conditions.push(sql`(${updated} > ${position} OR (${updated} = ${position} AND ${id} > ${after ?? ''}))`);
  }
  return conditions;
}

interface UpdatedBound {
  updated_at: string;
  shared_user_id: string;
}

/** The `budget`-th entry of the `updated_at` range from the start (any activity, any date): where a scan stops. */
function updatedScanBound(query: UserPageQuery, budget: number): RawBuilder<UpdatedBound> {
  const conditions = [sql`user_shares.merchant_id = ${query.merchantId}`, ...updatedStart(query)];
  return sql<UpdatedBound>`SELECT ${canonicalColumn('user_shares.updated_at')} AS updated_at, shared_user_id FROM user_shares FORCE INDEX (user_shares_updated)
    WHERE ${and(conditions)} ORDER BY user_shares.updated_at, user_shares.shared_user_id LIMIT 1 OFFSET ${budget - 1}`;
}

/**
 * `order=updated_at`: the next `limit` entries of `user_shares_updated` from the start (up to
 * `upTo`, inclusive) that the other filters keep, checked on the entries; users joined for them.
 */
function updatedOrderPage(query: UserPageQuery, limit: number, upTo?: UpdatedBound): RawBuilder<ChangedUserRow> {
  const { merchantId, filter } = query;
  const conditions = [sql`user_shares.merchant_id = ${merchantId}`, ...updatedStart(query), ...dateConditions(filter, 'user_shares')];
  if (filter.active !== undefined) conditions.push(sql`user_shares.is_active = ${filter.active ? 1 : 0}`);
  if (upTo !== undefined) {
    const bound = toSqlDatetime(upTo.updated_at);
    conditions.push(sql`(user_shares.updated_at < ${bound} OR (user_shares.updated_at = ${bound} AND user_shares.shared_user_id <= ${upTo.shared_user_id}))`);
  }
  return sql<ChangedUserRow>`SELECT ${COLUMNS}, ${canonicalColumn('p.updated_at')} AS updated_at FROM (SELECT shared_user_id, updated_at FROM user_shares FORCE INDEX (user_shares_updated)
      WHERE ${and(conditions)} ORDER BY updated_at, shared_user_id LIMIT ${limit}) AS p
    INNER JOIN user_shares s ON s.merchant_id = ${merchantId} AND s.shared_user_id = p.shared_user_id
    INNER JOIN users u ON u.id = s.user_id
    ORDER BY p.updated_at, p.shared_user_id`;
}

function toRecords(rows: UserRow[]): UserRecordPage {
  return rows.map(toRecord);
}

interface ChangedUserRow extends UserRow {
  updated_at: string;
}

function toChangedRecords(rows: ChangedUserRow[]): UserRecordPage {
  return rows.map((row): ChangedUserRecord => ({ ...toRecord(row), updated_at: row.updated_at }));
}

// Built key by key so the record has exactly the 14 keys, in the API's order.
function toRecord(row: UserRow): UserRecord {
  return {
    shared_user_id: row.shared_user_id,
    first_name: row.first_name,
    last_name: row.last_name,
    email_address: row.email_address,
    street: row.street,
    zip_code: row.zip_code,
    city: row.city,
    state: row.state,
    country: row.country,
    preferred_language: row.preferred_language,
    date_joined: row.date_joined,
    deactivated_at: row.deactivated_at,
    agreed_to_terms_and_conditions: row.agreed_to_terms_and_conditions,
    agreed_to_marketing: row.agreed_to_marketing,
  };
}
