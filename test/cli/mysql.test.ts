/**
 * The MySQL command line end to end: migrate, import the seed and
 * NDJSON, administer merchants, and after each step the HTTP answers of a
 * server on that database reflect it, matching the memory storage's.
 */
import { execFile } from 'node:child_process';
import { lookup } from 'node:dns/promises';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi, silentLogger, type MerchantApi, type Storage } from '../../src/index.js';
import { signUrl } from '../../src/signing/index.js';
import { mysqlCommands, openMysqlStorage } from '../../src/cli/commands/mysql.js';
import { runCli } from '../../src/cli/run.js';
import type { CliIo } from '../../src/cli/io.js';
import { readMysqlConfig, type MysqlConfig } from '../../src/cli/config.js';
import { createMemoryStorage } from '../../src/storage/memory/index.js';
import { generateMasterKey } from '../../src/storage/mysql/index.js';
import { basic } from '../support/basic-auth.js';
import { captureIo } from '../support/recording.js';
import { createTestDatabase, mysqlAvailable, MYSQL_URL, type TestDatabase } from '../support/mysql.js';
import { createConnection } from 'mysql2/promise';
import { user } from '../support/seeds.js';

const available = await mysqlAvailable();
const BASE = 'http://merchant-api.test';

/** The arguments of openMysqlStorage for an environment. */
function open(env: Record<string, string | undefined>): [MysqlConfig, CliIo] {
  return [readMysqlConfig(env), capture(env)];
}

/** What a command writes, with a progress line that goes nowhere (as on a terminal). */
const capture = (env: Record<string, string | undefined>) => captureIo(env, { progress: () => {} });

describe.skipIf(!available)('merchant-api CLI on MySQL', () => {
  let database: TestDatabase;
  let env: Record<string, string>;
  let dir: string;
  let storage: Storage;
  let api: MerchantApi;
  const run = async (args: string[], extraEnv: Record<string, string | undefined> = {}) => {
    const io = capture({ ...env, ...extraEnv });
    const code = await runCli(args, io, { name: 'test', serve: () => Promise.reject(new Error('not in this test')), commands: mysqlCommands, openMysqlStorage });
    return { code, out: io.lines.join('\n'), err: io.errors.join('\n') };
  };
  const users = (id: string, key: string, path = '/merchant/users') =>
    api.fetch(new Request(`${BASE}${path}`, { headers: basic(id, key) }));
  const validate = (id: string, key: string) => api.fetch(new Request(signUrl(key, `${BASE}/validatesignature`, { cp: id })));

  beforeAll(async () => {
    database = await createTestDatabase({ migrate: false });
    env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText, KEY_CACHE_TTL: '0' };
    dir = await mkdtemp(join(tmpdir(), 'merchant-api-cli-'));
  });
  afterAll(async () => {
    await storage?.close();
    await database?.drop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('refuses to run without DATABASE_URL or MASTER_KEY, saying what to set (exit 2)', async () => {
    expect(await run(['migrate'], { DATABASE_URL: undefined })).toMatchObject({ code: 2, err: expect.stringMatching(/DATABASE_URL is not set/) });
    expect(await run(['merchant', 'add', 'x'], { MASTER_KEY: undefined })).toMatchObject({ code: 2, err: expect.stringMatching(/MASTER_KEY is not set.*randomBytes/) });
    expect(await run(['merchant', 'add', 'x'], { MASTER_KEY: 'c2hvcnQ' })).toMatchObject({ code: 2, err: expect.stringMatching(/exactly 32 bytes/) });
    expect(await run(['merchant', 'add', 'x'], { MASTER_KEY: 'short' })).toMatchObject({ code: 2, err: expect.stringMatching(/exactly 32 bytes/) });
    await expect(openMysqlStorage(...open({ DATABASE_URL: database.url }))).rejects.toThrow(/MASTER_KEY is not set/);
    expect(await run(['merchant', 'frobnicate'])).toMatchObject({ code: 2 });
    expect(await run(['import'])).toMatchObject({ code: 2, err: expect.stringMatching(/Usage: merchant-api import FILE/) });
  });

  it('migrates, and migrating again changes nothing', async () => {
    expect(await run(['migrate'])).toMatchObject({ code: 0, out: expect.stringMatching(/Applied migration 0001_initial/) });
    expect(await run(['migrate'])).toMatchObject({ code: 0, out: expect.stringMatching(/up to date; nothing to apply/) });
    expect(await run(['migrate', '--status'])).toMatchObject({ code: 0, out: 'applied  0001_initial\napplied  0002_user_share_filters\napplied  0003_auth_failures\napplied  0004_key_ids\napplied  0005_user_share_updated_at\napplied  0006_replica_heartbeat\napplied  0007_key_limits_audit\napplied  0008_webhooks\napplied  0009_auth_check_reservations\napplied  0010_webhook_event_refs\napplied  0011_auth_failures_census\napplied  0012_webhook_test_budget\napplied  0013_share_removals\napplied  0014_webhook_deliveries_by_endpoint\napplied  0015_idempotency_keys\napplied  0017_test_mode\napplied  0018_webhook_share_batches' });
  });

  it('imports examples/seed.json, and the server answers exactly as the memory storage does', async () => {
    const result = await run(['import', 'examples/seed.json']);
    expect(result).toMatchObject({ code: 0, out: expect.stringMatching(/3 merchant\(s\) created, 0 updated; 4 key\(s\) added; 12 user\(s\) inserted, 0 updated/) });
    storage = await openMysqlStorage(...open(env));
    api = createMerchantApi({ storage, logger: silentLogger });
    const seed = JSON.parse(await readFile('examples/seed.json', 'utf8'));
    const memory = createMerchantApi({ storage: createMemoryStorage({ seed }), logger: silentLogger });
    const auth = basic('demo-merchant', 'demo-secret');
    const acme = basic('acme-books', 'acme-books-key-2024');
    for (const [path, headers] of [
      ['/merchant/users', auth],
      ['/merchant/users?limit=3', auth],
      ['/merchant/users?active=false', auth],
      ['/merchant/users/usr-0001', auth],
      ['/merchant/users/usr-0002', acme],
      ['/merchant/users', acme],
      ['/merchant/users', basic('closed-shop', 'closed-shop-key')],
    ] as const) {
      const [fromMysql, fromMemory] = await Promise.all([api.fetch(new Request(`${BASE}${path}`, { headers })), memory.fetch(new Request(`${BASE}${path}`, { headers }))]);
      expect(fromMysql.status, path).toBe(fromMemory.status);
      const [a, b] = await Promise.all([fromMysql.text(), fromMemory.text()]);
      // Cursors are sealed per instance; everything else is byte for byte the same.
      expect(a.replace(/"next_cursor":"[^"]+"/, ''), path).toBe(b.replace(/"next_cursor":"[^"]+"/, ''));
      if (headers === auth && path === '/merchant/users') expect(JSON.parse(a).data).toHaveLength(8);
    }
    expect((await validate('demo-merchant', 'demo-secret')).status).toBe(200);
    expect(await (await validate('closed-shop', 'closed-shop-key')).json()).toEqual({ status: 'error', message: 'This account is disabled.', is_valid: false });
  });

  it('imports the seed again idempotently: nothing new, nothing doubled', async () => {
    expect(await run(['import', 'examples/seed.json'])).toMatchObject({ code: 0, out: expect.stringMatching(/0 merchant\(s\) created, 3 updated; 0 key\(s\) added; 0 user\(s\) inserted, 0 updated, 12 unchanged/) });
    const counts = await Promise.all(['users', 'user_shares', 'merchant_keys', 'merchants'].map(async (table) => (await database.db.selectFrom(table as 'users').select((eb) => eb.fn.countAll<string>().as('n')).executeTakeFirstOrThrow()).n));
    expect(counts.map(Number)).toEqual([12, 12, 4, 3]);
  });

  it('rejects an NDJSON file with bad lines by line number, writing nothing and quoting no value', async () => {
    const good = (id: string) => JSON.stringify(user('acme-books', id));
    const file = join(dir, 'bad.ndjson');
    await writeFile(file, [good('nd-1'), '{"merchant_id": "acme-books", oops', good('nd-3'), JSON.stringify({ ...user('acme-books', 'nd-4'), date_joined: 'secret-ish yesterday' }), '', JSON.stringify(user('nobody', 'nd-6')), JSON.stringify(user('acme-books', '..'))].join('\n'));
    const result = await run(['import', file]);
    expect(result.code).toBe(1);
    expect(result.err).toMatch(/line 2: not valid JSON/);
    expect(result.err).toMatch(/line 4: date_joined: not an ISO 8601 timestamp/);
    expect(result.err).toMatch(/line 6: merchant_id: no such merchant/);
    expect(result.err).toContain('line 7: shared_user_id: `.` and `..` cannot be used, because URLs drop such path segments');
    expect(result.err).toMatch(/Nothing was imported/);
    expect(result.err).not.toContain('secret-ish');
    expect(await storage.getUser('acme-books', 'nd-1')).toBeUndefined();
  });

  it('names the merchant in a seed\'s problems (a merchant id is no personal data), and still quotes no user value', async () => {
    const file = join(dir, 'twice.json');
    const users = [user('acme-books', 'tw-1'), user('acme-books', 'tw-1'), { ...user('acme-books', 'tw-2'), date_joined: 'secret-ish yesterday' }];
    await writeFile(file, JSON.stringify({ merchants: [{ id: 'acme-books', keys: ['k-1'] }, { id: 'acme-books', keys: ['k-2'] }], users }));
    const result = await run(['import', file]);
    expect(result.code).toBe(1);
    expect(result.err).toContain('merchants[1].id: "acme-books" appears twice');
    expect(result.err).toContain('users[1].shared_user_id: appears twice for merchant "acme-books"');
    expect(result.err).toContain('users[2].date_joined: not an ISO 8601 timestamp');
    expect(result.err).not.toContain('secret-ish');
  });

  it('imports a good NDJSON file in batches, and the users appear', async () => {
    const file = join(dir, 'good.jsonl');
    const lines = Array.from({ length: 25 }, (_, i) => JSON.stringify(user('acme-books', `nd-${String(i).padStart(2, '0')}`, { first_name: `Reader ${i}` })));
    // Repeats: line 26 repeats line 1 (another batch), line 27 repeats line 25 (the same batch). The last record is kept, and said.
    lines.push(JSON.stringify(user('acme-books', 'nd-00', { first_name: 'Last one wins' })));
    lines.push(JSON.stringify(user('acme-books', 'nd-24', { first_name: 'Also last' })));
    await writeFile(file, `\uFEFF${lines.join('\r\n')}\r\n`);
    const progress: string[] = [];
    const io = { ...capture(env), progress: (line: string) => progress.push(line) };
    expect(await mysqlCommands.import!([file, '--batch-size', '10'], io, readMysqlConfig(io.env))).toBe(0);
    const out = io.lines.join('\n');
    expect(out).toMatch(/25 user\(s\) inserted, 1 updated, 0 unchanged; 2 line\(s\) repeated a user of an earlier line, the last record kept \(first: line 26 repeats line 1\)\.$/m);
    expect(io.errors.join('\n')).toMatch(/"event":"import_completed".*"users_repeated":2,"first_repeated_line":26,"first_repeated_line_repeats":1/);
    expect(progress.some((line) => /27\/27 users/.test(line))).toBe(true);
    expect(((await (await users('acme-books', 'acme-books-key-2025', '/merchant/users/nd-24')).json()) as { data: Array<{ first_name: string }> }).data[0]!.first_name).toBe('Also last');
    const body = (await (await users('acme-books', 'acme-books-key-2025', '/merchant/users/nd-00')).json()) as { data: Array<{ first_name: string }> };
    expect(body.data[0]!.first_name).toBe('Last one wins');
  });

  it('adds, rotates, revokes, disables and enables a merchant, and HTTP follows each step', async () => {
    const added = await run(['merchant', 'add', 'new-shop', '--json']);
    expect(added.code).toBe(0);
    const { api_key: first } = JSON.parse(added.out) as { api_key: string };
    expect(first).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect((await users('new-shop', first)).status).toBe(200);
    expect(await (await validate('new-shop', first)).json()).toEqual({ status: 'ok', is_valid: true });
    expect(await run(['merchant', 'add', 'new-shop'])).toMatchObject({ code: 1, err: expect.stringMatching(/already exists/) });

    const rotated = await run(['merchant', 'rotate-key', 'new-shop']);
    expect(rotated).toMatchObject({ code: 0, out: expect.stringMatching(/Older keys still work/) });
    const second = /: ([A-Za-z0-9_-]{43})$/m.exec(rotated.out)![1]!;
    expect((await users('new-shop', first)).status).toBe(200);
    expect((await users('new-shop', second)).status).toBe(200);

    const revoked = await run(['merchant', 'rotate-key', 'new-shop', '--revoke-old', '--json']);
    const { api_key: third, revoked: count } = JSON.parse(revoked.out) as { api_key: string; revoked: number };
    expect(count).toBe(2);
    expect((await users('new-shop', first)).status).toBe(401);
    expect((await users('new-shop', second)).status).toBe(401);
    expect((await validate('new-shop', second)).status).toBe(400);
    expect((await users('new-shop', third)).status).toBe(200);

    expect(await run(['merchant', 'disable', 'new-shop'])).toMatchObject({ code: 0, out: expect.stringMatching(/disabled.*within 0 s/) });
    expect((await users('new-shop', third)).status).toBe(403);
    expect(await (await validate('new-shop', third)).json()).toEqual({ status: 'error', message: 'This account is disabled.', is_valid: false });
    expect(await run(['merchant', 'enable', 'new-shop'])).toMatchObject({ code: 0 });
    expect((await validate('new-shop', third)).status).toBe(200);

    expect(await run(['merchant', 'disable', 'no-such-shop'])).toMatchObject({ code: 1, err: expect.stringMatching(/No merchant "no-such-shop"/) });
    expect(await run(['merchant', 'rotate-key', 'no-such-shop'])).toMatchObject({ code: 1 });

    const listed = await run(['merchant', 'list']);
    expect(listed.out).toMatch(/^ID\s+STATUS\s+ACTIVE KEYS\s+REVOKED KEYS/);
    expect(listed.out).toMatch(/new-shop\s+active\s+1\s+2/);
    expect(listed.out).toMatch(/closed-shop\s+disabled\s+1\s+0/);
    const json = JSON.parse((await run(['merchant', 'list', '--json'])).out) as Array<{ id: string }>;
    expect(json.map((m) => m.id)).toEqual(['acme-books', 'closed-shop', 'demo-merchant', 'new-shop']);
    for (const key of [first, second, third]) expect(listed.out + JSON.stringify(json)).not.toContain(key);
  });

  it('refuses to serve with a MASTER_KEY that does not open the stored keys', async () => {
    await expect(openMysqlStorage(...open({ ...env, MASTER_KEY: generateMasterKey() }))).rejects.toThrow(/another MASTER_KEY.*Refusing to start/);
  });

  it('starts serving on an unreachable database with a warning, answering 503 until it answers', async () => {
    const io = capture({ ...env, DATABASE_URL: 'mysql://root@127.0.0.1:1/nothing?connectTimeout=1000' });
    const down = await openMysqlStorage(readMysqlConfig(io.env), io);
    try {
      expect(io.errors.join('\n')).toMatch(/Warning: .*ECONNREFUSED.*Serving 503 until MySQL answers/);
      const answer = await createMerchantApi({ storage: down, logger: silentLogger }).fetch(new Request(`${BASE}/readyz`));
      expect(answer.status).toBe(503);
    } finally {
      await down.close();
    }
  });

  it('reports an unreachable database as one line and exit code 1', async () => {
    const result = await run(['merchant', 'list'], { DATABASE_URL: 'mysql://root@127.0.0.1:1/nothing?connectTimeout=1000' });
    expect(result).toMatchObject({ code: 1, err: expect.stringMatching(/merchant list failed: .*ECONNREFUSED.*unreachable/) });
  });

  it('names a configuration problem of DATABASE_URL as such, with database, user and host but never the password (exit 2), in the admin commands and in serve', async () => {
    const server = new URL(MYSQL_URL);
    const at = (path: string, auth = 'root') => `mysql://${auth}@${server.host}${path}`;
    const unknownDb = await run(['merchant', 'list'], { DATABASE_URL: at('/merchant_api_no_such_db') });
    expect(unknownDb).toMatchObject({ code: 2, err: `merchant list failed: the database "merchant_api_no_such_db" does not exist on ${server.host} (DATABASE_URL): create it, or fix the name.` });
    // serve refuses to start on it too, instead of warning and answering 503 for ever (runCli's serve would reject: it is never reached).
    expect(await run(['serve'], { DATABASE_URL: at('/merchant_api_no_such_db') })).toMatchObject({
      code: 2,
      err: `serve: the database "merchant_api_no_such_db" does not exist on ${server.host} (DATABASE_URL): create it, or fix the name. Refusing to start.`,
    });
    const noDb = await run(['merchant', 'list'], { DATABASE_URL: at('/') });
    expect(noDb).toMatchObject({ code: 2, err: expect.stringMatching(/^DATABASE_URL names no database: /) });
    expect(await run(['serve'], { DATABASE_URL: at('/') })).toMatchObject({ code: 2, err: expect.stringMatching(/^DATABASE_URL names no database: /) });
    const unknownHost = await run(['merchant', 'list'], { DATABASE_URL: 'mysql://root@no-such-host.invalid:3306/merchant_api' });
    expect(unknownHost).toMatchObject({ code: 2, err: expect.stringMatching(/^merchant list failed: the host "no-such-host\.invalid" of DATABASE_URL is not found \(DNS (ENOTFOUND|EAI_AGAIN)\)\.$/) });
    // serve: a name that does not exist stops the start; a resolver that does not answer (EAI_AGAIN) is an outage it waits out.
    const dns = await lookup('no-such-host.invalid').then(() => 'resolved', (error: { code: string }) => error.code);
    const serveUnknownHost = await run(['serve'], { DATABASE_URL: 'mysql://root@no-such-host.invalid:3306/merchant_api' });
    if (dns === 'ENOTFOUND') {
      expect(serveUnknownHost).toMatchObject({ code: 2, err: 'serve: the host "no-such-host.invalid" of DATABASE_URL is not found (DNS ENOTFOUND). Refusing to start.' });
    } else {
      expect(dns).toBe('EAI_AGAIN');
      expect(serveUnknownHost.err).toMatch(/Warning: MySQL start-up check failed \(EAI_AGAIN\): the MySQL host name does not resolve \(DNS\)\. Serving 503/);
    }
    const admin = await createConnection({ uri: MYSQL_URL });
    const password = 'right-password-9f3';
    await admin.query(`CREATE USER IF NOT EXISTS 'merchant_api_pw_test'@'%' IDENTIFIED BY '${password}'`);
    await admin.query(`CREATE USER IF NOT EXISTS 'merchant_api_pw_test'@'localhost' IDENTIFIED BY '${password}'`);
    try {
      const wrong = await run(['merchant', 'list'], { DATABASE_URL: at(`/${database.name}`, 'merchant_api_pw_test:wrong-password-7c1') });
      expect(wrong).toMatchObject({ code: 2, err: `merchant list failed: access denied for user "merchant_api_pw_test" on ${server.host} (DATABASE_URL): a wrong user or password.` });
      expect(wrong.err).not.toContain('wrong-password-7c1');
      const serveWrong = await run(['serve'], { DATABASE_URL: at(`/${database.name}`, 'merchant_api_pw_test:wrong-password-7c1') });
      expect(serveWrong).toMatchObject({ code: 2, err: `serve: access denied for user "merchant_api_pw_test" on ${server.host} (DATABASE_URL): a wrong user or password. Refusing to start.` });
      expect(serveWrong.err).not.toContain('wrong-password-7c1');
      // Right password, but no privilege on the database: named as such.
      const serveNoGrant = await run(['serve'], { DATABASE_URL: at(`/${database.name}`, `merchant_api_pw_test:${password}`) });
      expect(serveNoGrant).toMatchObject({ code: 2, err: expect.stringMatching(/^serve: (user "merchant_api_pw_test" may not use the database|access denied for user "merchant_api_pw_test")/) });
      expect(serveNoGrant.err).not.toContain(password);
    } finally {
      await admin.query(`DROP USER IF EXISTS 'merchant_api_pw_test'@'%'`);
      await admin.query(`DROP USER IF EXISTS 'merchant_api_pw_test'@'localhost'`);
      await admin.end();
    }
  });

  it('checks DATABASE_READ_URL at start as it checks DATABASE_URL: configuration refuses (exit 2, no password), an outage reads from the primary', async () => {
    const server = new URL(MYSQL_URL);
    const replica = (path: string, auth = 'root') => `mysql://${auth}@${server.host}${path}`;
    const unknownDb = await run(['serve'], { DATABASE_READ_URL: replica('/merchant_api_no_such_replica_db') });
    expect(unknownDb).toMatchObject({
      code: 2,
      err: `serve: the database "merchant_api_no_such_replica_db" does not exist on ${server.host} (DATABASE_READ_URL): create it, or fix the name. Refusing to start.`,
    });
    const wrong = await run(['serve'], { DATABASE_READ_URL: replica(`/${database.name}`, 'merchant_api_no_such_user:secret-pw-41d') });
    expect(wrong).toMatchObject({ code: 2, err: expect.stringMatching(/^serve: access denied for user "merchant_api_no_such_user" on .* \(DATABASE_READ_URL\): a wrong user or password\. Refusing to start\.$/) });
    expect(wrong.err).not.toContain('secret-pw-41d');

    const io = capture({ ...env, DATABASE_READ_URL: 'mysql://root@127.0.0.1:1/nothing?connectTimeout=1000' });
    const storage = await openMysqlStorage(readMysqlConfig(io.env), io);
    try {
      expect(io.errors.join('\n')).toMatch(/Warning: the replica of DATABASE_READ_URL does not answer \(ECONNREFUSED\); user reads go to the primary until it does\./);
      const answer = await createMerchantApi({ storage, logger: silentLogger }).fetch(new Request(`${BASE}/readyz`));
      expect(answer.status).toBe(200);
    } finally {
      await storage.close();
    }
  });

  it('works through the built bin: node dist/cli.js', async () => {
    const exec = promisify(execFile);
    const { stdout } = await exec(process.execPath, ['dist/cli.js', 'migrate', '--status'], { env: { ...process.env, ...env } });
    expect(stdout).toContain('applied  0001_initial');
    const listed = await exec(process.execPath, ['dist/cli.js', 'merchant', 'list', '--json'], { env: { ...process.env, ...env } });
    expect(JSON.parse(listed.stdout).length).toBe(4);
    const failed = await exec(process.execPath, ['dist/cli.js', 'migrate'], { env: { ...process.env, DATABASE_URL: '' } }).catch((error: { code: number; stderr: string }) => error);
    expect(failed).toMatchObject({ code: 2, stderr: expect.stringMatching(/DATABASE_URL is not set/) });
  });
});
