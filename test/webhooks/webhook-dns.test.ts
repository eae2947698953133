/**
 * One merchant's DNS or receivers hold back no one else (docs/webhooks.md#delivery,
 * docs/webhooks.md#addresses). The built `serve` runs in a mount namespace whose /etc/resolv.conf
 * names a DNS server of the test's own (test/support/dns-server.ts), which stops answering for a
 * merchant's endpoint names; another merchant's delivery arrives while they hang, every event is
 * received once at the real receivers, and with `DATABASE_URL` naming a host the users endpoints
 * keep answering. Then two merchants whose ten receivers each never answer leave room for a third.
 * On the memory storage (Node, Bun, Deno) and on MySQL.
 */
import type { ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:http';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { addWebhookEndpoint, importSeed, sendWebhookTest } from '../../src/storage/mysql/index.js';
import { basic } from '../support/api.js';
import { inCi } from '../support/ci.js';
import { dnsNamespaceAvailable, startDnsServer, type TestDnsServer } from '../support/dns-server.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { CLI, CLEAN_ENV, ROOT, RUNTIMES, runProcess, startServer, type Runtime, type ServerProcess } from '../support/processes.js';
import { seedUser, writeSeed } from '../support/seeds.js';
import { startWebhookReceiver, type WebhookReceiver } from '../support/webhook-receiver.js';

const namespaces = dnsNamespaceAvailable();
if (!namespaces) {
  if (inCi()) throw new Error('webhook-dns.test.ts needs root on Linux (unshare -m and a bind mount over /etc/resolv.conf); CI runs as root.');
  console.warn('SKIPPED webhook-dns.test.ts: it needs root on Linux (unshare -m, mount --bind) to give serve a resolv.conf of its own.');
}
const mysql = await mysqlAvailable();

const A = { id: 'slow-dns', key: 'key-slow-dns' };
const B = { id: 'other', key: 'key-other' };
const C = { id: 'third', key: 'key-third' };
const MERCHANTS = [A, B, C].map((m) => ({ id: m.id, status: 'active' as const, keys: [m.key] }));
/** Receivers on 127.0.0.1 over http; one-second attempts and retries, so a lease is 4 s (4 × WEBHOOK_TIMEOUT). */
const LIFTED = { WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true', WEBHOOK_TIMEOUT: '1s', WEBHOOK_RETRY_SCHEDULE: Array(20).fill('1s').join(',') };

const auth = (m: { id: string; key: string }) => basic(m.id, m.key);

async function addEndpoint(server: ServerProcess, merchant: { id: string; key: string }, url: string): Promise<{ id: string; secret: string }> {
  const response = await fetch(`${server.url}/merchant/webhooks`, { method: 'POST', headers: { ...auth(merchant), 'content-type': 'application/json' }, body: JSON.stringify({ url }) });
  const text = await response.text();
  expect(response.status, text).toBe(201);
  return JSON.parse(text).data[0];
}

async function queueTest(server: ServerProcess, merchant: { id: string; key: string }, endpointId: string): Promise<string> {
  const response = await fetch(`${server.url}/merchant/webhooks/${endpointId}/test`, { method: 'POST', headers: auth(merchant) });
  const text = await response.text();
  expect(response.status, text).toBe(202);
  return JSON.parse(text).data[0].event_id;
}

/** How a scenario adds endpoints and queues test events: through the server's API, or (MySQL) beside it. */
interface Admin {
  add(merchant: { id: string; key: string }, url: string): Promise<{ id: string; secret: string }>;
  test(merchant: { id: string; key: string }, endpointId: string): Promise<string>;
}

function apiAdmin(server: ServerProcess): Admin {
  return { add: (merchant, url) => addEndpoint(server, merchant, url), test: (merchant, endpointId) => queueTest(server, merchant, endpointId) };
}

/** webhook-id → how many times it arrived. */
function receipts(receiver: WebhookReceiver): Map<string, number> {
  const counts = new Map<string, number>();
  for (const r of receiver.received) counts.set(String(r.headers['webhook-id']), (counts.get(String(r.headers['webhook-id'])) ?? 0) + 1);
  return counts;
}

/**
 * A receiver that takes every request and never answers; counts the requests it holds open per
 * merchant (the first part of the path) and the most it held at once.
 */
/** `ended`: attempts whose connection closed (the sender gave up on it). */
async function startDeadReceiver(): Promise<{ port: number; received: number; ended: number; mostOpen: Map<string, number>; close(): Promise<void> }> {
  const held: ServerResponse[] = [];
  const open = new Map<string, number>();
  const dead = { port: 0, received: 0, ended: 0, mostOpen: new Map<string, number>(), close: async () => {} };
  const server: Server = createServer((req, res) => {
    const merchant = String(req.url).split('/')[1]!;
    dead.received++;
    open.set(merchant, (open.get(merchant) ?? 0) + 1);
    dead.mostOpen.set(merchant, Math.max(dead.mostOpen.get(merchant) ?? 0, open.get(merchant)!));
    req.socket.once('close', () => {
      open.set(merchant, open.get(merchant)! - 1);
      dead.ended++;
    });
    req.resume();
    held.push(res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return Object.assign(dead, {
    port: (server.address() as { port: number }).port,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  });
}

/** An endpoint's deliveries as the merchant's API lists them (docs/webhooks.md#deliveries). */
async function deliveriesOf(server: ServerProcess, merchant: { id: string; key: string }, endpointId: string): Promise<{ event_id: string; attempts: number; state: string; last_error: string | null }[]> {
  const response = await fetch(`${server.url}/merchant/webhooks/${endpointId}/deliveries?limit=100`, { headers: auth(merchant) });
  const text = await response.text();
  expect(response.status, text).toBe(200);
  return JSON.parse(text).data;
}

async function healthz(server: ServerProcess): Promise<{ in_flight: number }> {
  return (await (await fetch(`${server.url}/healthz`)).json()).details.webhooks;
}

describe.skipIf(!namespaces)('a merchant whose DNS never answers', () => {
  let dns: TestDnsServer;
  const servers: ServerProcess[] = [];
  const receivers: WebhookReceiver[] = [];
  beforeAll(async () => {
    dns = await startDnsServer();
  });
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop()));
    await Promise.all(receivers.splice(0).map((r) => r.close()));
  });
  afterAll(async () => {
    await dns?.close();
  });

  /**
   * A's ten endpoints' names answer (TTL 0) while they are added, then never; each gets four test
   * events (40: every slot A may have, and every lookup thread). B's endpoint, a name that answers,
   * gets one. Returns when B has it; then A's names answer again and every event arrives once.
   */
  async function slowDnsScenario(server: ServerProcess, tag: string, meanwhile?: () => Promise<void>, admin: Admin = apiAdmin(server)): Promise<void> {
    const atA = await startWebhookReceiver();
    const atB = await startWebhookReceiver();
    receivers.push(atA, atB);
    const names = Array.from({ length: 10 }, (_, i) => `hook-${i}.${tag}.slow.test`);
    for (const name of [...names, `hooks.${tag}.b.test`]) dns.answers.set(name, { a: ['127.0.0.1'], ttl: 0 });
    const endpointsOfA = [];
    for (const name of names) {
      const endpoint = await admin.add(A, `http://${name}:${atA.port}/hook`);
      atA.secrets.push(endpoint.secret);
      endpointsOfA.push(endpoint);
    }
    const endpointOfB = await admin.add(B, `http://hooks.${tag}.b.test:${atB.port}/hook`);
    atB.secrets.push(endpointOfB.secret);

    const hanging = new Set(names);
    const hangBefore = dns.hang;
    dns.hang = (name) => hanging.has(name) || hangBefore(name);
    try {
      const idsOfA: string[] = [];
      for (let round = 0; round < 4; round++) idsOfA.push(...(await Promise.all(endpointsOfA.map((e) => admin.test(A, e.id)))));
      // A's attempts are under way (waiting on DNS) before B's event is queued.
      await vi.waitFor(() => expect(names.some((name) => dns.queries.has(`${name}/A`))).toBe(true), { timeout: 10_000, interval: 50 });
      const queuedAt = performance.now();
      const idOfB = await admin.test(B, endpointOfB.id);
      await meanwhile?.();
      // Behind A's hung lookups, B's delivery never came in 20 s (3920f53, Node and Bun): arriving at all while
      // they hang is the promise. How soon is a figure (the goal was 5 s), printed rather than
      // asserted: on a loaded machine a process can wait longer than that for the CPU alone.
      await vi.waitFor(() => expect(atB.received.map((r) => r.headers['webhook-id'])).toContain(idOfB), { timeout: 20_000, interval: 20 });
      console.log(`[dns] ${tag}: B's delivery ${Math.round(performance.now() - queuedAt)} ms after it was queued, while A's names hang`);

      // A's names answer again: each of its 40 events arrives, and once.
      hanging.clear();
      await vi.waitFor(() => expect(new Set(receipts(atA).keys())).toEqual(new Set(idsOfA)), { timeout: 30_000, interval: 100 });
      await vi.waitFor(async () => expect((await healthz(server)).in_flight).toBe(0), { timeout: 20_000, interval: 100 });
      // Once, unless an attempt ended without its answer (WEBHOOK_TIMEOUT ran out, on a loaded machine,
      // after the receiver had the request): then the retry sends it again, as docs/webhooks.md says.
      // What a live instance never does is send one without recording the attempt: no event may
      // arrive more often than its delivery counts attempts, and only after a failed one.
      const twice = [...receipts(atA)].filter(([, n]) => n !== 1);
      if (twice.length > 0) {
        const deliveries = (await Promise.all(endpointsOfA.map((e) => deliveriesOf(server, A, e.id)))).flat();
        for (const [eventId, n] of twice) {
          const delivery = deliveries.find((d) => d.event_id === eventId);
          const attempts = server.output().split('\n').filter((line) => line.includes(eventId) && line.includes('webhook_attempt'));
          console.log(`[dns] ${tag}: ${eventId} arrived ${n} times; its delivery: ${JSON.stringify(delivery)}; its attempts:\n${attempts.join('\n')}`);
          expect(delivery?.attempts, `${eventId} arrived ${n} times`).toBeGreaterThanOrEqual(n);
          expect(attempts.filter((line) => /"outcome":"(retry|failed)"/.test(line)).length, `${eventId} arrived ${n} times`).toBeGreaterThanOrEqual(n - 1);
        }
      }
      expect([...receipts(atB).values()]).toEqual([1]);
      expect(atA.unverified).toEqual([]);
      // The slow names were attempts that failed on DNS, not refused endpoints.
      expect(server.output()).toMatch(/"merchant_id":"slow-dns"[^\n]*"error":"dns_timeout"/);
    } finally {
      dns.hang = hangBefore;
    }
  }

  for (const runtime of RUNTIMES) {
    it(`${runtime}, memory storage: another merchant's delivery while A's DNS hangs, each event once`, async () => {
      const seed = writeSeed({ merchants: MERCHANTS, users: [] });
      try {
        const server = await startServer(runtime, CLI[runtime], { SEED_FILE: seed.path, ...LIFTED }, ['serve'], dns.wrap);
        servers.push(server);
        await slowDnsScenario(server, `mem-${runtime}`);
      } finally {
        seed.remove();
      }
    }, 120_000);
  }

  describe.skipIf(!mysql)('on MySQL, DATABASE_URL naming a host', () => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await createTestDatabase();
      await importSeed(database.db, database.masterKey, { merchants: MERCHANTS, users: Array.from({ length: 30 }, (_, i) => seedUser(B.id, `u${i}`, i)) });
    });
    afterAll(async () => {
      await database?.drop();
    });

    it('node: the outbox dispatcher sends B while A\'s DNS hangs, each event once; the users endpoints keep answering', async () => {
      const url = new URL(database.url);
      // A name (from /etc/hosts), so that each new connection of the pool is looked up as the driver does;
      // a pool of 40 (a merchant may use 20), so that the reads below open new connections.
      url.hostname = 'localhost';
      url.searchParams.set('connectionLimit', '40');
      const server = await startServer('node', CLI.node, { ...CLEAN_ENV, DATABASE_URL: url.toString(), MASTER_KEY: database.masterKeyText, ...LIFTED }, ['serve'], dns.wrap);
      servers.push(server);
      // Endpoints and events written beside the server (as `webhook add` would): its pool holds only the connections it opened at start.
      const beside: Admin = {
        add: (merchant, endpointUrl) => addWebhookEndpoint(database.db, database.masterKey, merchant.id, endpointUrl, ['user.shared']),
        test: (merchant, endpointId) => sendWebhookTest(database.db, endpointId, merchant.id),
      };
      await slowDnsScenario(server, 'mysql', async () => {
        // While A's names hang: 20 reads at once (4 listings, the most a merchant runs at once, and 16 users), new connections of the pool among them.
        const paths = [...Array<string>(4).fill('/merchant/users?limit=10'), ...Array.from({ length: 16 }, (_, i) => `/merchant/users/u${i}`)];
        const answers = await Promise.all(paths.map((path) => fetch(`${server.url}${path}`, { headers: auth(B) }).then(async (r) => [r.status, await r.text()] as const)));
        expect(answers.filter(([status]) => status !== 200), 'reads that failed').toEqual([]);
      }, beside);
    }, 120_000);
  });
});

describe('one merchant\'s share of an instance\'s slots', () => {
  const servers: ServerProcess[] = [];
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.stop()));
    await Promise.all(closers.splice(0).map((close) => close()));
  });

  /**
   * A and B each have ten endpoints at receivers that never answer, with five events each (100
   * attempts wanted, 64 slots); then C's event. C's arrives before any of their attempts ended (it
   * waited for a 15 s timeout to free a slot before), and A and B hold at most a quarter of the slots each.
   */
  async function deadReceiversScenario(server: ServerProcess): Promise<void> {
    const dead = await startDeadReceiver();
    closers.push(dead.close);
    const atC = await startWebhookReceiver();
    closers.push(() => atC.close());
    for (const merchant of [A, B]) {
      const endpoints = [];
      for (let i = 0; i < 10; i++) endpoints.push(await addEndpoint(server, merchant, `http://127.0.0.1:${dead.port}/${merchant.id}/${i}`));
      // Five events per endpoint: 50 attempts wanted per merchant, 100 in all for 64 slots.
      for (let round = 0; round < 5; round++) await Promise.all(endpoints.map((e) => queueTest(server, merchant, e.id)));
    }
    // A and B hold what they may (16 each: a quarter of 64), and their attempts reached the receiver.
    await vi.waitFor(() => expect(dead.received).toBeGreaterThanOrEqual(32), { timeout: 10_000, interval: 50 });
    const endpointOfC = await addEndpoint(server, C, atC.url);
    atC.secrets.push(endpointOfC.secret);
    const queuedAt = performance.now();
    const idOfC = await queueTest(server, C, endpointOfC.id);
    await vi.waitFor(() => expect(atC.received.map((r) => r.headers['webhook-id'])).toContain(idOfC), { timeout: 30_000, interval: 20 });
    // Before, C waited for one of A's or B's attempts to time out (15 s) and free a slot: here none had ended when C's
    // arrived. How soon is a figure (the goal was 5 s), printed rather than asserted (a loaded machine delays any process).
    expect(dead.ended, "attempts of A and B that had ended when C's delivery arrived").toBe(0);
    console.log(`[dead receivers] C's delivery ${Math.round(performance.now() - queuedAt)} ms after it was queued`);
    // Both merchants at their share, never more: 16 each of the 64, the rest free.
    expect(Object.fromEntries(dead.mostOpen)).toEqual({ [A.id]: 16, [B.id]: 16 });
    expect(atC.received).toHaveLength(1);
  }

  it('memory storage (node serve)', async () => {
    const seed = writeSeed({ merchants: MERCHANTS, users: [] });
    try {
      const server = await startServer('node', CLI.node, { SEED_FILE: seed.path, WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true' }, ['serve']);
      servers.push(server);
      await deadReceiversScenario(server);
    } finally {
      seed.remove();
    }
  }, 120_000);

  describe.skipIf(!mysql)('MySQL', () => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await createTestDatabase();
      await importSeed(database.db, database.masterKey, { merchants: MERCHANTS, users: [] });
    });
    afterAll(async () => {
      await database?.drop();
    });

    it('node serve, the outbox dispatcher', async () => {
      const server = await startServer('node', CLI.node, { ...CLEAN_ENV, DATABASE_URL: database.url, MASTER_KEY: database.masterKeyText, WEBHOOK_ALLOW_PRIVATE: 'true', WEBHOOK_ALLOW_HTTP: 'true' }, ['serve']);
      servers.push(server);
      await deadReceiversScenario(server);
    }, 120_000);
  });
});

describe.skipIf(!namespaces)('the resolver on every runtime', () => {
  let dns: TestDnsServer;
  beforeAll(async () => {
    dns = await startDnsServer({
      answers: { 'public.resolver.test': { a: ['93.184.216.34'], aaaa: ['2606:2800::1'], ttl: 300 }, 'private.resolver.test': { a: ['93.184.216.34', '10.0.0.1'], ttl: 300 }, 'v6.resolver.test': { aaaa: ['::ffff:169.254.169.254'], ttl: 300 } },
      hang: (name) => name.startsWith('hang-'),
    });
  });
  afterAll(async () => {
    await dns?.close();
  });

  const fixture: Record<Runtime, string[]> = {
    node: [process.execPath, '--import', 'tsx', 'test/fixtures/name-resolver.ts'],
    bun: [`${ROOT}node_modules/.bin/bun`, 'test/fixtures/name-resolver.ts'],
    deno: [`${ROOT}node_modules/.bin/deno`, 'run', '--allow-net', '--allow-read', '--allow-env', '--allow-sys', '--unstable-sloppy-imports', 'test/fixtures/name-resolver.ts'],
  };
  for (const runtime of RUNTIMES) {
    it(`${runtime}: answers from DNS within its bound, cached for the TTL, the guard on every address, the thread pool free`, async () => {
      dns.queries.clear();
      const [command, ...args] = fixture[runtime];
      const { code, output } = await runProcess(...dns.wrap(command!, args), { NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1' });
      expect(code, output).toBe(0);
      const result = JSON.parse(output.trim().split('\n').at(-1)!);
      expect(result.public).toEqual([{ address: '93.184.216.34', family: 4 }, { address: '2606:2800::1', family: 6 }]);
      // Asked once for both resolutions: the second came from the cache.
      expect(dns.queries.get('public.resolver.test/A')).toBe(1);
      expect(result.localhost).toEqual([{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }]);
      expect(result.missing).toBe('not_found');
      expect(result.hanging).toBe('timeout');
      expect(result.hangingMs).toBeLessThan(3000);
      // Ten names that never answer hold no thread: a file read and a lookup in /etc/hosts go on meanwhile.
      expect(result.poolFree).toBe(true);
      expect(result.refused).toEqual({ private: 'refused', v6: 'refused', localhost: 'refused', missing: 'refused', hanging: 'dns_timeout' });
    }, 60_000);
  }
});
