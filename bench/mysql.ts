/**
 * `npm run bench:mysql`: the MySQL storage at a million users (issue 13).
 * 1. Import: 1,000,000 users of one merchant (`fake-users.ts`) as NDJSON through
 *    `importUserFile` (what `merchant-api import` runs), against a raw `LOAD DATA LOCAL INFILE`
 *    of the same rows (users with their ids, then the shares) into the same schema, each into a
 *    fresh database, alternating, best of `--rounds`. Rows/s and the ratio.
 * 2. Listings: every filtered case of `listing-cases.ts` at its first, a middle and its last page:
 *    the rows each page examines, summed from `ANALYZE FORMAT=JSON` of every statement it runs
 *    (r_rows x r_loops of each table read), and latency in process and over HTTP (the server in
 *    its own process: `merchant-api serve` from dist/, with the throttle, fair sharing and the
 *    access log off), each against the first unfiltered page.
 * 3. The hot path (`mysql-hot-path.ts`): single-user reads against a raw primary-key read, and
 *    validatesignature against a raw unique-salt INSERT, same run, same concurrency, as ratios.
 * 4. As before: single-user reads one at a time, the streamed whole list in users/s, the server's peak RSS.
 * The scratch databases are dropped at the end.
 *
 * MYSQL_URL (default mysql://root@127.0.0.1:3306/test) names the server. Options: --users=N
 * (BENCH_USERS), --rounds=N (default 2), --batch-size=N (the import's, default DEFAULT_BATCH_SIZE), --skip-import-reference, --skip-listings, --skip-hot-path;
 * the hot path's --concurrency=N (default 16), --hot-seconds=S (3), --hot-warmup=S (1), --hot-rounds=N (5).
 */
import { spawn } from 'node:child_process';
import { createReadStream, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { CompiledQuery, type Kysely } from 'kysely';
import { createConnection } from 'mysql2/promise';
import { addMerchant, addMerchantKey, createMysqlKysely, DEFAULT_BATCH_SIZE, generateMasterKey, importUserFile, migrateToLatest, MysqlStorage, parseMasterKey, type MerchantApiDatabase } from '../src/storage/mysql/index.js';
import { selectUserPage, userByKeySql } from '../src/storage/mysql/statements/user-queries.js';
import { toSqlDatetime } from '../src/storage/mysql/sql-values.js';
import { fakeUser, idOf, MERCHANT, writeUsersFile } from './fake-users.js';
import { casesTable, CURSOR_SECRET, runCases, timeMany } from './listing-cases.js';
import { InfileWriter } from '../src/storage/mysql/admin/infile.js';
import { MAX_SIGNED_RATE, runHotPath } from './mysql-hot-path.js';
import { MERCHANT_KEY, PUBLIC_URL, TIMESTAMP_TOLERANCE } from './servers/data.mjs';
import { writeSignedPaths } from './signed-paths.js';
import { StatementTimes } from './statement-times.js';

const args = new Map(process.argv.slice(2).map((arg) => [arg.replace(/=.*$/, ''), arg.includes('=') ? arg.replace(/^[^=]*=/, '') : 'true']));
const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const USERS = Number(args.get('--users') ?? process.env.BENCH_USERS ?? 1_000_000);
const ROUNDS = Number(args.get('--rounds') ?? 2);
const BATCH_SIZE = args.has('--batch-size') ? Number(args.get('--batch-size')) : undefined;
const HOT = {
  concurrency: Number(args.get('--concurrency') ?? 16),
  seconds: Number(args.get('--hot-seconds') ?? 3),
  warmup: Number(args.get('--hot-warmup') ?? 1),
  rounds: Number(args.get('--hot-rounds') ?? 5),
};
const MARKER = '"shared_user_id":';
const USER_COLUMNS = 'first_name, last_name, email_address, street, zip_code, city, state, country, preferred_language, date_joined, deactivated_at, agreed_to_terms_and_conditions, agreed_to_marketing';

const admin = await createConnection({ uri: MYSQL_URL });
const [[version]] = (await admin.query('SELECT VERSION() AS v')) as unknown as [[{ v: string }]];
const [[pool]] = (await admin.query('SELECT @@innodb_buffer_pool_size AS b, @@innodb_flush_log_at_trx_commit AS f')) as unknown as [[{ b: number; f: number }]];
console.log(
  `bench:mysql on ${availableParallelism()} cores (${cpus()[0]?.model ?? '?'}), ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Node ${process.version}, ${version.v} (buffer pool ${Math.round(pool.b / 2 ** 20)} MiB, flush_log_at_trx_commit ${pool.f}), ${new Date().toISOString()}`,
);
const dir = mkdtempSync(join(tmpdir(), 'merchant-api-bench-mysql-'));
const databases: string[] = [];
let server: ReturnType<typeof spawn> | undefined;
let db: Kysely<MerchantApiDatabase> | undefined;

async function freshDatabase(): Promise<{ name: string; url: string; db: Kysely<MerchantApiDatabase> }> {
  const name = `merchant_api_bench_${randomBytes(4).toString('hex')}`;
  await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4`);
  databases.push(name);
  const url = new URL(MYSQL_URL);
  url.pathname = `/${name}`;
  const kysely = createMysqlKysely(url.toString(), { queryTimeout: 0 });
  await migrateToLatest(kysely);
  return { name, url: url.toString(), db: kysely };
}

async function dropDatabase(name: string): Promise<void> {
  await admin.query(`DROP DATABASE IF EXISTS \`${name}\``);
  databases.splice(databases.indexOf(name), 1);
}

/** The reference: the same rows as two tab-separated files, each loaded by one LOAD DATA LOCAL INFILE. */
async function rawLoad(usersFile: string, sharesFile: string): Promise<number> {
  const target = await freshDatabase();
  await target.db.insertInto('merchants').values({ id: MERCHANT, status: 'active' }).execute();
  await target.db.destroy();
  const connection = await createConnection({ uri: target.url, charset: 'utf8mb4_unicode_ci', infileStreamFactory: (path: string) => createReadStream(path) } as never);
  await connection.query("SET SESSION sql_mode = 'STRICT_ALL_TABLES', time_zone = '+00:00'");
  const started = performance.now();
  await connection.query('BEGIN');
  await connection.query(`LOAD DATA LOCAL INFILE ${connection.escape(usersFile)} INTO TABLE users CHARACTER SET utf8mb4 (id, ${USER_COLUMNS})`);
  const usersLoaded = performance.now();
  await connection.query(`LOAD DATA LOCAL INFILE ${connection.escape(sharesFile)} INTO TABLE user_shares CHARACTER SET utf8mb4 (merchant_id, shared_user_id, user_id, is_active, date_joined)`);
  const sharesLoaded = performance.now();
  await connection.query('COMMIT');
  console.log(`  raw LOAD DATA: users ${((usersLoaded - started) / 1000).toFixed(2)} s, user_shares ${((sharesLoaded - usersLoaded) / 1000).toFixed(2)} s, COMMIT ${((performance.now() - sharesLoaded) / 1000).toFixed(2)} s`);
  const seconds = (performance.now() - started) / 1000;
  const [[count]] = (await connection.query('SELECT COUNT(*) AS n FROM user_shares')) as unknown as [[{ n: number }]];
  if (Number(count.n) !== USERS) throw new Error(`raw load: ${count.n} shares`);
  await connection.end();
  await dropDatabase(target.name);
  return seconds;
}

/** The import under test: `importUserFile` on the NDJSON file, as `merchant-api import` runs it. */
async function importRun(ndjsonFile: string, keep: boolean) {
  const target = await freshDatabase();
  const { apiKey } = await addMerchant(target.db, parseMasterKey(masterKeyText), MERCHANT);
  const times = new StatementTimes();
  times.start();
  const started = performance.now();
  let last = 0;
  const summary = await importUserFile(target.db.withPlugin(times), ndjsonFile, {
    batchSize: BATCH_SIZE,
    onProgress: (done, total) => {
      if (performance.now() - last < 500 && done < total) return;
      last = performance.now();
      process.stderr.write(`\r  importing: ${done}/${total} users (${Math.round(done / ((last - started) / 1000))}/s)   `);
    },
  });
  const seconds = (performance.now() - started) / 1000;
  process.stderr.write('\n');
  if (summary.usersInserted !== USERS) throw new Error(`import: ${summary.usersInserted} inserted`);
  console.log(`\n${times.table(`import of ${USERS.toLocaleString('en-US')} users: where the time went`)}\n`);
  if (!keep) {
    await target.db.destroy();
    await dropDatabase(target.name);
    return { seconds };
  }
  return { seconds, target, apiKey };
}

const masterKeyText = generateMasterKey();

try {
  // The files: NDJSON for the import; for the reference, the same rows as LOAD DATA text.
  const ndjsonFile = join(dir, 'users.ndjson');
  const usersFile = join(dir, 'users.tsv');
  const sharesFile = join(dir, 'shares.tsv');
  let started = performance.now();
  await writeUsersFile(ndjsonFile, USERS, 'ndjson');
  const { writeFile, appendFile } = await import('node:fs/promises');
  await writeFile(usersFile, '');
  await writeFile(sharesFile, '');
  for (let from = 0; from < USERS; from += 50_000) {
    const users = new InfileWriter();
    const shares = new InfileWriter();
    for (let i = from; i < Math.min(USERS, from + 50_000); i++) {
      const u = fakeUser(i);
      const time = (value: string | null) => (value === null ? null : toSqlDatetime(value));
      users.row([i + 1, u.first_name, u.last_name, u.email_address, u.street, u.zip_code, u.city, u.state, u.country, u.preferred_language, time(u.date_joined), time(u.deactivated_at), time(u.agreed_to_terms_and_conditions), time(u.agreed_to_marketing)]);
      shares.row([MERCHANT, u.shared_user_id, i + 1, u.deactivated_at === null ? 1 : 0, time(u.date_joined)]);
    }
    await appendFile(usersFile, Buffer.concat(users.finish()));
    await appendFile(sharesFile, Buffer.concat(shares.finish()));
  }
  console.log(`files: ${USERS.toLocaleString('en-US')} users as NDJSON and as LOAD DATA text, in ${((performance.now() - started) / 1000).toFixed(1)} s`);

  // 1. Import against the raw load, alternating, best of ROUNDS.
  let raw = Infinity;
  let imported = Infinity;
  let kept: Awaited<ReturnType<typeof importRun>> | undefined;
  for (let round = 0; round < ROUNDS; round++) {
    const last = round === ROUNDS - 1;
    const steps = round % 2 === 0 ? (['raw', 'import'] as const) : (['import', 'raw'] as const);
    for (const step of steps) {
      if (step === 'raw') {
        if (args.has('--skip-import-reference')) continue;
        const seconds = await rawLoad(usersFile, sharesFile);
        raw = Math.min(raw, seconds);
        console.log(`  round ${round + 1}: raw LOAD DATA ${seconds.toFixed(1)} s = ${Math.round(USERS / seconds).toLocaleString('en-US')} rows/s`);
      } else {
        const result = await importRun(ndjsonFile, last);
        imported = Math.min(imported, result.seconds);
        if (last) kept = result;
        console.log(`  round ${round + 1}: import ${result.seconds.toFixed(1)} s = ${Math.round(USERS / result.seconds).toLocaleString('en-US')} rows/s`);
      }
    }
  }
  const importRate = USERS / imported;
  const rawRate = USERS / raw;
  console.log('\n| load of 1 user = 1 users row + 1 user_shares row | seconds | rows/s | x raw LOAD DATA |');
  console.log('|---|--:|--:|--:|');
  if (Number.isFinite(raw)) console.log(`| raw LOAD DATA LOCAL INFILE of the same rows (reference) | ${raw.toFixed(1)} | ${Math.round(rawRate).toLocaleString('en-US')} | 1.00x |`);
  console.log(`| \`importUserFile\` (merchant-api import), NDJSON, batches of ${(BATCH_SIZE ?? DEFAULT_BATCH_SIZE).toLocaleString('en-US')} | ${imported.toFixed(1)} | ${Math.round(importRate).toLocaleString('en-US')} | ${Number.isFinite(raw) ? `${(importRate / rawRate).toFixed(2)}x` : '-'} |`);
  const goal = rawRate < 148_000 ? `>= 0.67x raw (this machine's raw load is under 148,000 rows/s): ${importRate / rawRate >= 0.67 ? 'met' : 'missed'}` : `>= 100,000 rows/s: ${importRate >= 100_000 ? 'met' : 'missed'}`;
  console.log(`goal: ${goal}`);
  rmSync(usersFile, { force: true });
  rmSync(sharesFile, { force: true });

  if (!kept?.target) throw new Error('no import was kept');
  const { target, apiKey } = kept;
  db = target.db;
  const storage = new MysqlStorage({ db, masterKey: masterKeyText });
  // The key the pre-signed validatesignature paths are signed with (bench/servers/data.mjs), next to the generated one.
  await addMerchantKey(db, parseMasterKey(masterKeyText), MERCHANT, MERCHANT_KEY);

  // The server in its own process: the shipped `serve` (dist/, which `npm run bench:mysql` builds),
  // with the request-path features off that the storage comparisons are not about (as the library's defaults).
  server = spawn(process.execPath, ['dist/cli.js', 'serve'], {
    env: {
      ...process.env,
      DATABASE_URL: target.url,
      MASTER_KEY: masterKeyText,
      CURSOR_SECRET,
      PUBLIC_URL,
      TIMESTAMP_TOLERANCE: String(TIMESTAMP_TOLERANCE),
      HOST: '127.0.0.1',
      PORT: '0',
      ACCESS_LOG: 'false',
      THROTTLE_AUTH: 'false',
      FAIR_SHARE: 'false',
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const base = await new Promise<string>((resolve, reject) => {
    let started = '';
    server!.stdout!.on('data', (chunk: Buffer) => {
      // The start event, one JSON line: {"event":"listening","url":"http://127.0.0.1:PORT",...}.
      started += chunk.toString();
      const match = /"event":"listening","url":"([^"]+)"/.exec(started);
      if (match) resolve(match[1]!);
    });
    server!.once('exit', (code) => reject(new Error(`server exited with ${code}`)));
  });
  const headers = { authorization: `Basic ${Buffer.from(`${MERCHANT}:${apiKey}`).toString('base64')}` };

  // 2. Every filtered listing, with the rows its page examines.
  if (!args.has('--skip-listings')) {
    console.log('\nListings on MySQL (one merchant, 0.1% deactivated); rows examined from ANALYZE FORMAT=JSON:');
    const results = await runCases({
      storage,
      base,
      headers,
      users: USERS,
      examine: async (query) => {
        const statements: CompiledQuery[] = [];
        await selectUserPage(db!, query, (statement) => statements.push(statement));
        let rows = 0;
        for (const statement of statements) {
          const { rows: [row] } = await db!.executeQuery<{ ANALYZE: string }>(CompiledQuery.raw(`ANALYZE FORMAT=JSON ${statement.sql}`, [...statement.parameters]));
          rows += examinedRows(JSON.parse(row!.ANALYZE));
        }
        return rows;
      },
      updatedAtOf: async (sharedUserId) => {
        const { rows: [row] } = await db!.executeQuery<{ at: string }>(
          CompiledQuery.raw("SELECT DATE_FORMAT(updated_at, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS at FROM user_shares WHERE merchant_id = ? AND shared_user_id = ?", [MERCHANT, sharedUserId]),
        );
        return row!.at;
      },
    });
    console.log(casesTable(results));
  }

  // 3. The hot path: single users and salts, each against its raw mysql2 reference.
  if (!args.has('--skip-hot-path')) {
    const signedPaths = { file: join(dir, 'signed-paths.txt'), count: MAX_SIGNED_RATE * (HOT.seconds + HOT.warmup) * HOT.rounds };
    await writeSignedPaths(signedPaths.file, signedPaths.count);
    console.log(`\n${await runHotPath({ url: target.url, storage, base, headers, users: USERS, userSql: userByKeySql(db), signedPaths, saltWindowSeconds: TIMESTAMP_TOLERANCE, dir, serverPid: server.pid!, ...HOT })}`);
  }

  // 4. Single users one at a time, the whole list, memory.
  console.log('');
  const reads = await timeMany(5000, () => storage.getUser(MERCHANT, idOf(Math.floor(Math.random() * USERS))));
  console.log(`storage getUser: p50 ${reads.p50.toFixed(2)} ms, p99 ${reads.p99.toFixed(2)} ms (5000 random ids)`);
  const startRss = rssOf(server.pid!, 'VmRSS');
  const http = await timeMany(5000, async () => {
    const response = await fetch(`${base}/merchant/users/${idOf(Math.floor(Math.random() * USERS))}`, { headers });
    if (response.status !== 200) throw new Error(`HTTP ${response.status}`);
    await response.arrayBuffer();
  });
  console.log(`HTTP GET /merchant/users/{id}: p50 ${http.p50.toFixed(2)} ms, p99 ${http.p99.toFixed(2)} ms (sequential, keep-alive)`);

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
  console.log(`server process RSS: peak ${(rssOf(server.pid!, 'VmHWM') / 1024).toFixed(0)} MiB (VmHWM), highest sampled while streaming ${(peakSample / 1024).toFixed(0)} MiB, ${(startRss / 1024).toFixed(0)} MiB at start`);
} finally {
  server?.kill('SIGTERM');
  await db?.destroy();
  for (const name of [...databases]) await dropDatabase(name);
  await admin.end();
  rmSync(dir, { recursive: true, force: true });
}

/** Rows read from tables (not from derived or temporary ones) in an ANALYZE FORMAT=JSON plan. */
function examinedRows(node: unknown): number {
  if (Array.isArray(node)) return node.reduce((sum: number, item) => sum + examinedRows(item), 0);
  if (typeof node !== 'object' || node === null) return 0;
  const record = node as Record<string, unknown>;
  let rows = 0;
  if (typeof record.table_name === 'string' && !record.table_name.startsWith('<')) rows += Number(record.r_rows ?? 0) * Number(record.r_loops ?? 1);
  for (const value of Object.values(record)) rows += examinedRows(value);
  return rows;
}

/** A field of /proc/<pid>/status in KiB (Linux). */
function rssOf(pid: number, field: 'VmRSS' | 'VmHWM'): number {
  const match = new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) : 0;
}
