/**
 * The audit trail of webhook endpoint changes (docs/cli.md#the-audit-trail) on real MariaDB:
 * through the built command line (`webhook add|rotate-secret|remove|enable|redeliver`, the actor
 * from `--actor`, `MERCHANT_API_ACTOR` or the OS user) and through `/merchant/webhooks` (the
 * merchant and the id of the key that signed the request). The URL is kept as its origin only
 * (a path or query may hold a token); no secret anywhere; a change whose
 * record cannot be written does not happen (one transaction).
 */
import { execFile } from 'node:child_process';
import { userInfo } from 'node:os';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi, type MerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { importSeed, listAuditEvents, listMerchantKeys, MysqlStorage, type AuditRecord } from '../../src/storage/mysql/index.js';
import { basic, call } from '../support/api.js';
import { CLEAN_ENV, CLI, ROOT } from '../support/processes.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { user } from '../support/seeds.js';

const available = await mysqlAvailable();
const ORIGIN = 'http://api.test';
/** A receiver URL with what must never reach the trail: a token in the path and in the query (credentials before the host are refused). */
const TOKEN_URL = 'http://127.0.0.1:9/hooks/T0/B0/PATHTOKEN123?token=QUERYTOKEN456';
const NEVER = ['PATHTOKEN123', 'QUERYTOKEN456', 'whsec_', 'key-a'];

interface Run {
  code: number;
  out: string;
  err: string;
}

describe.skipIf(!available)('the audit trail of webhook endpoint changes on MySQL', () => {
  let database: TestDatabase;
  let env: Record<string, string>;
  let storage: MysqlStorage;
  let api: MerchantApi;
  const lifted = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true' };

  const cli = (args: string[], extra: Record<string, string> = {}): Promise<Run> =>
    new Promise((resolve) => {
      execFile(process.execPath, [CLI.node, ...args], { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV, ...env, ...lifted, ...extra } }, (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: stdout.trim(), err: stderr.trim() });
      });
    });
  /** `audit list --action A --json`, newest first, through the CLI. */
  const audited = async (action: string): Promise<AuditRecord[]> => {
    const run = await cli(['audit', 'list', '--action', action, '--json']);
    expect(run.code, run.err).toBe(0);
    return (JSON.parse(run.out) as { events: AuditRecord[] }).events;
  };
  const json = (auth: Record<string, string>, body: unknown): RequestInit => ({ method: 'POST', headers: { ...auth, 'content-type': 'application/json' }, body: JSON.stringify(body) });

  beforeAll(async () => {
    database = await createTestDatabase();
    env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText };
    await importSeed(database.db, database.masterKey, {
      merchants: [
        { id: 'wa', status: 'active', keys: ['key-a'] },
        { id: 'wb', status: 'active', keys: ['key-b'] },
      ],
      users: [],
    });
    storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
    api = createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false, webhooks: { allowPrivate: true, allowHttp: true, maxEndpointsPerMerchant: 5 } });
  });
  afterAll(async () => {
    await storage?.close();
    await database?.drop();
  });

  it('CLI: add, rotate-secret, enable, redeliver and remove each write one event with the actor, the endpoint and the URL origin only', async () => {
    const added = await cli(['webhook', 'add', 'wb', TOKEN_URL, '--events', 'user.shared', '--json', '--actor', 'alice']);
    expect(added.code, added.err).toBe(0);
    const endpoint = JSON.parse(added.out) as { id: string; secret: string };
    const [add] = await audited('webhook_endpoint_added');
    expect(add).toEqual({ id: expect.any(String), at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/), actor: 'alice', action: 'webhook_endpoint_added', merchant_id: 'wb', key_id: null, summary: { endpoint_id: endpoint.id, url_origin: 'http://127.0.0.1:9', events: ['user.shared'] } });

    // The actor from MERCHANT_API_ACTOR, then from the OS user.
    const rotated = await cli(['webhook', 'rotate-secret', endpoint.id, '--expire-old-in', '1h', '--json'], { MERCHANT_API_ACTOR: 'bob' });
    expect(rotated.code, rotated.err).toBe(0);
    const { old_secret_expires_at: oldEnd, secret } = JSON.parse(rotated.out) as { old_secret_expires_at: string; secret: string };
    const [rotation] = await audited('webhook_secret_rotated');
    expect(rotation).toMatchObject({ actor: 'bob', merchant_id: 'wb', summary: { endpoint_id: endpoint.id, old_expires_at: oldEnd } });

    // Enabling an enabled endpoint changes nothing and records nothing; a disabled one is recorded with why it was.
    expect(await cli(['webhook', 'enable', endpoint.id, '--actor', 'carol'])).toMatchObject({ code: 0, out: expect.stringMatching(/nothing changed/) });
    expect(await audited('webhook_endpoint_enabled')).toEqual([]);
    await database.db.updateTable('webhook_endpoints').set({ status: 'disabled', disabled_reason: 'gone' }).where('id', '=', endpoint.id).execute();
    expect((await cli(['webhook', 'enable', endpoint.id, '--actor', 'carol'])).code).toBe(0);
    expect(await audited('webhook_endpoint_enabled')).toEqual([expect.objectContaining({ actor: 'carol', merchant_id: 'wb', summary: { endpoint_id: endpoint.id, disabled_reason: 'gone' } })]);

    // A share queues a delivery (no dispatcher runs here); failed, then sent again by the operator.
    await importSeed(database.db, undefined, { merchants: [], users: [user('wb', 'audit-user')] });
    const [delivery] = await database.db.selectFrom('webhook_deliveries').select(['event_id']).where('endpoint_id', '=', endpoint.id).execute();
    expect(delivery).toBeDefined();
    await database.db.updateTable('webhook_deliveries').set({ state: 'failed' }).where('endpoint_id', '=', endpoint.id).execute();
    expect(await cli(['webhook', 'redeliver', delivery!.event_id, '--actor', 'dave'])).toMatchObject({ code: 0, out: '1 delivery queued again.' });
    expect(await audited('webhook_redelivered')).toEqual([expect.objectContaining({ actor: 'dave', merchant_id: 'wb', summary: { event_id: delivery!.event_id, deliveries: 1 } })]);
    // Nothing left to send again: nothing changed, nothing recorded.
    await database.db.updateTable('webhook_deliveries').set({ leased_until: sql<string>`UTC_TIMESTAMP(6) + INTERVAL 1 HOUR` }).where('endpoint_id', '=', endpoint.id).execute();
    expect(await cli(['webhook', 'redeliver', '--endpoint', endpoint.id, '--since', '2000-01-01T00:00:00Z'])).toMatchObject({ code: 0, out: expect.stringMatching(/nothing changed/) });
    expect(await audited('webhook_redelivered')).toHaveLength(1);

    expect((await cli(['webhook', 'remove', endpoint.id])).code).toBe(0);
    expect(await audited('webhook_endpoint_removed')).toEqual([expect.objectContaining({ actor: userInfo().username, merchant_id: 'wb', summary: { endpoint_id: endpoint.id, url_origin: 'http://127.0.0.1:9' } })]);
    // A refused change (no such endpoint) records nothing.
    expect((await cli(['webhook', 'remove', endpoint.id, '--actor', 'alice'])).code).toBe(1);
    expect(await audited('webhook_endpoint_removed')).toHaveLength(1);

    const trail = (await cli(['audit', 'list', '--merchant', 'wb', '--json'])).out;
    for (const never of [...NEVER, endpoint.secret, secret]) expect(trail).not.toContain(never);
    // About twenty CLI processes, each a second or more on a loaded machine.
  }, 120_000);

  it('API: the merchant and the id of the key that signed the request are the actor of add, rotate-secret and remove', async () => {
    const [key] = await listMerchantKeys(database.db, database.masterKey, 'wa');
    const A = basic('wa', 'key-a');
    const added = await call(api, `${ORIGIN}/merchant/webhooks`, json(A, { url: TOKEN_URL }));
    expect(added.status).toBe(201);
    const id = added.body.data[0].id as string;
    const rotated = await call(api, `${ORIGIN}/merchant/webhooks/${id}/rotate-secret`, json(A, { expire_old_in: '24h' }));
    expect(rotated.status).toBe(200);
    // A test event is not a change of the endpoint: not recorded.
    expect((await call(api, `${ORIGIN}/merchant/webhooks/${id}/test`, { method: 'POST', headers: A })).status).toBe(202);
    // Another merchant's attempt is a 404 and records nothing.
    expect((await call(api, `${ORIGIN}/merchant/webhooks/${id}`, { method: 'DELETE', headers: basic('wb', 'key-b') })).status).toBe(404);
    expect((await call(api, `${ORIGIN}/merchant/webhooks/${id}`, { method: 'DELETE', headers: A })).status).toBe(204);

    const { events } = await listAuditEvents(database.db, { merchantId: 'wa', limit: 10 });
    const actor = `merchant:wa key:${key!.key_id}`;
    expect(key!.key_id).toMatch(/^key_/);
    expect(events.map((e) => [e.action, e.actor])).toEqual([
      ['webhook_endpoint_removed', actor],
      ['webhook_secret_rotated', actor],
      ['webhook_endpoint_added', actor],
    ]);
    expect(events[2]!.summary).toEqual({ endpoint_id: id, url_origin: 'http://127.0.0.1:9', events: ['user.shared', 'user.updated', 'user.deactivated', 'user.unshared'] });
    expect(events[1]!.summary).toEqual({ endpoint_id: id, old_expires_at: rotated.body.data[0].old_secret_expires_at });
    const text = JSON.stringify(events);
    for (const never of [...NEVER, added.body.data[0].secret, rotated.body.data[0].secret]) expect(text).not.toContain(never);
  });

  it('a change whose record cannot be written does not happen: no endpoint added, removed or rotated without its event', async () => {
    const A = basic('wa', 'key-a');
    const kept = (await call(api, `${ORIGIN}/merchant/webhooks`, json(A, { url: 'http://127.0.0.1:9/kept' }))).body.data[0] as { id: string };
    const sealed = async () => (await database.db.selectFrom('webhook_endpoints').select(['sealed_secret']).where('id', '=', kept.id).executeTakeFirstOrThrow()).sealed_secret;
    const before = await sealed();
    const count = async () => Number((await database.db.selectFrom('webhook_endpoints').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
    const endpoints = await count();
    await sql`RENAME TABLE audit_events TO audit_events_away`.execute(database.db);
    try {
      expect((await cli(['webhook', 'add', 'wa', 'http://127.0.0.1:9/lost', '--actor', 'alice'])).code).not.toBe(0);
      expect((await call(api, `${ORIGIN}/merchant/webhooks`, json(A, { url: 'http://127.0.0.1:9/lost' }))).status).toBe(503);
      expect((await call(api, `${ORIGIN}/merchant/webhooks/${kept.id}/rotate-secret`, { method: 'POST', headers: A })).status).toBe(503);
      expect((await call(api, `${ORIGIN}/merchant/webhooks/${kept.id}`, { method: 'DELETE', headers: A })).status).toBe(503);
      expect((await cli(['webhook', 'remove', kept.id])).code).not.toBe(0);
    } finally {
      // Back before anything else runs against this database.
      await sql`RENAME TABLE audit_events_away TO audit_events`.execute(database.db);
    }
    expect(await count()).toBe(endpoints);
    expect(await sealed()).toBe(before);
  });
});
