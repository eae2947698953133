/**
 * `merchant-api serve` on a real 3-node Galera cluster (docs/mysql.md#galera-cluster): one server
 * per node, each with DATABASE_URL on its own node. A signed URL accepted on one is refused on the
 * others as a replay; 10 wrong keys at one block the pair at the others too; a database with a
 * MyISAM table is refused at start, naming it; a node flushing its log once a second is warned
 * about, one writing it once a second refused (docs/mysql.md#durability); a node killed with
 * SIGKILL leaves the servers on the other nodes answering, while the server on the dead node answers
 * 503 with Retry-After, and 200 again once its node has rejoined.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { signUrl } from '../../../src/signing/index.js';
import { createMysqlKysely, generateMasterKey, importSeed, migrateToLatest, parseMasterKey } from '../../../src/storage/mysql/index.js';
import { basic } from '../../support/basic-auth.js';
import { send } from '../../support/http-client.js';
import { galeraAvailable, startGaleraCluster, type GaleraCluster } from '../../support/galera.js';
import { CLEAN_ENV, CLI, runProcess, startServer, type ServerProcess } from '../../support/processes.js';
import { largeSeed, MERCHANTS } from '../../support/seeds.js';
import { within } from '../../support/within.js';

const PUBLIC_URL = 'http://merchant-api.test';
const { main, other } = MERCHANTS;

describe.skipIf(!galeraAvailable())('serve on a Galera cluster, one server per node', () => {
  let cluster: GaleraCluster;
  const servers: ServerProcess[] = [];
  const envs: Record<string, string>[] = [];

  beforeAll(async () => {
    cluster = await startGaleraCluster();
    const name = `galera_serve_${randomBytes(4).toString('hex')}`;
    await cluster.createDatabase(name);
    const masterKeyText = generateMasterKey();
    const db = createMysqlKysely(cluster.nodes[0].url(name));
    try {
      await migrateToLatest(db);
      const merchants = [main, other].map(({ id, keys }) => ({ id, status: 'active' as const, keys: [...keys] }));
      await importSeed(db, parseMasterKey(masterKeyText), { merchants, users: largeSeed(3).users });
    } finally {
      await db.destroy();
    }
    for (const node of cluster.nodes) {
      const env = { DATABASE_URL: node.url(name), MASTER_KEY: masterKeyText, PUBLIC_URL, ACCESS_LOG: 'false', FAIR_SHARE: 'false', STORAGE_TIMEOUT: '1000' };
      envs.push(env);
      servers.push(await startServer('node', CLI.node, env, ['serve']));
    }
  }, 180_000);
  afterAll(async () => {
    await Promise.all(servers.map((server) => server.stop()));
    await cluster?.stop();
  }, 60_000);

  const signed = (server: ServerProcess) => {
    const url = new URL(signUrl(main.keys[0], `${PUBLIC_URL}/validatesignature`, { cp: main.id }));
    return `${server.url}${url.pathname}${url.search}`;
  };
  const onServer = (url: string, server: ServerProcess) => url.replace(/^http:\/\/[^/]+/, server.url);

  it('accepts a signed URL on one node and refuses it on the two others as a replay', async () => {
    for (const server of servers) {
      const url = signed(server);
      expect((await send(url)).body).toBe('{"status":"ok","is_valid":true}');
      for (const peer of servers.filter((s) => s !== server)) {
        const again = await send(onServer(url, peer));
        expect(again.status).toBe(400);
        expect(again.body).toMatch(/This salt was already used/);
      }
    }
    // The replays were failed authentications: a whole success ends the count they made.
    expect((await send(signed(servers[0]!))).status).toBe(200);
  }, 60_000);

  it('blocks a pair on every node after 10 wrong keys at one', async () => {
    const [a, ...others] = servers;
    for (let i = 0; i < 10; i++) expect((await send(`${a!.url}/merchant/users?limit=1`, { headers: basic(other.id, `wrong-${i}`) })).status).toBe(401);
    for (const b of others) {
      await vi.waitFor(async () => expect((await send(`${b.url}/merchant/users?limit=1`, { headers: basic(other.id, other.keys[0]) })).status).toBe(429), { timeout: 10_000, interval: 100 });
    }
  }, 60_000);

  it('refuses to start on a node whose database holds a table Galera does not replicate, naming it (exit 2)', async () => {
    const name = `galera_myisam_${randomBytes(4).toString('hex')}`;
    await cluster.createDatabase(name);
    await cluster.nodes[1].query(`CREATE TABLE \`${name}\`.stray (id INT PRIMARY KEY) ENGINE=MyISAM`);
    const { code, output } = await runProcess(process.execPath, [CLI.node, 'serve'], { ...CLEAN_ENV, DATABASE_URL: cluster.nodes[1].url(name), MASTER_KEY: generateMasterKey() });
    expect(output).toMatch(/This Galera node lacks what the storage needs: table stray uses the MyISAM engine, which Galera does not replicate \(ALTER TABLE stray ENGINE=InnoDB\)\. Refusing to start\./);
    expect(code).toBe(2);
  }, 60_000);

  it('warns at start, naming the loss on a cluster, when a node flushes its log once a second; refuses a node that writes it once a second', async () => {
    expect(servers[1]!.output()).not.toMatch(/mysql_durability/);
    await cluster.nodes[1].query('SET GLOBAL innodb_flush_log_at_trx_commit = 2');
    try {
      const relaxed = await startServer('node', CLI.node, envs[1]!, ['serve']);
      await relaxed.stop();
      const event = relaxed
        .output()
        .split('\n')
        .find((line) => line.includes('"mysql_durability_relaxed"'));
      expect(JSON.parse(event ?? '{}')).toMatchObject({ level: 'warn', setting: 'innodb_flush_log_at_trx_commit', value: 2 });
      expect(JSON.parse(event!).problem).toMatch(/^innodb_flush_log_at_trx_commit is 2 on this Galera node: .*when every node's machine fails within a second .*\(set innodb_flush_log_at_trx_commit=1 on every node\)$/);
      await cluster.nodes[1].query('SET GLOBAL innodb_flush_log_at_trx_commit = 0');
      const { code, output } = await runProcess(process.execPath, [CLI.node, 'serve'], { ...CLEAN_ENV, ...envs[1]! });
      expect(output).toMatch(/innodb_flush_log_at_trx_commit is 0 on this Galera node: .*every node's server process crashes within a second.*Refusing to start\./);
      expect(code).toBe(2);
    } finally {
      await cluster.nodes[1].query('SET GLOBAL innodb_flush_log_at_trx_commit = 1');
    }
  }, 60_000);

  it('keeps answering on the other nodes when a node is SIGKILLed; the server on the dead node answers 503 with Retry-After, and 200 once it rejoins', async () => {
    const dead = cluster.nodes[2];
    const [first, second, orphan] = servers as [ServerProcess, ServerProcess, ServerProcess];
    const killedAt = performance.now();
    await dead.kill();
    // The survivors keep the quorum (2 of 3); their commits may wait for the dead node's eviction (a few seconds), not longer.
    for (const server of [first, second]) {
      await vi.waitFor(async () => expect((await send(signed(server))).body).toBe('{"status":"ok","is_valid":true}'), { timeout: 20_000, interval: 250 });
    }
    const survivorsAt = performance.now();
    const refused = await within(send(signed(orphan)), 10_000, 'a signed request on the server of the dead node');
    expect(refused.status).toBe(503);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    // The survivors go on answering every request, signed and Basic.
    for (const server of [first, second]) {
      for (let i = 0; i < 5; i++) expect((await send(signed(server))).status).toBe(200);
      expect((await send(`${server.url}/merchant/users?limit=1`, { headers: basic(main.id, main.keys[0]) })).status).toBe(200);
    }
    const restartedAt = performance.now();
    await dead.restart();
    await vi.waitFor(async () => expect((await send(signed(orphan))).body).toBe('{"status":"ok","is_valid":true}'), { timeout: 30_000, interval: 250 });
    console.log(
      `galera node killed: the survivors' servers answered 200 ${((survivorsAt - killedAt) / 1000).toFixed(1)} s after the kill; ` +
        `the dead node's server 200 again ${((performance.now() - restartedAt) / 1000).toFixed(1)} s after its node was started again`,
    );
  }, 180_000);
});
