/**
 * Every audited command writes its row (docs/cli.md#the-audit-trail), in one table: each command
 * line of the CLI that changes something, run in process on a real MariaDB (`runCli` with the
 * MySQL commands), must add exactly one row to `audit_events` with its action, its merchant, its
 * key id and the actor given with `--actor` (and the rows it writes beside it: an import's
 * per-merchant counts, an `import --erase`'s per-share subjects). The table is held to the source: every action a
 * `writeAuditEvent` call of src/ can write has a row, so a new audited command without one fails
 * here, and a command that stopped writing its row (`merchant revoke-key` writing none was missed
 * by every suite) fails its own.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mysqlCommands, openMysqlStorage } from '../../src/cli/commands/mysql.js';
import { runCli } from '../../src/cli/run.js';
import { importSeed } from '../../src/storage/mysql/index.js';
import { inCi } from '../support/ci.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { ROOT } from '../support/processes.js';
import { captureIo } from '../support/recording.js';
import { user } from '../support/seeds.js';

const available = await mysqlAvailable();
if (!available && inCi()) throw new Error('MariaDB is required in CI (127.0.0.1:3306).');

/** What one command leaves for the next: the ids it printed. */
interface State {
  keyIds: string[];
  endpointId?: string;
  eventId?: string;
}

interface Row {
  /** The audit action the command must record. */
  action: string;
  /** The command line, without `--actor` (added: `actor-<action>`). */
  args: (state: State, dir: string) => string[];
  /** What must hold before it runs (rows of other tables, files); may write audit rows of its own. */
  before?: (db: TestDatabase, state: State, dir: string) => Promise<void>;
  /** Its exit code (0 unless it records a failure). */
  code?: number;
  /** Reads what it printed into the state. */
  after?: (out: string, state: State) => void;
  merchantId: string | null;
  keyId: (state: State) => string | null;
  /** Part of the summary worth pinning (ids, never a secret). */
  summary?: (state: State) => Record<string, unknown>;
  /** Rows the command writes after its own, in the same transaction (an import's per-merchant counts). */
  also?: Array<{ action: string; merchantId: string | null }>;
}

const MERCHANT = 'audited-shop';
const HOOK = 'http://127.0.0.1:9/hooks/audit';
const none = () => null;
const lastKey = (state: State) => state.keyIds.at(-1)!;
const readKey = (out: string, state: State) => void state.keyIds.push(JSON.parse(out).key_id as string);
const ndjson = (users: object[]) => `${users.map((u) => JSON.stringify(u)).join('\n')}\n`;

/** Every audited command line, in an order in which each finds what it needs. */
const ROWS: Row[] = [
  { action: 'merchant_added', args: () => ['merchant', 'add', MERCHANT, '--json'], after: readKey, merchantId: MERCHANT, keyId: lastKey },
  { action: 'key_added', args: () => ['merchant', 'add-key', MERCHANT, '--json'], after: readKey, merchantId: MERCHANT, keyId: lastKey },
  { action: 'key_updated', args: (s) => ['merchant', 'update-key', MERCHANT, s.keyIds[1]!, '--name', 'reports'], merchantId: MERCHANT, keyId: (s) => s.keyIds[1]! },
  { action: 'key_rotated', args: () => ['merchant', 'rotate-key', MERCHANT, '--json'], after: readKey, merchantId: MERCHANT, keyId: lastKey },
  { action: 'key_revoked', args: (s) => ['merchant', 'revoke-key', MERCHANT, s.keyIds[1]!], merchantId: MERCHANT, keyId: (s) => s.keyIds[1]! },
  { action: 'merchant_disabled', args: () => ['merchant', 'disable', MERCHANT], merchantId: MERCHANT, keyId: none },
  { action: 'merchant_enabled', args: () => ['merchant', 'enable', MERCHANT], merchantId: MERCHANT, keyId: none },
  {
    action: 'import_completed',
    before: (_, __, dir) => writeFile(join(dir, 'seed.json'), JSON.stringify({ merchants: [{ id: 'seeded-shop', status: 'active', keys: ['seeded-shop-key'] }], users: [user('seeded-shop', 's-1')] })),
    args: (_, dir) => ['import', join(dir, 'seed.json')],
    merchantId: null,
    keyId: none,
    summary: () => ({ kind: 'seed' }),
    also: [{ action: 'merchant_users_imported', merchantId: 'seeded-shop' }],
  },
  {
    action: 'import_completed',
    before: (_, __, dir) => writeFile(join(dir, 'users.ndjson'), ndjson([user(MERCHANT, 'u-3'), user(MERCHANT, 'u-4')])),
    args: (_, dir) => ['import', join(dir, 'users.ndjson')],
    merchantId: null,
    keyId: none,
    summary: () => ({ kind: 'users' }),
    also: [{ action: 'merchant_users_imported', merchantId: MERCHANT }],
  },
  {
    action: 'import_stopped',
    before: (_, __, dir) => writeFile(join(dir, 'stops.ndjson'), `${ndjson([user(MERCHANT, 'u-5')])}not json\n`),
    args: (_, dir) => ['import', join(dir, 'stops.ndjson'), '--batch-size', '1'],
    code: 1,
    merchantId: null,
    keyId: none,
    summary: () => ({ through_line: 1, problems: 1 }),
    also: [{ action: 'merchant_users_imported', merchantId: MERCHANT }],
  },
  { action: 'user_erased', args: () => ['user', 'erase', 'u-3', '--merchant', MERCHANT], merchantId: MERCHANT, keyId: none, summary: () => ({ scope: 'one_merchant', shares: 1 }) },
  {
    action: 'users_erased',
    before: (_, __, dir) => writeFile(join(dir, 'erase.ndjson'), ndjson([{ merchant_id: MERCHANT, shared_user_id: 'u-4' }])),
    args: (_, dir) => ['import', '--erase', join(dir, 'erase.ndjson')],
    merchantId: null,
    keyId: none,
    summary: () => ({ requested: 1, shares: 1 }),
    also: [{ action: 'user_erased', merchantId: MERCHANT }],
  },
  {
    action: 'throttle_unblocked',
    before: async (db) => {
      await sql`INSERT INTO auth_failures (scope, address, merchant_id, failures, window_start, blocks, blocked_until, updated_at, expires_at)
        VALUES ('address', '198.51.100.7', '', 10, 0, 1, 4102444800, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 DAY)`.execute(db.db);
    },
    args: () => ['throttle', 'unblock', '--address', '198.51.100.7'],
    merchantId: null,
    keyId: none,
    summary: () => ({ client_address: '198.51.100.7', rows: 1 }),
  },
  {
    action: 'webhook_endpoint_added',
    args: () => ['webhook', 'add', MERCHANT, HOOK, '--events', 'user.shared', '--json'],
    after: (out, state) => void (state.endpointId = JSON.parse(out).id as string),
    merchantId: MERCHANT,
    keyId: none,
    summary: (s) => ({ endpoint_id: s.endpointId, url_origin: 'http://127.0.0.1:9' }),
  },
  { action: 'webhook_secret_rotated', args: (s) => ['webhook', 'rotate-secret', s.endpointId!], merchantId: MERCHANT, keyId: none, summary: (s) => ({ endpoint_id: s.endpointId }) },
  {
    action: 'webhook_endpoint_enabled',
    before: async (db, s) => void (await db.db.updateTable('webhook_endpoints').set({ status: 'disabled', disabled_reason: 'gone' }).where('id', '=', s.endpointId!).execute()),
    args: (s) => ['webhook', 'enable', s.endpointId!],
    merchantId: MERCHANT,
    keyId: none,
    summary: (s) => ({ endpoint_id: s.endpointId, disabled_reason: 'gone' }),
  },
  {
    action: 'webhook_redelivered',
    // A share queues a delivery to the endpoint (no dispatcher runs here); it failed.
    before: async (db, s) => {
      await importSeed(db.db, undefined, { merchants: [], users: [user(MERCHANT, 'hook-user')] });
      const [delivery] = await db.db.selectFrom('webhook_deliveries').select(['event_id']).where('endpoint_id', '=', s.endpointId!).execute();
      s.eventId = delivery!.event_id;
      await db.db.updateTable('webhook_deliveries').set({ state: 'failed' }).where('endpoint_id', '=', s.endpointId!).execute();
    },
    args: (s) => ['webhook', 'redeliver', s.eventId!],
    merchantId: MERCHANT,
    keyId: none,
    summary: (s) => ({ event_id: s.eventId, deliveries: 1 }),
  },
  { action: 'webhook_endpoint_removed', args: (s) => ['webhook', 'remove', s.endpointId!], merchantId: MERCHANT, keyId: none, summary: (s) => ({ endpoint_id: s.endpointId }) },
  { action: 'merchant_deleted', args: () => ['merchant', 'delete', MERCHANT, '--yes'], merchantId: MERCHANT, keyId: none },
];

/** Every action a `writeAuditEvent(...)` call of src/ names: the snake_case literals of its `action:`. */
function actionsInSource(): string[] {
  const files = (dir: string): string[] =>
    readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => (entry.isDirectory() ? files(join(dir, entry.name)) : entry.name.endsWith('.ts') ? [join(dir, entry.name)] : []));
  const actions = new Set<string>();
  for (const file of files('src')) {
    const text = readFileSync(join(ROOT, file), 'utf8');
    for (const call of text.matchAll(/writeAuditEvent\([^;]*?action:\s*([^,]+)/g)) {
      if (/^\s*(export\s+)?async\s+function/.test(text.slice(call.index! - 30, call.index!))) continue;
      for (const [, action] of call[1]!.matchAll(/'([a-z]+_[a-z_]+)'/g)) actions.add(action!);
    }
  }
  return [...actions].sort();
}

describe.skipIf(!available)('every audited command writes its audit row (action, merchant, key id, actor)', () => {
  let database: TestDatabase;
  let dir: string;
  const state: State = { keyIds: [] };
  const env = () => ({ DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText, WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true', MERCHANT_API_ACTOR: 'not-this-one' });
  const newestId = async () => Number((await database.db.selectFrom('audit_events').select((eb) => eb.fn.max('id').as('id')).executeTakeFirstOrThrow()).id ?? 0);

  beforeAll(async () => {
    database = await createTestDatabase();
    dir = await mkdtemp(join(tmpdir(), 'merchant-api-audit-rows-'));
  });
  afterAll(async () => {
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('has a row for every action the source can record, and no other', () => {
    const source = actionsInSource();
    expect(source.length).toBeGreaterThanOrEqual(18);
    expect([...new Set(ROWS.map((row) => row.action))].sort()).toEqual(source);
  });

  // One after the other: each finds what the ones before it made.
  for (const row of ROWS) {
    it(`${row.action}: ${row.args({ keyIds: ['KEY_ID', 'KEY_ID'], endpointId: 'ENDPOINT_ID', eventId: 'EVENT_ID' }, 'DIR').join(' ').replace(/\/\S*\/(\w+\.\w+)/, '$1')}`, async () => {
      await row.before?.(database, state, dir);
      const since = await newestId();
      const actor = `actor-${row.action}`;
      const io = captureIo(env(), { progress: () => {} });
      const code = await runCli([...row.args(state, dir), '--actor', actor], io, { name: 'test', serve: () => Promise.reject(new Error('not in this test')), commands: mysqlCommands, openMysqlStorage });
      const out = io.lines.join('\n');
      expect(code, `${out}\n${io.errors.join('\n')}`).toBe(row.code ?? 0);
      row.after?.(out, state);
      const rows = await database.db.selectFrom('audit_events').select(['action', 'merchant_id', 'key_id', 'actor', 'summary']).where('id', '>', since as never).orderBy('id').execute();
      expect(rows.map(({ summary: _, ...rest }) => rest)).toEqual([
        { action: row.action, merchant_id: row.merchantId, key_id: row.keyId(state), actor },
        ...(row.also ?? []).map(({ action, merchantId }) => ({ action, merchant_id: merchantId, key_id: null, actor })),
      ]);
      if (row.summary) expect(JSON.parse(rows[0]!.summary)).toMatchObject(row.summary(state));
    });
  }
});
