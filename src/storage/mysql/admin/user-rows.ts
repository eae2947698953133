/**
 * A seed user as rows of `users` and `user_shares`: the columns Kysely writes, and the values of a
 * LOAD DATA line (`infile.ts`), the same record in the two forms the import writes it in.
 */
import type { Insertable } from 'kysely';
import type { SeedUser } from '../../seed/seed.js';
import type { UsersTable } from '../schema.js';
import { toSqlDatetime } from '../sql-values.js';

export type UserColumns = Omit<Insertable<UsersTable>, 'id'>;

export function userColumns(user: SeedUser): UserColumns {
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
export function shareValues(user: SeedUser, row: number): (string | number)[] {
  return [user.merchant_id, user.shared_user_id, row, user.deactivated_at === null ? 1 : 0, loadDatetime(user.date_joined)];
}

/** The `users` columns of USER_FIELDS, in that order, as LOAD DATA values. */
export function userValues(u: SeedUser): (string | null)[] {
  return [u.first_name, u.last_name, u.email_address, u.street, u.zip_code, u.city, u.state, u.country, u.preferred_language, loadDatetime(u.date_joined), loadDatetime(u.deactivated_at), loadDatetime(u.agreed_to_terms_and_conditions), loadDatetime(u.agreed_to_marketing)];
}

/** `2019-12-12T12:19:17.193961+00:00` -> `2019-12-12T12:19:17.193961`, which DATETIME(6) takes as it is (UTC). */
function loadDatetime<T extends string | null>(canonical: T): T {
  return (canonical === null ? null : canonical.slice(0, 26)) as T;
}
