/**
 * A `migrate` killed part-way on a Galera cluster (docs/mysql.md#migrations): the real CLI on node 1
 * stopped by its test hook and SIGKILLed, then `migrate` again, on another node (the dead holder's
 * lease is honoured until it expires: its named lock cannot be seen from there) and on the same node
 * (the lease is taken over at once), must leave the schema of a clean run, read on a third node;
 * `serve` on that node then answers /readyz 200. The two run at once (the first waits out a lease).
 */
import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMysqlKysely, generateMasterKey } from '../../../src/storage/mysql/index.js';
import { galeraAvailable, startGaleraCluster, type GaleraCluster } from '../../support/galera.js';
import { migrateKilledAfter, migrateOk, schemaSnapshot } from '../../support/migrate-runs.js';
import { CLI, startServer } from '../../support/processes.js';

describe.skipIf(!galeraAvailable())('a migrate killed part-way on a Galera cluster', () => {
  let cluster: GaleraCluster;
  let clean: Record<string, unknown>;
  const opened: Kysely<any>[] = [];
  const on = (index: number, database: string) => {
    const db = createMysqlKysely(cluster.nodes[index]!.url(database));
    opened.push(db);
    return db;
  };
  const newDatabase = async () => {
    const name = `galera_${randomBytes(4).toString('hex')}`;
    await cluster.createDatabase(name);
    return name;
  };
  /** Every node has applied everything committed anywhere so far. */
  const caughtUp = async () => {
    for (const node of cluster.nodes) await node.query('SET SESSION wsrep_sync_wait = 1; SELECT 1; SET SESSION wsrep_sync_wait = 0');
  };

  beforeAll(async () => {
    cluster = await startGaleraCluster();
    const name = await newDatabase();
    await migrateOk(cluster.nodes[0].url(name));
    await caughtUp();
    clean = await schemaSnapshot(on(2, name));
  }, 180_000);
  afterAll(async () => {
    await Promise.all(opened.map((db) => db.destroy().catch(() => undefined)));
    await cluster?.stop();
  }, 60_000);

  it.concurrent('killed after the fill of 0002 on node 1: migrate on node 2 completes it once the lease expires', async () => {
    const name = await newDatabase();
    await migrateKilledAfter(cluster.nodes[0].url(name), '0002_user_share_filters', 2);
    // The dead holder's lease names node 1: node 2 cannot see its named lock and waits for the expiry.
    const { rows } = await sql<{ node: string | null }>`SELECT node FROM merchant_api_migration_lease`.execute(on(1, name));
    expect(rows).toHaveLength(1);
    expect(rows[0]!.node).toMatch(new RegExp(`:${cluster.nodes[0].port}:`));
    const started = performance.now();
    const output = await migrateOk(cluster.nodes[1].url(name));
    console.log(`galera: migrate on another node completed the killed one in ${Math.round(performance.now() - started)} ms`);
    expect(output).toContain('Completing migration 0002_user_share_filters: an earlier migrate stopped part-way through it.');
    await caughtUp();
    expect(await schemaSnapshot(on(2, name))).toEqual(clean);
  }, 120_000);

  it.concurrent('killed after the first ALTER of 0010 on node 1: migrate on node 1 takes the lease over at once and completes it; serve answers /readyz 200', async () => {
    const name = await newDatabase();
    await migrateKilledAfter(cluster.nodes[0].url(name), '0010_webhook_event_refs', 1);
    const started = performance.now();
    const output = await migrateOk(cluster.nodes[0].url(name));
    console.log(`galera: migrate on the same node completed the killed one in ${Math.round(performance.now() - started)} ms`);
    expect(output).toContain('Completing migration 0010_webhook_event_refs: an earlier migrate stopped part-way through it.');
    await caughtUp();
    expect(await schemaSnapshot(on(2, name))).toEqual(clean);
    const server = await startServer('node', CLI.node, { DATABASE_URL: cluster.nodes[2].url(name), MASTER_KEY: generateMasterKey() }, ['serve']);
    try {
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    } finally {
      await server.stop();
    }
  }, 120_000);
});
