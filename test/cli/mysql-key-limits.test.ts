/**
 * Keys merchants can reason about, the audit trail and erasure through the command line, in
 * process on a real MariaDB (issue 31): `add-key` with every option, `rotate-key` with them,
 * `update-key`, `keys --json`, each scope and an allowlist (IPv4 and an IPv6 /48) through a
 * handler on the same database, an expired key, `last_used_at` moving, every command's audit
 * event with its actor, `audit list` with its filters and pages, `user erase` for one merchant
 * and for all, and `import --erase`.
 */
import { sql } from 'kysely';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMerchantApi, silentLogger, type MerchantApi } from '../../src/index.js';
import { signUrl } from '../../src/signing/index.js';
import { mysqlCommands, openMysqlStorage } from '../../src/cli/commands/mysql.js';
import { runCli } from '../../src/cli/run.js';
import { importSeed, MysqlStorage } from '../../src/storage/mysql/index.js';
import type { KeyUse } from '../../src/storage/contract.js';
import { basic } from '../support/basic-auth.js';
import { inCi } from '../support/ci.js';
import { captureIo } from '../support/recording.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { user } from '../support/seeds.js';

const available = await mysqlAvailable();
if (!available && inCi()) throw new Error('MariaDB is required in CI (127.0.0.1:3306).');
const BASE = 'http://merchant-api.test';

describe.skipIf(!available)('key limits, audit trail and erasure through the CLI on MariaDB', () => {
  let database: TestDatabase;
  let env: Record<string, string>;
  let dir: string;
  let storage: MysqlStorage;
  let api: MerchantApi;
  const secrets = new Set<string>();
  const writes: KeyUse[][] = [];
  const run = async (args: string[], extraEnv: Record<string, string | undefined> = {}) => {
    const io = captureIo({ ...env, ...extraEnv }, { progress: () => {} });
    const code = await runCli(args, io, { name: 'test', serve: () => Promise.reject(new Error('not in this test')), commands: mysqlCommands, openMysqlStorage });
    const out = io.lines.join('\n');
    for (const [, key] of out.matchAll(/"api_key":"([^"]+)"/g)) secrets.add(key!);
    return { code, out, err: io.errors.join('\n') };
  };
  const json = async (args: string[], extraEnv: Record<string, string | undefined> = {}) => {
    const result = await run(args, extraEnv);
    expect(result.code, result.err).toBe(0);
    return JSON.parse(result.out);
  };
  const read = async (id: string, key: string, address = '192.0.2.1', path = '/merchant/users?limit=1') => (await api.fetch(new Request(`${BASE}${path}`, { headers: basic(id, key) }), { clientAddress: address })).status;
  const sign = async (id: string, key: string, address = '192.0.2.1') => (await api.fetch(new Request(signUrl(key, `${BASE}/validatesignature`, { cp: id })), { clientAddress: address })).status;

  beforeAll(async () => {
    database = await createTestDatabase();
    env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText, KEY_CACHE_TTL: '0', MERCHANT_API_ACTOR: 'ops-env' };
    dir = await mkdtemp(join(tmpdir(), 'merchant-api-keylimits-'));
    await importSeed(database.db, database.masterKey, {
      merchants: [
        { id: 'shop', status: 'active', keys: ['shop-original-key'] },
        { id: 'other', status: 'active', keys: ['other-original-key'] },
      ],
      users: [user('shop', 'u-1'), user('shop', 'u-2'), user('other', 'o-1'), user('shop', 'u-3'), user('other', 'o-3')],
    }, { actor: 'seed-loader' });
    // u-3 of shop and o-3 of other are one person (one users row, two shares).
    const row = await database.db.selectFrom('user_shares').select('user_id').where('merchant_id', '=', 'shop').where('shared_user_id', '=', 'u-3').executeTakeFirstOrThrow();
    const other = await database.db.selectFrom('user_shares').select('user_id').where('merchant_id', '=', 'other').where('shared_user_id', '=', 'o-3').executeTakeFirstOrThrow();
    await database.db.updateTable('user_shares').set({ user_id: String(row.user_id) } as never).where('merchant_id', '=', 'other').where('shared_user_id', '=', 'o-3').execute();
    await database.db.deleteFrom('users').where('id', '=', String(other.user_id)).execute();
    storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey, keyCacheTtlMs: 0, throttleSharing: false });
    // Every batch the handler writes, to count them.
    const record = storage.recordKeyUse.bind(storage);
    storage.recordKeyUse = async (uses) => {
      writes.push([...uses]);
      return record(uses);
    };
    api = createMerchantApi({ storage, logger: silentLogger, throttle: false });
  });
  afterAll(async () => {
    await storage?.close();
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('add-key adds a key beside the others with its name, scopes, end and networks; keys --json shows them', async () => {
    const added = await json(['merchant', 'add-key', 'shop', '--name', 'reports job', '--scopes', 'users:read', '--expires-in', '90d', '--allow-from', '203.0.113.0/24, 2001:db8:42::/48', '--json', '--actor', 'alice']);
    expect(Object.keys(added)).toEqual(['merchant_id', 'api_key', 'key_id', 'fingerprint', 'expires_at', 'mode']);
    expect(added.mode).toBe('live');
    const keys = await json(['merchant', 'keys', 'shop', '--json']);
    expect(keys).toHaveLength(2);
    const key = keys.find((k: { key_id: string }) => k.key_id === added.key_id);
    expect(key).toMatchObject({ name: 'reports job', scopes: ['users:read'], allow_from: ['203.0.113.0/24', '2001:db8:42::/48'], last_used_at: null, expires_at: added.expires_at, active: true });
    expect(Date.parse(key.expires_at) - Date.now()).toBeGreaterThan(89 * 86_400_000);
    expect(keys[0]).toMatchObject({ name: null, scopes: ['signature', 'users:read', 'webhooks:manage', 'keys:manage'], allow_from: [], expires_at: null });
    for (const field of ['key_id', 'name', 'scopes', 'created_at', 'expires_at', 'last_used_at', 'allow_from']) expect(key).toHaveProperty(field);

    // Each scope, and the allowlist from inside and outside: IPv4 and an IPv6 /48.
    expect(await read('shop', added.api_key, '203.0.113.9')).toBe(200);
    expect(await read('shop', added.api_key, '2001:db8:42:7::1')).toBe(200);
    expect(await read('shop', added.api_key, '198.51.100.1')).toBe(403);
    expect(await read('shop', added.api_key, '2001:db8:43::1')).toBe(403);
    expect(await sign('shop', added.api_key, '203.0.113.9')).toBe(403);
    expect(await read('shop', 'shop-original-key')).toBe(200);
    expect(await sign('shop', 'shop-original-key')).toBe(200);
  });

  it('add-key --mode test adds a test key (test_…) that reads the test dataset only (docs/test-mode.md); keys shows its mode', async () => {
    const added = await json(['merchant', 'add-key', 'other', '--mode', 'test', '--json']);
    expect(added).toMatchObject({ merchant_id: 'other', mode: 'test', api_key: expect.stringMatching(/^test_[A-Za-z0-9_-]{43}$/) });
    const keys = await json(['merchant', 'keys', 'other', '--json']);
    expect(keys.map((key: { key_id: string; mode: string }) => [key.key_id === added.key_id, key.mode])).toEqual([
      [false, 'live'],
      [true, 'test'],
    ]);
    expect((await run(['merchant', 'keys', 'other'])).out).toMatch(/\n\S+\s+-\s+test\s/);
    const list = async (key: string) => (await (await api.fetch(new Request(`${BASE}/merchant/users`, { headers: basic('other', key) }), { clientAddress: '192.0.2.1' })).json()).data.map((u: { shared_user_id: string }) => u.shared_user_id);
    const testIds = await list(added.api_key);
    expect(testIds).toHaveLength(100);
    expect(testIds[0]).toBe('test_user_00001');
    expect(await list('other-original-key')).toEqual(['o-1', 'o-3']);
    expect(await sign('other', added.api_key)).toBe(200);
    const refused = await run(['merchant', 'add-key', 'other', '--mode', 'sandbox']);
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(/--mode: "sandbox" is not a key mode \(live or test\)/);
  });

  it('refuses bad options with exit 2, naming the option', async () => {
    expect((await run(['merchant', 'add-key', 'shop', '--scopes', 'users:write'])).code).toBe(2);
    expect((await run(['merchant', 'add-key', 'shop', '--allow-from', '203.0.113.7/24'])).err).toMatch(/--allow-from: .*bits set after its \/24 prefix/);
    expect((await run(['merchant', 'add-key', 'shop', '--expires-in', 'soon'])).code).toBe(2);
    expect((await run(['merchant', 'update-key', 'shop', 'key_0123456789ab'])).code).toBe(2);
  });

  it('rotate-key takes the same options for the new key, and prints the end as stored', async () => {
    const rotated = await json(['merchant', 'rotate-key', 'other', '--scopes', 'signature', '--expires-in', '1h', '--json']);
    const keys = await json(['merchant', 'keys', 'other', '--json']);
    const key = keys.find((k: { key_id: string }) => k.key_id === rotated.key_id);
    expect(key).toMatchObject({ scopes: ['signature'], expires_at: rotated.expires_at });
    expect(await sign('other', rotated.api_key)).toBe(200);
    expect(await read('other', rotated.api_key)).toBe(403);
    // --expire-old-in: the end printed is the end stored, to the microsecond.
    const rolled = await json(['merchant', 'rotate-key', 'other', '--expire-old-in', '1d', '--json']);
    const ends = (await json(['merchant', 'keys', 'other', '--json'])).filter((k: { key_id: string }) => k.key_id !== rolled.key_id).map((k: { expires_at: string }) => k.expires_at);
    expect(ends).toContain(rolled.old_keys_expire_at);
  });

  it('update-key changes scopes, networks, name and end; the same change again changes nothing', async () => {
    const { key_id: keyId, api_key: apiKey } = await json(['merchant', 'add-key', 'shop', '--json']);
    expect(await sign('shop', apiKey)).toBe(200);
    const updated = await run(['merchant', 'update-key', 'shop', keyId, '--scopes', 'users:read', '--name', 'reader', '--actor', 'bob']);
    expect(updated.code, updated.err).toBe(0);
    expect(updated.out).toMatch(/updated \(name, scopes\)/);
    expect(await sign('shop', apiKey)).toBe(403);
    const again = await run(['merchant', 'update-key', 'shop', keyId, '--scopes', 'users:read', '--name', 'reader']);
    expect(again.out).toMatch(/nothing changed/);
    // An end in the past: the key no longer matches, as a revoked one.
    await database.db.updateTable('merchant_keys').set({ expires_at: '2001-01-01 00:00:00.000000' }).where('key_id', '=', keyId).execute();
    expect(await read('shop', apiKey)).toBe(401);
    expect((await json(['merchant', 'keys', 'shop', '--json'])).find((k: { key_id: string }) => k.key_id === keyId).active).toBe(false);
  });

  it('last_used_at moves within about a minute of use, written in batches, not per request', async () => {
    const { key_id: keyId, api_key: apiKey } = await json(['merchant', 'add-key', 'other', '--json']);
    const before = Date.now();
    for (let i = 0; i < 30; i++) expect(await read('other', apiKey)).toBe(200);
    await vi.waitFor(async () => {
      const key = (await json(['merchant', 'keys', 'other', '--json'])).find((k: { key_id: string }) => k.key_id === keyId);
      expect(key.last_used_at).not.toBeNull();
      expect(Math.abs(Date.parse(key.last_used_at) - before)).toBeLessThan(60_000);
    }, { timeout: 15_000, interval: 200 });
    // 30 requests with one key: one use of it written, in one batch (with whatever other keys were noted in that second).
    expect(writes.flat().filter((use) => use.keyId === keyId)).toEqual([expect.objectContaining({ merchantId: 'other', keyId })]);
  });

  it('GET /merchant/keys answers the metadata of the merchant\'s own keys, never a secret', async () => {
    const response = await api.fetch(new Request(`${BASE}/merchant/keys`, { headers: basic('shop', 'shop-original-key') }), { clientAddress: '192.0.2.1' });
    expect(response.status).toBe(200);
    const text = await response.text();
    const body = JSON.parse(text);
    expect(body.data.length).toBeGreaterThanOrEqual(2);
    for (const secret of secrets) expect(text).not.toContain(secret);
    expect(text).not.toContain('shop-original-key');
  });

  it('enable on an enabled merchant says nothing changed and records nothing; disable records with the actor', async () => {
    const enable = await run(['merchant', 'enable', 'shop']);
    expect(enable.out).toMatch(/was active already; nothing changed/);
    expect(enable.err).toBe('');
    expect((await run(['merchant', 'disable', 'shop', '--actor', 'carol'])).code).toBe(0);
    expect((await run(['merchant', 'enable', 'shop'])).code).toBe(0);
    const { events } = await json(['audit', 'list', '--merchant', 'shop', '--json']);
    expect(events.filter((e: { action: string }) => e.action === 'merchant_enabled')).toHaveLength(1);
    expect(events.find((e: { action: string }) => e.action === 'merchant_disabled')).toMatchObject({ actor: 'carol', merchant_id: 'shop' });
  });

  it('user erase for one merchant: the share goes, the person stays for the other; --dry-run changes nothing', async () => {
    const dry = await json(['user', 'erase', 'u-3', '--merchant', 'shop', '--dry-run', '--json']);
    expect(dry).toEqual({ dry_run: true, scope: 'one_merchant', merchant_id: 'shop', shares: 1, users: 0, merchants: 1, changed: false });
    expect(await read('shop', 'shop-original-key', '192.0.2.1', '/merchant/users/u-3')).toBe(200);
    const erased = await json(['user', 'erase', 'u-3', '--merchant', 'shop', '--json']);
    expect(erased).toMatchObject({ shares: 1, users: 0, changed: true });
    expect(await read('shop', 'shop-original-key', '192.0.2.1', '/merchant/users/u-3')).toBe(404);
    const list = await (await api.fetch(new Request(`${BASE}/merchant/users?order=updated_at&updated_since=2000-01-01T00:00:00Z`, { headers: basic('shop', 'shop-original-key') }), { clientAddress: '192.0.2.1' })).json();
    expect(list.data.map((u: { shared_user_id: string }) => u.shared_user_id)).not.toContain('u-3');
    expect(await read('other', 'other-original-key', '192.0.2.1', '/merchant/users/o-3')).toBe(200);
    const again = await run(['user', 'erase', 'u-3', '--merchant', 'shop']);
    expect(again.out).toMatch(/nothing changed/);
  });

  it('user erase for every merchant removes every share of the person and the record', async () => {
    const erased = await json(['user', 'erase', 'o-3', '--json', '--actor', 'dpo']);
    expect(erased).toMatchObject({ scope: 'every_merchant', shares: 1, users: 1, merchants: 1 });
    expect(await read('other', 'other-original-key', '192.0.2.1', '/merchant/users/o-3')).toBe(404);
    const { events } = await json(['audit', 'list', '--action', 'user_erased', '--json']);
    expect(events[0]).toMatchObject({ actor: 'dpo', merchant_id: null, summary: { scope: 'every_merchant', shares: 1, users: 1, merchants: 1 } });
  });

  it('import --erase checks every line first, then erases in batches with one audit event each', async () => {
    const bad = join(dir, 'bad.ndjson');
    await writeFile(bad, '{"merchant_id":"shop","shared_user_id":"u-1"}\n{"merchant_id":"shop"}\nnot json\n');
    const refused = await run(['import', '--erase', bad]);
    expect(refused.code).toBe(1);
    expect(refused.err).toMatch(/line 2: shared_user_id/);
    expect(refused.err).toMatch(/line 3: not valid JSON/);
    expect(await read('shop', 'shop-original-key', '192.0.2.1', '/merchant/users/u-1')).toBe(200);
    const good = join(dir, 'good.ndjson');
    await writeFile(good, '{"merchant_id":"shop","shared_user_id":"u-1"}\n\n{"merchant_id":"shop","shared_user_id":"u-2"}\n{"merchant_id":"other","shared_user_id":"no-such"}\n');
    const done = await run(['import', '--erase', good, '--batch-size', '2', '--actor', 'dpo']);
    expect(done.code, done.err).toBe(0);
    expect(done.out).toMatch(/Removed 2 share\(s\) of the 3 pair\(s\)/);
    expect(await read('shop', 'shop-original-key', '192.0.2.1', '/merchant/users/u-1')).toBe(404);
    const { events } = await json(['audit', 'list', '--action', 'users_erased', '--json']);
    expect(events).toHaveLength(1);
    expect(events[0].summary).toMatchObject({ requested: 2, shares: 2, users: 2 });
  });

  it('audit list: every command recorded with its actor, newest first, paged, never a secret', async () => {
    const all = await json(['audit', 'list', '--limit', '1000', '--json']);
    const actions = all.events.map((e: { action: string }) => e.action);
    for (const action of ['import_completed', 'key_added', 'key_rotated', 'key_updated', 'merchant_disabled', 'merchant_enabled', 'user_erased', 'users_erased']) expect(actions).toContain(action);
    expect(all.events.find((e: { action: string }) => e.action === 'import_completed').actor).toBe('seed-loader');
    expect(all.events.find((e: { action: string }) => e.action === 'key_added').actor).toBe('ops-env');
    expect(all.events.find((e: { action: string; actor: string }) => e.action === 'key_added' && e.actor === 'alice')).toBeDefined();
    expect(all.events.find((e: { action: string }) => e.action === 'key_updated').actor).toBe('bob');
    const ids = all.events.map((e: { id: string }) => Number(e.id));
    expect(ids).toEqual([...ids].sort((a, b) => b - a));
    const text = JSON.stringify(all);
    for (const secret of [...secrets, 'shop-original-key', database.masterKeyText]) expect(text).not.toContain(secret);
    for (const field of ['first_name', 'email_address', 'Ada', '@']) expect(text).not.toContain(field);
    // Pages of 2 walk the same events.
    const walked: string[] = [];
    let before: string | undefined;
    do {
      const page = await json(['audit', 'list', '--limit', '2', '--json', ...(before ? ['--before', before] : [])]);
      walked.push(...page.events.map((e: { id: string }) => e.id));
      before = page.next_before ?? undefined;
    } while (before);
    expect(walked).toEqual(all.events.map((e: { id: string }) => e.id));
    expect((await json(['audit', 'list', '--since', '1h', '--json'])).events.length).toBe(all.events.length);
    expect((await json(['audit', 'list', '--since', '2999-01-01T00:00:00Z', '--json'])).events).toEqual([]);
  });

  it('the CLI speaks one language: snake_case JSON, and an address that is no IP is a usage error', async () => {
    const listed = await json(['merchant', 'list', '--json']);
    expect(Object.keys(listed[0])).toEqual(['id', 'status', 'active_keys', 'revoked_keys', 'created_at']);
    const refused = await run(['throttle', 'unblock', '--address', 'not-an-ip']);
    expect(refused.code).toBe(2);
    expect(refused.err).toMatch(/--address must be an IPv4 or IPv6 address/);
    expect((await run(['throttle', 'unblock', '--address', '2001:db8:1:2::/64'])).code).toBe(0);
    expect((await run(['throttle', 'unblock', '--address', '2001:db8:1:2::/129'])).code).toBe(2);
    // A lifted block is recorded with its actor, in the lift's transaction.
    await sql`INSERT INTO auth_failures (scope, address, merchant_id, failures, window_start, blocks, blocked_until, updated_at, expires_at)
      VALUES ('address', '198.51.100.7', '', 10, 0, 1, 4102444800, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 DAY)`.execute(database.db);
    const lifted = await run(['throttle', 'unblock', '--address', '198.51.100.7', '--actor', 'oncall']);
    expect(lifted.code, lifted.err).toBe(0);
    const { events } = await json(['audit', 'list', '--action', 'throttle_unblocked', '--json']);
    expect(events).toEqual([expect.objectContaining({ actor: 'oncall', merchant_id: null, summary: { client_address: '198.51.100.7', rows: 1 } })]);
  });

  it('migrate prunes events older than AUDIT_RETENTION', async () => {
    await database.db.updateTable('audit_events').set({ at: '2001-01-01 00:00:00.000000' }).where('action', '=', 'import_completed').execute();
    const migrate = await run(['migrate'], { AUDIT_RETENTION: '400d' });
    expect(migrate.code, migrate.err).toBe(0);
    expect(migrate.out).toMatch(/Pruned 1 audit event\(s\)/);
    expect((await run(['migrate'], { AUDIT_RETENTION: '2h' })).code).toBe(2);
  });
});
