/**
 * What `merchant-api serve` writes where (docs/observability.md#start-up):
 * standard output is the JSON log only, start-up included, so a log shipper
 * reads every line; the banner for people is on standard error (stdout is a
 * pipe here). With WORKERS above 1 every line carries the pid of the process
 * that wrote it. METRICS_HOST puts the metrics listener on its own interface;
 * SHUTDOWN_TIMEOUT is read and checked like every variable.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readServerConfig } from '../../src/cli/config.js';
import { startBanner } from '../../src/cli/start-lines.js';
import { stampPid } from '../../src/cli/workers/line-writer.js';
import { CLEAN_ENV, ROOT, runProcess } from '../support/processes.js';
import { redisAvailable, useRedis } from '../support/redis.js';
import { sleep } from '../support/sleep.js';

interface Run {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  url: string;
  stop(): Promise<number | null>;
}

/** `node dist/cli.js serve`, stdout and stderr apart, until the banner's URL shows. */
async function serve(env: Record<string, string>): Promise<Run> {
  const child = spawn(process.execPath, ['dist/cli.js', 'serve'], { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV, CURSOR_SECRET: '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  for (let waited = 0; !/listening on (http:\/\/\S+)/.test(stderr); waited += 20) {
    if (child.exitCode !== null || waited > 30_000) throw new Error(`no banner:\n${stdout}\n${stderr}`);
    await sleep(20);
  }
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    url: /listening on (http:\/\/\S+)/.exec(stderr)![1]!,
    stop: () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

const jsonLines = (text: string) => text.split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);

describe('merchant-api serve, one process', () => {
  let run: Run;
  beforeAll(async () => {
    run = await serve({ METRICS_PORT: '0', METRICS_HOST: '127.0.0.2' });
  });
  afterAll(async () => {
    await run?.stop();
  });

  it('writes only JSON lines on stdout, start-up events first, never the demo key or a signature', async () => {
    await fetch(`${run.url}/healthz`);
    await sleep(100);
    const events = jsonLines(run.stdout());
    expect(events[0]).toMatchObject({ level: 'info', event: 'listening', url: run.url, runtime: 'node', demo: true });
    expect(String(events[0]!.storage)).toMatch(/^in memory, loaded from the bundled examples\/seed\.json: 3 merchants, 12 users/);
    expect(events.map((event) => event.event)).toEqual(expect.arrayContaining(['metrics_listening', 'cursor_secret_unset', 'request']));
    expect(run.stdout()).not.toMatch(/demo-secret|hmac|listening on/);
  });

  it('writes the banner for people on stderr, with the demo merchant and its curl lines', () => {
    expect(run.stderr()).toMatch(new RegExp(`^merchant-api listening on ${run.url.replace(/[.:/]/g, '\\$&')} \\(node, storage: in memory`, 'm'));
    expect(run.stderr()).toContain('Demo merchant: id "demo-merchant", API key "demo-secret"');
    expect(run.stderr()).toMatch(/^Try: curl '.*hmac=[0-9a-f]{56}'$/m);
    expect(run.stderr()).not.toMatch(/^\{/m);
  });

  it('names the API reference page, which answers there', async () => {
    expect(run.stderr().split('\n')[1]).toBe(`API reference: ${run.url}/docs`);
    const page = await fetch(`${run.url}/docs`);
    expect([page.status, page.headers.get('content-type')]).toEqual([200, 'text/html; charset=utf-8']);
    await page.body?.cancel();
  });

  it('serves the metrics on METRICS_HOST, apart from the API’s HOST', async () => {
    const metricsUrl = String(jsonLines(run.stdout()).find((event) => event.event === 'metrics_listening')!.url);
    expect(metricsUrl).toMatch(/^http:\/\/127\.0\.0\.2:\d+\/metrics$/);
    expect(run.stderr()).toContain(`Metrics: ${metricsUrl}`);
    expect((await fetch(metricsUrl)).status).toBe(200);
    expect(run.url).toMatch(/^http:\/\/127\.0\.0\.1:/);
  });
});

describe('the banner with DOCS_PAGE=false, and with PUBLIC_URL', () => {
  it('names no API reference page when it is off; names it under PUBLIC_URL, as a person opens it', () => {
    const facts = { url: 'http://127.0.0.1:8787', runtime: 'node', description: 'storage: in memory', cursorSecret: true, hostname: '127.0.0.1', demo: false };
    expect(startBanner(facts).join('\n')).not.toContain('API reference');
    expect(startBanner({ ...facts, docsUrl: 'https://api.example.com/docs' })[1]).toBe('API reference: https://api.example.com/docs');
  });

  it('serve leaves it out with DOCS_PAGE=false', async () => {
    const off = await serve({ DOCS_PAGE: 'false' });
    try {
      expect(off.stderr()).not.toContain('API reference');
      expect((await fetch(`${off.url}/docs`)).status).toBe(404);
    } finally {
      await off.stop();
    }
  });
});

describe('SHUTDOWN_TIMEOUT and METRICS_HOST in the configuration', () => {
  it('reads SHUTDOWN_TIMEOUT in ms (default 8000) and METRICS_HOST (default HOST)', () => {
    expect(readServerConfig({})).toMatchObject({ shutdownTimeout: 8000, metricsHost: '127.0.0.1' });
    expect(readServerConfig({ SHUTDOWN_TIMEOUT: '30000', HOST: '0.0.0.0' })).toMatchObject({ shutdownTimeout: 30_000, metricsHost: '0.0.0.0' });
    expect(readServerConfig({ HOST: '0.0.0.0', METRICS_HOST: '10.0.0.5' })).toMatchObject({ hostname: '0.0.0.0', metricsHost: '10.0.0.5' });
  });

  it('refuses a SHUTDOWN_TIMEOUT that is not a whole number of ms, exit 2', async () => {
    const { code, output } = await runProcess(process.execPath, ['dist/cli.js', 'serve'], { ...CLEAN_ENV, SHUTDOWN_TIMEOUT: '8s' });
    expect(output.trim()).toBe('Invalid configuration: SHUTDOWN_TIMEOUT must be a whole number from 0 to 3600000 (got "8s").');
    expect(code).toBe(2);
  });
});

describe('stampPid', () => {
  it('puts the pid after the time of every line', () => {
    const written: string[] = [];
    stampPid(42, (lines) => written.push(lines))('{"time":"t1","level":"info","event":"a"}\n{"time":"t2","level":"warn"}\n');
    expect(written).toEqual(['{"time":"t1","pid":42,"level":"info","event":"a"}\n{"time":"t2","pid":42,"level":"warn"}\n']);
  });
});

describe.runIf(redisAvailable())('merchant-api serve with WORKERS=2', () => {
  const redis = useRedis();
  let run: Run;
  beforeAll(async () => {
    run = await serve({ WORKERS: '2', REDIS_URL: redis.url });
  }, 60_000);
  afterAll(async () => {
    await run?.stop();
  });

  it('stamps every stdout line with the pid of the primary or of the worker that wrote it', async () => {
    for (let i = 0; i < 6; i++) await fetch(`${run.url}/healthz`, { headers: { connection: 'close' } });
    await sleep(200);
    const events = jsonLines(run.stdout());
    expect(events.every((event) => typeof event.pid === 'number')).toBe(true);
    const listening = events.find((event) => event.event === 'workers_listening')!;
    expect(listening.pid).toBe(run.child.pid);
    const workers = listening.pids as number[];
    expect(workers).toHaveLength(2);
    expect(events.filter((event) => event.event === 'listening').map((event) => event.pid).sort()).toEqual([...workers].sort());
    for (const event of events.filter((each) => each.event === 'request')) expect(workers).toContain(event.pid);
    expect(run.stderr()).toMatch(/^merchant-api listening on http:\/\/127\.0\.0\.1:\d+ \(node, .*, 2 workers\)$/m);
  });
});
