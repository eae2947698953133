/**
 * The MySQL hot path of `bench:mysql` (issue 13): each request kind against the cheapest raw
 * `mysql2` call doing the same database work, measured in the same run, at the same
 * concurrency, in alternating order, so the ratios hold on a shared, noisy machine.
 *
 * - Single user. Reference: the user row read by its primary key, the same statement as the
 *   storage's (the `user_shares` primary key joined to `users` by theirs, the 14 columns) run
 *   straight on a pool built by `createMysqlPool` (the settings `serve` uses), as a prepared
 *   `execute` and as a text `query`; the faster of the two is the reference. Against it: the
 *   storage's `getUser` in this process, and `GET /merchant/users/{id}` through the server
 *   process (autocannon, one connection per caller). Goal: each within 2x, i.e. at least 0.5x
 *   the reference's reads/s.
 * - Salts. Reference: one `INSERT INTO used_salts` of a fresh salt per call on the same pool.
 *   Against it: the storage's `recordSalt` in this process, and `/validatesignature` with a new
 *   pre-signed salt per request through the server (`signed-paths.ts`). Goal: validatesignature
 *   at least 0.8x the reference's inserts/s.
 *
 * Every caller is a closed loop (the next call when the last answered), `concurrency` of them,
 * random users from `users`; the figure of a kind is its median over the rounds.
 */
import { writeFileSync } from 'node:fs';
import { createMysqlPool, parseMysqlUrl } from '../src/storage/mysql/create-mysql-kysely.js';
import { unixToSqlDatetime } from '../src/storage/mysql/sql-values.js';
import type { Storage } from '../src/storage/contract.js';
import { idOf, MERCHANT } from './fake-users.js';
import { runAutocannon } from './load.js';
import { cpuSeconds, databasePid } from './servers.js';

/** The most validatesignature requests/s a run may reach before its pre-signed salts run out (then they repeat: failures). */
export const MAX_SIGNED_RATE = 12_000;

export interface HotPathOptions {
  /** The scratch database's URL (the server process uses the same one). */
  url: string;
  storage: Storage;
  /** The server process's base URL, and the Basic credentials of MERCHANT on it. */
  base: string;
  headers: Record<string, string>;
  users: number;
  /** The storage's single-user statement text (`userByKeySql`): the reference runs the same SQL. */
  userSql: string;
  /** A file of pre-signed `/validatesignature` paths (`writeSignedPaths`) and how many it holds. */
  signedPaths: { file: string; count: number };
  /** Salt lifetime the reference inserts with (the server's window). */
  saltWindowSeconds: number;
  concurrency: number;
  seconds: number;
  warmup: number;
  rounds: number;
  /** Scratch directory for the path files autocannon reads. */
  dir: string;
  /** The server process, whose CPU time is accounted per call. */
  serverPid: number;
}

interface Rate {
  rate: number;
  p50: number;
  p99: number;
  failures: number;
  /** CPU µs per call of this process (client or load generator), the server process and MariaDB. */
  cpu?: { bench: number; server: number; database: number };
}

/** CPU seconds (user + system) of a process; 0 when it is gone or unknown. */
function cpuSecondsOrZero(pid: number | undefined): number {
  return pid === undefined ? 0 : cpuSeconds(pid) || 0;
}

type Kind = 'raw execute' | 'raw query' | 'storage getUser' | 'HTTP user' | 'raw insert' | 'storage recordSalt' | 'HTTP validatesignature';

/** `concurrency` closed loops of `call` for `seconds`: calls/s and latency percentiles in ms. */
async function closedLoop(concurrency: number, seconds: number, call: () => Promise<unknown>): Promise<Rate> {
  const times: number[] = [];
  let failures = 0;
  const started = performance.now();
  const end = started + seconds * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < end) {
        const at = performance.now();
        try {
          await call();
        } catch {
          failures++;
        }
        times.push(performance.now() - at);
      }
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  times.sort((a, b) => a - b);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))] ?? NaN;
  return { rate: times.length / elapsed, p50: at(0.5), p99: at(0.99), failures };
}

export async function runHotPath(options: HotPathOptions): Promise<string> {
  const { concurrency, seconds, warmup } = options;
  const pool = createMysqlPool(parseMysqlUrl(options.url)).promise();
  const randomId = () => idOf(Math.floor(Math.random() * options.users));
  // Autocannon cycles through a file of paths: random users, enough that none repeats in a run.
  const userPaths = `${options.dir}/user-paths.txt`;
  writeFileSync(userPaths, `${Array.from({ length: 200_000 }, () => `/merchant/users/${randomId()}`).join('\n')}\n`);
  let nextSigned = 1;
  const signedCount = options.signedPaths.count;
  let saltCounter = 0;
  const run = Date.now().toString(36);
  const now = () => Date.now() / 1000;
  const results = new Map<Kind, Rate[]>();
  const dbPid = databasePid();
  /** Runs one measurement and adds each party's CPU per call. */
  const measured = async (run: () => Promise<Rate>): Promise<Rate> => {
    const before = { bench: process.cpuUsage(), server: cpuSecondsOrZero(options.serverPid), database: cpuSecondsOrZero(dbPid), at: performance.now() };
    const rate = await run();
    const calls = (rate.rate * (performance.now() - before.at)) / 1000;
    const bench = process.cpuUsage(before.bench);
    const perCall = (seconds: number) => (seconds * 1e6) / calls;
    return { ...rate, cpu: { bench: perCall((bench.user + bench.system) / 1e6), server: perCall(cpuSecondsOrZero(options.serverPid) - before.server), database: perCall(cpuSecondsOrZero(dbPid) - before.database) } };
  };

  const check = (rows: unknown) => {
    if (!Array.isArray(rows) || rows.length !== 1) throw new Error('no user');
  };
  const kinds: Record<Kind, (time: number) => Promise<Rate>> = {
    'raw execute': (time) => closedLoop(concurrency, time, async () => check((await pool.execute(options.userSql, [MERCHANT, randomId()]))[0])),
    'raw query': (time) => closedLoop(concurrency, time, async () => check((await pool.query(options.userSql, [MERCHANT, randomId()]))[0])),
    'storage getUser': (time) =>
      closedLoop(concurrency, time, async () => {
        if (!(await options.storage.getUser(MERCHANT, randomId()))) throw new Error('no user');
      }),
    'HTTP user': async (time) => http(time, { file: userPaths, first: 1 + Math.floor(Math.random() * 100_000), count: 100_000 }, options.headers),
    'raw insert': (time) =>
      closedLoop(concurrency, time, () =>
        pool.execute('INSERT INTO used_salts (merchant_id, salt, expires_at) VALUES (?, ?, ?)', [MERCHANT, `raw-${run}-${(saltCounter++).toString(36)}`, unixToSqlDatetime(now() + options.saltWindowSeconds)]),
      ),
    'storage recordSalt': (time) =>
      closedLoop(concurrency, time, async () => {
        const at = now();
        if (!(await options.storage.recordSalt({ merchantId: MERCHANT, salt: `rec-${run}-${(saltCounter++).toString(36)}`, expiresAt: at + options.saltWindowSeconds, now: at }))) throw new Error('replay');
      }),
    'HTTP validatesignature': async (time) => {
      // Each run takes fresh lines of the file; a repeated salt would be a 400, counted as a failure.
      const count = Math.min(signedCount - nextSigned + 1, MAX_SIGNED_RATE * time);
      const paths = { file: options.signedPaths.file, first: nextSigned, count };
      nextSigned += count;
      return http(time, paths, {});
    },
  };

  async function http(time: number, paths: { file: string; first: number; count: number }, headers: Record<string, string>): Promise<Rate> {
    const result = await runAutocannon({ url: options.base, path: '/', headers, connections: concurrency, seconds: time, paths, pin: false });
    return { rate: result.rps, p50: result.p50Ms, p99: result.p99Ms, failures: result.non2xx + result.socketErrors + result.wrapped };
  }

  const groups: Kind[][] = [
    ['raw execute', 'raw query', 'storage getUser', 'HTTP user'],
    ['raw insert', 'storage recordSalt', 'HTTP validatesignature'],
  ];
  try {
    for (let round = 0; round < options.rounds; round++) {
      for (const group of groups) {
        const order = round % 2 === 0 ? group : [...group].reverse();
        for (const kind of order) {
          if (warmup > 0) await kinds[kind](warmup);
          const rate = await measured(() => kinds[kind](seconds));
          results.set(kind, [...(results.get(kind) ?? []), rate]);
          process.stderr.write(`  round ${round + 1} ${kind}: ${Math.round(rate.rate)}/s, p50 ${rate.p50.toFixed(2)} ms, p99 ${rate.p99.toFixed(2)} ms${rate.failures ? `, ${rate.failures} failures` : ''}; CPU µs per call: bench ${cpuText(rate)}\n`);
        }
      }
    }
  } finally {
    await pool.end();
  }
  return table(results, options);
}

const cpuText = ({ cpu }: Rate) => (cpu ? `${Math.round(cpu.bench)}, server ${Math.round(cpu.server)}, MariaDB ${Math.round(cpu.database)}` : '-');

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/**
 * Each kind against its reference: the median of the per-round ratios (each round measures both
 * within seconds of each other, so a slow spell of the shared machine hits both), with their range.
 */
function table(results: Map<Kind, Rate[]>, options: HotPathOptions): string {
  const rates = (kind: Kind) => results.get(kind)!.map((r) => r.rate);
  const rounds = rates('raw execute').map((_, round) => round);
  const reference = { read: rounds.map((round) => Math.max(rates('raw execute')[round]!, rates('raw query')[round]!)), insert: rates('raw insert') };
  const ratios = (kind: Kind, to: number[]) => rounds.map((round) => rates(kind)[round]! / to[round]!);
  const lines = [
    `Hot path at ${options.concurrency} concurrent callers, ${options.rounds} rounds of ${options.seconds} s, each round in alternating order; medians, per round in brackets:`,
    '',
    '| call | per second | p50 ms | p99 ms | CPU µs per call: bench, server, MariaDB | x reference, per round | reference, goal |',
    '|---|--:|--:|--:|--:|--:|---|',
  ];
  const fmt = (ratio: number) => `${ratio.toFixed(2)}x`;
  const row = (kind: Kind, to: number[], goal: string) => {
    const list = results.get(kind)!;
    const failures = list.reduce((sum, r) => sum + r.failures, 0);
    const each = ratios(kind, to);
    lines.push(
      `| ${kind}${failures ? ` (${failures} failures)` : ''} | ${Math.round(median(rates(kind))).toLocaleString('en-US')} [${rates(kind).map(Math.round).join(', ')}] | ${median(list.map((r) => r.p50)).toFixed(2)} | ${median(list.map((r) => r.p99)).toFixed(2)} | ${(['bench', 'server', 'database'] as const).map((party) => Math.round(median(list.map((r) => r.cpu?.[party] ?? NaN)))).join(', ')} | ${fmt(median(each))} [${each.map(fmt).join(', ')}] | ${goal} |`,
    );
  };
  const goal = (kind: Kind, to: number[], least: number, what: string) => `${what}; goal >= ${least.toFixed(2)}x: ${median(ratios(kind, to)) >= least ? 'met' : 'missed'}`;
  row('raw execute', reference.read, 'raw pk read (the faster of the two), prepared');
  row('raw query', reference.read, 'raw pk read, text protocol');
  row('storage getUser', reference.read, goal('storage getUser', reference.read, 0.5, 'raw pk read (within 2x)'));
  row('HTTP user', reference.read, goal('HTTP user', reference.read, 0.5, 'raw pk read (within 2x)'));
  row('raw insert', reference.insert, 'raw unique-salt INSERT');
  row('storage recordSalt', reference.insert, 'raw insert');
  row('HTTP validatesignature', reference.insert, goal('HTTP validatesignature', reference.insert, 0.8, 'raw insert'));
  return lines.join('\n');
}
