/**
 * One time format in every command (docs/cli.md#times): each command that prints a time, run
 * with `--json` through the built CLI on real MariaDB, and every value that looks like a time
 * (anywhere in its JSON, audit summaries included) must be RFC 3339 in UTC with six fractional
 * digits and `+00:00`; where the database holds the value, equal to it to the microsecond.
 */
import { execFile } from 'node:child_process';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { importSeed } from '../../src/storage/mysql/index.js';
import { CLEAN_ENV, CLI, ROOT } from '../support/processes.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { user } from '../support/seeds.js';

const available = await mysqlAvailable();

/** The one format. */
const CANONICAL = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/;
/** What looks like a time, in any of the forms a command could slip into: `2026-11-28`, `…T04:00`, `… 04:00:00Z`, epoch-ms ISO. */
const TIME_LIKE = /^\d{4}-\d\d-\d\d(?:$|[T ]\d)/;
/** A JSON member that holds a time by its name, whatever its value looks like. */
const TIME_NAME = /(^|_)(at|until|since|time)$/;

/** Every time-looking string of `value`, with where it is: `[path, value]`. */
function timesIn(value: unknown, path = '$'): Array<[string, unknown]> {
  if (Array.isArray(value)) return value.flatMap((item, i) => timesIn(item, `${path}[${i}]`));
  if (value !== null && typeof value === 'object') {
    return Object.entries(value).flatMap(([key, item]) => {
      const here = `${path}.${key}`;
      // A member named like a time must be a time or null (a number of seconds would not be one format).
      if (TIME_NAME.test(key) && item !== null && typeof item !== 'object') return [[here, item] as [string, unknown]];
      return timesIn(item, here);
    });
  }
  return typeof value === 'string' && TIME_LIKE.test(value) ? [[path, value]] : [];
}

interface Run {
  code: number;
  out: string;
  err: string;
}

describe.skipIf(!available)('every command prints times in one format, equal to the stored ones', () => {
  let database: TestDatabase;
  let env: Record<string, string>;
  /** Every `--json` answer of the run, by command line, for the format check at the end. */
  const answers = new Map<string, unknown>();

  const cli = (args: string[]): Promise<Run> =>
    new Promise((resolve) => {
      execFile(process.execPath, [CLI.node, ...args], { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV, ...env, WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true' } }, (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout.trim(), err: stderr.trim() });
      });
    });
  /** Runs a `--json` command, keeps its answer for the format check, and returns it parsed. */
  const json = async <T>(args: string[]): Promise<T> => {
    const run = await cli([...args, '--json']);
    expect(run.code, `${args.join(' ')}: ${run.err}`).toBe(0);
    const parsed = JSON.parse(run.out) as T;
    answers.set(args.join(' '), parsed);
    return parsed;
  };
  /** A DATETIME(6) column as the database holds it, in the canonical form. */
  const stored = async (table: string, column: string, where: string, value: string): Promise<string | null> => {
    const { rows } = await sql<{ v: string | null }>`SELECT DATE_FORMAT(${sql.ref(column)}, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS v FROM ${sql.table(table)} WHERE ${sql.ref(where)} = ${value}`.execute(database.db);
    expect(rows, `${table}.${column} of ${value}`).toHaveLength(1);
    return rows[0]!.v;
  };

  beforeAll(async () => {
    database = await createTestDatabase();
    env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText };
  });
  afterAll(async () => {
    await database?.drop();
  });

  it('merchant add, add-key, rotate-key, update-key, keys and list: the ends printed are the ends stored', async () => {
    const added = await json<{ key_id: string; expires_at: string }>(['merchant', 'add', 'times-shop', '--expires-in', '90d']);
    expect(added.expires_at).toBe(await stored('merchant_keys', 'expires_at', 'key_id', added.key_id));
    const second = await json<{ key_id: string; expires_at: string }>(['merchant', 'add-key', 'times-shop', '--expires-in', '30d']);
    expect(second.expires_at).toBe(await stored('merchant_keys', 'expires_at', 'key_id', second.key_id));
    const rotated = await json<{ key_id: string; expires_at: string; old_keys_expire_at: string }>(['merchant', 'rotate-key', 'times-shop', '--expire-old-in', '1h', '--expires-in', '7d']);
    expect(rotated.expires_at).toBe(await stored('merchant_keys', 'expires_at', 'key_id', rotated.key_id));
    // The older keys' end: the very value `merchant keys` shows and the servers compare (it differed by microseconds once).
    expect(rotated.old_keys_expire_at).toBe(await stored('merchant_keys', 'expires_at', 'key_id', added.key_id));
    expect(rotated.old_keys_expire_at).toBe(await stored('merchant_keys', 'expires_at', 'key_id', second.key_id));
    expect((await cli(['merchant', 'update-key', 'times-shop', rotated.key_id, '--expires-in', '10d'])).code).toBe(0);
    expect((await cli(['merchant', 'revoke-key', 'times-shop', second.key_id])).code).toBe(0);
    await sql`UPDATE merchant_keys SET last_used_at = UTC_TIMESTAMP(6) WHERE key_id = ${rotated.key_id}`.execute(database.db);

    const keys = await json<Array<Record<string, string | null> & { key_id: string }>>(['merchant', 'keys', 'times-shop']);
    expect(keys).toHaveLength(3);
    for (const key of keys) {
      for (const column of ['created_at', 'expires_at', 'revoked_at', 'last_used_at']) {
        expect(key[column], `${key.key_id} ${column}`).toBe(await stored('merchant_keys', column, 'key_id', key.key_id));
      }
    }
    // Every kind of time is there to be checked: not only nulls.
    expect(keys.map((k) => [k.revoked_at !== null, k.last_used_at !== null])).toContainEqual([true, false]);
    expect(keys.map((k) => k.last_used_at)).toContainEqual(expect.stringMatching(CANONICAL));

    const merchants = await json<Array<{ id: string; created_at: string }>>(['merchant', 'list']);
    for (const merchant of merchants) expect(merchant.created_at).toBe(await stored('merchants', 'created_at', 'id', merchant.id));

    // The table prints the same values, whole.
    const table = await cli(['merchant', 'keys', 'times-shop']);
    for (const key of keys) expect(table.out).toContain(key.created_at!);
    expect((await cli(['merchant', 'list'])).out).toContain(merchants[0]!.created_at);
  }, 120_000);

  it('webhook add, rotate-secret, list and deliveries', async () => {
    const endpoint = await json<{ id: string; created_at: string }>(['webhook', 'add', 'times-shop', 'http://127.0.0.1:9/hook']);
    expect(endpoint.created_at).toBe(await stored('webhook_endpoints', 'created_at', 'id', endpoint.id));
    const rotated = await json<{ old_secret_expires_at: string }>(['webhook', 'rotate-secret', endpoint.id, '--expire-old-in', '1h']);
    expect(rotated.old_secret_expires_at).toBe(await stored('webhook_endpoints', 'previous_expires_at', 'id', endpoint.id));
    const listed = await json<Array<{ id: string; created_at: string }>>(['webhook', 'list']);
    expect(listed[0]!.created_at).toBe(await stored('webhook_endpoints', 'created_at', 'id', endpoint.id));
    await importSeed(database.db, undefined, { merchants: [], users: [user('times-shop', 'times-user')] });
    const deliveries = await json<Array<{ id: string; created_at: string; next_attempt_at: string | null }>>(['webhook', 'deliveries']);
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]!.created_at).toBe(await stored('webhook_deliveries', 'created_at', 'id', deliveries[0]!.id));
    expect(deliveries[0]!.next_attempt_at).toBe(await stored('webhook_deliveries', 'next_attempt_at', 'id', deliveries[0]!.id));
    expect((await cli(['webhook', 'deliveries'])).out).toContain(deliveries[0]!.created_at);
    await database.db.updateTable('webhook_deliveries').set({ state: 'failed' }).execute();
    const redelivered = await cli(['webhook', 'redeliver', '--endpoint', endpoint.id, '--since', '2000-01-01T01:00:00.123456+01:00']);
    expect(redelivered.code).toBe(0);
    // Its log event names the time as given, in the one format, to the microsecond.
    const logged = JSON.parse(redelivered.err.split('\n').find((line) => line.includes('"webhook_redelivered"'))!) as { since: string };
    expect(logged.since).toBe('2000-01-01T00:00:00.123456+00:00');
  }, 120_000);

  it('throttle list: a block stored in whole seconds, printed in the one format', async () => {
    const until = Math.floor(Date.now() / 1000) + 600;
    await sql`INSERT INTO auth_failures (scope, address, merchant_id, failures, window_start, blocks, blocked_until, updated_at, expires_at)
      VALUES ('pair', '203.0.113.9', 'times-shop', 0, ${until - 3600}, 1, ${until}, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)`.execute(database.db);
    const blocks = await json<Array<{ blocked_until: string }>>(['throttle', 'list']);
    const expected = `${new Date(until * 1000).toISOString().slice(0, 19)}.000000+00:00`;
    expect(blocks).toEqual([expect.objectContaining({ blocked_until: expected })]);
    expect((await cli(['throttle', 'list'])).out).toContain(expected);
    expect((await cli(['throttle', 'unblock', '--address', '203.0.113.9'])).code).toBe(0);
  }, 60_000);

  it('user erase and the audit list: every event\'s time and every time in a summary', async () => {
    await json(['user', 'erase', 'times-user', '--merchant', 'times-shop']);
    const { events } = await json<{ events: Array<{ id: string; at: string; action: string; summary: Record<string, unknown> }> }>(['audit', 'list', '--limit', '1000']);
    for (const event of events) expect(event.at, event.action).toBe(await stored('audit_events', 'at', 'id', event.id));
    // The summaries with times: key ends, a rotation's old end, a redelivery's start.
    const summaryTimes = events.flatMap((event) => timesIn(event.summary).map(([path]) => `${event.action}${path.slice(1)}`));
    expect(summaryTimes).toEqual(expect.arrayContaining(['merchant_added.expires_at', 'key_added.expires_at', 'key_rotated.expires_at', 'key_rotated.old_keys_expire_at', 'key_updated.expires_at', 'webhook_secret_rotated.old_expires_at', 'webhook_redelivered.since']));
  }, 60_000);

  it('every time-looking value of every answer above is in the one format', () => {
    expect([...answers.keys()].length).toBeGreaterThanOrEqual(12);
    const all = [...answers].flatMap(([command, answer]) => timesIn(answer).map(([path, value]) => ({ command, path, value })));
    expect(all.length).toBeGreaterThan(30);
    expect(all.filter(({ value }) => typeof value !== 'string' || !CANONICAL.test(value))).toEqual([]);
  });

  it('and every member name of every answer is snake_case (docs/cli.md: one language)', () => {
    const names = (value: unknown): string[] =>
      Array.isArray(value) ? value.flatMap(names) : value !== null && typeof value === 'object' ? Object.entries(value).flatMap(([key, item]) => [key, ...names(item)]) : [];
    const all = [...answers].flatMap(([command, answer]) => names(answer).map((name) => `${command}: ${name}`));
    expect(all.filter((entry) => !/: [a-z][a-z0-9_]*$/.test(entry))).toEqual([]);
  });
});
