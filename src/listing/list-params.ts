/**
 * The list endpoint's parameters (docs/protocol.md#users). Every problem is reported
 * at once, one error object each, with `param` naming it.
 */
import { MerchantApiError, type ErrorDetail } from '../errors.js';
import type { UserFilter, UserOrder } from '../storage/contract.js';
import { printable } from './printable.js';
import { canonicalTimestamp } from '../storage/timestamps.js';

export const MAX_PAGE_SIZE = 1000;

export interface ListParams {
  /** Page size; absent when neither `limit` nor `cursor` was given (stream everything). */
  limit?: number;
  cursor?: string;
  filter: UserFilter;
  /**
   * `order`: `shared_user_id` (the default), `date_joined` or `updated_at`
   * (docs/protocol.md#pagination-and-cursors); `updated_since` alone means `updated_at`.
   */
  order: UserOrder;
  /**
   * `include_removed=true`: the change feed, tombstones of removed shares merged in
   * (docs/protocol.md#removals); lists in `order=updated_at`. Absent otherwise (`false` too).
   */
  includeRemoved?: true;
  /** The filter and order parameters exactly as sent, for the next page's link. */
  filterParams: [string, string][];
}

const ALLOWED = new Set(['limit', 'cursor', 'active', 'joined_after', 'joined_before', 'updated_since', 'order', 'include_removed']);
const ORDERS: readonly UserOrder[] = ['shared_user_id', 'date_joined', 'updated_at'];

/** Validates the decoded query pairs of `GET /merchant/users`. */
export function parseListParams(pairs: readonly [string, string][]): ListParams {
  const problems: ErrorDetail[] = [];
  const values = new Map<string, string>();
  for (const [key, value] of pairs) {
    if (!ALLOWED.has(key)) {
      problems.push({ code: 'unknown_parameter', message: `Unknown parameter: ${printable(key)}.`, param: key });
    } else if (values.has(key)) {
      if (!problems.some((p) => p.param === key)) problems.push({ code: 'invalid_parameter', message: `${key} is given more than once.`, param: key });
    } else {
      values.set(key, value);
    }
  }

  const params: ListParams = { filter: {}, order: 'shared_user_id', filterParams: [] };
  const limit = values.get('limit');
  if (limit !== undefined && !problems.some((p) => p.param === 'limit')) {
    if (/^[1-9]\d{0,3}$/.test(limit) && Number(limit) <= MAX_PAGE_SIZE) params.limit = Number(limit);
    else problems.push({ code: 'invalid_parameter', message: `limit must be a whole number from 1 to ${MAX_PAGE_SIZE}.`, param: 'limit' });
  }
  const cursor = values.get('cursor');
  if (cursor !== undefined && !problems.some((p) => p.param === 'cursor')) {
    if (cursor === '') problems.push({ code: 'invalid_cursor', message: 'cursor is empty; pass the next_cursor of the previous page.', param: 'cursor' });
    else params.cursor = cursor;
  }
  const active = values.get('active');
  if (active !== undefined && !problems.some((p) => p.param === 'active')) {
    if (active === 'true' || active === 'false') {
      params.filter.active = active === 'true';
      params.filterParams.push(['active', active]);
    } else {
      problems.push({ code: 'invalid_parameter', message: 'active must be true or false.', param: 'active' });
    }
  }
  for (const [name, field] of [['joined_after', 'joinedAfter'], ['joined_before', 'joinedBefore'], ['updated_since', 'updatedSince']] as const) {
    const value = values.get(name);
    if (value === undefined || problems.some((p) => p.param === name)) continue;
    const canonical = canonicalTimestamp(value);
    if (canonical === undefined) {
      const hint = / \d{2}:?\d{2}$/.test(value) ? " (a '+' in a query string means a space: send the offset as %2B)" : '';
      problems.push({ code: 'invalid_parameter', message: `${name} must be an ISO 8601 timestamp such as 2020-01-31T00:00:00Z${hint}.`, param: name });
    } else {
      params.filter[field] = canonical;
      params.filterParams.push([name, value]);
    }
  }

  const order = values.get('order');
  if (order !== undefined && !problems.some((p) => p.param === 'order')) {
    if ((ORDERS as readonly string[]).includes(order)) {
      params.order = order as UserOrder;
      params.filterParams.push(['order', order]);
    } else {
      problems.push({ code: 'invalid_parameter', message: 'order must be shared_user_id, date_joined or updated_at.', param: 'order' });
    }
  }
  // Changes are read in the order they were made: `updated_since` alone implies it, another order is refused.
  if (values.has('updated_since') && !problems.some((p) => p.param === 'order')) {
    if (order === undefined) params.order = 'updated_at';
    else if (order !== 'updated_at') problems.push({ code: 'invalid_parameter', message: 'updated_since lists in updated_at order: send order=updated_at or no order.', param: 'order' });
  }

  const removed = values.get('include_removed');
  if (removed !== undefined && !problems.some((p) => p.param === 'include_removed')) {
    if (removed !== 'true' && removed !== 'false') problems.push({ code: 'invalid_parameter', message: 'include_removed must be true or false.', param: 'include_removed' });
    else {
      params.filterParams.push(['include_removed', removed]);
      if (removed === 'true') includeRemoved(params, values, problems);
    }
  }

  if (problems.length) throw new MerchantApiError(problems[0]!.code, problems[0]!.message, { details: problems, status: 400 });
  return params;
}

/**
 * The change feed lists every share's changes and removals in `updated_at` order: `order` may be
 * left out; another order, or a filter a tombstone cannot be checked against, is refused.
 */
function includeRemoved(params: ListParams, values: Map<string, string>, problems: ErrorDetail[]): void {
  const order = values.get('order');
  if (order !== undefined && order !== 'updated_at') {
    if (!problems.some((p) => p.param === 'order')) problems.push({ code: 'invalid_parameter', message: 'include_removed lists in updated_at order: send order=updated_at or no order.', param: 'order' });
    return;
  }
  for (const name of ['active', 'joined_after', 'joined_before']) {
    if (values.has(name) && !problems.some((p) => p.param === name)) {
      problems.push({ code: 'invalid_parameter', message: `include_removed lists every share and its removal: it does not combine with ${name}.`, param: name });
    }
  }
  params.order = 'updated_at';
  params.includeRemoved = true;
}
