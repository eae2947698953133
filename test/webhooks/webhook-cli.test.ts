/**
 * Webhooks through the built command line on MySQL (docs/webhooks.md#operations): `webhook add`
 * with the address rules, the dispatcher of `serve` delivering after a SIGKILL between the claim
 * and the answer, rotation, redelivery, and the log events, none holding a secret or a body.
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WEBHOOK_ADMIN_EVENTS } from '../../src/cli/commands/admin-log.js';
import { importSeed } from '../../src/storage/mysql/index.js';
import { CLEAN_ENV, CLI, ROOT, startServer, type ServerProcess } from '../support/processes.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { user } from '../support/seeds.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

const available = await mysqlAvailable();

interface Run {
  code: number;
  out: string;
  err: string;
  /** The admin events it logged (`"admin":true` lines), and the secrets it printed. */
  admin: string[];
  secrets: string[];
}

describe.skipIf(!available)('webhooks through the CLI and serve on MySQL', () => {
  let database: TestDatabase;
  let receiver: WebhookReceiver;
  let env: Record<string, string>;
  const servers: ServerProcess[] = [];

  const cli = (args: string[], extra: Record<string, string> = {}): Promise<Run> =>
    new Promise((resolve) => {
      execFile(process.execPath, [CLI.node, ...args], { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV, ...env, ...extra } }, (error, stdout, stderr) => {
        const out = stdout.trim();
        const err = stderr.trim();
        resolve({
          code: error ? Number((error as { code?: number }).code ?? 1) : 0,
          out,
          err,
          admin: err.split('\n').filter((line) => line.startsWith('{') && line.includes('"admin":true')),
          secrets: [...out.matchAll(/(whsec_[A-Za-z0-9+/=]+)/g)].map(([, secret]) => secret!),
        });
      });
    });
  const lifted = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true' };

  beforeAll(async () => {
    database = await createTestDatabase();
    receiver = await startWebhookReceiver();
    env = { DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText };
    await importSeed(database.db, database.masterKey, { merchants: [{ id: 'shop', status: 'active', keys: ['shop-key-1'] }], users: [] });
  });
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await receiver?.close();
    await database?.drop();
  });

  let endpointId = '';

  it('webhook add refuses http and private addresses unless the settings lift the rules, and prints the secret once', async () => {
    // The operator's refusal names the setting that lifts the rule.
    expect(await cli(['webhook', 'add', 'shop', receiver.url])).toMatchObject({ code: 1, err: expect.stringMatching(/must use https\. WEBHOOK_ALLOW_HTTP=true lifts the rule/) });
    expect(await cli(['webhook', 'add', 'shop', receiver.url], { WEBHOOK_ALLOW_HTTP: 'true' })).toMatchObject({ code: 1, err: expect.stringMatching(/private, loopback.* WEBHOOK_ALLOW_PRIVATE=true lifts the rule/) });
    expect(await cli(['webhook', 'add', 'shop', 'https://localhost/hook'])).toMatchObject({ code: 1, err: expect.stringMatching(/private, loopback.* WEBHOOK_ALLOW_PRIVATE=true/) });
    expect(await cli(['webhook', 'add', 'shop', receiver.url, '--events', 'user.bogus'], lifted)).toMatchObject({ code: 2 });
    // At most 2048 characters as stored: 16 + 2000 characters sent, 12,016 once percent-encoded.
    const long = await cli(['webhook', 'add', 'shop', `https://8.8.8.8/${'é'.repeat(2000)}`]);
    expect(long).toMatchObject({ code: 1, err: expect.stringMatching(/^webhook add failed: The URL must be at most 2048 characters once normalized and percent-encoded, as it is stored; this one is 12016\.$/) });
    const added = await cli(['webhook', 'add', 'shop', receiver.url, '--json'], lifted);
    expect(added.code).toBe(0);
    const endpoint = JSON.parse(added.out) as { id: string; secret: string; events: string[] };
    expect(endpoint.secret).toMatch(/^whsec_/);
    expect(endpoint.events).toEqual(['user.shared', 'user.updated', 'user.deactivated', 'user.unshared']);
    endpointId = endpoint.id;
    receiver.secrets.push(endpoint.secret);
    const listed = await cli(['webhook', 'list', '--json']);
    expect(JSON.parse(listed.out)).toEqual([expect.objectContaining({ id: endpointId, merchant_id: 'shop', status: 'enabled' })]);
    expect(listed.out).not.toContain('whsec_');
  });

  it('a server killed with SIGKILL after the import and before the delivery was answered delivers after restart', async () => {
    const serverEnv = { ...env, ...lifted, WEBHOOK_TIMEOUT: '1s', WEBHOOK_RETRY_SCHEDULE: '1s,1s' };
    const first = await startServer('node', CLI.node, serverEnv, ['serve']);
    servers.push(first);
    expect(first.output()).toMatch(/WEBHOOK_ALLOW_PRIVATE and WEBHOOK_ALLOW_HTTP set/);
    // The first request is held and the server killed the moment it arrives: claimed, sent, never answered.
    receiver.answer = (n, res) => {
      if (n === 0) first.child.kill('SIGKILL');
      else res.writeHead(204).end();
    };
    await importSeed(database.db, undefined, { merchants: [], users: [user('shop', 'killed-before-delivery')] });
    await first.exited;
    expect(receiver.received).toHaveLength(1);
    const second = await startServer('node', CLI.node, serverEnv, ['serve']);
    servers.push(second);
    await vi.waitFor(() => expect(receiver.received).toHaveLength(2), { timeout: 20_000, interval: 100 });
    expect(receiver.received[1]!.headers['webhook-id']).toBe(receiver.received[0]!.headers['webhook-id']);
    expect(receiver.received[1]!.event).toMatchObject({ type: 'user.shared', data: { shared_user_id: 'killed-before-delivery' } });
    // The built server names the release of package.json (the build inlines it).
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(receiver.received[1]!.headers['user-agent']).toBe(`merchant-api-webhooks/${version} (+https://www.standardwebhooks.com)`);
    expect(receiver.unverified).toEqual([]);
    await vi.waitFor(() => expect(second.output()).toMatch(/"event":"webhook_attempt"/), { timeout: 10_000 });
    const attempt = second.output().split('\n').find((line) => line.includes('"webhook_attempt"'))!;
    expect(JSON.parse(attempt)).toMatchObject({ endpoint_id: endpointId, event_id: receiver.received[0]!.headers['webhook-id'], attempt: 1, status: 204, outcome: 'delivered' });
    expect(second.output()).not.toContain(receiver.secrets[0]!);
    expect(second.output()).not.toContain('killed-before-delivery@example.com');
    // /healthz details the dispatcher: running, in flight, and the outbox as read every 15 s (at start too).
    await vi.waitFor(
      async () => {
        const health = (await (await fetch(`${second.url}/healthz`)).json()) as { status: string; details: { webhooks: Record<string, unknown> } };
        expect(health).toEqual({ status: 'ok', details: { webhooks: { ok: true, running: true, in_flight: expect.any(Number), pending: expect.any(Number), oldest_due_seconds: expect.any(Number) } } });
      },
      { timeout: 10_000 },
    );
    const deliveries = JSON.parse((await cli(['webhook', 'deliveries', '--endpoint', endpointId, '--json'])).out) as Array<{ state: string; attempts: number }>;
    await vi.waitFor(async () => expect(JSON.parse((await cli(['webhook', 'deliveries', '--state', 'delivered', '--json'])).out)).toHaveLength(1), { timeout: 10_000 });
    expect(deliveries).toHaveLength(1);
  }, 60_000);

  // No cap of its own (the file's 120 s is for a hang): its time is that of a few CLI processes,
  // seconds each at load 20, and one condition wait (the dispatcher's next round, 1 s when idle).
  it('rotate-secret sends both signatures until the old one expires; redeliver sends an event again with its id', async () => {
    const rotated = await cli(['webhook', 'rotate-secret', endpointId, '--expire-old-in', '1h', '--json']);
    expect(rotated.code).toBe(0);
    const { secret } = JSON.parse(rotated.out) as { secret: string };
    receiver.secrets.push(secret);
    // A second rotation with an overlap would end the first one's before the hour it was promised.
    const { old_secret_expires_at: firstEnds } = JSON.parse(rotated.out) as { old_secret_expires_at: string };
    const second = await cli(['webhook', 'rotate-secret', endpointId, '--expire-old-in', '1h']);
    expect(second).toMatchObject({ code: 1, err: expect.stringContaining(`webhook rotate-secret failed: An earlier rotation's overlap is still running: its old secret signs until ${firstEnds}`) });
    const eventId = String(receiver.received[0]!.headers['webhook-id']);
    const again = await cli(['webhook', 'redeliver', eventId]);
    expect(again).toMatchObject({ code: 0, out: '1 delivery queued again.' });
    await vi.waitFor(() => expect(receiver.received).toHaveLength(3), { timeout: 20_000, interval: 100 });
    expect(receiver.received[2]!.headers['webhook-id']).toBe(eventId);
    expect(receiver.received[2]!.verifiedBy).toEqual([0, 1]);
    expect((await cli(['webhook', 'redeliver', '--endpoint', endpointId, '--since', '2000-01-01T00:00:00Z'])).code).toBe(0);
  });

  it('enable says when nothing changed, enables a disabled endpoint, refuses an unknown one; remove', async () => {
    expect(await cli(['webhook', 'enable', endpointId])).toMatchObject({ code: 0, out: `Webhook endpoint ${endpointId} was enabled already; nothing changed.` });
    await database.db.updateTable('webhook_endpoints').set({ status: 'disabled', disabled_reason: 'gone' }).where('id', '=', endpointId).execute();
    expect(await cli(['webhook', 'enable', endpointId])).toMatchObject({ code: 0, out: expect.stringMatching(/^Webhook endpoint \S+ enabled\./) });
    expect(await cli(['webhook', 'enable', 'we_nope'])).toMatchObject({ code: 1, err: expect.stringMatching(/No such webhook endpoint/) });
    expect(await cli(['webhook', 'remove', endpointId])).toMatchObject({ code: 0 });
    expect(JSON.parse((await cli(['webhook', 'list', '--json'])).out)).toEqual([]);
  });

  // On an endpoint of its own, with no server delivering (a delivery being sent is not
  // redelivered): whatever the tests above did or failed to do, this one stands alone.
  it('every webhook admin command logs its event, and none holds a secret', async () => {
    await Promise.all(servers.splice(0).map((server) => server.stop()));
    const runs: Run[] = [];
    const run = async (args: string[], extra: Record<string, string> = {}) => {
      const done = await cli(args, extra);
      runs.push(done);
      expect(done).toMatchObject({ code: 0 });
      return done;
    };
    const { id } = JSON.parse((await run(['webhook', 'add', 'shop', receiver.url, '--json'], lifted)).out) as { id: string };
    await run(['webhook', 'rotate-secret', id, '--expire-old-in', '1h']);
    // A user shared: a delivery to the endpoint, pending with no claim on it.
    await importSeed(database.db, undefined, { merchants: [], users: [user('shop', 'for-the-admin-events')] });
    await run(['webhook', 'redeliver', '--endpoint', id, '--since', '2000-01-01T00:00:00Z']);
    await database.db.updateTable('webhook_endpoints').set({ status: 'disabled', disabled_reason: 'gone' }).where('id', '=', id).execute();
    await run(['webhook', 'enable', id]);
    await run(['webhook', 'remove', id]);
    const adminLines = runs.flatMap((done) => done.admin);
    const secrets = new Set(runs.flatMap((done) => done.secrets));
    expect(new Set(adminLines.map((line) => (JSON.parse(line) as { event: string }).event))).toEqual(new Set(WEBHOOK_ADMIN_EVENTS));
    expect(secrets.size).toBeGreaterThanOrEqual(2);
    for (const line of adminLines) for (const secret of secrets) expect(line).not.toContain(secret);
  });
});
