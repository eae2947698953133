/**
 * The storage contract (test/suites/storage-contract.ts) over a MySQL storage
 * that reads from a real MariaDB replica (docs/mysql.md#read-replicas): the
 * primary and the replica are private mariadbd processes replicating by
 * GTID; each storage of the suite gets a database of its own, written on the
 * primary and read, once the replica has caught up, from the replica.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe } from 'vitest';
import { createMysqlKysely, generateMasterKey, importSeed, listWebhookDeliveries, migrateToLatest, MysqlStorage, parseMasterKey, withReplicaReads } from '../../../src/storage/mysql/index.js';
import { storageContract } from '../../suites/storage-contract.js';
import { replicaAvailable, startPrimaryAndReplica, type ReplicatedPair } from '../../support/mariadb-replica.js';
import { sleep } from '../../support/sleep.js';

describe.skipIf(!replicaAvailable())('the MySQL storage reading from a replica', () => {
  let pair: ReplicatedPair;
  beforeAll(async () => {
    pair = await startPrimaryAndReplica();
  });
  afterAll(async () => {
    await pair?.stop();
  });

  storageContract('mysql reading from a replica', async (seed, plan) => {
    const name = `contract_${randomBytes(4).toString('hex')}`;
    await pair.primary.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
    const primaryDb = createMysqlKysely(pair.primary.url(name));
    await migrateToLatest(primaryDb);
    const masterKey = parseMasterKey(generateMasterKey());
    await importSeed(primaryDb, masterKey, seed);
    await pair.caughtUp();
    const storage = withReplicaReads(new MysqlStorage({ db: primaryDb, masterKey, pagePlan: plan, destroyOnClose: true }), {
      replicaDb: createMysqlKysely(pair.replica.url(name)),
      masterKey,
      pagePlan: plan,
      destroyOnClose: true,
    });
    // Reads go to the replica once its lag has been read.
    for (let waited = 0; !storage.readingFromReplica; waited += 20) {
      if (waited > 5000) throw new Error('the replica was never found in step');
      await sleep(20);
    }
    return {
      storage,
      listWebhookDeliveries: (options) => listWebhookDeliveries(primaryDb, options),
      add: async (more) => {
        await importSeed(primaryDb, masterKey, more);
        await pair.caughtUp();
      },
    };
  });
});
