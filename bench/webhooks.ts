/**
 * `npm run bench:webhooks`: the cost of webhooks (issue 30), on MySQL.
 * 1. Import: `--users` users of one merchant as NDJSON through `importUserFile`, into a fresh
 *    database with one webhook endpoint for the merchant (every user a `user.shared` event and a
 *    delivery) and into one without, alternating, `--rounds` each; users/s and the ratio
 *    (with / without) of the medians, same run.
 * 2. The dispatcher: the deliveries of that import sent to a local receiver (a node:http server
 *    answering 204), deliveries/s from the first claim to the last recorded attempt.
 * MYSQL_URL (default mysql://root@127.0.0.1:3306/test). Options: --users=N (default 100000),
 * --rounds=N (default 3), --deliveries=N (default 5000: how many of them the dispatcher sends).
 */
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { createConnection } from 'mysql2/promise';
import { addMerchant, addWebhookEndpoint, createMysqlKysely, generateMasterKey, importUserFile, migrateToLatest, MysqlWebhookOutbox, parseMasterKey } from '../src/storage/mysql/index.js';
import { WebhookDispatcher } from '../src/webhooks/dispatcher.js';
import { MERCHANT, writeUsersFile } from './fake-users.js';

const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const USERS = arg('users', 100_000);
const ROUNDS = arg('rounds', 3);
const DELIVERIES = arg('deliveries', 5000);
const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const masterKey = parseMasterKey(generateMasterKey());

async function freshDatabase() {
  const name = `merchant_api_bench_wh_${randomBytes(4).toString('hex')}`;
  const admin = await createConnection({ uri: MYSQL_URL });
  await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  await admin.end();
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  const db = createMysqlKysely(url.toString(), { queryTimeout: 0 });
  await migrateToLatest(db);
  await addMerchant(db, masterKey, MERCHANT);
  return {
    db,
    async drop() {
      await db.destroy();
      const c = await createConnection({ uri: MYSQL_URL });
      await c.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await c.end();
    },
  };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'merchant-api-bench-wh-'));
  const file = join(dir, 'users.ndjson');
  await writeUsersFile(file, USERS, 'ndjson');
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const port = (receiver.address() as { port: number }).port;
  const rates: Record<'with' | 'without', number[]> = { with: [], without: [] };
  let kept: Awaited<ReturnType<typeof freshDatabase>> | undefined;
  console.log(`load average at start: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  for (let round = 0; round < ROUNDS; round++) {
    for (const variant of round % 2 ? (['with', 'without'] as const) : (['without', 'with'] as const)) {
      const database = await freshDatabase();
      if (variant === 'with') await addWebhookEndpoint(database.db, masterKey, MERCHANT, `http://127.0.0.1:${port}/hook`, ['user.shared', 'user.updated', 'user.deactivated', 'user.unshared']);
      const started = performance.now();
      await importUserFile(database.db, file);
      const seconds = (performance.now() - started) / 1000;
      rates[variant].push(USERS / seconds);
      console.log(`round ${round + 1} ${variant.padEnd(7)} ${Math.round(USERS / seconds)} users/s (${seconds.toFixed(1)} s)`);
      if (variant === 'with' && kept === undefined) kept = database;
      else await database.drop();
    }
  }
  const ratio = median(rates.with) / median(rates.without);
  console.log(`import with one endpoint / without: ${ratio.toFixed(2)}x (medians ${Math.round(median(rates.with))} vs ${Math.round(median(rates.without))} users/s, ${ROUNDS} rounds; spread with ${Math.round(Math.min(...rates.with))}-${Math.round(Math.max(...rates.with))}, without ${Math.round(Math.min(...rates.without))}-${Math.round(Math.max(...rates.without))})`);

  // The dispatcher over the kept database's outbox: only DELIVERIES of them stay pending.
  const db = kept!.db;
  await sql`UPDATE webhook_deliveries SET state = 'cancelled' WHERE id > (SELECT m FROM (SELECT MIN(id) + ${DELIVERIES - 1} AS m FROM webhook_deliveries) t)`.execute(db);
  let sent = 0;
  let failed = 0;
  const dispatcher = new WebhookDispatcher({
    outbox: new MysqlWebhookOutbox({ db, masterKey }),
    policy: { allowPrivate: true, allowHttp: true },
    pollIntervalMs: 20,
    claimBatch: 100,
    maxInFlightPerEndpoint: 64,
    onAttempt: (event) => (event.outcome === 'delivered' ? sent++ : failed++),
  });
  const started = performance.now();
  dispatcher.start();
  while (sent + failed < DELIVERIES) await new Promise((resolve) => setTimeout(resolve, 20));
  const seconds = (performance.now() - started) / 1000;
  await dispatcher.stop();
  console.log(`dispatcher: ${sent} delivered, ${failed} failed, ${Math.round(DELIVERIES / seconds)} deliveries/s to a local receiver (one endpoint, 64 in flight)`);
  console.log(`load average at end: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  await kept!.drop();
  receiver.close();
  rmSync(dir, { recursive: true, force: true });
}

await main();
