/**
 * Reads from a read replica (docs/mysql.md#read-replicas), against a real
 * MariaDB primary and a real replica of it (two private mariadbd processes,
 * replicating by GTID): users are read from the replica while it keeps up
 * (a user written on the primary while replication is stopped is not listed
 * until it resumes); merchants and keys are always read on the primary, so a
 * key revoked there is refused at once whatever the replica says; salts are
 * written to the primary; reads move to the primary when replication stops,
 * when the replica lags more than allowed, and when it is down (the users
 * endpoints stay 200), and back when it is well.
 */
import type { Kysely } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import {
  addMerchant,
  createMysqlKysely,
  generateMasterKey,
  importSeed,
  migrateToLatest,
  MysqlStorage,
  parseMasterKey,
  rotateMerchantKey,
  setMerchantStatus,
  withReplicaReads,
  type MerchantApiDatabase,
  type ReplicaReadsOptions,
} from '../../../src/storage/mysql/index.js';
import type { Storage } from '../../../src/storage/contract.js';
import { basic } from '../../support/basic-auth.js';
import { send } from '../../support/http-client.js';
import { CLEAN_ENV, CLI, runProcess, startServer } from '../../support/processes.js';
import { replicaAvailable, startPrimaryAndReplica, type ReplicatedPair } from '../../support/mariadb-replica.js';
import { contractSeed, user } from '../../support/seeds.js';
import { sleep } from '../../support/sleep.js';
import { TcpProxy } from '../../support/tcp-proxy.js';

const available = replicaAvailable();
const NOW = Math.floor(Date.now() / 1000);

describe('DATABASE_READ_URL and DATABASE_READ_MAX_LAG refused, exit 2 with one line', () => {
  const refused: [string, Record<string, string>, string][] = [
    ['a replica without a primary', { DATABASE_READ_URL: 'mysql://reader:hunter2@replica:3306/merchant_api' }, 'DATABASE_READ_URL needs DATABASE_URL, the primary every write goes to'],
    ['a replica URL that is not one', { DATABASE_URL: 'mysql://root@127.0.0.1:1/x', DATABASE_READ_URL: 'not a url hunter2' }, 'DATABASE_READ_URL: it must be a URL like mysql://user:password@host:3306/database'],
    ['a lag that is not a number', { DATABASE_URL: 'mysql://root@127.0.0.1:1/x', DATABASE_READ_URL: 'mysql://r@replica/x', DATABASE_READ_MAX_LAG: 'soon' }, 'DATABASE_READ_MAX_LAG must be a whole number from 0 to 86400 (got "soon")'],
  ];
  for (const [name, env, message] of refused) {
    it(name, async () => {
      const { code, output } = await runProcess(process.execPath, [CLI.node, 'serve'], { ...CLEAN_ENV, MASTER_KEY: generateMasterKey(), ...env });
      expect(output.trim()).toBe(`Invalid configuration: ${message}.`);
      expect(output).not.toContain('hunter2');
      expect(code).toBe(2);
    });
  }
});

describe.skipIf(!available)('reads from a real MariaDB replica', () => {
  let pair: ReplicatedPair;
  let primaryDb: Kysely<MerchantApiDatabase>;
  const masterKeyText = generateMasterKey();
  const masterKey = parseMasterKey(masterKeyText);
  const open: Storage[] = [];

  beforeAll(async () => {
    pair = await startPrimaryAndReplica();
    await pair.primary.query('CREATE DATABASE merchant_api CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci');
    primaryDb = createMysqlKysely(pair.primary.url('merchant_api'), { connectTimeout: 2000, queryTimeout: 2000 });
    await migrateToLatest(primaryDb);
    await importSeed(primaryDb, masterKey, contractSeed());
    await pair.caughtUp();
    // A row only the replica has: which server answered a read shows in its first_name.
    await pair.replica.query("UPDATE merchant_api.users SET first_name = 'from the replica' WHERE id = (SELECT user_id FROM merchant_api.user_shares WHERE merchant_id = 'm1' AND shared_user_id = 'a-001')");
  });
  afterEach(async () => {
    await Promise.all(open.splice(0).map((storage) => storage.close()));
  });
  afterAll(async () => {
    await primaryDb?.destroy();
    await pair?.stop();
  });

  function storage(options: Partial<ReplicaReadsOptions> = {}) {
    const changes: [boolean, string][] = [];
    const replicaDb = createMysqlKysely(pair.replica.url('merchant_api'), { connectTimeout: 1000, queryTimeout: 1000 });
    const wrapped = withReplicaReads(new MysqlStorage({ db: primaryDb, masterKey, keyCacheTtlMs: 0, throttleSharing: false }), {
      replicaDb,
      masterKey,
      checkIntervalMs: 50,
      destroyOnClose: true,
      onChange: (usable, reason) => void changes.push([usable, reason]),
      ...options,
    });
    open.push(wrapped);
    return { storage: wrapped, changes };
  }
  const firstName = async (s: Storage) => (await s.getUser('m1', 'a-001'))?.first_name;
  /**
   * Waits until the beat the replica applied is more than `seconds` old, as the servers tell (one
   * host, one clock). From then on every reading of a storage finds it too far behind for a
   * maxLagSeconds of 1: reads that went to the primary on a late reading cannot come back.
   */
  const laggingMoreThan = (seconds: number) =>
    vi.waitFor(async () => {
      const [row] = (await pair.replica.query('SELECT TIMESTAMPDIFF(MICROSECOND, beat_at, UTC_TIMESTAMP(6)) AS lag FROM merchant_api.replica_heartbeat WHERE id = 1')) as { lag: number }[];
      expect(Number(row!.lag)).toBeGreaterThan(seconds * 1_000_000);
    }, { timeout: 30_000, interval: 100 });

  it('reads users from the replica while it keeps up, and records salts on the primary', async () => {
    const { storage: s, changes } = storage();
    await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
    // The move to the replica is told with its lag. On a busy machine the first reading of a fresh
    // pair may come before the first beat has replicated: reads stay on the primary until it has.
    expect(changes.find(([usable]) => usable)).toEqual([true, expect.stringMatching(/^the replica is \d+ s behind$/)]);
    // On a busy machine a lag reading may come late and send a read to the primary for a moment.
    await vi.waitFor(async () => {
      const page = await s.listUsers({ merchantId: 'm1', filter: {}, limit: 10 });
      expect(page.find((user) => user.shared_user_id === 'a-001')?.first_name).toBe('from the replica');
    }, { timeout: 20_000, interval: 50 });
    expect(await s.recordSalt({ merchantId: 'm1', salt: 'replica-test-salt', expiresAt: NOW + 300, now: NOW })).toBe(true);
    expect(await pair.primary.query("SELECT merchant_id FROM merchant_api.used_salts WHERE salt = 'replica-test-salt'")).toEqual([{ merchant_id: 'm1' }]);
    expect(await s.recordSalt({ merchantId: 'm1', salt: 'replica-test-salt', expiresAt: NOW + 300, now: NOW })).toBe(false);
  });

  it('reads users from the replica: a user written on the primary while replication is stopped is listed only once it resumes', async () => {
    const { storage: s } = storage({ maxLagSeconds: 3600 });
    await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
    const listed = async () => (await s.listUsers({ merchantId: 'm2', filter: {}, limit: 100 })).map((user) => user.shared_user_id);
    await pair.replica.query('STOP SLAVE');
    try {
      await importSeed(primaryDb, masterKey, { merchants: [], users: [user('m2', 'written-while-stopped')] });
      expect(await pair.primary.query("SELECT shared_user_id FROM merchant_api.user_shares WHERE shared_user_id = 'written-while-stopped'")).toHaveLength(1);
      // Checked several times over more than one lag reading: the replica, stopped a moment ago, is still within the bound.
      // Only reads the replica answered count: on a busy machine a late lag reading sends some to the primary, which has the user.
      let fromReplica = 0;
      for (let i = 0; i < 200 && fromReplica < 5; i++) {
        const before = s.readingFromReplica;
        const [names, one] = [await listed(), await s.getUser('m2', 'written-while-stopped')];
        if (before && s.readingFromReplica) {
          expect(names).not.toContain('written-while-stopped');
          expect(one).toBeUndefined();
          fromReplica++;
        }
        await sleep(60);
      }
      expect(fromReplica).toBe(5);
    } finally {
      await pair.replica.query('START SLAVE');
    }
    // Listed once the replica has it, and by the replica: a late lag reading would send the read to the primary, which always had it.
    await vi.waitFor(async () => {
      const before = s.readingFromReplica;
      const names = await listed();
      expect(before && s.readingFromReplica).toBe(true);
      expect(names).toContain('written-while-stopped');
    }, { timeout: 20_000, interval: 50 });
  });

  it('reads merchants and keys on the primary: a merchant disabled there is refused at once while the replica still has it active', async () => {
    const { storage: s } = storage({ maxLagSeconds: 3600 });
    await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
    await pair.replica.query('STOP SLAVE');
    try {
      await setMerchantStatus(primaryDb, 'm2', 'disabled');
      expect(await pair.replica.query("SELECT status FROM merchant_api.merchants WHERE id = 'm2'")).toEqual([{ status: 'active' }]);
      expect(s.readingFromReplica).toBe(true);
      expect(await s.getMerchant('m2')).toMatchObject({ id: 'm2', status: 'disabled' });
      const { apiKey } = await rotateMerchantKey(primaryDb, masterKey, 'm1', { revokeOld: true });
      expect((await s.getMerchant('m1'))?.keys).toEqual([apiKey]);
    } finally {
      await setMerchantStatus(primaryDb, 'm2', 'active');
      await pair.replica.query('START SLAVE');
      await pair.caughtUp();
    }
  });

  it('moves reads to the primary once stopped replication may leave the replica more than maxLagSeconds behind, and back once it runs', async () => {
    const { storage: s, changes } = storage({ maxLagSeconds: 1 });
    await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
    await pair.replica.query('STOP SLAVE SQL_THREAD');
    try {
      await vi.waitFor(async () => expect(await firstName(s)).not.toBe('from the replica'), { timeout: 20_000, interval: 50 });
      // A reading late under load may have sent a read to the primary for a moment first: the move that stays is the lag's.
      await vi.waitFor(async () => {
        await firstName(s);
        expect(changes.at(-1)![0]).toBe(false);
        // The lag, or on a busy machine no reading of it in time: either moves reads to the primary.
        expect(changes.at(-1)![1]).toMatch(/^the replica is \d+ s behind, more than 1$|^the replica's lag is unknown/);
      }, { timeout: 20_000, interval: 50 });
    } finally {
      await pair.replica.query('START SLAVE SQL_THREAD');
    }
    await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
    expect(changes.at(-1)![0]).toBe(true);
  });

  it('moves reads to the primary while the replica lags more than maxLagSeconds', async () => {
    const strict = storage({ maxLagSeconds: 1 });
    const lenient = storage({ maxLagSeconds: 3600 });
    for (const { storage: s } of [strict, lenient]) await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
    await pair.replica.query('STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 30; START SLAVE');
    try {
      await addMerchant(primaryDb, masterKey, 'added-on-the-primary');
      // A write the delayed replica holds back: its lag grows past one second.
      await laggingMoreThan(1.5);
      await vi.waitFor(async () => {
        expect(await firstName(strict.storage)).not.toBe('from the replica');
        expect(strict.storage.readingFromReplica).toBe(false);
      }, { timeout: 30_000, interval: 100 });
      // The reason is not read from `strict`: under load its last change may be a late reading's
      // ("lag unknown", then back at "0 s behind" in the second before the delay showed), and a move
      // already made is not told again. A storage opened now tells its first reading's verdict (one
      // that failed under load is asked again of another).
      await vi.waitFor(async () => {
        const { changes } = storage({ maxLagSeconds: 1 });
        await vi.waitFor(() => expect(changes).not.toEqual([]), { timeout: 10_000, interval: 20 });
        expect(changes[0]).toEqual([false, expect.stringMatching(/^the replica is \d+ s behind, more than 1$/)]);
      }, { timeout: 30_000, interval: 100 });
      // The lenient storage reads on from the replica (a reading late under load may send one read to the primary).
      await vi.waitFor(async () => expect(await firstName(lenient.storage)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
      // Merchants are read on the primary whatever the lag: the one the replica lacks is found.
      expect(await pair.replica.query("SELECT id FROM merchant_api.merchants WHERE id = 'added-on-the-primary'")).toEqual([]);
      expect(await lenient.storage.getMerchant('added-on-the-primary')).toMatchObject({ id: 'added-on-the-primary', status: 'active' });
      expect(await lenient.storage.getMerchant('never-added')).toBeUndefined();
    } finally {
      await pair.replica.query('STOP SLAVE; CHANGE MASTER TO MASTER_DELAY = 0; START SLAVE');
      await pair.caughtUp();
    }
  });

  it('a heartbeat on the replica ahead of the primary\'s clock (a clock set back) is unknown lag: reads go to the primary', async () => {
    const { storage: s, changes } = storage({ maxLagSeconds: 3600 });
    await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
    await pair.replica.query('STOP SLAVE SQL_THREAD');
    try {
      await pair.replica.query("UPDATE merchant_api.replica_heartbeat SET beat_at = '2999-01-01 00:00:00' WHERE id = 1");
      await vi.waitFor(async () => expect(await firstName(s)).not.toBe('from the replica'), { timeout: 20_000, interval: 50 });
      expect(changes.at(-1)).toEqual([false, "the replica's heartbeat is ahead of the primary's clock (was that clock set back?)"]);
    } finally {
      await pair.replica.query('START SLAVE SQL_THREAD');
      await pair.caughtUp();
    }
    // The next beat replicated replaces it: the replica is used again.
    await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
  });

  it('after idle time with replication stopped, the first read is from the primary: an old lag reading is not trusted', async () => {
    const { storage: s } = storage({ maxLagSeconds: 1 });
    await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
    await pair.replica.query('STOP SLAVE');
    try {
      await importSeed(primaryDb, masterKey, { merchants: [], users: [user('m2', 'written-while-idle')] });
      // No read for longer than maxLagSeconds: the replica is now more than 1 s behind.
      await sleep(2500);
      expect(await s.getUser('m2', 'written-while-idle')).toBeDefined();
      expect(await firstName(s)).not.toBe('from the replica');
    } finally {
      await pair.replica.query('START SLAVE');
      await pair.caughtUp();
    }
  });

  it('a streamed listing reads every batch from the source of its first, while single reads move to the primary', async () => {
    const { storage: s } = storage({ maxLagSeconds: 1 });
    await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
    // A listing whose first batch the replica answered (a reading late under load may send one to the primary).
    let listing = {};
    await vi.waitFor(async () => {
      listing = {};
      const first = await s.listUsers({ merchantId: 'm1', filter: {}, limit: 2, listing });
      expect(first.map((u) => u.shared_user_id)).toEqual(['B-002', 'a-001']);
      expect(first[1]!.first_name).toBe('from the replica');
    }, { timeout: 20_000, interval: 50 });
    await pair.replica.query('STOP SLAVE SQL_THREAD');
    try {
      // A second row only the replica has, past the first batch.
      await pair.replica.query("UPDATE merchant_api.users SET first_name = 'second from the replica' WHERE id = (SELECT user_id FROM merchant_api.user_shares WHERE merchant_id = 'm1' AND shared_user_id = 'b-003')");
      // Not only moved (a late reading moves reads for a moment) but to stay: the replica too far behind.
      await laggingMoreThan(1.5);
      await vi.waitFor(async () => {
        await s.getUser('m1', 'B-002');
        expect(s.readingFromReplica).toBe(false);
      }, { timeout: 20_000, interval: 50 });
      expect((await s.getUser('m1', 'b-003'))?.first_name).not.toBe('second from the replica');
      const second = await s.listUsers({ merchantId: 'm1', filter: {}, limit: 1, after: 'a-001', listing });
      expect(second.map((u) => [u.shared_user_id, u.first_name])).toEqual([['b-003', 'second from the replica']]);
      // Another listing starts where reads go now.
      const other = await s.listUsers({ merchantId: 'm1', filter: {}, limit: 2, listing: {} });
      expect(other[1]!.first_name).not.toBe('from the replica');
    } finally {
      await pair.replica.query('START SLAVE SQL_THREAD');
      await pair.caughtUp();
    }
  });

  it('with the link to the primary frozen (sockets open, Seconds_Behind_Master 0), a deleted share and an old email are not served past maxLagSeconds', async () => {
    const proxy = new TcpProxy('127.0.0.1', pair.primary.port);
    await proxy.start();
    await importSeed(primaryDb, masterKey, { merchants: [], users: [user('m2', 'deleted-while-frozen'), user('m2', 'moved-while-frozen')] });
    await pair.replica.query(`STOP SLAVE; CHANGE MASTER TO MASTER_PORT = ${proxy.port}; START SLAVE`);
    try {
      await pair.caughtUp();
      // Caught up says nothing of the IO thread: the replica may hold every transaction while its
      // thread is still connecting through the proxy ('Preparing', no lag known). The link frozen
      // below must be a connected one that believes it keeps up.
      await vi.waitFor(async () => {
        const [status] = (await pair.replica.query('SHOW SLAVE STATUS')) as Record<string, unknown>[];
        expect(status).toMatchObject({ Slave_IO_Running: 'Yes', Slave_SQL_Running: 'Yes', Seconds_Behind_Master: 0 });
      }, { timeout: 20_000, interval: 50 });
      const { storage: s } = storage({ maxLagSeconds: 1 });
      await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
      proxy.hang();
      await pair.primary.query("DELETE FROM merchant_api.user_shares WHERE merchant_id = 'm2' AND shared_user_id = 'deleted-while-frozen'");
      await pair.primary.query("UPDATE merchant_api.users SET email_address = 'new@example.com' WHERE id = (SELECT user_id FROM merchant_api.user_shares WHERE merchant_id = 'm2' AND shared_user_id = 'moved-while-frozen')");
      const changedAt = performance.now();
      await sleep(300);
      // The replica believes it keeps up: its IO thread is connected and says 0 s behind.
      const [status] = (await pair.replica.query('SHOW SLAVE STATUS')) as Record<string, unknown>[];
      expect(status).toMatchObject({ Slave_IO_Running: 'Yes', Slave_SQL_Running: 'Yes', Seconds_Behind_Master: 0 });
      expect(await pair.replica.query("SELECT shared_user_id FROM merchant_api.user_shares WHERE shared_user_id = 'deleted-while-frozen'")).toHaveLength(1);
      // Every read that starts more than maxLagSeconds (and a reading's slack) after the change sees it.
      const fresh: boolean[] = [];
      while (performance.now() - changedAt < 4000) {
        const started = performance.now() - changedAt;
        const deleted = (await s.getUser('m2', 'deleted-while-frozen')) === undefined;
        const moved = (await s.getUser('m2', 'moved-while-frozen'))?.email_address === 'new@example.com';
        const listed = (await s.listUsers({ merchantId: 'm2', filter: {}, limit: 100 })).some((u) => u.shared_user_id === 'deleted-while-frozen');
        if (started > 1300) fresh.push(deleted && moved && !listed);
        await sleep(50);
      }
      expect(fresh.length).toBeGreaterThan(5);
      expect(fresh.every(Boolean)).toBe(true);
      expect(s.readingFromReplica).toBe(false);
    } finally {
      proxy.resume();
      await pair.replica.query(`STOP SLAVE; CHANGE MASTER TO MASTER_PORT = ${pair.primary.port}; START SLAVE`);
      await proxy.stop();
      await pair.caughtUp();
    }
  });

  it('serves with DATABASE_READ_URL: users from the replica, logged; with the replica killed the users endpoints stay 200, from the primary', async () => {
    const server = await startServer('node', CLI.node, { DATABASE_URL: pair.primary.url('merchant_api'), MASTER_KEY: masterKeyText, DATABASE_READ_URL: pair.replica.url('merchant_api'), STORAGE_TIMEOUT: '1000', ACCESS_LOG: 'false' }, ['serve']);
    const { storage: s, changes } = storage();
    const auth = { headers: basic('m1', (await s.getMerchant('m1'))!.keys[0]!) };
    try {
      await vi.waitFor(async () => {
        const answer = await send(`${server.url}/merchant/users/a-001`, auth);
        expect(JSON.parse(answer.body).data[0].first_name).toBe('from the replica');
      }, { timeout: 20_000, interval: 50 });
      // The JSON logger writes in batches: the line may reach the pipe just after the answer.
      await vi.waitFor(() => expect(server.output()).toMatch(/"event":"replica_used","reason":"the replica is \d s behind"/), { timeout: 20_000, interval: 50 });
      await vi.waitFor(async () => expect(await firstName(s)).toBe('from the replica'), { timeout: 20_000, interval: 50 });
      await pair.replica.kill();
      for (const path of ['/merchant/users/a-001', '/merchant/users?limit=2', '/merchant/users']) {
        const answer = await send(`${server.url}${path}`, auth);
        expect(answer.status, path).toBe(200);
        expect(answer.body).not.toContain('from the replica');
      }
      await vi.waitFor(() => expect(server.output()).toMatch(/"level":"warn","event":"replica_bypassed","reason":"/), { timeout: 20_000, interval: 50 });
      // The wrapper alone, too: answers from the primary, no error.
      const name = await firstName(s);
      expect(name).toBeDefined();
      expect(name).not.toBe('from the replica');
      expect((await s.listUsers({ merchantId: 'm1', filter: {}, limit: 2 })).length).toBe(2);
      expect(changes.at(-1)![0]).toBe(false);
      await s.ping();
    } finally {
      await server.stop();
    }
  });
});
