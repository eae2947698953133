/**
 * Keys for the merchant (issue 41 §3, docs/protocol.md#managing-keys), through real servers (the
 * Node adapter on real ports) on the memory storage and on MySQL (real MariaDB, two instances on
 * one database): a key added works at once, on the other instance too, and is answered once with
 * its secret; only a key with `keys:manage` changes keys, and it gives only scopes it has; another
 * merchant's key is 404; a rotated key works until its overlap ends, then is 401 (the handler's
 * clock moved, not waited for); the last key that manages keys is never revoked, even by
 * requests at once on two instances; at most MAX_ACTIVE_KEYS keys; every change audited with the
 * key that made it (MySQL).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serve, type Served } from '../../adapters/node.js';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MAX_ACTIVE_KEYS } from '../../src/storage/key-changes.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { importSeed, listAuditEvents, MysqlStorage } from '../../src/storage/mysql/index.js';
import type { Seed, SeedMerchant } from '../../src/storage/seed/seed.js';
import type { Storage } from '../../src/storage/contract.js';
import { mysqlCommands, openMysqlStorage } from '../../src/cli/commands/mysql.js';
import { runCli } from '../../src/cli/run.js';
import { basic } from '../support/api.js';
import { captureIo } from '../support/recording.js';
import { inCi } from '../support/ci.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';

const mysqlReady = await mysqlAvailable();
if (!mysqlReady && inCi()) throw new Error('MariaDB is required in CI (127.0.0.1:3306).');

const full = (id: string, keys: string[]): SeedMerchant => ({ id, status: 'active', keys });
const SEED: Seed = {
  merchants: [
    {
      id: 'ka',
      status: 'active',
      keys: ['ka-full', 'ka-read', 'ka-limited'],
      keyDetails: [undefined, { limits: { scopes: ['users:read'] } }, { name: 'deployer', limits: { scopes: ['users:read', 'keys:manage'] } }],
    },
    full('kb', ['kb-full']),
    full('kc', ['kc-full']),
    full('kd', ['kd-full']),
    full('ke', ['ke-1', 'ke-2', 'ke-3', 'ke-4', 'ke-5', 'ke-6']),
    full('kf', ['kf-1', 'kf-2']),
  ],
  users: [],
};

interface Env {
  /** Two instances on one storage where the storage is shared (MySQL); the same one twice on memory. */
  urls: [string, string];
  /** Moves the handlers' clock (both instances). */
  advance(ms: number): void;
  /** `ka`'s audit events, newest first (MySQL), or undefined. */
  audited?: () => Promise<Array<{ action: string; actor: string; key_id: string | null; summary: Record<string, unknown> }>>;
  /** What the operator's `merchant keys ID --json` prints (MySQL), or undefined. */
  cliKeys?: (merchantId: string) => Promise<Array<Record<string, unknown>>>;
  close(): Promise<void>;
}

type Answer = { status: number; body: any };

/** `operatorTools`: the storage has the operator's CLI and an audit trail (MySQL), and the tests of those run. */
function suite(name: string, make: () => Promise<Env>, { skip = false, operatorTools = false } = {}): void {
  describe.skipIf(skip)(name, () => {
    // Defined only where the storage has the tools: on the memory storage nothing is missing, so nothing is skipped.
    const itOperator = operatorTools ? it : () => undefined;
    let env: Env;
    beforeAll(async () => {
      env = await make();
    }, 120_000);
    afterAll(async () => env?.close());

    async function send(merchant: string, key: string, method: string, path: string, body?: unknown, instance = 0): Promise<Answer> {
      const headers: Record<string, string> = { ...basic(merchant, key) };
      if (body !== undefined) headers['content-type'] = 'application/json';
      const response = await fetch(`${env.urls[instance]}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const text = await response.text();
      return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
    }
    const users = (merchant: string, key: string, instance = 0) => send(merchant, key, 'GET', '/merchant/users', undefined, instance).then((a) => a.status);
    const keyIdsOf = async (merchant: string, key: string): Promise<string[]> => (await send(merchant, key, 'GET', '/merchant/keys')).body.data.map((k: { key_id: string }) => k.key_id);
    /** The key id of a seed key: the listing is oldest first, the seed's keys first in their order. */
    async function idOf(merchant: string, key: string): Promise<string> {
      const seed = SEED.merchants.find((m) => m.id === merchant)!;
      return (await keyIdsOf(merchant, key))[seed.keys.indexOf(key)]!;
    }

    it('adds a key answered once with its secret; it works at once on both instances, is listed without it, and stops at once when revoked', async () => {
      const created = await send('ka', 'ka-full', 'POST', '/merchant/keys', { name: 'ci job', scopes: ['users:read'], allow_from: ['127.0.0.1', '::1'], expires_in: '30d' });
      expect(created.status).toBe(201);
      const [key] = created.body.data;
      expect(Object.keys(key)).toEqual(['key_id', 'name', 'scopes', 'created_at', 'expires_at', 'last_used_at', 'allow_from', 'mode', 'secret']);
      expect(key).toMatchObject({ key_id: expect.stringMatching(/^key_[0-9a-hjkmnp-tv-z]{12}$/), name: 'ci job', scopes: ['users:read'], last_used_at: null, allow_from: ['127.0.0.1/32', '::1/128'], secret: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/) });
      expect(Math.abs(Date.parse(key.expires_at) - Date.now() - 30 * 86_400_000)).toBeLessThan(120_000);
      expect(await users('ka', key.secret, 0)).toBe(200);
      expect(await users('ka', key.secret, 1)).toBe(200);
      const listed = await send('ka', key.secret, 'GET', '/merchant/keys');
      const { secret, ...info } = key;
      // Its use is noted off the request path, within a minute: null or a time.
      expect(listed.body.data.find((k: { key_id: string }) => k.key_id === key.key_id)).toEqual({ ...info, last_used_at: listed.body.data.find((k: { key_id: string }) => k.key_id === key.key_id).last_used_at });
      expect(JSON.stringify(listed.body)).not.toContain(secret);
      // Made with users:read only: it cannot change keys itself.
      expect((await send('ka', key.secret, 'POST', '/merchant/keys', { scopes: ['users:read'] })).body.errors[0]).toMatchObject({ code: 'insufficient_scope', message: expect.stringContaining('keys:manage') });
      expect((await send('ka', 'ka-full', 'DELETE', `/merchant/keys/${key.key_id}`)).status).toBe(204);
      expect(await users('ka', key.secret, 0)).toBe(401);
      expect((await send('ka', 'ka-full', 'DELETE', `/merchant/keys/${key.key_id}`)).status).toBe(404);
    });

    it('stops a revoked key at once on the instance that revoked it, and on another within its key cache', async () => {
      const made = (await send('ka', 'ka-full', 'POST', '/merchant/keys', { scopes: ['users:read'] })).body.data[0];
      expect(await users('ka', made.secret, 1)).toBe(200);
      expect((await send('ka', 'ka-full', 'DELETE', `/merchant/keys/${made.key_id}`, undefined, 0)).status).toBe(204);
      expect(await users('ka', made.secret, 0)).toBe(401);
      // Waited for as a condition: the other instance's copy of the merchant expires (KEY_CACHE_TTL; 500 ms here).
      const deadline = Date.now() + 15_000;
      let status = await users('ka', made.secret, 1);
      while (status !== 401 && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        status = await users('ka', made.secret, 1);
      }
      expect(status).toBe(401);
    });

    it('refuses a key without keys:manage on each of the four routes, 403 naming the scope, and changes nothing; it may still list the keys', async () => {
      const before = await keyIdsOf('ka', 'ka-full');
      const target = before[0]!;
      for (const [method, path, body] of [
        ['POST', '/merchant/keys', { scopes: ['users:read'] }],
        ['POST', `/merchant/keys/${target}/rotate`, { expire_old_in: '1h' }],
        ['PATCH', `/merchant/keys/${target}`, { name: 'taken over' }],
        ['DELETE', `/merchant/keys/${target}`, undefined],
      ] as const) {
        const answer = await send('ka', 'ka-read', method, path, body);
        expect(answer.status, `${method} ${path}`).toBe(403);
        expect(answer.body.errors[0]).toEqual({ code: 'insufficient_scope', message: 'This API key lacks the scope keys:manage, which this endpoint needs.' });
      }
      expect(await keyIdsOf('ka', 'ka-read')).toEqual(before);
      expect((await send('ka', 'ka-full', 'GET', '/merchant/keys')).body.data[0].name).toBeNull();
    });

    it('lets a key give only scopes it has, to a new key or by rotating one', async () => {
      const more = await send('ka', 'ka-limited', 'POST', '/merchant/keys', { scopes: ['users:read', 'webhooks:manage'] });
      expect(more.status).toBe(403);
      expect(more.body.errors[0]).toEqual({ code: 'insufficient_scope', message: 'This API key lacks the scope webhooks:manage, so it cannot give it to another key: a key gives only scopes it has.' });
      const rotated = await send('ka', 'ka-limited', 'POST', `/merchant/keys/${await idOf('ka', 'ka-full')}/rotate`, {});
      expect(rotated.status).toBe(403);
      expect(rotated.body.errors[0].message).toContain('scope signature');
      expect(await users('ka', 'ka-full')).toBe(200);
      const own = await send('ka', 'ka-limited', 'POST', '/merchant/keys', { scopes: ['keys:manage', 'users:read'] });
      expect(own.status).toBe(201);
      expect(own.body.data[0].scopes).toEqual(['users:read', 'keys:manage']);
      expect((await send('ka', 'ka-limited', 'DELETE', `/merchant/keys/${own.body.data[0].key_id}`)).status).toBe(204);
    });

    it('checks a body as the CLI checks its key options: one 400 naming the member', async () => {
      const refused = async (body: unknown) => (await send('ka', 'ka-full', 'POST', '/merchant/keys', body)).body.errors[0];
      expect(await refused({ name: 'x' })).toMatchObject({ code: 'invalid_parameter', param: 'scopes' });
      expect(await refused({ scopes: [] })).toMatchObject({ code: 'invalid_parameter', param: 'scopes' });
      expect(await refused({ scopes: ['users:write'] })).toEqual({ code: 'invalid_parameter', param: 'scopes', message: 'scopes: "users:write" is not a scope (the scopes are signature, users:read, webhooks:manage, keys:manage).' });
      expect(await refused({ scopes: ['users:read'], name: '' })).toMatchObject({ code: 'invalid_parameter', param: 'name' });
      expect(await refused({ scopes: ['users:read'], name: 'a\nb' })).toMatchObject({ code: 'invalid_parameter', param: 'name' });
      expect(await refused({ scopes: ['users:read'], allow_from: [] })).toMatchObject({ code: 'invalid_parameter', param: 'allow_from' });
      expect(await refused({ scopes: ['users:read'], allow_from: ['203.0.113.7/24'] })).toMatchObject({ code: 'invalid_parameter', param: 'allow_from', message: expect.stringContaining('203.0.113.0/24') });
      expect(await refused({ scopes: ['users:read'], expires_in: '400d' })).toMatchObject({ code: 'invalid_parameter', param: 'expires_in' });
      expect(await refused({ scopes: ['users:read'], expires_at: '2001-01-01T00:00:00Z' })).toMatchObject({ code: 'invalid_parameter', param: 'expires_at' });
      expect(await refused({ scopes: ['users:read'], expires_at: '2999-01-01T00:00:00Z', expires_in: '1d' })).toMatchObject({ code: 'malformed_request' });
      expect(await refused({ scopes: ['users:read'], secret: 'mine' })).toMatchObject({ code: 'unknown_parameter', param: 'secret' });
      const id = await idOf('ka', 'ka-read');
      expect((await send('ka', 'ka-full', 'PATCH', `/merchant/keys/${id}`, {})).body.errors[0]).toMatchObject({ code: 'malformed_request' });
      expect((await send('ka', 'ka-full', 'PATCH', `/merchant/keys/${id}`, { scopes: ['keys:manage'] })).body.errors[0]).toMatchObject({ code: 'unknown_parameter', param: 'scopes' });
      expect((await send('ka', 'ka-full', 'POST', `/merchant/keys/${id}/rotate`, { expire_old_in: '8d' })).body.errors[0]).toEqual({ code: 'invalid_parameter', param: 'expire_old_in', message: 'expire_old_in must be a duration such as 0s, 15m, 24h or 7d, at most 7d.' });
      expect(await users('ka', 'ka-read')).toBe(200);
    });

    it("answers another merchant's key 404, as one that does not exist, and leaves it working", async () => {
      const theirs = await idOf('kb', 'kb-full');
      for (const [method, path, body] of [
        ['POST', `/merchant/keys/${theirs}/rotate`, {}],
        ['PATCH', `/merchant/keys/${theirs}`, { allow_from: ['192.0.2.0/24'] }],
        ['DELETE', `/merchant/keys/${theirs}`, undefined],
        ['DELETE', '/merchant/keys/key_0000000000zz', undefined],
      ] as const) {
        const answer = await send('ka', 'ka-full', method, path, body);
        expect(answer.status, `${method} ${path}`).toBe(404);
        expect(answer.body.errors[0]).toEqual({ code: 'not_found', message: 'This merchant has no working key with this id.' });
      }
      expect(await users('kb', 'kb-full')).toBe(200);
      expect((await send('kb', 'kb-full', 'GET', '/merchant/keys')).body.data).toEqual([expect.objectContaining({ key_id: theirs, allow_from: [] })]);
    });

    it('rotates a key: the new one with the same name, scopes and networks; the old one works until its overlap ends, then is 401', async () => {
      const made = (await send('ka', 'ka-full', 'POST', '/merchant/keys', { name: 'reports', scopes: ['users:read'], allow_from: ['127.0.0.0/8'] })).body.data[0];
      const rotation = await send('ka', 'ka-full', 'POST', `/merchant/keys/${made.key_id}/rotate`, { expire_old_in: '24h' }, 1);
      expect(rotation.status).toBe(200);
      const rotated = rotation.body.data[0];
      expect(Object.keys(rotated)).toEqual(['key_id', 'name', 'scopes', 'created_at', 'expires_at', 'last_used_at', 'allow_from', 'mode', 'secret', 'old_key_id', 'old_key_expires_at']);
      expect(rotated).toMatchObject({ name: 'reports', scopes: ['users:read'], allow_from: ['127.0.0.0/8'], expires_at: null, old_key_id: made.key_id });
      expect(Math.abs(Date.parse(rotated.old_key_expires_at) - Date.now() - 86_400_000)).toBeLessThan(120_000);
      for (const instance of [0, 1]) {
        expect(await users('ka', made.secret, instance)).toBe(200);
        expect(await users('ka', rotated.secret, instance)).toBe(200);
      }
      // The handlers' clock a second past the overlap (the instance that rotated forgot the merchant; the other reads it again after its key cache).
      env.advance(86_401_000);
      try {
        expect(await users('ka', made.secret, 1)).toBe(401);
        expect(await users('ka', rotated.secret, 1)).toBe(200);
      } finally {
        env.advance(-86_401_000);
      }
      // Without an overlap the old key stops at once.
      const again = (await send('ka', 'ka-full', 'POST', `/merchant/keys/${rotated.key_id}/rotate`)).body.data[0];
      expect(Date.parse(again.old_key_expires_at)).toBeLessThanOrEqual(Date.now());
      expect(await users('ka', rotated.secret)).toBe(401);
      expect(await users('ka', again.secret)).toBe(200);
      for (const id of [made.key_id, again.key_id]) expect((await send('ka', 'ka-full', 'DELETE', `/merchant/keys/${id}`)).status).toBe(204);
    });

    it("changes a key's name and networks: outside them it is refused at once, and works again when they are cleared", async () => {
      const made = (await send('ka', 'ka-full', 'POST', '/merchant/keys', { scopes: ['users:read'] })).body.data[0];
      const patched = await send('ka', 'ka-full', 'PATCH', `/merchant/keys/${made.key_id}`, { name: 'elsewhere', allow_from: ['198.51.100.0/24'] });
      expect(patched.status).toBe(200);
      expect(patched.body.data).toEqual([{ key_id: made.key_id, name: 'elsewhere', scopes: ['users:read'], created_at: made.created_at, expires_at: null, last_used_at: null, allow_from: ['198.51.100.0/24'], mode: 'live' }]);
      const outside = await send('ka', made.secret, 'GET', '/merchant/users');
      expect([outside.status, outside.body.errors[0].code]).toEqual([403, 'address_not_allowed']);
      expect((await send('ka', 'ka-full', 'PATCH', `/merchant/keys/${made.key_id}`, { allow_from: [], name: null })).body.data[0]).toMatchObject({ name: null, allow_from: [] });
      expect(await users('ka', made.secret)).toBe(200);
      expect((await send('ka', 'ka-full', 'DELETE', `/merchant/keys/${made.key_id}`)).status).toBe(204);
    });

    it('never revokes the last key with keys:manage; a key revokes itself while another one manages', async () => {
      const own = await idOf('kc', 'kc-full');
      const last = await send('kc', 'kc-full', 'DELETE', `/merchant/keys/${own}`);
      expect(last.status).toBe(409);
      expect(last.body.errors[0]).toEqual({ code: 'conflict', message: expect.stringContaining('last working key with the scope keys:manage') });
      const manager = (await send('kc', 'kc-full', 'POST', '/merchant/keys', { scopes: ['keys:manage'] })).body.data[0];
      expect((await send('kc', 'kc-full', 'DELETE', `/merchant/keys/${own}`)).status).toBe(204);
      expect(await users('kc', 'kc-full')).toBe(401);
      expect((await send('kc', manager.secret, 'DELETE', `/merchant/keys/${manager.key_id}`)).status).toBe(409);
      expect((await send('kc', manager.secret, 'GET', '/merchant/keys')).status).toBe(403);
    });

    it(`holds a merchant to ${MAX_ACTIVE_KEYS} working keys: one more is 409`, async () => {
      for (let i = 1; i < MAX_ACTIVE_KEYS; i++) expect((await send('kd', 'kd-full', 'POST', '/merchant/keys', { scopes: ['users:read'] })).status).toBe(201);
      const over = await send('kd', 'kd-full', 'POST', '/merchant/keys', { scopes: ['users:read'] });
      expect(over.status).toBe(409);
      expect(over.body.errors[0].message).toContain(`${MAX_ACTIVE_KEYS} working keys`);
      expect(await keyIdsOf('kd', 'kd-full')).toHaveLength(MAX_ACTIVE_KEYS);
    });

    it('keeps one key with keys:manage whatever revocations run at once, on both instances', async () => {
      // Six managing keys, each revoking itself at once: five go, one is refused.
      const ids = await keyIdsOf('ke', 'ke-1');
      const answers = await Promise.all(ids.map((id, i) => send('ke', `ke-${i + 1}`, 'DELETE', `/merchant/keys/${id}`, undefined, i % 2)));
      expect(answers.map((a) => a.status).sort()).toEqual([204, 204, 204, 204, 204, 409]);
      const kept = answers.findIndex((a) => a.status === 409);
      expect(await keyIdsOf('ke', `ke-${kept + 1}`)).toEqual([ids[kept]]);
      // The last two managing keys, each revoking the other at once, five times: one goes, never both.
      let keys = [{ secret: 'kf-1', id: await idOf('kf', 'kf-1') }, { secret: 'kf-2', id: await idOf('kf', 'kf-2') }];
      for (let round = 0; round < 5; round++) {
        const [a, b] = keys as [(typeof keys)[0], (typeof keys)[0]];
        const both = await Promise.all([send('kf', a.secret, 'DELETE', `/merchant/keys/${b.id}`, undefined, 0), send('kf', b.secret, 'DELETE', `/merchant/keys/${a.id}`, undefined, 1)]);
        const statuses = both.map((answer) => answer.status);
        expect(statuses.filter((s) => s === 204), `round ${round}: ${statuses}`).toHaveLength(1);
        // The other: refused as the last manager, or its key was revoked before it authenticated.
        expect([409, 401]).toContain(statuses.find((s) => s !== 204));
        const survivor = statuses[0] === 204 ? a : b;
        expect(await keyIdsOf('kf', survivor.secret)).toEqual([survivor.id]);
        const added = (await send('kf', survivor.secret, 'POST', '/merchant/keys', { scopes: ['keys:manage', 'users:read'] })).body.data[0];
        keys = [survivor, { secret: added.secret, id: added.key_id }];
      }
    });

    itOperator("shows the operator's `merchant keys --json` the same keys the API lists, with the same fields", async () => {
      if (env.cliKeys === undefined) throw new Error('this storage has no CLI');
      const made = (await send('ka', 'ka-full', 'POST', '/merchant/keys', { name: 'parity', scopes: ['users:read', 'keys:manage'], allow_from: ['2001:db8::/48'], expires_in: '2d' })).body.data[0];
      const listed = (await send('ka', 'ka-full', 'GET', '/merchant/keys')).body.data as Array<Record<string, unknown>>;
      const printed = (await env.cliKeys('ka')).filter((key) => key.active === true);
      expect(printed.map((key) => Object.fromEntries(Object.keys(listed[0]!).map((field) => [field, key[field]])))).toEqual(listed);
      expect(printed.find((key) => key.key_id === made.key_id)).toMatchObject({ name: 'parity', scopes: ['users:read', 'keys:manage'], allow_from: ['2001:db8::/48'], expires_at: made.expires_at, revoked_at: null });
      expect((await send('ka', 'ka-full', 'DELETE', `/merchant/keys/${made.key_id}`)).status).toBe(204);
      expect((await env.cliKeys('ka')).find((key) => key.key_id === made.key_id)).toMatchObject({ active: false, revoked_at: expect.stringMatching(/\+00:00$/) });
    });

    itOperator('audits every change with the key that made it', async () => {
      if (env.audited === undefined) throw new Error('this storage keeps no trail');
      const actorKey = await idOf('ka', 'ka-limited');
      const made = (await send('ka', 'ka-limited', 'POST', '/merchant/keys', { name: 'audited', scopes: ['users:read'] })).body.data[0];
      await send('ka', 'ka-limited', 'PATCH', `/merchant/keys/${made.key_id}`, { allow_from: ['192.0.2.0/24'] });
      const rotated = (await send('ka', 'ka-limited', 'POST', `/merchant/keys/${made.key_id}/rotate`, { expire_old_in: '1h' })).body.data[0];
      await send('ka', 'ka-limited', 'DELETE', `/merchant/keys/${rotated.key_id}`);
      await send('ka', 'ka-limited', 'DELETE', `/merchant/keys/${made.key_id}`);
      const events = (await env.audited()).slice(0, 5).reverse();
      const actor = `merchant:ka key:${actorKey}`;
      expect(events).toEqual([
        { action: 'key_added', actor, key_id: actorKey, summary: { new_key_id: made.key_id, name_changed: true, scopes: ['users:read'], allow_from: [], expires_at: null } },
        { action: 'key_updated', actor, key_id: actorKey, summary: { key_id: made.key_id, changed: ['allow_from'], allow_from: ['192.0.2.0/24'] } },
        { action: 'key_rotated', actor, key_id: actorKey, summary: expect.objectContaining({ new_key_id: rotated.key_id, expiring_key_ids: [made.key_id], old_keys_expire_at: rotated.old_key_expires_at }) },
        { action: 'key_revoked', actor, key_id: actorKey, summary: { key_id: rotated.key_id } },
        { action: 'key_revoked', actor, key_id: actorKey, summary: { key_id: made.key_id } },
      ]);
      expect(JSON.stringify(events)).not.toContain(made.secret);
    });
  });
}

/** Two servers on one storage (or each its own), each with the shared clock. */
async function servers(storages: [Storage, Storage]): Promise<{ urls: [string, string]; advance(ms: number): void; close(): Promise<void> }> {
  let offset = 0;
  const served: Served[] = [];
  for (const storage of storages) {
    const api = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false, now: () => Date.now() + offset });
    served.push(await serve(api, { port: 0, hostname: '127.0.0.1' }));
  }
  return {
    urls: [served[0]!.url, served[1]!.url],
    advance: (ms) => void (offset += ms),
    close: async () => void (await Promise.all(served.map((s) => s.close()))),
  };
}

suite('keys for the merchant on the memory storage', async () => {
  const storage = new MemoryStorage(SEED);
  // One storage, two servers: the memory storage is one process's.
  const both = await servers([storage, storage]);
  return { ...both, close: async () => (await both.close(), await storage.close()) };
});

let database: TestDatabase | undefined;
suite(
  'keys for the merchant on MySQL, two instances',
  async () => {
    database = await createTestDatabase();
    await importSeed(database.db, database.masterKey, SEED);
    // The second instance holds a merchant 500 ms (KEY_CACHE_TTL), so that a revocation reaching it is seen soon.
    const storages: [MysqlStorage, MysqlStorage] = [new MysqlStorage({ db: database.db, masterKey: database.masterKey }), new MysqlStorage({ db: database.db, masterKey: database.masterKey, keyCacheTtlMs: 500 })];
    const both = await servers(storages);
    const db = database.db;
    return {
      ...both,
      audited: async () => (await listAuditEvents(db, { merchantId: 'ka', limit: 20 })).events.map(({ action, actor, key_id, summary }) => ({ action, actor, key_id, summary })),
      cliKeys: async (merchantId) => {
        const io = captureIo({ DATABASE_URL: database!.url, MASTER_KEY: database!.masterKeyText }, { progress: () => {} });
        const code = await runCli(['merchant', 'keys', merchantId, '--json'], io, { name: 'test', serve: () => Promise.reject(new Error('not in this test')), commands: mysqlCommands, openMysqlStorage });
        expect(code, io.errors.join('\n')).toBe(0);
        return JSON.parse(io.lines.join('\n')) as Array<Record<string, unknown>>;
      },
      close: async () => {
        await both.close();
        for (const storage of storages) await storage.close();
        await database?.drop();
      },
    };
  },
  { skip: !mysqlReady, operatorTools: true },
);

describe('a storage without the key operations', () => {
  it('answers each key change 501 not_implemented, after authentication and scope, as it answers webhooks', async () => {
    const memory = new MemoryStorage(SEED);
    // Only what the contract requires: an embedder's own storage of before the key operations.
    const storage: Storage = {
      getMerchant: (id) => memory.getMerchant(id),
      recordSalt: (record) => memory.recordSalt(record),
      listUsers: (query) => memory.listUsers(query),
      getUser: (merchantId, id) => memory.getUser(merchantId, id),
      listKeys: (merchantId) => memory.listKeys(merchantId),
      ping: () => memory.ping(),
      close: () => memory.close(),
    };
    const api = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false });
    const json = { ...basic('ka', 'ka-full'), 'content-type': 'application/json' };
    for (const [method, path, body] of [
      ['POST', '/merchant/keys', { scopes: ['users:read'] }],
      ['POST', '/merchant/keys/key_0000000000zz/rotate', {}],
      ['PATCH', '/merchant/keys/key_0000000000zz', { name: 'x' }],
      ['DELETE', '/merchant/keys/key_0000000000zz', undefined],
    ] as const) {
      const response = await api.fetch(new Request(`http://api.test${path}`, { method, headers: body === undefined ? basic('ka', 'ka-full') : json, body: body === undefined ? undefined : JSON.stringify(body) }));
      expect([method, path, response.status]).toEqual([method, path, 501]);
      expect((await response.json()).errors[0]).toEqual({ code: 'not_implemented', message: 'The storage behind this server cannot change keys through the API (ask the operator).' });
    }
    // Scope first: a key without keys:manage learns nothing of the storage.
    const read = await api.fetch(new Request('http://api.test/merchant/keys/key_0000000000zz', { method: 'DELETE', headers: basic('ka', 'ka-read') }));
    expect(read.status).toBe(403);
    expect((await api.fetch(new Request('http://api.test/merchant/keys', { headers: basic('ka', 'ka-read') }))).status).toBe(200);
    await memory.close();
  });
});
