/**
 * A whole Galera cluster crashing (docs/mysql.md#what-a-fault-costs): `serve` on each of three
 * nodes run with the recommended `innodb_flush_log_at_trx_commit=1`, signed URLs accepted through
 * all three, then every node SIGKILLed at once. The cluster is started again as an operator does
 * (each node's position read with `--wsrep-recover`, grastate.dat saying seqno -1 after a crash;
 * the most advanced node bootstrapped, the others joining it), and every URL that got a 200 is sent
 * again, each to another node's server than the one that accepted it: none is accepted twice. The
 * test says how long the servers refused service. Jepsen lost commits this way with setting 2 and
 * machines failing (MDEV-38977): docs/mysql.md#durability.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMysqlKysely, generateMasterKey, importSeed, migrateToLatest, parseMasterKey } from '../../../src/storage/mysql/index.js';
import { galeraAvailable, startGaleraCluster, type GaleraCluster } from '../../support/galera.js';
import { CLI, startServer, type ServerProcess } from '../../support/processes.js';
import { MERCHANTS } from '../../support/seeds.js';
import { firstAnswer, replayAll, startSignedLoad } from '../../support/signed-load.js';

const PUBLIC_URL = 'http://merchant-api.test';
const { main } = MERCHANTS;

describe.skipIf(!galeraAvailable())('serve on a Galera cluster whose three nodes are SIGKILLed at once', () => {
  let cluster: GaleraCluster;
  const servers: ServerProcess[] = [];

  beforeAll(async () => {
    cluster = await startGaleraCluster();
    const name = `galera_crash_${randomBytes(4).toString('hex')}`;
    await cluster.createDatabase(name);
    const masterKeyText = generateMasterKey();
    const db = createMysqlKysely(cluster.nodes[0].url(name));
    try {
      await migrateToLatest(db);
      await importSeed(db, parseMasterKey(masterKeyText), { merchants: [{ id: main.id, status: 'active', keys: [...main.keys] }], users: [] });
    } finally {
      await db.destroy();
    }
    for (const node of cluster.nodes) {
      // No throttle: the replays are failed authentications, and a block would hide what the salts say.
      const env = { DATABASE_URL: node.url(name), MASTER_KEY: masterKeyText, PUBLIC_URL, ACCESS_LOG: 'false', FAIR_SHARE: 'false', THROTTLE_AUTH: 'false', STORAGE_TIMEOUT: '2000' };
      servers.push(await startServer('node', CLI.node, env, ['serve']));
    }
  }, 180_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await cluster?.stop();
  }, 60_000);

  it('starts without a durability warning on the recommended settings', () => {
    for (const server of servers) expect(server.output()).not.toMatch(/mysql_durability/);
  });

  it('accepts no URL twice after every node is killed within a second and the cluster is bootstrapped from its most advanced node', async () => {
    const load = startSignedLoad(() => servers.map((s) => s.url), { merchantId: main.id, key: main.keys[0], publicUrl: PUBLIC_URL, loops: 6 });
    try {
      await vi.waitFor(() => expect(load.accepted.length).toBeGreaterThanOrEqual(300), { timeout: 90_000, interval: 100 });
      const killedAt = performance.now();
      await Promise.all(cluster.nodes.map((node) => node.kill()));
      const killSpan = performance.now() - killedAt;
      expect(killSpan).toBeLessThan(1000);
      await vi.waitFor(() => expect(firstAnswer(load.answers, killedAt, 503)).toBeDefined(), { timeout: 20_000, interval: 50 });
      const refusedAt = firstAnswer(load.answers, killedAt, 503)!.at;
      const acceptedBefore = load.accepted.length;
      const { positions, bootstrapped } = await cluster.recoverAfterCrash();
      const recoveredAt = performance.now();
      // Every server answers again once its node has rejoined.
      for (const index of [0, 1, 2]) await vi.waitFor(() => expect(firstAnswer(load.answers, refusedAt, 200, index)).toBeDefined(), { timeout: 60_000, interval: 100 });
      await load.stop();
      const back = [0, 1, 2].map((index) => firstAnswer(load.answers, refusedAt, 200, index)!.at);
      // Each URL to the server of another node than the one that accepted it (the load went round the three).
      const replays = await replayAll(load.accepted, (i) => servers[(i + 1) % servers.length]!.url);
      const twice = replays.filter((status) => status === 200).length;
      console.log(
        `galera crash: ${acceptedBefore} URL(s) accepted before the kill (all 3 nodes killed within ${killSpan.toFixed(0)} ms); ` +
          `recovered positions ${positions.map((p) => `node${p.index}:${p.seqno}`).join(', ')}, node ${bootstrapped} bootstrapped; ` +
          `the cluster was Synced again ${((recoveredAt - killedAt) / 1000).toFixed(1)} s after the kill; service refused ` +
          `${((Math.min(...back) - killedAt) / 1000).toFixed(1)} s on the first server back, ${((Math.max(...back) - killedAt) / 1000).toFixed(1)} s on the last; ` +
          `${twice} of ${load.accepted.length} replays accepted again`,
      );
      expect(replays.filter((status) => status !== 400)).toEqual([]);
    } finally {
      await load.stop();
    }
  }, 300_000);
});
