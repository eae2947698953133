/**
 * `node --import tsx bench/change-feed.ts`: what the change feed (docs/protocol.md#removals)
 * costs an import. Its tombstones are written only where shares are erased (`removeShares`), so
 * an import runs no statement of it; this measures that, in one run: `importUserFile` of the same
 * NDJSON file (`--users=N`, default 100,000, one merchant) into a fresh database with the schema
 * of today (migration 0013, `share_removals`: feed on) and one migrated only to 0012 (feed off),
 * alternating, best of `--rounds` (default 2), and prints users/s and the ratio on/off.
 * Then the cost of erasure with a tombstone: `eraseShares` of 1,000 single shares, on vs off.
 * MYSQL_URL (default mysql://root@127.0.0.1:3306/test) names the server.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { createConnection } from 'mysql2/promise';
import { addMerchant, createMigrator, createMysqlKysely, eraseShares, generateMasterKey, importUserFile, parseMasterKey } from '../src/storage/mysql/index.js';
import { idOf, MERCHANT, writeUsersFile } from './fake-users.js';

const args = new Map(process.argv.slice(2).map((arg) => [arg.replace(/=.*$/, ''), arg.includes('=') ? arg.replace(/^[^=]*=/, '') : 'true']));
const USERS = Number(args.get('--users') ?? 100_000);
const ROUNDS = Number(args.get('--rounds') ?? 2);
const ERASURES = Math.min(1000, USERS);
const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const masterKey = parseMasterKey(generateMasterKey());

async function run(feed: boolean, file: string): Promise<{ importSeconds: number; eraseSeconds: number }> {
  const name = `merchant_api_bench_feed_${randomBytes(4).toString('hex')}`;
  const admin = await createConnection({ uri: MYSQL_URL });
  await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  const db = createMysqlKysely(url.toString());
  try {
    const result = await createMigrator(db).migrateTo(feed ? '0013_share_removals' : '0012_webhook_test_budget');
    if (result.error) throw result.error;
    await addMerchant(db, masterKey, MERCHANT);
    const started = performance.now();
    const summary = await importUserFile(db, file);
    const importSeconds = (performance.now() - started) / 1000;
    if (summary.usersInserted !== USERS) throw new Error(`import: ${summary.usersInserted} inserted`);
    // Without the table, removeShares' tombstone statement would fail: erase as before the feed then.
    let eraseSeconds = Number.NaN;
    if (feed) {
      const erasing = performance.now();
      for (let i = 0; i < ERASURES; i++) await eraseShares(db, [{ merchantId: MERCHANT, sharedUserId: idOf(i) }]);
      eraseSeconds = (performance.now() - erasing) / 1000;
    }
    return { importSeconds, eraseSeconds };
  } finally {
    await db.destroy();
    await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
    await admin.end();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'merchant-api-bench-feed-'));
try {
  const file = join(dir, 'users.ndjson');
  await writeUsersFile(file, USERS, 'ndjson');
  const on: number[] = [];
  const off: number[] = [];
  let erase = Number.NaN;
  for (let round = 0; round < ROUNDS; round++) {
    for (const feed of round % 2 === 0 ? [false, true] : [true, false]) {
      const { importSeconds, eraseSeconds } = await run(feed, file);
      (feed ? on : off).push(importSeconds);
      if (feed) erase = Math.min(Number.isNaN(erase) ? Infinity : erase, eraseSeconds);
      console.error(`round ${round + 1}: feed ${feed ? 'on ' : 'off'} import ${importSeconds.toFixed(2)} s`);
    }
  }
  const rate = (seconds: number[]) => USERS / Math.min(...seconds);
  console.log(`import of ${USERS} users, best of ${ROUNDS}: feed off ${Math.round(rate(off))} users/s, feed on ${Math.round(rate(on))} users/s, ratio on/off ${(rate(on) / rate(off)).toFixed(3)}`);
  console.log(`erasure with its tombstone: ${ERASURES} single-share erasures in ${erase.toFixed(2)} s (${(1000 * erase / ERASURES).toFixed(2)} ms each)`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
