/**
 * Idempotent batch upsert of seed users: a user already shared with the
 * merchant under that id is updated in place (the person keeps one row even
 * if other merchants see it under other ids); a new one gets a `users` row
 * and a `user_shares` row. Three multi-row statements per batch at most, so
 * a million rows load in seconds when they come in key order.
 */
import { sql, type Insertable, type Kysely, type Transaction } from 'kysely';
import type { SeedUser } from '../seed.js';
import { USER_FIELDS, USER_FIELD_MAX_LENGTH, type MerchantApiDatabase, type UsersTable } from './schema.js';
import { toSqlDatetime } from './sql-values.js';

type Trx = Transaction<MerchantApiDatabase>;

/** How the server hands out AUTO_INCREMENT values to one multi-row INSERT. */
export interface IdAllocation {
  /** True when a multi-row INSERT gets consecutive ids (innodb_autoinc_lock_mode 0 or 1). */
  consecutive: boolean;
  /** `auto_increment_increment` (1 unless replication spreads ids). */
  step: bigint;
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

/** Upserts one batch inside `trx`; a key repeated in the batch keeps its last record. */
export async function upsertUsers(trx: Trx, batch: SeedUser[], allocation: IdAllocation): Promise<{ inserted: number; updated: number }> {
  const byMerchant = new Map<string, Map<string, SeedUser>>();
  for (const user of batch) {
    let users = byMerchant.get(user.merchant_id);
    if (!users) byMerchant.set(user.merchant_id, (users = new Map()));
    users.set(user.shared_user_id, user);
  }
  const updates: Array<UserColumns & { id: string }> = [];
  const news: SeedUser[] = [];
  for (const [merchantId, users] of byMerchant) {
    const existing = await trx
      .selectFrom('user_shares')
      .select(['shared_user_id', 'user_id'])
      .where('merchant_id', '=', merchantId)
      .where('shared_user_id', 'in', [...users.keys()])
      .execute();
    const idOf = new Map(existing.map((row) => [row.shared_user_id, String(row.user_id)]));
    for (const [sharedUserId, user] of users) {
      const id = idOf.get(sharedUserId);
      if (id === undefined) news.push(user);
      else updates.push({ id, ...userColumns(user) });
    }
  }
  if (updates.length > 0) {
    const assignments = Object.fromEntries(USER_FIELDS.map((field) => [field, sql.raw(`VALUES(${field})`)]));
    await trx.insertInto('users').values(updates).onDuplicateKeyUpdate(assignments).execute();
  }
  if (news.length > 0) await insertNewUsers(trx, news, allocation);
  return { inserted: news.length, updated: updates.length };
}

async function insertNewUsers(trx: Trx, users: SeedUser[], allocation: IdAllocation): Promise<void> {
  const ids: bigint[] = [];
  if (allocation.consecutive) {
    const result = await trx.insertInto('users').values(users.map(userColumns)).executeTakeFirstOrThrow();
    const first = result.insertId;
    if (first === undefined || result.numInsertedOrUpdatedRows !== BigInt(users.length)) throw new Error('The users INSERT did not report its ids.');
    for (let i = 0n; i < BigInt(users.length); i++) ids.push(first + i * allocation.step);
  } else {
    // Interleaved allocation (lock mode 2) may hand one INSERT scattered ids: one row at a time, exact ids.
    for (const user of users) {
      const result = await trx.insertInto('users').values(userColumns(user)).executeTakeFirstOrThrow();
      ids.push(result.insertId!);
    }
  }
  await trx
    .insertInto('user_shares')
    .values(users.map((user, i) => ({ merchant_id: user.merchant_id, shared_user_id: user.shared_user_id, user_id: ids[i]!.toString() })))
    .execute();
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
