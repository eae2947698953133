/**
 * WORKERS=N (docs/runtimes.md#workers), with real processes: the
 * configurations refused, and on MariaDB, per runtime, a primary with two
 * workers that both take connections, print one `listening on` line, answer
 * a signed URL once however many times it is sent, count both workers'
 * requests on the primary's one metrics port, restart a worker killed
 * with SIGKILL, and on SIGTERM finish an in-flight streamed list, exit 0
 * and leave no process behind.
 */
import { Buffer } from 'node:buffer';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, readdirSync, readlinkSync } from 'node:fs';
import { Agent, get } from 'node:http';
import { connect, createServer, type AddressInfo } from 'node:net';
import parsePrometheusTextFormat from 'parse-prometheus-text-format';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { signUrl } from '../../src/signing/index.js';
import { basic } from '../support/basic-auth.js';
import { send } from '../support/http-client.js';
import { readRest, startSlowList } from '../support/slow-list.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { CLEAN_ENV, CLI, ROOT, RUNTIMES, runProcess, runtimeCommand, type Runtime } from '../support/processes.js';
import { largeSeed, MERCHANTS, writeSeed } from '../support/seeds.js';
import { sleep } from '../support/sleep.js';
import { sql } from 'kysely';
import { addWebhookEndpoint } from '../../src/storage/mysql/index.js';

/** Whether anything accepts a TCP connection at `url`'s port (closed at once, nothing sent). */
function listening(url: string): Promise<boolean> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect(Number(port), hostname);
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}


/** The command line of the built server on `runtime`; Deno's primary also needs --allow-run to start its workers. */
function serverCommand(runtime: Runtime, args: string[]): [string, string[]] {
  const [command, argv] = runtimeCommand(runtime, CLI[runtime], args);
  return [command, runtime === 'deno' ? ['run', '--allow-run', ...argv.slice(1)] : argv];
}

describe('WORKERS: the configurations refused, exit 2 with one line', () => {
  const refused: [string, Record<string, string>, string][] = [
    ['WORKERS=0', { WORKERS: '0' }, 'Invalid configuration: WORKERS must be auto or a whole number from 1 to 256 (got "0").'],
    ['WORKERS=abc', { WORKERS: 'abc' }, 'Invalid configuration: WORKERS must be auto or a whole number from 1 to 256 (got "abc").'],
    [
      'WORKERS=2 with the memory storage',
      { WORKERS: '2' },
      'Invalid configuration: WORKERS=2 needs the MySQL storage (DATABASE_URL) or Redis (REDIS_URL): with the memory storage alone each worker would keep its own salts, and a signed URL would be accepted once by each worker.',
    ],
  ];
  for (const [name, env, message] of refused) {
    it(name, async () => {
      const { code, output } = await runProcess(process.execPath, [CLI.node, 'serve'], { ...CLEAN_ENV, ...env });
      expect(output.trim()).toBe(message);
      expect(code).toBe(2);
    });
  }

  it('serve --worker, which only the primary may start', async () => {
    const { code, output } = await runProcess(process.execPath, [CLI.node, 'serve', '--worker'], { ...CLEAN_ENV });
    expect(output.trim()).toBe('serve --worker is how the server starts its own workers (WORKERS); run merchant-api serve.');
    expect(code).toBe(2);
  });

  it('WORKERS=2 on Deno without --allow-run', async () => {
    const [command, args] = runtimeCommand('deno', CLI.deno, ['serve']);
    const { code, output } = await runProcess(command, args, { ...CLEAN_ENV, WORKERS: '2', DATABASE_URL: 'mysql://root@127.0.0.1:1/none', MASTER_KEY: 'x' });
    expect(output.trim()).toBe(
      'WORKERS above 1 on Deno needs --allow-run: the primary starts its workers (--allow-run) and gives them --allow-net --allow-read --allow-env, which it must hold itself.',
    );
    expect(code).toBe(2);
  });
});

const mysql = await mysqlAvailable();

// About 18 MB of JSON, far more than the loopback socket buffers hold: a client that stops reading leaves its worker mid-stream.
const USERS = 40_000;

describe.skipIf(!mysql)('WORKERS=2 on MariaDB', () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase();
    const seed = writeSeed(largeSeed(USERS));
    try {
      const imported = await runProcess(process.execPath, [CLI.node, 'import', seed.path], { ...CLEAN_ENV, DATABASE_URL: db.url, MASTER_KEY: db.masterKeyText });
      expect(imported.output).toContain(`${USERS} user(s) inserted`);
    } finally {
      seed.remove();
    }
    // Three webhook deliveries pending, due tomorrow: the outbox every worker's dispatcher reads, and none sends.
    const endpoint = await addWebhookEndpoint(db.db, db.masterKey, MERCHANTS.main.id, 'https://hooks.example.com/in', ['user.updated']);
    for (const n of [1, 2, 3]) {
      await sql`INSERT INTO webhook_events (id, merchant_id, type, data, created_at) VALUES (${`evt_workers_${n}`}, ${MERCHANTS.main.id}, 'user.updated', '{}', UTC_TIMESTAMP(6))`.execute(db.db);
      await sql`INSERT INTO webhook_deliveries (event_id, endpoint_id, merchant_id, next_attempt_at, created_at)
        VALUES (${`evt_workers_${n}`}, ${endpoint.id}, ${MERCHANTS.main.id}, UTC_TIMESTAMP(6) + INTERVAL 1 DAY, UTC_TIMESTAMP(6))`.execute(db.db);
    }
  }, 120_000);
  afterAll(async () => db?.drop());

  for (const runtime of RUNTIMES) {
    describe(`on ${runtime}`, () => {
      let server: Primary;
      beforeAll(async () => {
        // Without the throttle: the replays of a round are failed authentications (docs/security.md#only-a-whole-success-is-a-success)
        // that would block the pair for the next rounds; these tests are about the workers.
        server = await startPrimary(runtime, { DATABASE_URL: db.url, MASTER_KEY: db.masterKeyText, WORKERS: '2', CURSOR_SECRET: '', METRICS_PORT: '0', THROTTLE_AUTH: 'false' });
      }, 60_000);
      afterAll(async () => server?.kill());

      it('prints one listening line for both workers, which are two processes under the primary', () => {
        expect(server.output().match(/listening on/g)).toHaveLength(1);
        expect(server.output()).toMatch(new RegExp(`^merchant-api listening on http://127\\.0\\.0\\.1:\\d+ \\(${runtime}, storage: MySQL, 2 workers\\)$`, 'm'));
        // The primary gave its workers one random CURSOR_SECRET, and says so once.
        expect(server.output().match(/CURSOR_SECRET is not set/g)).toHaveLength(1);
        const pids = server.workerPids();
        expect(pids).toHaveLength(2);
        for (const pid of pids) expect(descendants(server.pid)).toContain(pid);
      });

      it('spreads connections over both workers', async () => {
        // Held-open keep-alive connections: each is held by the worker that accepted it.
        const agent = new Agent({ keepAlive: true, maxSockets: 16 });
        try {
          const answers = await Promise.all(Array.from({ length: 16 }, () => status(`${server.url}/healthz`, agent)));
          expect(answers).toEqual(Array(16).fill(200));
          const held = server.workerPids().map((pid) => connectionsHeldBy(pid, server.port));
          expect(held.reduce((a, b) => a + b)).toBe(16);
          expect(held.every((count) => count > 0), `connections per worker: ${held.join(', ')}`).toBe(true);
        } finally {
          agent.destroy();
        }
      });

      it('accepts a signed URL exactly once, however many fresh connections send it to whichever worker', async () => {
        const { main } = MERCHANTS;
        for (let round = 0; round < 3; round++) {
          const url = signUrl(main.keys[0], `${server.url}/validatesignature`, { cp: main.id });
          const answers = await Promise.all(Array.from({ length: 24 }, () => send(url)));
          expect(answers.filter((answer) => answer.body === '{"status":"ok","is_valid":true}')).toHaveLength(1);
          expect(answers.filter((answer) => answer.status === 200)).toHaveLength(1);
        }
      });

      it('counts both workers\' requests on the one metrics port the primary serves', async () => {
        const metricsUrl = /^Metrics: (http:\/\/\S+)$/m.exec(server.output())![1]!;
        const scrape = async () => {
          const text = await (await fetch(metricsUrl)).text();
          expect(text).toContain('# merchant-api: 2 of 2 workers answered this scrape');
          const families = parsePrometheusTextFormat(text);
          const healthz = families.find((family) => family.name === 'merchant_api_requests_total')?.metrics.filter((m) => m.labels?.route === '/healthz') ?? [];
          return healthz.reduce((sum, m) => sum + Number(m.value ?? 0), 0);
        };
        const before = await scrape();
        // Held-open connections, so that both workers answer some of them.
        const agent = new Agent({ keepAlive: true, maxSockets: 16 });
        try {
          expect(await Promise.all(Array.from({ length: 32 }, () => status(`${server.url}/healthz`, agent)))).toEqual(Array(32).fill(200));
          expect(server.workerPids().map((pid) => connectionsHeldBy(pid, server.port)).every((count) => count > 0)).toBe(true);
        } finally {
          agent.destroy();
        }
        expect((await scrape()) - before).toBe(32);
        expect(server.output().match(/^Metrics: /gm)).toHaveLength(1);
      });

      it('reports the shared webhook outbox once, not once per worker', async () => {
        const metricsUrl = /^Metrics: (http:\/\/\S+)$/m.exec(server.output())![1]!;
        const gauge = async (name: string) => {
          const text = await (await fetch(metricsUrl)).text();
          expect(text).toContain('# merchant-api: 2 of 2 workers answered this scrape');
          return Number(parsePrometheusTextFormat(text).find((family) => family.name === name)?.metrics[0]?.value);
        };
        // Each worker's dispatcher reads the outbox as it starts: 3 pending, none due yet. Summed, it was 6.
        await expect.poll(() => gauge('merchant_api_webhook_pending'), { timeout: 10_000 }).toBe(3);
        expect(await gauge('merchant_api_webhook_oldest_due_seconds')).toBe(0);
      });

      it('pages with a cursor sealed by one worker and opened by another', async () => {
        const { main } = MERCHANTS;
        let next: string | null = `${server.url}/merchant/users?limit=2`;
        for (let page = 0; page < 6 && next; page++) {
          const answer = await send(next, { headers: basic(main.id, main.keys[0]) });
          expect(answer.status).toBe(200);
          next = /<([^>]+)>; rel="next"/.exec(String(answer.headers.link))?.[1] ?? null;
        }
        expect(next).not.toBeNull();
      });

      it('starts another worker when one is killed, and keeps answering', async () => {
        const [victim, survivor] = server.workerPids();
        process.kill(victim!, 'SIGKILL');
        await server.waitFor(new RegExp(`"event":"worker_exit","pid":${victim},"code":null,"signal":"SIGKILL","restart":true`));
        // The other worker answers meanwhile: once the primary knows, every new connection lands on a live one.
        const answers = await Promise.all(Array.from({ length: 10 }, () => send(`${server.url}/healthz`)));
        expect(answers.map((answer) => answer.status)).toEqual(Array(10).fill(200));
        const restarted = await server.waitFor(new RegExp(`"event":"worker_restarted","pid":(\\d+),"replaced":${victim}`));
        expect(alive(victim!)).toBe(false);
        const replacement = Number(restarted[1]);
        expect(server.workerPids()).toEqual(expect.arrayContaining([survivor, replacement]));
        expect(descendants(server.pid)).toContain(replacement);
      });

      it('on SIGTERM every worker finishes its in-flight streamed list, then the primary exits 0 and no process is left', async () => {
        const workers = server.workerPids();
        const { response, firstChunk } = await startSlowList(server.url);
        expect(response.statusCode).toBe(200);
        const signalledAt = Date.now();
        server.child.kill('SIGTERM');
        await server.waitFor(/"event":"shutdown","signal":"SIGTERM","workers":2/);
        // The workers take the signal from the primary: on a busy machine a moment later. Waited for by
        // bare TCP connects (an HTTP request sent to a listener just closing could wait for the shutdown).
        await vi.waitFor(async () => expect(await listening(server.url)).toBe(false), { timeout: 10_000, interval: 100 });
        expect(server.child.exitCode).toBeNull();
        await expect(send(`${server.url}/healthz`)).rejects.toThrow(/ECONNREFUSED|ECONNRESET|socket hang up/);

        const answer = JSON.parse(await readRest(response, firstChunk)) as { status: string; data: unknown[] };
        expect(answer.status).toBe('ok');
        expect(answer.data).toHaveLength(USERS);
        expect(await server.exited).toBe(0);
        expect(Date.now() - signalledAt).toBeLessThan(10_000);
        // Each worker logs shutdown and stopped (after closing its storage), then the primary its own stopped.
        expect(server.output().match(/"event":"shutdown","signal":"SIGTERM","msg":"finishing in-flight requests"/g)).toHaveLength(2);
        expect(server.output().match(/"event":"stopped"/g)).toHaveLength(3);
        expect(workers.filter(alive)).toEqual([]);
      }, 30_000);
    });
  }

  describe('a worker that cannot start', () => {
    it('stops the start: the primary stops the others and exits 1, printing why', async () => {
      const taken = createServer().listen(0, '127.0.0.1');
      await once(taken, 'listening');
      try {
        const port = String((taken.address() as AddressInfo).port);
        const { code, output } = await runProcess(process.execPath, [CLI.node, 'serve'], { ...CLEAN_ENV, DATABASE_URL: db.url, MASTER_KEY: db.masterKeyText, WORKERS: '2', PORT: port });
        expect(output).toMatch(/merchant-api serve failed: Error: (bind|listen) EADDRINUSE 127\.0\.0\.1:\d+/);
        expect(output).not.toContain('listening on');
        expect(code).toBe(1);
      } finally {
        taken.close();
      }
    });
  });

  describe('a worker that keeps dying', () => {
    it(`stops the server, exit 1, once it has died more than 5 times within a minute`, async () => {
      const server = await startPrimary('node', { DATABASE_URL: db.url, MASTER_KEY: db.masterKeyText, WORKERS: '2', ACCESS_LOG: 'false' });
      try {
        for (let kill = 1; kill <= 5; kill++) {
          const victim = server.workerPids()[0]!;
          process.kill(victim, 'SIGKILL');
          await server.waitFor(new RegExp(`"event":"worker_restarted","pid":\\d+,"replaced":${victim}`));
        }
        const pids = server.workerPids();
        process.kill(pids[0]!, 'SIGKILL');
        expect(await server.exited).toBe(1);
        expect(server.output()).toContain('a worker stopped unexpectedly, more than 5 times within a minute: stopping');
        expect(pids.filter(alive)).toEqual([]);
      } finally {
        server.kill();
      }
    }, 60_000);
  });
});

interface Primary {
  url: string;
  port: number;
  pid: number;
  child: ReturnType<typeof spawn>;
  output(): string;
  /** The workers now: those the primary listed at start, less the ones it reported dead, plus their replacements. */
  workerPids(): number[];
  waitFor(pattern: RegExp): Promise<RegExpExecArray>;
  exited: Promise<number | null>;
  kill(): void;
}

/** Starts `serve` with WORKERS and waits for its `listening on` line and the workers' pids. */
async function startPrimary(runtime: Runtime, env: Record<string, string>): Promise<Primary> {
  const [command, args] = serverCommand(runtime, ['serve']);
  if (!existsSync(`${ROOT}${CLI[runtime]}`)) throw new Error(`${CLI[runtime]} is missing: run npm run build first.`);
  const child = spawn(command, args, { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const waitFor = async (pattern: RegExp, ms = 20_000) => {
    for (let waited = 0; waited < ms; waited += 20) {
      const match = pattern.exec(output);
      if (match) return match;
      if (child.exitCode !== null) break;
      await sleep(20);
    }
    throw new Error(`${runtime} serve never printed ${pattern}:\n${output}`);
  };
  try {
    const url = (await waitFor(/listening on (http:\/\/\S+)/, 40_000))[1]!;
    await waitFor(/"event":"workers_listening"/);
    return {
      url,
      port: Number(new URL(url).port),
      pid: child.pid!,
      child,
      output: () => output,
      workerPids() {
        const lines = output.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as { event?: string; pids?: number[]; pid?: number });
        const pids = new Set(lines.find((line) => line.event === 'workers_listening')!.pids);
        for (const line of lines) {
          if (line.event === 'worker_exit') pids.delete(line.pid!);
          if (line.event === 'worker_restarted') pids.add(line.pid!);
        }
        return [...pids];
      },
      waitFor,
      exited,
      kill() {
        for (const pid of descendants(child.pid!)) process.kill(pid, 'SIGKILL');
        child.kill('SIGKILL');
      },
    };
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
}

/** Whether `pid` is a process that has not exited (a zombie has). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Every process under `pid`, from /proc/<pid>/task/<tid>/children. */
function descendants(pid: number): number[] {
  const found: number[] = [];
  const visit = (parent: number) => {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${parent}/task`);
    } catch {
      return;
    }
    for (const task of tasks) {
      let children = '';
      try {
        children = readFileSync(`/proc/${parent}/task/${task}/children`, 'utf8');
      } catch {
        continue;
      }
      for (const child of children.split(' ').filter(Boolean).map(Number)) {
        found.push(child);
        visit(child);
      }
    }
  };
  visit(pid);
  return found;
}

/** Established connections on the server's `port` whose socket `pid` holds: matched by inode between /proc/<pid>/fd and /proc/net/tcp. */
function connectionsHeldBy(pid: number, port: number): number {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode) inodes.add(inode);
    } catch {
      // Closed while listed.
    }
  }
  const localPort = `:${port.toString(16).toUpperCase().padStart(4, '0')}`;
  return readFileSync('/proc/net/tcp', 'utf8')
    .split('\n')
    .slice(1)
    .map((line) => line.trim().split(/\s+/))
    .filter((fields) => fields[1]?.endsWith(localPort) && fields[3] === '01' && inodes.has(fields[9]!)).length;
}

function status(url: string, agent: Agent): Promise<number> {
  return new Promise((resolve, reject) => {
    get(url, { agent }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode!));
    }).on('error', reject);
  });
}
