/**
 * `npm run bench:mysql`: the MySQL storage at a million users.
 * Loads 1,000,000 users for one merchant into a scratch database with the
 * importer's batched multi-row upserts in key order, then prints: single-user
 * read p50/p99 (storage and HTTP), a 100-user keyset page at the start,
 * middle and end, the full streamed list in users/s, and the server
 * process's peak RSS. The scratch database is dropped at the end.
 *
 * MYSQL_URL (default mysql://root@127.0.0.1:3306/test) names the server;
 * BENCH_USERS overrides the count.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { createConnection } from 'mysql2/promise';
import { addMerchant, createMysqlKysely, generateMasterKey, migrateToLatest, MysqlStorage, parseMasterKey } from '../src/storage/mysql/index.js';
import { readIdAllocation, upsertUsers } from '../src/storage/mysql/user-upsert.js';
import type { SeedUser } from '../src/storage/seed.js';

const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const USERS = Number(process.env.BENCH_USERS ?? 1_000_000);
const BATCH = 5000;
const MERCHANT = 'bench-merchant';
const MARKER = '"shared_user_id":';
const idOf = (i: number) => `user-${String(i).padStart(7, '0')}`;

const name = `merchant_api_bench_${randomBytes(4).toString('hex')}`;
const url = new URL(MYSQL_URL);
url.pathname = `/${name}`;
const admin = await createConnection({ uri: MYSQL_URL });
await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
const db = createMysqlKysely(url.toString(), { queryTimeout: 0 });
const masterKeyText = generateMasterKey();
const masterKey = parseMasterKey(masterKeyText);
let server: ReturnType<typeof spawn> | undefined;

try {
  await migrateToLatest(db);
  const { apiKey } = await addMerchant(db, masterKey, MERCHANT);

  // Load: key order, so InnoDB appends to both clustered indexes instead of splitting pages.
  let started = performance.now();
  const allocation = await readIdAllocation(db);
  for (let from = 0; from < USERS; from += BATCH) {
    const batch: SeedUser[] = [];
    for (let i = from; i < Math.min(from + BATCH, USERS); i++) batch.push(fakeUser(i));
    await db.transaction().execute((trx) => upsertUsers(trx, batch, allocation));
    if ((from / BATCH) % 20 === 0) process.stderr.write(`\rloading: ${from + batch.length}/${USERS}`);
  }
  const loadSeconds = (performance.now() - started) / 1000;
  console.log(`\nload: ${USERS} users in ${loadSeconds.toFixed(1)} s (${Math.round(USERS / loadSeconds)} users/s, importer upserts, batches of ${BATCH})`);

  // Storage-level latencies, in this process.
  const storage = new MysqlStorage({ db, masterKey });
  const reads = await timeMany(5000, () => storage.getUser(MERCHANT, idOf(Math.floor(Math.random() * USERS))));
  console.log(`storage getUser: p50 ${reads.p50} ms, p99 ${reads.p99} ms (5000 random ids)`);
  for (const [label, position] of [['start', undefined], ['middle', idOf(USERS / 2)], ['end', idOf(USERS - 101)]] as const) {
    const page = await timeMany(500, async () => {
      const users = await storage.listUsers({ merchantId: MERCHANT, filter: {}, after: position, limit: 100 });
      if (users.length !== 100) throw new Error('short page');
    });
    console.log(`storage 100-user page at ${label}: p50 ${page.p50} ms, p99 ${page.p99} ms`);
  }

  // The server in its own process, as `serve` runs it.
  server = spawn(process.execPath, ['--import', 'tsx', 'bench/mysql-server.ts'], {
    env: { ...process.env, DATABASE_URL: url.toString(), MASTER_KEY: masterKeyText },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const base = await new Promise<string>((resolve, reject) => {
    server!.stdout!.on('data', (chunk: Buffer) => {
      const match = /listening (\S+)/.exec(chunk.toString());
      if (match) resolve(match[1]!);
    });
    server!.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  const startRss = rssOf(server.pid!, 'VmRSS');
  const headers = { authorization: `Basic ${Buffer.from(`${MERCHANT}:${apiKey}`).toString('base64')}` };
  const http = await timeMany(5000, async () => {
    const response = await fetch(`${base}/merchant/users/${idOf(Math.floor(Math.random() * USERS))}`, { headers });
    if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
    await response.arrayBuffer();
  });
  console.log(`HTTP GET /merchant/users/{id}: p50 ${http.p50} ms, p99 ${http.p99} ms (sequential, keep-alive)`);
  const httpPage = await timeMany(500, async () => (await fetch(`${base}/merchant/users?limit=100`, { headers })).arrayBuffer());
  console.log(`HTTP GET /merchant/users?limit=100: p50 ${httpPage.p50} ms, p99 ${httpPage.p99} ms`);

  started = performance.now();
  const response = await fetch(`${base}/merchant/users`, { headers });
  let count = 0;
  let bytes = 0;
  let tail = '';
  let peakSample = 0;
  const decoder = new TextDecoder();
  const reader = response.body!.getReader();
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    const chunk = next.value;
    bytes += chunk.length;
    // The tail is shorter than the marker, so a marker split across chunks is counted once.
    const text = tail + decoder.decode(chunk, { stream: true });
    count += text.split(MARKER).length - 1;
    tail = text.slice(-(MARKER.length - 1));
    peakSample = Math.max(peakSample, rssOf(server.pid!, 'VmRSS'));
  }
  const streamSeconds = (performance.now() - started) / 1000;
  if (count !== USERS) throw new Error(`streamed ${count} users, expected ${USERS}`);
  console.log(`HTTP full list (streamed): ${count} users, ${(bytes / 2 ** 20).toFixed(0)} MiB in ${streamSeconds.toFixed(1)} s = ${Math.round(count / streamSeconds)} users/s`);
  console.log(`server process RSS: peak ${(rssOf(server.pid!, 'VmHWM') / 1024).toFixed(0)} MiB (VmHWM), highest sampled while streaming ${(peakSample / 1024).toFixed(0)} MiB, ${(startRss / 1024).toFixed(0)} MiB at start (includes the tsx loader)`);
} finally {
  server?.kill('SIGTERM');
  await db.destroy();
  await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
  await admin.end();
}

function fakeUser(i: number): SeedUser {
  const micros = String((i * 7919) % 1_000_000).padStart(6, '0');
  const day = String(1 + (i % 28)).padStart(2, '0');
  return {
    merchant_id: MERCHANT,
    shared_user_id: idOf(i),
    first_name: ['Anna', 'Björn', 'Chloé', '美咲', 'Олег', 'Zoë'][i % 6]!,
    last_name: `Lastname${i % 997}`,
    email_address: `user${i}@example.com`,
    street: `Hauptstraße ${i % 300}`,
    zip_code: String(10000 + (i % 89999)),
    city: ['Berlin', 'München', 'Köln', 'Hamburg'][i % 4]!,
    state: i % 3 === 0 ? null : 'BY',
    country: 'de',
    preferred_language: i % 2 ? 'de' : 'en',
    date_joined: `20${10 + (i % 14)}-0${1 + (i % 9)}-${day}T12:00:00.${micros}+00:00`,
    deactivated_at: i % 50 === 0 ? `2024-01-${day}T00:00:00.000001+00:00` : null,
    agreed_to_terms_and_conditions: `2019-12-12T12:19:17.${micros}+00:00`,
    agreed_to_marketing: i % 4 === 0 ? null : `2020-01-01T00:00:00.${micros}+00:00`,
  };
}

async function timeMany(n: number, call: () => Promise<unknown>): Promise<{ p50: string; p99: string }> {
  for (let i = 0; i < Math.min(100, n); i++) await call(); // warm-up
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await call();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!.toFixed(2);
  return { p50: at(0.5), p99: at(0.99) };
}

/** A field of /proc/<pid>/status in KiB (Linux). */
function rssOf(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) : 0;
}
