/**
 * The filtered listings the scale benches time (issue 13, section 1), on the users of
 * `fake-users.ts`: every filter, both orders, each at its first, a middle and its last page.
 * Positions are computed from the data itself, so "last" is the page the listing ends with.
 * Timed in process (the storage call) and over HTTP (a real server process, cursors sealed with
 * its CURSOR_SECRET), each against the first unfiltered page measured in the same run.
 * `order=updated_at` cases run where the bench can say a user's `updated_at` (`updatedAtOf`):
 * the benches write users in id order, one stamp per batch, so (updated_at, id) order is id order.
 */
import { CursorCodec } from '../src/listing/cursor.js';
import { compareCodePoints } from '../src/storage/order.js';
import type { Storage, UserFilter, UserOrder, UserPageQuery } from '../src/storage/contract.js';
import { fakeUser, MERCHANT } from './fake-users.js';

export const PAGE = 100;
export const CURSOR_SECRET = 'bench-cursor-secret-bench-cursor-secret';

export interface ListingCase {
  name: string;
  query: string;
  filter: UserFilter;
  order: UserOrder;
}

const t = (text: string) => `${text}.000000+00:00`;

export const CASES: ListingCase[] = [
  { name: 'unfiltered', query: '', filter: {}, order: 'shared_user_id' },
  { name: 'active=true', query: 'active=true', filter: { active: true }, order: 'shared_user_id' },
  { name: 'active=false', query: 'active=false', filter: { active: false }, order: 'shared_user_id' },
  { name: 'joined_after, the newest 0.4%', query: 'joined_after=2023-09-27T00:00:00Z', filter: { joinedAfter: t('2023-09-27T00:00:00') }, order: 'shared_user_id' },
  { name: 'joined_before, the oldest 0.8%', query: 'joined_before=2010-02-01T00:00:00Z', filter: { joinedBefore: t('2010-02-01T00:00:00') }, order: 'shared_user_id' },
  { name: 'joined range (one year, 7%)', query: 'joined_after=2015-01-01T00:00:00Z&joined_before=2016-01-01T00:00:00Z', filter: { joinedAfter: t('2015-01-01T00:00:00'), joinedBefore: t('2016-01-01T00:00:00') }, order: 'shared_user_id' },
  { name: 'active=false + joined range', query: 'active=false&joined_after=2014-01-01T00:00:00Z&joined_before=2015-01-01T00:00:00Z', filter: { active: false, joinedAfter: t('2014-01-01T00:00:00'), joinedBefore: t('2015-01-01T00:00:00') }, order: 'shared_user_id' },
  { name: 'matches nothing (joined_after=2099)', query: 'joined_after=2099-01-01T00:00:00Z', filter: { joinedAfter: t('2099-01-01T00:00:00') }, order: 'shared_user_id' },
  { name: 'order=date_joined', query: 'order=date_joined', filter: {}, order: 'date_joined' },
  { name: 'order=date_joined, joined_after 2023', query: 'order=date_joined&joined_after=2023-01-01T00:00:00Z', filter: { joinedAfter: t('2023-01-01T00:00:00') }, order: 'date_joined' },
  { name: 'order=date_joined, active=false', query: 'order=date_joined&active=false', filter: { active: false }, order: 'date_joined' },
  { name: 'order=updated_at', query: 'order=updated_at', filter: {}, order: 'updated_at' },
  { name: 'updated_since (all), order=updated_at', query: 'updated_since=2000-01-01T00:00:00Z&order=updated_at', filter: { updatedSince: t('2000-01-01T00:00:00') }, order: 'updated_at' },
  { name: 'order=updated_at, active=false (0.1%)', query: 'order=updated_at&active=false', filter: { active: false }, order: 'updated_at' },
  { name: 'order=updated_at, joined_after 2023', query: 'order=updated_at&joined_after=2023-01-01T00:00:00Z', filter: { joinedAfter: t('2023-01-01T00:00:00') }, order: 'updated_at' },
];

export interface Position {
  label: 'first' | 'middle' | 'last';
  after?: string;
  afterJoined?: string;
  /** In `order=updated_at`: the position's `updated_at` (filled in by `runCases`). */
  afterUpdated?: string;
  /** How many users the listing holds in all. */
  matching?: number;
}

interface Compact {
  id: string;
  joined: string;
  active: boolean;
}

/** The first, a middle and the last page's position of each case, from the `users` fake users. */
export function positionsOf(users: number): Map<ListingCase, Position[]> {
  const all: Compact[] = [];
  for (let i = 0; i < users; i++) {
    const user = fakeUser(i);
    all.push({ id: user.shared_user_id, joined: user.date_joined, active: user.deactivated_at === null });
  }
  const positions = new Map<ListingCase, Position[]>();
  for (const c of CASES) {
    const kept = all.filter((u) => (c.filter.active === undefined || u.active === c.filter.active) && (c.filter.joinedAfter === undefined || u.joined > c.filter.joinedAfter) && (c.filter.joinedBefore === undefined || u.joined < c.filter.joinedBefore));
    // order=updated_at: id order, as the benches write the users (see the file comment).
    kept.sort(c.order === 'date_joined' ? (a, b) => (a.joined < b.joined ? -1 : a.joined > b.joined ? 1 : compareCodePoints(a.id, b.id)) : (a, b) => compareCodePoints(a.id, b.id));
    const at = (index: number): Position => (index < 0 || kept.length === 0 ? {} : { after: kept[index]!.id, afterJoined: kept[index]!.joined }) as Position;
    // The last page starts after the last full page's last user; the middle one halfway.
    const lastStart = kept.length === 0 ? 0 : Math.floor((kept.length - 1) / PAGE) * PAGE;
    positions.set(c, [
      { label: 'first', matching: kept.length },
      { ...at(Math.floor(kept.length / PAGE / 2) * PAGE - 1), label: 'middle', matching: kept.length },
      { ...at(lastStart - 1), label: 'last', matching: kept.length },
    ]);
  }
  return positions;
}

/** The storage query of a case at a position. */
export function queryOf(c: ListingCase, position: Position, limit = PAGE + 1): UserPageQuery {
  return {
    merchantId: MERCHANT,
    filter: c.filter,
    order: c.order,
    after: position.after,
    afterJoined: c.order === 'date_joined' ? position.afterJoined : undefined,
    afterUpdated: c.order === 'updated_at' ? position.afterUpdated : undefined,
    limit,
  };
}

/** The HTTP path of a case at a position, with a cursor the bench server accepts. */
export async function pathOf(c: ListingCase, position: Position): Promise<string> {
  const base = `/merchant/users?limit=${PAGE}${c.query ? `&${c.query}` : ''}`;
  if (position.after === undefined) return base;
  const cursor = await new CursorCodec(CURSOR_SECRET).seal(MERCHANT, c.filter, { after: position.after, afterJoined: position.afterJoined, afterUpdated: position.afterUpdated, limit: PAGE }, c.order);
  return `${base}&cursor=${encodeURIComponent(cursor)}`;
}

/** p50 and p99 in ms of `n` sequential calls after a warm-up. */
export async function timeMany(n: number, call: () => Promise<unknown>): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < Math.min(50, n); i++) await call();
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await call();
    times.push(performance.now() - started);
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!;
  return { p50: at(0.5), p99: at(0.99) };
}

export interface CaseResult {
  name: string;
  matching: number;
  position: string;
  users: number;
  examined: number;
  storageP50: number;
  httpP50: number;
  httpP99: number;
}

/**
 * Times every case at every position: in process on `storage` (with `examine` saying how many
 * rows the page looked at) and over HTTP on `base`. Prints one row a case as it goes.
 */
export async function runCases(options: {
  storage: Storage;
  base: string;
  headers: Record<string, string>;
  users: number;
  examine: (query: UserPageQuery) => Promise<number>;
  /** A user's `updated_at` (canonical); without it the `order=updated_at` cases are left out. */
  updatedAtOf?: (sharedUserId: string) => Promise<string>;
  calls?: number;
}): Promise<CaseResult[]> {
  const { storage, base, headers, examine, updatedAtOf } = options;
  const calls = options.calls ?? 200;
  const positions = positionsOf(options.users);
  for (const c of CASES) {
    if (c.order !== 'updated_at') continue;
    if (!updatedAtOf) positions.delete(c);
    else for (const position of positions.get(c)!) if (position.after !== undefined) position.afterUpdated = await updatedAtOf(position.after);
  }
  const cases = CASES.filter((c) => positions.has(c));
  // Warm-up: every case's first page, so the reference is not measured on a cold server.
  for (const c of cases) {
    const path = await pathOf(c, positions.get(c)![0]!);
    await timeMany(50, async () => (await fetch(`${base}${path}`, { headers })).arrayBuffer());
    await timeMany(50, () => storage.listUsers(queryOf(c, positions.get(c)![0]!)));
  }
  const results: CaseResult[] = [];
  for (const c of cases) {
    for (const position of positions.get(c)!) {
      const query = queryOf(c, position);
      const page = await storage.listUsers(query);
      const examined = await examine(query);
      const local = await timeMany(calls, () => storage.listUsers(query));
      const path = await pathOf(c, position);
      const http = await timeMany(calls, async () => {
        const response = await fetch(`${base}${path}`, { headers });
        if (response.status !== 200) throw new Error(`HTTP ${response.status} for ${path}`);
        await response.arrayBuffer();
      });
      const result = { name: c.name, matching: position.matching ?? 0, position: position.label, users: Math.min(page.length, PAGE), examined, storageP50: local.p50, httpP50: http.p50, httpP99: http.p99 };
      results.push(result);
      process.stderr.write(`  ${c.name}, ${position.label}: ${result.users} users, ${examined} rows examined, storage p50 ${(local.p50 * 1000).toFixed(0)} µs, HTTP p50 ${http.p50.toFixed(2)} ms\n`);
    }
  }
  return results;
}

/** The results as a Markdown table, each against the first unfiltered page (same run). */
export function casesTable(results: CaseResult[]): string {
  const reference = results.find((r) => r.name === 'unfiltered' && r.position === 'first')!;
  const lines = [
    '| listing (limit=100) | users in it | page | users on it | rows examined | storage p50 µs | x first unfiltered | HTTP p50 ms | HTTP p99 ms | x first unfiltered |',
    '|---|--:|---|--:|--:|--:|--:|--:|--:|--:|',
  ];
  for (const r of results) {
    lines.push(
      `| ${r.name} | ${r.position === 'first' ? r.matching.toLocaleString('en-US') : ''} | ${r.position} | ${r.users} | ${r.examined.toLocaleString('en-US')} | ${Math.round(r.storageP50 * 1000)} | ${(r.storageP50 / reference.storageP50).toFixed(2)}x | ${r.httpP50.toFixed(2)} | ${r.httpP99.toFixed(2)} | ${(r.httpP50 / reference.httpP50).toFixed(2)}x |`,
    );
  }
  const worstRows = Math.max(...results.map((r) => r.examined));
  const worstHttp = Math.max(...results.map((r) => r.httpP50 / reference.httpP50));
  lines.push('', `Most rows examined by one page: ${worstRows.toLocaleString('en-US')} (goal: about 10,000). Slowest page over HTTP: ${worstHttp.toFixed(2)}x the first unfiltered page (goal: within 3x).`);
  return lines.join('\n');
}
