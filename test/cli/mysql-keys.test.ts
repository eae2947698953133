/**
 * Keys, merchants and throttle blocks administered through the built CLI (`node dist/cli.js`)
 * while two real servers (`dist/cli.js serve`) run on the same MariaDB database with a long key
 * cache: a rotated key works at once on both, a block lifted by `throttle unblock` is lifted on
 * both, and every command says what it changed in one log event that never holds a key: every
 * event the suite's commands write is kept, and the last test checks each against every key the
 * suite knows, and that every kind of event (the CLI's own list) was among them.
 */
import { sql } from 'kysely';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi, silentLogger, type MerchantApi } from '../../src/index.js';
import { signUrl } from '../../src/signing/index.js';
import { MysqlStorage } from '../../src/storage/mysql/index.js';
import { ADMIN_EVENTS } from '../../src/cli/commands/admin-log.js';
import { basic } from '../support/basic-auth.js';
import { inCi } from '../support/ci.js';
import { CLEAN_ENV, ROOT, startServer, type ServerProcess } from '../support/processes.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { user } from '../support/seeds.js';
import { sleep } from '../support/sleep.js';

const available = await mysqlAvailable();
if (!available && inCi()) throw new Error('MariaDB is required in CI (127.0.0.1:3306).');

interface Run {
  code: number;
  out: string;
  err: string;
}

const fingerprint = (key: string) => createHash('sha256').update(key).digest('hex').slice(0, 16);

/** Polls `check` every 50 ms until it holds, for at most `limitMs` (generous: not a timing test). */
async function eventually(check: () => Promise<boolean>, limitMs = 15_000, state?: () => Promise<unknown>): Promise<void> {
  const end = Date.now() + limitMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`the condition never held${state ? `; at the end: ${JSON.stringify(await state())}` : ''}`);
    await sleep(50);
  }
}

/** The JSON log events on standard error. */
function events(err: string): Array<Record<string, unknown>> {
  return err
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

describe.skipIf(!available)('keys, merchants and throttle blocks through the CLI, with two servers on one database', () => {
  let database: TestDatabase;
  let env: Record<string, string>;
  let dir: string;
  let servers: ServerProcess[] = [];
  /** In process, with no key cache: sees every change at once. */
  let direct: MerchantApi;
  let storage: MysqlStorage;

  /** Every admin event line the suite's commands wrote, and every key the suite has seen or written. */
  const adminLines: string[] = [];
  const keysSeen = new Set<string>(['wrong-key']);
  const cli = (args: string[], extra: Record<string, string> = {}): Promise<Run> =>
    new Promise((resolve) => {
      execFile(process.execPath, ['dist/cli.js', ...args], { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV, ...env, ...extra } }, (error, stdout, stderr) => {
        const run = { code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout.trim(), err: stderr.trim() };
        // New keys are printed once: as `api_key` in JSON, or after "(stored encrypted): " in text.
        for (const [, key] of run.out.matchAll(/"api_key":"([^"]+)"/g)) keysSeen.add(key!);
        for (const [, key] of run.out.matchAll(/stored encrypted\): (\S+)/g)) keysSeen.add(key!);
        adminLines.push(...run.err.split('\n').filter((line) => line.startsWith('{') && line.includes('"admin":true')));
        resolve(run);
      });
    });
  const users = (base: string, id: string, key: string) => fetch(`${base}/merchant/users?limit=1`, { headers: basic(id, key) });
  const validate = (base: string, id: string, key: string) => fetch(signUrl(key, `${base}/validatesignature`, { cp: id }));
  const directUsers = async (id: string, key: string) => (await direct.fetch(new Request('http://merchant-api.test/merchant/users?limit=1', { headers: basic(id, key) }))).status;

  beforeAll(async () => {
    database = await createTestDatabase();
    env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText };
    keysSeen.add(database.masterKeyText);
    dir = await mkdtemp(join(tmpdir(), 'merchant-api-keys-'));
    storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey, keyCacheTtlMs: 0, throttleSharing: false });
    direct = createMerchantApi({ storage, logger: silentLogger, throttle: false });
    const serverEnv = { ...env, KEY_CACHE_TTL: '300', AUTH_FAILURES_PER_MERCHANT: '3', AUTH_FAILURES_PER_ADDRESS: '1000', PUBLIC_URL: '' };
    servers = await Promise.all([startServer('node', 'dist/cli.js', serverEnv), startServer('node', 'dist/cli.js', serverEnv)]);
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await storage?.close();
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  let current = '';

  it('a rotated key works at once on both servers; a revoked one until KEY_CACHE_TTL, as documented', async () => {
    const added = await cli(['merchant', 'add', 'shop', '--json']);
    expect(added.code).toBe(0);
    const first = JSON.parse(added.out) as { api_key: string; key_id: string; fingerprint: string };
    expect(events(added.err)).toEqual([{ time: expect.any(String), level: 'info', event: 'merchant_added', merchant_id: 'shop', status: 'active', key_id: first.key_id, admin: true, msg: expect.any(String) }]);
    expect(first.key_id).toMatch(/^key_[0-9a-z]{12}$/);
    expect(first.fingerprint).toBe(fingerprint(first.api_key));
    // Both servers cache the merchant with its first key (KEY_CACHE_TTL=300).
    for (const server of servers) {
      expect((await users(server.url, 'shop', first.api_key)).status).toBe(200);
      expect((await validate(server.url, 'shop', first.api_key)).status).toBe(200);
    }

    const rotated = await cli(['merchant', 'rotate-key', 'shop', '--revoke-old', '--json']);
    expect(rotated.code).toBe(0);
    const second = JSON.parse(rotated.out) as { api_key: string; key_id: string; revoked: number };
    expect(second.revoked).toBe(1);
    const [a, b] = servers as [ServerProcess, ServerProcess];
    expect((await validate(a.url, 'shop', second.api_key)).status).toBe(200);
    expect((await users(b.url, 'shop', second.api_key)).status).toBe(200);
    expect((await users(a.url, 'shop', second.api_key)).status).toBe(200);
    expect((await validate(b.url, 'shop', second.api_key)).status).toBe(200);
    // Revoked: refused wherever the merchant is read anew (a server that re-read nothing
    // accepts it until its cache entry expires, KEY_CACHE_TTL).
    expect(await directUsers('shop', first.api_key)).toBe(401);

    const [event] = events(rotated.err);
    expect(event).toMatchObject({ event: 'merchant_key_rotated', merchant_id: 'shop', key_id: second.key_id, revoked_key_ids: [first.key_id], admin: true });
    expect(rotated.err).not.toContain(second.api_key);
    current = second.api_key;
  });

  it('throttle list shows a merchant blocked by wrong keys, and throttle unblock lifts it on both servers', async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess];
    for (let i = 0; i < 3; i++) expect((await users(a.url, 'shop', 'wrong-key')).status).toBe(401);
    // The right key is refused too, on both servers: the block is shared through MySQL.
    expect((await users(a.url, 'shop', current)).status).toBe(429);
    await eventually(async () => (await users(b.url, 'shop', current)).status === 429);

    // The server refuses from its own count at once; the block reaches the shared row with its next write.
    let lastListed: Run | undefined;
    await eventually(
      async () => {
        lastListed = await cli(['throttle', 'list', '--json']);
        return lastListed.code === 0 && JSON.parse(lastListed.out)[0]?.blocks >= 1;
      },
      15_000,
      // Failed once on a loaded machine (b refused, the list never showed the block): what the list and the table held.
      async () => ({ listed: lastListed?.out, rows: (await sql`SELECT scope, address, merchant_id, failures, blocks, blocked_until, reserved, reserved_until FROM auth_failures`.execute(database.db)).rows }),
    );
    const listed = await cli(['throttle', 'list', '--json']);
    expect(listed.code).toBe(0);
    expect(JSON.parse(listed.out)).toEqual([expect.objectContaining({ scope: 'pair', address: '127.0.0.1', merchant_id: 'shop', blocks: 1 })]);
    expect((await cli(['throttle', 'list'])).out).toMatch(/^ADDRESS\s+MERCHANT\s+BLOCKED UNTIL \(UTC\)\s+SECONDS LEFT\s+BLOCKS\n127\.0\.0\.1\s+shop\s/);

    const lifted = await cli(['throttle', 'unblock', '--address', '127.0.0.1', '--merchant', 'shop']);
    expect(lifted).toMatchObject({ code: 0, out: expect.stringMatching(/Lifted the block of merchant "shop" from address 127\.0\.0\.1/) });
    expect(events(lifted.err)).toEqual([expect.objectContaining({ event: 'throttle_unblocked', client_address: '127.0.0.1', merchant_id: 'shop' })]);
    for (const server of servers) await eventually(async () => (await users(server.url, 'shop', current)).status === 200);
    expect(JSON.parse((await cli(['throttle', 'list', '--json'])).out)).toEqual([]);

    expect(await cli(['throttle', 'unblock'])).toMatchObject({ code: 2, err: expect.stringMatching(/Give the client address/) });
    expect(await cli(['throttle', 'unblock', '--address', 'a b'])).toMatchObject({ code: 2 });
  }, 60_000);

  it('throttle unblock finds an IPv6 client under its network, as the servers count it (IPV6_PREFIX)', async () => {
    // Whatever a test before left (a block it failed to lift) is not this test's.
    await sql`DELETE FROM auth_failures`.execute(database.db);
    const until = Math.floor(Date.now() / 1000) + 600;
    // The row a server writes for a client of 2001:db8:1:2::/64 that failed too often.
    await sql`INSERT INTO auth_failures (scope, address, merchant_id, failures, window_start, blocks, blocked_until, updated_at, expires_at)
      VALUES ('address', '2001:db8:1:2::/64', '', 100, ${until - 3600}, 1, ${until}, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)`.execute(database.db);
    expect(JSON.parse((await cli(['throttle', 'list', '--json'])).out)).toEqual([expect.objectContaining({ scope: 'address', address: '2001:db8:1:2::/64' })]);
    // With a /48 the same address is another network: nothing to lift.
    expect((await cli(['throttle', 'unblock', '--address', '2001:db8:1:2:aaaa::7'], { IPV6_PREFIX: '48' })).out).toMatch(/^Nothing to lift/);
    const lifted = await cli(['throttle', 'unblock', '--address', '2001:db8:1:2:aaaa::7']);
    expect(lifted).toMatchObject({ code: 0, out: expect.stringMatching(/Lifted the block of address 2001:db8:1:2::\/64/) });
    expect(JSON.parse((await cli(['throttle', 'list', '--json'])).out)).toEqual([]);
  }, 60_000);

  it('merchant keys, revoke-key and rotate-key --expire-old-in name keys by id and fingerprint', async () => {
    const listed = await cli(['merchant', 'keys', 'shop', '--json']);
    expect(listed.code).toBe(0);
    const keys = JSON.parse(listed.out) as Array<{ key_id: string; fingerprint: string; active: boolean; revoked_at: string | null; expires_at: string | null; created_at: string }>;
    expect(keys.map((k) => [k.active, k.revoked_at === null])).toEqual([
      [false, false],
      [true, true],
    ]);
    expect(keys[1]!.fingerprint).toBe(fingerprint(current));
    expect(keys[0]!.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/);

    const rolled = await cli(['merchant', 'rotate-key', 'shop', '--expire-old-in', '2s', '--json']);
    expect(rolled.code).toBe(0);
    const third = JSON.parse(rolled.out) as { api_key: string; key_id: string; old_keys_expire_at: string };
    expect(third.old_keys_expire_at).toMatch(/\+00:00$/);
    expect(await directUsers('shop', current)).toBe(200);
    expect(await directUsers('shop', third.api_key)).toBe(200);
    await eventually(async () => (await directUsers('shop', current)) === 401);
    expect(await directUsers('shop', third.api_key)).toBe(200);
    const afterRoll = JSON.parse((await cli(['merchant', 'keys', 'shop', '--json'])).out) as typeof keys;
    expect(afterRoll[1]).toMatchObject({ active: false, revoked_at: null, expires_at: expect.stringMatching(/\+00:00$/) });
    expect((await cli(['merchant', 'keys', 'shop'])).out).toMatch(/^KEY ID\s+NAME\s+MODE\s+FINGERPRINT\s+STATE.*\n.*revoked.*\n.*expired.*\n.*active/);

    const revoked = await cli(['merchant', 'revoke-key', 'shop', third.key_id]);
    expect(revoked).toMatchObject({ code: 0, out: expect.stringMatching(new RegExp(`Key ${third.key_id} of "shop" revoked`)) });
    expect(events(revoked.err)).toEqual([expect.objectContaining({ event: 'merchant_key_revoked', merchant_id: 'shop', key_id: third.key_id })]);
    expect(await directUsers('shop', third.api_key)).toBe(401);
    expect(await cli(['merchant', 'revoke-key', 'shop', third.key_id])).toMatchObject({ code: 0, out: expect.stringMatching(/revoked already/), err: '' });
    expect(await cli(['merchant', 'revoke-key', 'shop', 'key_000000000000'])).toMatchObject({ code: 1, err: expect.stringMatching(/has no key key_000000000000/) });
    expect(await cli(['merchant', 'revoke-key', 'shop', '17'])).toMatchObject({ code: 1, err: expect.stringMatching(/"17" is not a key id/) });
    expect(await cli(['merchant', 'keys', 'nobody'])).toMatchObject({ code: 1, err: expect.stringMatching(/No merchant "nobody"/) });
  }, 60_000);

  it('usage: --help prints the usage, a bad option one plain line, and the roll options exclude each other', async () => {
    expect(await cli(['merchant', 'rotate-key', '--help'])).toMatchObject({ code: 0, out: expect.stringMatching(/^Usage: merchant-api merchant <subcommand>/) });
    const bad = await cli(['merchant', 'rotate-key', 'shop', '--bogus']);
    expect(bad).toMatchObject({ code: 2, err: expect.stringMatching(/^Unknown option --bogus\.\nUsage:/) });
    expect(bad.err).not.toMatch(/place it at the end/);
    expect(await cli(['merchant', 'rotate-key', 'shop', '--revoke-old', '--expire-old-in', '1d'])).toMatchObject({ code: 2, err: expect.stringMatching(/not both/) });
    expect(await cli(['merchant', 'rotate-key', 'shop', '--expire-old-in', '5y'])).toMatchObject({ code: 2, err: expect.stringMatching(/--expire-old-in must be a duration from 1s to 366d/) });
    expect(await cli(['import', '--help'])).toMatchObject({ code: 0, out: expect.stringMatching(/--batch-size N +users per transaction, 25000 by default, 1 to 100000/) });
    expect(await cli(['import', join(dir, 'missing.json')])).toMatchObject({ code: 1, err: expect.stringMatching(/missing\.json failed: no such file; nothing was imported\.$/) });
  });

  it('refuses merchant ids HTTP Basic cannot carry, wherever they are created or imported', async () => {
    const colon = await cli(['merchant', 'add', 'shop:colon']);
    expect(colon).toMatchObject({ code: 1, err: expect.stringMatching(/Merchant id "shop:colon": must be 1-128 characters, without a colon or a control character: HTTP Basic authentication ends the merchant id at the first colon/) });
    expect(await cli(['merchant', 'add', 'tab\there'])).toMatchObject({ code: 1, err: expect.stringMatching(/control character/) });
    const file = join(dir, 'colon.json');
    await writeFile(file, JSON.stringify({ merchants: [{ id: 'a:b', keys: ['k'] }] }));
    expect(await cli(['import', file])).toMatchObject({ code: 1, err: expect.stringMatching(/merchants\[0\]\.id: must be 1-128 characters, without a colon or a control character/) });
    expect(JSON.parse((await cli(['merchant', 'list', '--json'])).out).map((m: { id: string }) => m.id)).toEqual(['shop']);
  });

  it('re-importing a seed keeps a disabled merchant disabled unless --set-status, and says so apart', async () => {
    const file = join(dir, 'seed.json');
    await writeFile(file, JSON.stringify({ merchants: [{ id: 'seeded', status: 'active', keys: ['seeded-key-1'] }], users: [user('seeded', 'u-1')] }));
    keysSeen.add('seeded-key-1');
    expect((await cli(['import', file])).out).toMatch(/1 merchant\(s\) created, 0 updated; 1 key\(s\) added/);
    expect((await cli(['merchant', 'disable', 'seeded'])).code).toBe(0);
    const again = await cli(['import', file]);
    expect(again.out).toMatch(/0 merchant\(s\) created, 1 updated \(1 kept a status other than the file's: --set-status applies the file's\)/);
    expect(events(again.err)).toEqual([expect.objectContaining({ event: 'import_completed', merchant_statuses_kept: 1, merchant_statuses_changed: 0 })]);
    expect(await directUsers('seeded', 'seeded-key-1')).toBe(403);
    const applied = await cli(['import', file, '--set-status']);
    expect(applied.out).toMatch(/0 merchant\(s\) created, 1 updated \(1 status\(es\) changed\)/);
    expect(await directUsers('seeded', 'seeded-key-1')).toBe(200);
    expect(await cli(['import', join(dir, 'x.ndjson'), '--set-status'])).toMatchObject({ code: 2, err: expect.stringMatching(/--set-status applies to seed imports only/) });
    // An NDJSON import stopped by a bad line keeps the batches before it, and logs that too.
    const partial = join(dir, 'partial.ndjson');
    await writeFile(partial, [JSON.stringify(user('seeded', 'nd-1')), JSON.stringify(user('seeded', 'nd-2')), '{oops'].join('\n'));
    const stopped = await cli(['import', partial, '--batch-size', '1']);
    expect(stopped).toMatchObject({ code: 1, err: expect.stringMatching(/Lines 1 to 2 were imported \(2 user\(s\) inserted, 0 updated\)/) });
    expect(events(stopped.err)).toEqual([expect.objectContaining({ event: 'import_stopped', through_line: 2, users_inserted: 2 })]);
  });

  it('merchant delete asks first (refusing without --yes off a terminal), then removes its keys, shares and its own users', async () => {
    const file = join(dir, 'doomed.json');
    await writeFile(file, JSON.stringify({ merchants: [{ id: 'doomed', keys: ['doomed-key'] }], users: [user('doomed', 'd-1'), user('doomed', 'd-2')] }));
    keysSeen.add('doomed-key');
    expect((await cli(['import', file])).code).toBe(0);
    // d-2 is also shared with "seeded": that user stays.
    const d2 = await database.db.selectFrom('user_shares').selectAll().where('merchant_id', '=', 'doomed').where('shared_user_id', '=', 'd-2').executeTakeFirstOrThrow();
    await database.db.insertInto('user_shares').values({ merchant_id: 'seeded', shared_user_id: 'also-d-2', user_id: String(d2.user_id), is_active: d2.is_active, date_joined: d2.date_joined }).execute();
    const usersBefore = Number((await database.db.selectFrom('users').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow()).n);

    expect(await cli(['merchant', 'delete', 'doomed'])).toMatchObject({ code: 2, err: expect.stringMatching(/Refusing to delete merchant "doomed" without --yes: standard input is not a terminal/) });
    expect(await directUsers('doomed', 'doomed-key')).toBe(200);
    const deleted = await cli(['merchant', 'delete', 'doomed', '--yes']);
    expect(deleted).toMatchObject({ code: 0, out: expect.stringMatching(/Merchant "doomed" deleted: 1 key\(s\), 2 user share\(s\), 1 user\(s\) no other merchant shared/) });
    expect(events(deleted.err)).toEqual([expect.objectContaining({ event: 'merchant_deleted', merchant_id: 'doomed', keys: 1, shares: 2, users: 1 })]);
    expect(await directUsers('doomed', 'doomed-key')).toBe(401);
    expect(await database.db.selectFrom('user_shares').select('shared_user_id').where('merchant_id', '=', 'doomed').execute()).toEqual([]);
    expect(Number((await database.db.selectFrom('users').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow()).n)).toBe(usersBefore - 1);
    expect((await (await direct.fetch(new Request('http://merchant-api.test/merchant/users/also-d-2', { headers: basic('seeded', 'seeded-key-1') }))).json()) as object).toMatchObject({ data: [expect.objectContaining({ shared_user_id: 'also-d-2' })] });
    expect(await cli(['merchant', 'delete', 'doomed', '--yes'])).toMatchObject({ code: 1, err: expect.stringMatching(/No merchant "doomed"/) });
  });

  it('merchant add, disable and enable each write one event naming the merchant, its status and key id', async () => {
    const added = await cli(['merchant', 'add', 'logged', '--disabled']);
    expect(added.code).toBe(0);
    const [, keyId] = /^API key (key_[0-9a-z]{12}) /m.exec(added.out)!;
    expect(events(added.err)).toEqual([expect.objectContaining({ event: 'merchant_added', merchant_id: 'logged', status: 'disabled', key_id: keyId, admin: true })]);
    const enabled = await cli(['merchant', 'enable', 'logged']);
    expect(enabled).toMatchObject({ code: 0, out: expect.stringMatching(/^Merchant "logged" enabled\./) });
    expect(events(enabled.err)).toEqual([{ time: expect.any(String), level: 'info', event: 'merchant_status_set', merchant_id: 'logged', status: 'active', admin: true, msg: 'merchant enabled' }]);
    const disabled = await cli(['merchant', 'disable', 'logged']);
    expect(events(disabled.err)).toEqual([expect.objectContaining({ event: 'merchant_status_set', merchant_id: 'logged', status: 'disabled', msg: 'merchant disabled' })]);
    // A failed change writes no event.
    expect(await cli(['merchant', 'disable', 'nobody'])).toMatchObject({ code: 1, err: expect.not.stringContaining('"event"') });
    expect(await cli(['merchant', 'add', 'logged'])).toMatchObject({ code: 1, err: expect.not.stringContaining('"event"') });
  });

  // Runs last: it reads what the tests above wrote.
  it('add-key, update-key and user erase write their events too (issue 31; the suite of their own: mysql-key-limits.test.ts)', async () => {
    const added = await cli(['merchant', 'add-key', 'shop', '--name', 'ci', '--json']);
    expect(added.code, added.err).toBe(0);
    const { key_id: keyId } = JSON.parse(added.out) as { key_id: string };
    expect(events(added.err)).toEqual([expect.objectContaining({ event: 'merchant_key_added', merchant_id: 'shop', key_id: keyId })]);
    const updated = await cli(['merchant', 'update-key', 'shop', keyId, '--scopes', 'signature']);
    expect(events(updated.err)).toEqual([expect.objectContaining({ event: 'merchant_key_updated', merchant_id: 'shop', key_id: keyId, changed: ['scopes'] })]);
    await cli(['merchant', 'revoke-key', 'shop', keyId]);
    const erased = await cli(['user', 'erase', 'u-1', '--merchant', 'seeded']);
    expect(erased.code, erased.err).toBe(0);
    expect(events(erased.err)).toEqual([expect.objectContaining({ event: 'user_erased', merchant_id: 'seeded', shares: 1 })]);
  }, 60_000);

  it('every kind of admin event was written above, and none of their lines holds a key (nor the master key)', () => {
    expect(new Set(adminLines.map((line) => (JSON.parse(line) as { event: string }).event))).toEqual(new Set(ADMIN_EVENTS));
    // The master key, a wrong key, two seed keys, and the four keys the commands printed (JSON and text).
    expect(keysSeen.size).toBeGreaterThanOrEqual(8);
    for (const line of adminLines) {
      for (const key of keysSeen) expect(line, `an ${(JSON.parse(line) as { event: string }).event} line`).not.toContain(key);
    }
  });
});
