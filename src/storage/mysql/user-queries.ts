/**
 * The user reads (docs/protocol.md#users). Both use the primary key of
 * `user_shares (merchant_id, shared_user_id)`: one user is a point lookup,
 * a page is a range seek `shared_user_id > after ORDER BY shared_user_id
 * LIMIT n` whatever its position in the keyset (never OFFSET), and
 * `utf8mb4_nopad_bin` makes that order the code-point order the API promises.
 */
import type { Kysely } from 'kysely';
import type { UserPageQuery, UserRecord } from '../../storage.js';
import type { MerchantApiDatabase } from './schema.js';
import { canonicalColumn, toSqlDatetime } from './sql-values.js';

/** A keyset page of `query`, or with `exactId` the one user of that id. */
export async function selectUsers(db: Kysely<MerchantApiDatabase>, query: UserPageQuery, exactId?: string): Promise<UserRecord[]> {
  const rows = await userQuery(db, query, exactId).execute();
  // Built key by key so the record has exactly the 14 keys, in the API's order.
  return rows.map((row) => ({
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
  }));
}

/** The query behind `selectUsers` (exported so a test can EXPLAIN it). */
export function userQuery(db: Kysely<MerchantApiDatabase>, query: UserPageQuery, exactId?: string) {
  const { merchantId, filter, after, limit } = query;
  let select = db
    .selectFrom('user_shares as s')
    .innerJoin('users as u', 'u.id', 's.user_id')
    .select([
      's.shared_user_id',
      'u.first_name',
      'u.last_name',
      'u.email_address',
      'u.street',
      'u.zip_code',
      'u.city',
      'u.state',
      'u.country',
      'u.preferred_language',
      canonicalColumn<string>('u.date_joined').as('date_joined'),
      canonicalColumn('u.deactivated_at').as('deactivated_at'),
      canonicalColumn('u.agreed_to_terms_and_conditions').as('agreed_to_terms_and_conditions'),
      canonicalColumn('u.agreed_to_marketing').as('agreed_to_marketing'),
    ])
    .where('s.merchant_id', '=', merchantId);
  if (exactId !== undefined) select = select.where('s.shared_user_id', '=', exactId);
  if (after !== undefined) select = select.where('s.shared_user_id', '>', after);
  if (filter.active !== undefined) select = select.where('u.deactivated_at', filter.active ? 'is' : 'is not', null);
  if (filter.joinedAfter !== undefined) select = select.where('u.date_joined', '>', toSqlDatetime(filter.joinedAfter));
  if (filter.joinedBefore !== undefined) select = select.where('u.date_joined', '<', toSqlDatetime(filter.joinedBefore));
  return select.orderBy('s.shared_user_id').limit(Math.floor(limit));
}
