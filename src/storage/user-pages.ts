/**
 * How every storage of this package reads one page of users in bounded work
 * (docs/protocol.md#filters), whatever the filters and however many users a merchant has.
 * The memory and the MySQL storage follow the same plan with the same constants, so they cut
 * pages at the same places:
 *
 * - `order=date_joined`: an index range read in `(date_joined, shared_user_id)` order within the
 *   `active` value (both values merged when `active` is not given): `limit` users examined.
 * - `order=shared_user_id` (the default) without a date filter: an index range read in id order
 *   within the `active` value (or all users).
 * - `order=shared_user_id` with `joined_after`/`joined_before`: no index can serve both a date
 *   range and id order, so the plan depends on the range's size, counted on the date index up to
 *   `SEEK_LIMIT + 1` entries:
 *   - at most `SEEK_LIMIT` users in the range (a filter that matches nothing included): they are
 *     read from the date index and the page is the first `limit` of them by id after the
 *     position. Full pages; at most `SEEK_LIMIT` entries examined;
 *   - more: the users in id order after the position (within the `active` value) are examined,
 *     at most `SCAN_BUDGET` of them, keeping those in the range. When the budget runs out with
 *     fewer than `limit` kept, the page is short and `resumeAfter` names the last user examined:
 *     the next page goes on from there. A page may then be short, even empty, before the end.
 * - `order=updated_at` (with or without `updated_since`): an index range read in
 *   `(updated_at, shared_user_id)` order from `max(updated_since, position)`, all activities in one
 *   range; `active`, `joined_after` and `joined_before` are checked on the index entries. At most
 *   `SCAN_BUDGET` entries are examined: when the budget runs out with fewer than `limit` kept, the
 *   page is short and `resumeAfter`/`resumeAfterUpdated` name the last entry examined. Without those
 *   filters every page examines `limit` entries.
 */
import type { UserFilter } from './contract.js';

/** Largest date range (in users) read from the date index and ordered by id for each page. */
export const SEEK_LIMIT = 2000;
/** Users examined per page in id order when the date range is larger than `SEEK_LIMIT`. */
export const SCAN_BUDGET = 4000;

/** The two bounds of the plan; tests use small ones to cross every boundary with few users. */
export interface PagePlan {
  /** Largest date range read from the date index (default `SEEK_LIMIT`). */
  seekLimit: number;
  /** Users examined per page in id order beyond it (default `SCAN_BUDGET`). */
  scanBudget: number;
}

export const DEFAULT_PAGE_PLAN: Readonly<PagePlan> = Object.freeze({ seekLimit: SEEK_LIMIT, scanBudget: SCAN_BUDGET });

/** True when the filter bounds `date_joined`. */
export function hasDateFilter(filter: UserFilter): boolean {
  return filter.joinedAfter !== undefined || filter.joinedBefore !== undefined;
}
