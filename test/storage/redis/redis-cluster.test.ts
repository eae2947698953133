/**
 * The Redis state on a real three-master Redis Cluster (docs/scaling.md#redis-cluster):
 * every script's keys share a hash tag, so each runs on one node (no
 * CROSSSLOT); salts' groups and addresses spread over the masters; salts are accepted once and blocks
 * propagate between two instances, each with its own cluster connection; the
 * eviction policy is checked on every master; and `merchant-api serve` on
 * Node, Bun and Deno takes the cluster from REDIS_URL and REDIS_CLUSTER.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMerchantApi } from '../../../src/api.js';
import { silentLogger } from '../../../src/observe/logger.js';
import { signUrl } from '../../../src/signing/index.js';
import { MemoryStorage } from '../../../src/storage/memory/index.js';
import { createRedisConnection, withRedisState, type RedisConnection } from '../../../src/storage/redis/index.js';
import { SALT_GROUPS } from '../../../src/storage/redis/keys.js';
import { basic, call, NOW_MS, ORIGIN, signedUrl } from '../../support/api.js';
import { redisAvailable, startRedisCluster, type RedisCluster } from '../../support/redis.js';
import { send } from '../../support/http-client.js';
import { CLI, RUNTIMES, startServer, type ServerProcess } from '../../support/processes.js';
import { largeSeed, MERCHANTS as SEEDED, writeSeed, type Seed } from '../../support/seeds.js';

const available = redisAvailable();
const MERCHANTS = Array.from({ length: 12 }, (_, i) => ({ id: i === 11 ? 'brace{d}-id' : `shop-${i}`, status: 'active' as const, keys: [`key-${i}`] }));

describe.skipIf(!available)('the Redis state on a Redis Cluster', () => {
  let cluster: RedisCluster;
  const connections: RedisConnection[] = [];

  beforeAll(async () => {
    cluster = await startRedisCluster();
  });
  afterAll(async () => {
    await Promise.all(connections.map((c) => c.close()));
    await cluster?.stop();
  });

  async function instance() {
    const connection = createRedisConnection(cluster.urls, { cluster: true, connectTimeout: 2000, commandTimeout: 2000 });
    connections.push(connection);
    const seed: Seed = { merchants: MERCHANTS, users: [] };
    const storage = withRedisState(new MemoryStorage(seed), connection);
    const api = createMerchantApi({ storage, now: () => NOW_MS, logger: silentLogger, accessLog: false, tracing: false });
    await vi.waitFor(() => connection.ping(), { timeout: 5000 });
    return { api, connection };
  }

  const keysOn = (node: RedisCluster['nodes'][number]) => node.cli('--scan').trim().split('\n').filter(Boolean);

  it('accepts each signed URL once across two instances, each salt in its group marker\'s slot and the salts spread over the masters', async () => {
    const [a, b] = [await instance(), await instance()];
    for (const [i, merchant] of MERCHANTS.entries()) {
      for (let n = 0; n < 4; n++) {
        const url = signedUrl({ cp: merchant.id, key: `key-${i}` });
        const answers = await Promise.all(Array.from({ length: 6 }, (_, k) => call(k % 2 ? a.api : b.api, url)));
        expect(answers.filter((answer) => answer.body?.is_valid === true), merchant.id).toHaveLength(1);
      }
    }
    const perNode = cluster.nodes.map(keysOn);
    const slot = (key: string) => cluster.nodes[0]!.cli('cluster', 'keyslot', key).trim();
    const isMarker = (key: string) => key.endsWith('life') || key.endsWith('boot') || key.endsWith('seq');
    const salts = perNode.flat().filter((key) => !isMarker(key));
    expect(salts).toHaveLength(MERCHANTS.length * 4);
    for (const [node, keys] of perNode.entries()) {
      for (const key of keys.filter((k) => !isMarker(k))) {
        // A salt sits on the node of its group's marker, in the same slot.
        const marker = key.replace(/^(merchant-api:\{[0-9a-f]{3}\}).*$/, '$1life');
        expect(perNode[node]).toContain(marker);
        expect(slot(key)).toBe(slot(marker));
      }
    }
    // Every group's marker was written, spread over the three masters; the salts over every master.
    expect(perNode.flat().filter((k) => k.endsWith('life'))).toHaveLength(SALT_GROUPS);
    expect(perNode.every((keys) => keys.some((k) => k.endsWith('life')))).toBe(true);
    expect(perNode.filter((keys) => keys.some((k) => !isMarker(k))).length).toBe(3);
    // Each new salt raised its group's sequence, in the same slot.
    const sequences = perNode.flat().filter((k) => k.endsWith('seq'));
    expect(sequences.length).toBeGreaterThan(0);
    for (const key of sequences) expect(slot(key)).toBe(slot(key.replace(/seq$/, 'life')));
    // Each group's boot key holds the run_id of the master that holds it, read there by the script itself.
    for (const [node, keys] of perNode.entries()) {
      const boot = keys.find((k) => k.endsWith('boot'))!;
      expect(cluster.nodes[node]!.cli('get', boot).trim()).toBe(/run_id:(\w+)/.exec(cluster.nodes[node]!.cli('info', 'server'))![1]);
    }
  });

  it('propagates a block made through one node to an instance subscribed on the cluster', async () => {
    const [a, b] = [await instance(), await instance()];
    const address = '203.0.113.50';
    const fetchAs = (api: typeof a.api, headers: Record<string, string>) => api.fetch(new Request(`${ORIGIN}/merchant/users`, { headers }), { clientAddress: address });
    for (let i = 0; i < 10; i++) expect((await fetchAs(a.api, basic('shop-1', `wrong-${i}`))).status).toBe(401);
    await vi.waitFor(async () => expect((await fetchAs(b.api, basic('shop-1', 'key-1'))).status).toBe(429), { timeout: 3000, interval: 20 });
    expect((await fetchAs(b.api, basic('shop-2', 'key-2'))).status).toBe(200);
    // The address's counter and its pair share the address's slot.
    const holder = cluster.nodes.find((node) => keysOn(node).includes(`merchant-api:{a:${address}}:address`));
    expect(holder && keysOn(holder)).toContain(`merchant-api:{a:${address}}:pair:shop-1`);
  });

  it('refuses salts when any one master could evict them', async () => {
    const a = await instance();
    const last = cluster.nodes[2]!;
    last.cli('config', 'set', 'maxmemory-policy', 'allkeys-lru');
    try {
      expect((await call(a.api, signedUrl({ cp: 'shop-0', key: 'key-0' }))).status).toBe(503);
    } finally {
      last.cli('config', 'set', 'maxmemory-policy', 'noeviction');
    }
  });

  it('serves with REDIS_CLUSTER=true and the nodes in REDIS_URL on Node, Bun and Deno, accepting a signed URL once among them', async () => {
    const seed = writeSeed(largeSeed(3));
    const servers: ServerProcess[] = [];
    try {
      for (const runtime of RUNTIMES) {
        // Without the throttle: the replays are failed authentications that would block the pair within three rounds.
        servers.push(await startServer(runtime, CLI[runtime], { SEED_FILE: seed.path, REDIS_URL: cluster.urls.join(','), REDIS_CLUSTER: 'true', PUBLIC_URL: 'http://merchant-api.test', ACCESS_LOG: 'false', THROTTLE_AUTH: 'false' }, ['serve']));
      }
      for (const server of servers) expect(server.output()).toMatch(/salts and throttle on Redis Cluster\)/);
      for (let round = 0; round < 3; round++) {
        const signed = new URL(signUrl(SEEDED.main.keys[0], 'http://merchant-api.test/validatesignature', { cp: SEEDED.main.id }));
        const answers = await Promise.all(Array.from({ length: 9 }, (_, i) => send(`${servers[i % 3]!.url}${signed.pathname}${signed.search}`)));
        expect(answers.filter((answer) => answer.body === '{"status":"ok","is_valid":true}')).toHaveLength(1);
        expect(answers.filter((answer) => answer.status === 400)).toHaveLength(8);
      }
      for (const server of servers) expect((await send(`${server.url}/readyz`)).status).toBe(200);
    } finally {
      await Promise.all(servers.map((server) => server.stop()));
      seed.remove();
    }
  });
});
