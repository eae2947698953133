/**
 * A Galera node cut off by a network partition (docs/mysql.md#what-a-fault-costs). Node 3 runs in
 * a network namespace of the suite's own (test/support/galera.ts `isolatable`): its Galera traffic
 * crosses one veth pair, which the test takes down, and its SQL another, so that its server still
 * reaches it as a server on the same machine would. (A TCP proxy in front of the replication port
 * would not do: the nodes tell each other their listening addresses and connect there directly.)
 * While node 3 is cut off, a key is revoked through node 1: the servers of nodes 1 and 2 refuse it
 * (401) once their cache time has passed and go on accepting the merchant's other key; the server
 * of node 3, whose node has lost the primary component, refuses service (503 with Retry-After)
 * rather than accept the revoked key. Once the link is back, node 3 catches up and its server
 * refuses the revoked key too. The test says how long each side refused service.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { signUrl } from '../../../src/signing/index.js';
import { createMysqlKysely, generateMasterKey, importSeed, keyFingerprint, listMerchantKeys, migrateToLatest, parseMasterKey, revokeMerchantKey } from '../../../src/storage/mysql/index.js';
import { basic } from '../../support/basic-auth.js';
import { galeraAvailable, startGaleraCluster, type GaleraCluster } from '../../support/galera.js';
import { send } from '../../support/http-client.js';
import { CLI, startServer, type ServerProcess } from '../../support/processes.js';
import { MERCHANTS } from '../../support/seeds.js';
import { sleep } from '../../support/sleep.js';

const PUBLIC_URL = 'http://merchant-api.test';
const { main } = MERCHANTS;
const [revoked, kept] = main.keys;
const KEY_CACHE_TTL_SECONDS = 1;

describe.skipIf(!galeraAvailable())('serve on a Galera cluster with a node cut off by a partition', () => {
  let cluster: GaleraCluster;
  let name: string;
  let masterKeyText: string;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    cluster = await startGaleraCluster({ isolatable: true });
    name = `galera_partition_${randomBytes(4).toString('hex')}`;
    await cluster.createDatabase(name);
    masterKeyText = generateMasterKey();
    const db = createMysqlKysely(cluster.nodes[0].url(name));
    try {
      await migrateToLatest(db);
      await importSeed(db, parseMasterKey(masterKeyText), { merchants: [{ id: main.id, status: 'active', keys: [...main.keys] }], users: [] });
    } finally {
      await db.destroy();
    }
    for (const node of cluster.nodes) {
      const env = {
        DATABASE_URL: node.url(name),
        MASTER_KEY: masterKeyText,
        PUBLIC_URL,
        ACCESS_LOG: 'false',
        FAIR_SHARE: 'false',
        THROTTLE_AUTH: 'false',
        STORAGE_TIMEOUT: '2000',
        KEY_CACHE_TTL: String(KEY_CACHE_TTL_SECONDS),
      };
      servers.push(await startServer('node', CLI.node, env, ['serve']));
    }
  }, 180_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await cluster?.stop();
  }, 60_000);

  /** An answer, or status 0 when the server could not be reached. */
  const answer = (url: string, headers?: Record<string, string>) => send(url, headers ? { headers } : {}).catch(() => ({ status: 0, headers: {} as Record<string, string | undefined>, body: '' }));
  const signed = (server: ServerProcess, key: string) => {
    const url = new URL(signUrl(key, `${PUBLIC_URL}/validatesignature`, { cp: main.id }));
    return answer(`${server.url}${url.pathname}${url.search}`);
  };
  const listed = (server: ServerProcess, key: string) => answer(`${server.url}/merchant/users?limit=1`, basic(main.id, key));
  /** A signed URL made with a revoked key: no active key of the merchant produces its hmac. */
  const signatureRefused = (response: { status: number; body: string }) => response.status === 400 && response.body.includes('Signature does not match.');

  it('refuses service on the cut-off node (503) rather than accept a key revoked on the others, and refuses the key there once healed', async () => {
    const [first, second, cutOff] = servers as [ServerProcess, ServerProcess, ServerProcess];
    // Every server holds both keys in its cache.
    for (const server of servers) for (const key of [revoked, kept]) expect((await signed(server, key)).status).toBe(200);

    // Every answer of the cut-off node's server, with the key it was sent with, from the partition on.
    const cutOffAnswers: { at: number; key: string; kind: string; status: number; retryAfter: string | undefined }[] = [];
    let watching = true;
    const watch = (async () => {
      while (watching) {
        for (const key of [revoked, kept]) {
          for (const [kind, call] of [
            ['signed', signed],
            ['basic', listed],
          ] as const) {
            const response = await call(cutOff, key);
            cutOffAnswers.push({ at: performance.now(), key, kind, status: response.status, retryAfter: response.headers['retry-after'] as string | undefined });
          }
        }
        await sleep(100);
      }
    })();

    // The majority's answers to the kept key from the partition on: when each was sent, when answered.
    const majorityAnswers: { sent: number; at: number; status: number }[] = [];
    const watchMajority = (async () => {
      while (watching) {
        const sent = performance.now();
        const { status } = await signed(first, kept);
        majorityAnswers.push({ sent, at: performance.now(), status });
        await sleep(100);
      }
    })();

    const partitionedAt = performance.now();
    let revokedAt = Number.NaN;
    let settled = Number.NaN;
    cluster.partition();
    try {
      // The majority's commits wait until it has evicted node 3 (evs.suspect_timeout, 3 s here): the revocation with them.
      const db = createMysqlKysely(cluster.nodes[0].url(name));
      try {
        const keys = await listMerchantKeys(db, parseMasterKey(masterKeyText), main.id);
        const keyId = keys.find((k) => k.fingerprint === keyFingerprint(revoked))!.key_id;
        expect(await revokeMerchantKey(db, main.id, keyId)).toBe(true);
        revokedAt = performance.now();
      } finally {
        await db.destroy();
      }
      // The majority: the revoked key refused once the cache time has passed, the other accepted.
      for (const server of [first, second]) {
        await vi.waitFor(async () => expect(signatureRefused(await signed(server, revoked))).toBe(true), { timeout: 10_000, interval: 100 });
        expect((await listed(server, revoked)).status).toBe(401);
        expect((await signed(server, kept)).status).toBe(200);
        expect((await listed(server, kept)).status).toBe(200);
      }
      // Node 3 has left the primary component.
      await vi.waitFor(async () => expect((await cluster.nodes[2].query<{ Value: string }>("SHOW STATUS LIKE 'wsrep_cluster_status'"))[0]?.Value).toBe('non-Primary'), { timeout: 20_000, interval: 200 });
      // A few more rounds of the cut-off node's answers after the revocation and the cache time.
      settled = revokedAt + KEY_CACHE_TTL_SECONDS * 1000;
      await vi.waitFor(() => expect(cutOffAnswers.filter((a) => a.at > settled + 2000).length).toBeGreaterThanOrEqual(8), { timeout: 30_000, interval: 100 });
    } finally {
      watching = false;
      await Promise.all([watch, watchMajority]);
    }
    const majority = majorityAnswers.filter((a) => a.at > partitionedAt);
    const longestWait = Math.max(...majority.map((a) => a.at - a.sent));
    const majorityRefused = majority.filter((a) => a.status !== 200);
    expect(majority.at(-1)!.status).toBe(200);

    const afterRevocation = cutOffAnswers.filter((a) => a.at > settled);
    // Never the revoked key accepted; service refused as a whole (503 with Retry-After), the other key too.
    expect(afterRevocation.filter((a) => a.key === revoked && a.status === 200)).toEqual([]);
    const lastRound = afterRevocation.slice(-4);
    expect(lastRound.map((a) => [a.kind, a.key === revoked ? 'revoked' : 'kept', a.status])).toEqual([
      ['signed', 'revoked', 503],
      ['basic', 'revoked', 503],
      ['signed', 'kept', 503],
      ['basic', 'kept', 503],
    ]);
    for (const answer of lastRound) expect(Number(answer.retryAfter)).toBeGreaterThan(0);
    const firstRefusal = cutOffAnswers.find((a) => a.status === 503);

    const healedAt = performance.now();
    cluster.heal();
    await vi.waitFor(async () => expect((await signed(cutOff, kept)).status).toBe(200), { timeout: 60_000, interval: 200 });
    const cutOffBack = performance.now();
    expect(signatureRefused(await signed(cutOff, revoked))).toBe(true);
    expect((await listed(cutOff, revoked)).status).toBe(401);
    console.log(
      `galera partition: on the majority, the revocation committed ${((revokedAt - partitionedAt) / 1000).toFixed(1)} s after the cut, the longest request waited ${(longestWait / 1000).toFixed(1)} s, ` +
        `${majorityRefused.length} of ${majority.length} answers were not 200 (${majorityRefused.map((a) => `${a.status} at ${((a.at - partitionedAt) / 1000).toFixed(1)} s`).join(', ') || 'none'}); the cut-off node's server answered 503 from ${firstRefusal ? ((firstRefusal.at - partitionedAt) / 1000).toFixed(1) : '?'} s after the cut ` +
        `for as long as it lasted (${((healedAt - partitionedAt) / 1000).toFixed(1)} s here) and ${((cutOffBack - healedAt) / 1000).toFixed(1)} s after the link came back; ` +
        `${afterRevocation.filter((a) => a.key === revoked).length} answers to the revoked key after the revocation, none 200`,
    );
  }, 240_000);
});

