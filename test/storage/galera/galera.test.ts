/**
 * The MySQL storage on a real 3-node MariaDB Galera Cluster (docs/mysql.md#galera-cluster), started
 * by test/support/galera.ts: the storage contract with each call on a random node; three `migrate`
 * runs at once on three nodes; the same salt recorded at once on every node (one success, the
 * others "already used", never a 503); throttle failures counted on three nodes at once, none
 * lost; the same users imported through two nodes at once; the import's LOAD DATA path under Galera's interleaved ids;
 * a key added on one node honoured at once on another, even while that node lags; the start-up
 * check naming what a node lacks (dirty reads among them: docs/mysql.md#galera-cluster).
 */
import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { STORAGE_OPERATIONS, type Storage } from '../../../src/storage/contract.js';
import {
  addMerchant,
  createMigrator,
  createMysqlKysely,
  galeraProblems,
  generateMasterKey,
  importSeed,
  listWebhookDeliveries,
  migrateToLatest,
  MysqlStorage,
  parseMasterKey,
  rotateMerchantKey,
  writeConflictCounts,
  type MerchantApiDatabase,
} from '../../../src/storage/mysql/index.js';
import { migrations } from '../../../src/storage/mysql/migrations/migrations.js';
import { toSqlDatetime } from '../../../src/storage/mysql/sql-values.js';
import { recordFailure } from '../../../src/storage/mysql/throttle/throttle-queries.js';
import { storageContract } from '../../suites/storage-contract.js';
import { galeraAvailable, startGaleraCluster, type GaleraCluster } from '../../support/galera.js';
import { user } from '../../support/seeds.js';

/** Every node has applied everything committed anywhere so far: a read with wsrep_sync_wait on each. */
async function caughtUp(cluster: GaleraCluster): Promise<void> {
  for (const node of cluster.nodes) if (node.running) await node.query('SET SESSION wsrep_sync_wait = 1; SELECT 1; SET SESSION wsrep_sync_wait = 0');
}

/** A storage whose every call goes to the storage of a node picked at random. */
function onRandomNodes(storages: readonly Storage[]): Storage {
  const pick = () => storages[Math.floor(Math.random() * storages.length)]!;
  const random = { close: async () => void (await Promise.all(storages.map((storage) => storage.close()))) } as Record<string, unknown>;
  // The request's operations, and the optional one the contract suite calls beside them.
  for (const operation of [...STORAGE_OPERATIONS, 'recordKeyUse'] as const) random[operation] = (...args: unknown[]) => (pick()[operation] as (...a: unknown[]) => unknown)(...args);
  // What a node holds in memory is that node's: the synchronous answer comes from the node that last
  // read the merchant, as a server's own storage answers from its own cache.
  const readBy = new Map<string, Storage>();
  // A merchant's keys changed through one instance: that instance sees the change at once, another
  // within its key cache's time (docs/protocol.md#managing-keys). The merchant is read from the
  // instance that changed its keys last, as a client that made the change asks it again.
  const changedBy = new Map<string, Storage>();
  for (const operation of ['createKey', 'rotateKey', 'revokeKey', 'updateKey'] as const) {
    random[operation] = (first: unknown, ...rest: unknown[]) => {
      const node = pick();
      changedBy.set(typeof first === 'string' ? first : (first as { merchantId: string }).merchantId, node);
      return (node[operation] as (...a: unknown[]) => unknown)(first, ...rest);
    };
  }
  random.getMerchant = (id: string, options?: unknown) => {
    const node = changedBy.get(id) ?? pick();
    readBy.set(id, node);
    return node.getMerchant(id, options as Parameters<Storage['getMerchant']>[1]);
  };
  random.cachedMerchant = (id: string) => (readBy.get(id) ?? pick()).cachedMerchant!(id);
  // The test datasets' changes: each call on a random node too.
  const stores = storages.map((storage) => storage.testChanges!()!);
  const randomStore = Object.fromEntries(
    (['changes', 'record', 'reset'] as const).map((method) => [method, (...args: unknown[]) => (stores[Math.floor(Math.random() * stores.length)]![method] as (...a: unknown[]) => unknown)(...args)]),
  );
  random.testChanges = () => randomStore;
  return random as unknown as Storage;
}

describe.skipIf(!galeraAvailable())('the MySQL storage on a Galera cluster', () => {
  let cluster: GaleraCluster;
  const opened: Kysely<MerchantApiDatabase>[] = [];
  /** A Kysely on `database` through node `index` (0-2), destroyed after the suite. */
  const on = (index: number, database: string, options?: Parameters<typeof createMysqlKysely>[1]) => {
    const db = createMysqlKysely(cluster.nodes[index]!.url(database), options);
    opened.push(db);
    return db;
  };
  const newDatabase = async () => {
    const name = `galera_${randomBytes(4).toString('hex')}`;
    await cluster.createDatabase(name);
    return name;
  };

  beforeAll(async () => {
    cluster = await startGaleraCluster();
  }, 120_000);
  afterAll(async () => {
    await Promise.all(opened.map((db) => db.destroy().catch(() => undefined)));
    await cluster?.stop();
  }, 60_000);

  storageContract('mysql on a Galera cluster, each call on a random node', async (seed, plan) => {
    const name = await newDatabase();
    const writer = on(0, name);
    await migrateToLatest(writer);
    const masterKey = parseMasterKey(generateMasterKey());
    await importSeed(writer, masterKey, seed);
    for (const { merchant_id, shared_user_id, updated_at } of seed.users) {
      if (updated_at !== undefined) await writer.updateTable('user_shares').set({ updated_at: toSqlDatetime(updated_at) }).where('merchant_id', '=', merchant_id).where('shared_user_id', '=', shared_user_id).execute();
    }
    await caughtUp(cluster);
    const storages = [0, 1, 2].map((index) => new MysqlStorage({ db: on(index, name), masterKey, pagePlan: plan }));
    return {
      storage: onRandomNodes(storages),
      add: async (more) => {
        await importSeed(writer, masterKey, more);
        await caughtUp(cluster);
      },
      share: async (from, to) => {
        const row = await writer.selectFrom('user_shares').selectAll().where('merchant_id', '=', from.merchantId).where('shared_user_id', '=', from.sharedUserId).executeTakeFirstOrThrow();
        await writer.insertInto('user_shares').values({ ...row, user_id: String(row.user_id), merchant_id: to.merchantId, shared_user_id: to.sharedUserId }).execute();
        await caughtUp(cluster);
      },
      // Read on a random node once every node holds what the calls wrote.
      listWebhookDeliveries: async (options) => {
        await caughtUp(cluster);
        return listWebhookDeliveries(on(Math.floor(Math.random() * 3), name), options);
      },
    };
  });

  it('applies each migration once when three `migrate` runs start at once on three nodes (the lease row, not GET_LOCK)', async () => {
    const name = await newDatabase();
    const results = await Promise.all([0, 1, 2].map((index) => migrateToLatest(on(index, name))));
    const applied = results.flatMap((result) => (result.results ?? []).map((r) => r.migrationName));
    expect(applied.sort()).toEqual(Object.keys(migrations).sort());
    const { rows } = await sql<{ name: string }>`SELECT name FROM merchant_api_migration ORDER BY name`.execute(on(2, name));
    expect(rows.map((row) => row.name)).toEqual(Object.keys(migrations).sort());
    // The lease is given back: the next run on any node takes it at once and finds nothing to do.
    expect((await createMigrator(on(1, name)).migrateToLatest()).results).toEqual([]);
  }, 120_000);

  describe('on one migrated database', () => {
    let name: string;
    const masterKey = parseMasterKey(generateMasterKey());
    beforeAll(async () => {
      name = await newDatabase();
      await migrateToLatest(on(0, name));
      await importSeed(on(0, name), masterKey, { merchants: [{ id: 'shop', status: 'active', keys: ['shop-key'] }], users: [] });
      await caughtUp(cluster);
    }, 60_000);

    it('records a salt sent to every node at once exactly once: the others answer "already used", never an error', async () => {
      const storages = [0, 1, 2].map((index) => new MysqlStorage({ db: on(index, name, { connectionLimit: 4 }), masterKey }));
      const before = writeConflictCounts();
      const now = Math.floor(Date.now() / 1000);
      try {
        for (let round = 0; round < 40; round++) {
          const salt = `race-${round}-${randomBytes(4).toString('hex')}`;
          const answers = await Promise.all(storages.flatMap((storage) => [storage, storage].map((s) => s.recordSalt({ merchantId: 'shop', salt, expiresAt: now + 300, now }))));
          expect(answers.filter(Boolean)).toHaveLength(1);
        }
      } finally {
        await Promise.all(storages.map((storage) => storage.close()));
      }
      const after = writeConflictCounts();
      expect(after.failed).toBe(before.failed);
      console.log(`salt race on 3 nodes: ${after.retried - before.retried} certification conflicts retried in 40 rounds of 6`);
    }, 120_000);

    it('loses no failure of the shared throttle counted on three nodes at once (each upsert that lost certification runs again)', async () => {
      const rules = { pairFailures: 1_000_000, pairBlockSeconds: 300, pairMaxBlockSeconds: 86_400, addressFailures: 1_000_000, addressWindowSeconds: 3600, addressBlockSeconds: 3600, maxEntries: 10_000 };
      const address = `198.51.100.${1 + Math.floor(Math.random() * 200)}`;
      const dbs = [0, 1, 2].map((index) => on(index, name, { connectionLimit: 4 }));
      const now = Math.floor(Date.now() / 1000);
      const before = writeConflictCounts();
      await Promise.all(dbs.flatMap((db) => Array.from({ length: 20 }, () => recordFailure(db, { address, merchantId: 'shop', now }, rules))));
      await caughtUp(cluster);
      for (const db of dbs) {
        const { rows } = await sql<{ scope: string; failures: number }>`SELECT scope, failures FROM auth_failures WHERE address = ${address} ORDER BY scope`.execute(db);
        expect(rows.map((row) => [row.scope, Number(row.failures)])).toEqual([
          ['address', 60],
          ['pair', 60],
        ]);
      }
      console.log(`throttle on 3 nodes: ${writeConflictCounts().retried - before.retried} certification conflicts retried for 120 upserts`);
    }, 120_000);

    it('imports the same users through two nodes at once: both imports finish, each user once', async () => {
      const users = Array.from({ length: 500 }, (_, i) => user('shop', `both-${i}`, { first_name: `both ${i}` }));
      const summaries = await Promise.all([0, 1].map((index) => importSeed(on(index, name), masterKey, { merchants: [], users })));
      expect(summaries.map((summary) => summary.usersInserted + summary.usersUpdated + summary.usersUnchanged)).toEqual([500, 500]);
      expect(summaries[0]!.usersInserted + summaries[1]!.usersInserted).toBe(500);
      await caughtUp(cluster);
      const { rows } = await sql<{ n: number }>`SELECT COUNT(*) AS n FROM user_shares WHERE merchant_id = 'shop' AND shared_user_id LIKE 'both-%'`.execute(on(2, name));
      expect(Number(rows[0]!.n)).toBe(500);
    }, 120_000);

    it('imports through a node with Galera\'s interleaved ids by LOAD DATA: every share on its own user, read on another node', async () => {
      const node2 = on(1, name);
      const { rows } = await sql<{ mode: string; step: string }>`SELECT @@innodb_autoinc_lock_mode AS mode, @@auto_increment_increment AS step`.execute(node2);
      expect(rows.map(({ mode, step }) => [Number(mode), Number(step)])).toEqual([[2, 3]]);
      const users = Array.from({ length: 3000 }, (_, i) => user('shop', `imported-${i}`, { first_name: `first ${i}`, email_address: `u${i}@example.com` }));
      const summary = await importSeed(node2, masterKey, { merchants: [], users });
      expect(summary.usersInserted).toBe(3000);
      await caughtUp(cluster);
      const reader = new MysqlStorage({ db: on(2, name), masterKey });
      try {
        for (const u of users.filter((_, i) => i % 97 === 0 || i === users.length - 1)) {
          const { merchant_id: _, ...record } = u;
          expect(await reader.getUser('shop', u.shared_user_id)).toEqual(record);
        }
        expect((await reader.listUsers({ merchantId: 'shop', filter: {}, limit: 5000 })).filter((u) => u.shared_user_id.startsWith('imported-')).length).toBe(3000);
      } finally {
        await reader.close();
      }
    }, 120_000);

    it('honours a key added on node 1 at once on node 2, even while node 2 is behind (the re-read waits with wsrep_sync_wait)', async () => {
      const node2 = new MysqlStorage({ db: on(1, name), masterKey });
      const paused = await createConnectionOn(cluster, 1);
      try {
        expect((await node2.getMerchant('shop'))!.keys).toEqual(['shop-key']);
        // FLUSH TABLES WITH READ LOCK pauses node 2's appliers: node 1's commit has not reached its tables.
        await paused.query('FLUSH TABLES WITH READ LOCK');
        const { apiKey } = await rotateMerchantKey(on(0, name), masterKey, 'shop');
        setTimeout(() => void paused.query('UNLOCK TABLES'), 1500);
        const started = performance.now();
        const merchant = await node2.getMerchant('shop', { refresh: true });
        expect(merchant!.keys).toContain(apiKey);
        // It waited for node 2 to catch up, rather than answering the old keys at once.
        expect(performance.now() - started).toBeGreaterThan(1000);
      } finally {
        await paused.end();
        await node2.close();
      }
    }, 60_000);

    it("finds a webhook endpoint added on node 1 at once on node 2, even while node 2 is behind: its test event is queued", async () => {
      const node1 = new MysqlStorage({ db: on(0, name), masterKey });
      const node2 = new MysqlStorage({ db: on(1, name), masterKey });
      const paused = await createConnectionOn(cluster, 1);
      try {
        // FLUSH TABLES WITH READ LOCK pauses node 2's appliers: node 1's commit has not reached its tables.
        await paused.query('FLUSH TABLES WITH READ LOCK');
        const endpoint = await node1.addWebhookEndpoint!({ merchantId: 'shop', url: 'https://hooks.example.com/behind', events: ['user.updated'], maxPerMerchant: 10 });
        let settled = false;
        const listing = node2.listEndpointDeliveries!({ merchantId: 'shop', endpointId: endpoint.id, limit: 10 }).finally(() => (settled = true));
        // A read: node 2 applies node 1's commit first, so it waits while the lock holds its applier
        // (seen in node 2's process list), else it answers at once and finds no endpoint. The changes
        // below wait the same way; here FLUSH TABLES holds their writes anyway, but under load a test
        // sent right after the add through another node was "not found" (a loaded suite's contract
        // run: 2 deliveries of 3).
        await vi.waitFor(
          async () => {
            const [rows] = await paused.query("SELECT COUNT(*) AS n FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SET STATEMENT wsrep_sync_wait=1 FOR SELECT 1%'");
            expect(Number((rows as { n: number }[])[0]!.n)).toBeGreaterThan(0);
          },
          { timeout: 20_000, interval: 50 },
        );
        expect(settled).toBe(false);
        await paused.query('UNLOCK TABLES');
        expect(await listing).toEqual({ items: [], next: null });
        expect(await node2.sendWebhookTest!('shop', endpoint.id)).toMatch(/^evt_/);
        expect(await node2.rotateWebhookSecret!('shop', endpoint.id, 0)).toEqual({ secret: expect.stringMatching(/^whsec_/), oldExpiresAt: null });
        expect(await node2.removeWebhookEndpoint!('shop', endpoint.id)).toBe(true);
      } finally {
        await paused.query('UNLOCK TABLES').catch(() => undefined);
        await paused.end();
        await Promise.all([node1.close(), node2.close()]);
      }
    }, 60_000);

    it('finds a merchant added on node 1 from node 2 once its directory is read again, as on one server', async () => {
      const node2 = new MysqlStorage({ db: on(1, name), masterKey, keyCacheTtlMs: 300 });
      try {
        expect(await node2.getMerchant('late')).toBeUndefined();
        await addMerchant(on(0, name), masterKey, 'late');
        await new Promise((resolve) => setTimeout(resolve, 400));
        // The first look after the cache time reads again, waiting for the cluster's latest commit.
        expect(await node2.getMerchant('late')).toMatchObject({ id: 'late', status: 'active' });
      } finally {
        await node2.close();
      }
    }, 60_000);

    it('says that a node refusing queries (not Synced, or wsrep_reject_queries) is a Galera node to avoid, in its 503', async () => {
      const storage = new MysqlStorage({ db: on(2, name), masterKey });
      try {
        await cluster.nodes[2].query('SET GLOBAL wsrep_reject_queries = ALL');
        await expect(storage.ping()).rejects.toThrow('MySQL ping failed (ER_UNKNOWN_COM_ERROR): this Galera node refuses queries (not Synced, or wsrep_reject_queries set); another node answers until it has rejoined.');
      } finally {
        await cluster.nodes[2].query('SET GLOBAL wsrep_reject_queries = NONE');
        await storage.close();
      }
      // Once the node takes queries again, a new call succeeds.
      const again = new MysqlStorage({ db: on(2, name), masterKey });
      await again.ping();
      await again.close();
    }, 60_000);

    it('names what a node lacks at start: wsrep_on off in the session, dirty reads, a statement binary log, a MyISAM table', async () => {
      const db = on(2, name, { connectionLimit: 1 });
      expect(await galeraProblems(db)).toEqual([]);
      await sql`SET SESSION wsrep_on = OFF, SESSION wsrep_dirty_reads = ON, SESSION binlog_format = 'STATEMENT'`.execute(db);
      await sql`CREATE TABLE stray_myisam (id INT PRIMARY KEY) ENGINE=MyISAM`.execute(db);
      const problems = await galeraProblems(db);
      expect(problems).toHaveLength(4);
      expect(problems[0]).toMatch(/wsrep_on is OFF in this connection's session/);
      expect(problems[1]).toMatch(/^wsrep_dirty_reads is ON: cut off from the other nodes, this node would go on answering reads from its stale copy, accepting keys revoked on the others/);
      expect(problems[2]).toMatch(/binlog_format is STATEMENT/);
      expect(problems[3]).toMatch(/table stray_myisam uses the MyISAM engine/);
      await sql`DROP TABLE stray_myisam`.execute(db);
      await sql`SET SESSION wsrep_on = ON, SESSION wsrep_dirty_reads = OFF, SESSION binlog_format = 'ROW'`.execute(db);
    }, 60_000);
  });
});

async function createConnectionOn(cluster: GaleraCluster, index: number) {
  const { createConnection } = await import('mysql2/promise');
  return createConnection({ host: '127.0.0.1', port: cluster.nodes[index]!.port, user: 'root' });
}
