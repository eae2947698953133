/**
 * `npm run bench:webhooks`: the cost of webhooks (issue 30), on MySQL.
 * 1. Import: `--users` users of one merchant as NDJSON through `importUserFile`, into a fresh
 *    database with one webhook endpoint for the merchant (every user a `user.shared` event and a
 *    delivery) and into one without, alternating, `--rounds` each; users/s and the ratio
 *    (with / without) of the medians, same run.
 *    The import writes one outbox row per batch (migration 0018); the time to expand that import's
 *    rows into events and deliveries, which the dispatcher does after the commit, is printed apart.
 * 2. The dispatcher: the deliveries of that import sent to a local receiver (a node:http server
 *    answering 204), deliveries/s from the first claim to the last recorded attempt.
 * 3. With --backlog=N, instead of 1 and 2: the dispatcher behind a large outbox, as after an import
 *    of N users shared with 3 merchants with one endpoint each: N pending deliveries (3 endpoints,
 *    written by INSERT ... SELECT from MariaDB's Sequence engine), of which it sends --deliveries;
 *    deliveries/s, and the median time of a claim.
 * MYSQL_URL (default mysql://root@127.0.0.1:3306/test). Options: --users=N (default 100000),
 * --rounds=N (default 3), --deliveries=N (default 5000: how many of them the dispatcher sends),
 * --backlog=N (default 0).
 */
import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import { createConnection } from 'mysql2/promise';
import { addMerchant, addWebhookEndpoint, createMysqlKysely, expandAllShareBatches, generateMasterKey, importUserFile, migrateToLatest, MysqlWebhookOutbox, parseMasterKey } from '../src/storage/mysql/index.js';
import { EXPANSION_STEP } from '../src/storage/mysql/webhooks/share-batches.js';
import { WebhookDispatcher } from '../src/webhooks/dispatcher.js';
import type { WebhookOutbox } from '../src/storage/webhook-outbox.js';
import { MERCHANT, writeUsersFile } from './fake-users.js';
import { StatementTimes } from './statement-times.js';

const arg = (name: string, fallback: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? fallback);
const USERS = arg('users', 100_000);
const ROUNDS = arg('rounds', 3);
const DELIVERIES = arg('deliveries', 5000);
const BACKLOG = arg('backlog', 0);
const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const masterKey = parseMasterKey(generateMasterKey());

async function freshDatabase(merchants: readonly string[] = [MERCHANT]) {
  const name = `merchant_api_bench_wh_${randomBytes(4).toString('hex')}`;
  const admin = await createConnection({ uri: MYSQL_URL });
  await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  await admin.end();
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  const db = createMysqlKysely(url.toString(), { queryTimeout: 0 });
  await migrateToLatest(db);
  for (const merchant of merchants) await addMerchant(db, masterKey, merchant);
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

/** Sends DELIVERIES of the pending deliveries to the receiver; deliveries/s and the median claim time. */
async function dispatch(db: Awaited<ReturnType<typeof freshDatabase>>['db'], endpoints: number) {
  let sent = 0;
  let failed = 0;
  const outbox = new MysqlWebhookOutbox({ db, masterKey });
  const claimMs: number[] = [];
  const timed: WebhookOutbox = {
    async claimDue(options) {
      const started = performance.now();
      const claimed = await outbox.claimDue(options);
      if (claimed.length > 0) claimMs.push(performance.now() - started);
      return claimed;
    },
    recordAttempt: (record) => outbox.recordAttempt(record),
    prune: (before) => outbox.prune(before),
    stats: () => outbox.stats(),
  };
  const dispatcher = new WebhookDispatcher({
    outbox: timed,
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
  console.log(`dispatcher: ${sent} delivered, ${failed} failed, ${Math.round(DELIVERIES / seconds)} deliveries/s to a local receiver (${endpoints} endpoint(s), 64 in flight); ${claimMs.length} claims, median ${median(claimMs).toFixed(1)} ms`);
}

/** --backlog: N pending deliveries to 3 endpoints (3 merchants), then the dispatcher. */
async function backlogMain(port: number) {
  const merchants = ['bench-merchant-a', 'bench-merchant-b', 'bench-merchant-c'];
  const database = await freshDatabase(merchants);
  const { db } = database;
  const endpoints: string[] = [];
  for (const merchant of merchants) endpoints.push((await addWebhookEndpoint(db, masterKey, merchant, `http://127.0.0.1:${port}/hook`, ['user.updated'])).id);
  const started = performance.now();
  // One event per delivery, its record in `data` (so no user rows are needed); the endpoint by seq % 3.
  const endpointOf = sql.raw(`ELT(seq % 3 + 1, ${endpoints.map((id) => `'${id}'`).join(', ')})`);
  const merchantOf = sql.raw(`ELT(seq % 3 + 1, ${merchants.map((id) => `'${id}'`).join(', ')})`);
  const sequence = sql.raw(`seq_1_to_${Math.floor(BACKLOG)}`);
  await sql`INSERT INTO webhook_events (id, merchant_id, type, data, created_at)
    SELECT CONCAT('evt_bench_', seq), ${merchantOf}, 'user.updated', '{"shared_user_id":"u"}', UTC_TIMESTAMP(6) FROM ${sequence}`.execute(db);
  await sql`INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, next_attempt_at, created_at)
    SELECT CONCAT('evt_bench_', seq), ${endpointOf}, ${merchantOf}, UTC_TIMESTAMP(6) - INTERVAL 1 SECOND, UTC_TIMESTAMP(6) FROM ${sequence}`.execute(db);
  await sql`ANALYZE TABLE webhook_deliveries`.execute(db);
  console.log(`backlog: ${BACKLOG} pending deliveries to 3 endpoints written in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  await dispatch(db, 3);
  await database.drop();
}

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'merchant-api-bench-wh-'));
  const file = join(dir, 'users.ndjson');
  if (BACKLOG === 0) await writeUsersFile(file, USERS, 'ndjson');
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(204).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const port = (receiver.address() as { port: number }).port;
  if (BACKLOG > 0) {
    console.log(`load average at start: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    await backlogMain(port);
    console.log(`load average at end: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
    receiver.close();
    rmSync(dir, { recursive: true, force: true });
    return;
  }
  const rates: Record<'with' | 'without', number[]> = { with: [], without: [] };
  let kept: Awaited<ReturnType<typeof freshDatabase>> | undefined;
  console.log(`load average at start: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  for (let round = 0; round < ROUNDS; round++) {
    for (const variant of round % 2 ? (['with', 'without'] as const) : (['without', 'with'] as const)) {
      const database = await freshDatabase();
      if (variant === 'with') await addWebhookEndpoint(database.db, masterKey, MERCHANT, `http://127.0.0.1:${port}/hook`, ['user.shared', 'user.updated', 'user.deactivated', 'user.unshared']);
      const times = new StatementTimes();
      times.start();
      const started = performance.now();
      await importUserFile(database.db.withPlugin(times), file);
      const seconds = (performance.now() - started) / 1000;
      rates[variant].push(USERS / seconds);
      console.log(`round ${round + 1} ${variant.padEnd(7)} ${Math.round(USERS / seconds)} users/s (${seconds.toFixed(1)} s; load average ${loadavg().map((l) => l.toFixed(2)).join(' ')})`);
      // Where the time of each variant went, once (the last round).
      if (round === ROUNDS - 1) console.log(`\n${times.table(`import ${variant} an endpoint: where the time went`)}\n`);
      if (variant === 'with' && kept === undefined) kept = database;
      else await database.drop();
    }
  }
  const ratio = median(rates.with) / median(rates.without);
  console.log(`import with one endpoint / without: ${ratio.toFixed(2)}x (medians ${Math.round(median(rates.with))} vs ${Math.round(median(rates.without))} users/s, ${ROUNDS} rounds; spread with ${Math.round(Math.min(...rates.with))}-${Math.round(Math.max(...rates.with))}, without ${Math.round(Math.min(...rates.without))}-${Math.round(Math.max(...rates.without))})`);

  // The work the import no longer does in its transactions: its batch rows expanded into events and
  // deliveries (share-batches.ts), step after step as the dispatcher's claims do, timed on its own.
  const db = kept!.db;
  const expandStarted = performance.now();
  const expanded = await expandAllShareBatches(db);
  const expandSeconds = (performance.now() - expandStarted) / 1000;
  console.log(`expansion after the import: ${expanded} users' events and deliveries in ${expandSeconds.toFixed(1)} s (${Math.round(expanded / expandSeconds)} users/s, steps of ${EXPANSION_STEP})`);
  // The dispatcher over the kept database's outbox: only DELIVERIES of them stay pending.
  // By rank, not by MIN(id) + N: each batch's LOAD DATA may leave a gap in the ids (innodb_autoinc_lock_mode=1
  // reserves them in growing blocks), and then fewer than DELIVERIES would stay pending and the bench would wait forever.
  const { rows: [last] } = await sql<{ id: string | number }>`SELECT id FROM webhook_deliveries ORDER BY id LIMIT 1 OFFSET ${DELIVERIES - 1}`.execute(db);
  await sql`UPDATE webhook_deliveries SET state = 'cancelled' WHERE id > ${last!.id}`.execute(db);
  await dispatch(db, 1);
  console.log(`load average at end: ${loadavg().map((l) => l.toFixed(2)).join(' ')}`);
  await kept!.drop();
  receiver.close();
  rmSync(dir, { recursive: true, force: true });
}

await main();
