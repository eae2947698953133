/** The query strings of `/merchant/users`: the filters and the order (docs/protocol.md#filters), checked and encoded. */
import { pct } from '../signing/index.js';
import type { UserFilters, UserOrder, UsersQuery } from './types.js';

const ORDERS: readonly UserOrder[] = ['shared_user_id', 'date_joined', 'updated_at'];

/** The query of the filters (docs/protocol.md#filters). */
export function filterQuery(filters: UserFilters): UsersQuery {
  const query: UsersQuery = {};
  if (filters.active !== undefined) {
    if (typeof filters.active !== 'boolean') throw new TypeError('active must be true or false.');
    query.active = filters.active ? 'true' : 'false';
  }
  if (filters.joinedAfter !== undefined) query.joined_after = timestamp(filters.joinedAfter, 'joinedAfter');
  if (filters.joinedBefore !== undefined) query.joined_before = timestamp(filters.joinedBefore, 'joinedBefore');
  if (filters.updatedSince !== undefined) query.updated_since = timestamp(filters.updatedSince, 'updatedSince');
  if (filters.order !== undefined) {
    if (!ORDERS.includes(filters.order)) throw new TypeError(`order must be one of ${ORDERS.join(', ')}.`);
    query.order = filters.order;
  }
  return query;
}

function timestamp(value: string | Date, name: string): string {
  if (value instanceof Date) {
    if (Number.isNaN(value.getTime())) throw new RangeError(`${name} is an invalid Date.`);
    return value.toISOString();
  }
  if (typeof value !== 'string' || value === '') throw new TypeError(`${name} must be an ISO 8601 string or a Date.`);
  return value;
}

/** Every parameter encoded with pct, so `+` in an offset is sent as %2B, never read as a space. */
export function queryString(query: UsersQuery): string {
  return Object.entries(query)
    .filter(([, value]) => value !== undefined)
    .map(([key, value]) => `${key}=${pct(String(value))}`)
    .join('&');
}
