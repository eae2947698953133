/**
 * `npm run bench:features`: what each default feature of the request path
 * costs on the success path, in CPU microseconds per request, measured in
 * process through `api.fetch` (no HTTP, so the feature is not lost in the
 * noise of the socket work), on the built package (dist/), each feature on against everything off, in the
 * same run. Handlers are interleaved round by round, and the table gives the
 * median of the rounds; "everything off, again" shows the noise of the run.
 *
 *   npm run bench:features [-- --rounds=N --requests=N --case=user|validatesignature]
 *
 * With `--server=cli` the same question is asked of the standalone server over
 * HTTP instead (bench/feature-cost-cli.ts): each feature the environment turns
 * on and off, in CPU µs per request of `node dist/cli.js serve` under load
 * (`--rounds` default 5, `--seconds` per run, default 4).
 */
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import type { MerchantApi, MerchantApiOptions } from '../src/index.js';
import { makeUsers, MERCHANT_ID, MERCHANT_KEY, PUBLIC_URL, SINGLE_USER_ID, TIMESTAMP_TOLERANCE } from './servers/data.mjs';

// The built package, as deployed (its types are the sources'): through tsx the sources would carry
// esbuild's keepNames wrappers, a `__name` call for every closure made per request, which the build has not.
const dist = new URL('../dist/', import.meta.url);
const { createJsonLogger, createMerchantApi } = (await import(new URL('index.js', dist).href)) as typeof import('../src/index.js');
const { signUrl } = (await import(new URL('signing.js', dist).href)) as typeof import('../src/signing/index.js');
const { createMemoryStorage } = (await import(new URL('storage/memory.js', dist).href)) as typeof import('../src/storage/memory/index.js');

const { values } = parseArgs({
  options: { rounds: { type: 'string' }, requests: { type: 'string', default: '4000' }, case: { type: 'string', default: 'user' }, server: { type: 'string', default: 'in-process' }, seconds: { type: 'string', default: '4' } },
});
const caseId = values.case === 'validatesignature' ? 'validatesignature' : 'user';
if (values.server === 'cli') {
  const { featureCostThroughCli } = await import('./feature-cost-cli.js');
  await featureCostThroughCli({ rounds: Number(values.rounds ?? 5), seconds: Number(values.seconds), warmup: 2, caseId });
} else if (values.server === 'in-process') {
  await inProcess();
} else {
  throw new Error(`--server must be in-process or cli (got ${values.server})`);
}

async function inProcess(): Promise<void> {
  const rounds = Number(values.rounds ?? 15);
  const requests = Number(values.requests);

  const dir = mkdtempSync(join(tmpdir(), 'merchant-api-features-'));
  const fd = openSync(join(dir, 'access.log'), 'w');
  // Started a minute ago: a signature of the store's own first second is refused (no replay after a
  // restart). Room for every salt of the run: one merchant may hold half of maxSalts.
  const storage = createMemoryStorage({
    startedAt: Date.now() / 1000 - 60,
    maxSalts: 4 * (rounds + 2) * requests * 8,
    seed: { merchants: [{ id: MERCHANT_ID, status: 'active', keys: [MERCHANT_KEY] }], users: makeUsers(2000).map((user) => ({ merchant_id: MERCHANT_ID, ...user })) },
  });
  const OFF: Partial<MerchantApiOptions> = { accessLog: false, tracing: false, throttle: false, tarpit: false, fairShare: false };
  const CONFIGS: [string, Partial<MerchantApiOptions>][] = [
    ['everything off', OFF],
    ['everything off, again', OFF],
    // Test mode is on by default (docs/test-mode.md): a live request pays only the choice of its storage view.
    ['test mode off (TEST_MODE=false)', { ...OFF, testMode: false }],
    ['throttle', { ...OFF, throttle: undefined }],
    ['late refusals (tarpit)', { ...OFF, tarpit: undefined }],
    ['fair sharing', { ...OFF, fairShare: {} }],
    ['tracing, no SDK', { ...OFF, tracing: true }],
    ['access log, to a file', { ...OFF, accessLog: true }],
    ['every default, fair sharing on', { fairShare: {} }],
  ];
  const logger = createJsonLogger({ write: (lines) => void writeSync(fd, lines) });
  const apis: [string, MerchantApi][] = CONFIGS.map(([name, options]) => [
    name,
    createMerchantApi({ storage, publicUrl: PUBLIC_URL, timestampTolerance: TIMESTAMP_TOLERANCE, logger, merchantConcurrency: 1_000_000, ...options }),
  ]);
  const authorization = `Basic ${Buffer.from(`${MERCHANT_ID}:${MERCHANT_KEY}`).toString('base64')}`;
  const info = { clientAddress: '127.0.0.1', clientPort: 40_000 };

  /** The requests of one batch, made before it is timed: a Request costs more than most features. */
  function batch(): Request[] {
    return Array.from({ length: requests }, () =>
      caseId === 'user'
        ? new Request(`${PUBLIC_URL}/merchant/users/${SINGLE_USER_ID}`, { headers: { authorization } })
        : new Request(signUrl(MERCHANT_KEY, `${PUBLIC_URL}/validatesignature`, { cp: MERCHANT_ID })),
    );
  }

  async function measure(api: MerchantApi, list: Request[]): Promise<number> {
    const before = process.cpuUsage();
    for (const request of list) {
      const response = await api.fetch(request, info);
      if (response.status !== 200) throw new Error(`status ${response.status}`);
      await response.arrayBuffer();
    }
    const used = process.cpuUsage(before);
    // Let the timers (log flushes, samplers) run between batches, as they would between requests.
    await new Promise((resolve) => setTimeout(resolve, 10));
    return (used.user + used.system) / list.length;
  }

  const samples = new Map<string, number[]>(apis.map(([name]) => [name, []]));
  for (let round = 0; round < rounds + 2; round++) {
    // Two warm-up rounds; then each round in another order, so no handler always runs first.
    const order = apis.map((_, i) => apis[(i + round) % apis.length]!);
    for (const [name, api] of order) {
      const micros = await measure(api, batch());
      if (round >= 2) samples.get(name)!.push(micros);
    }
  }
  closeSync(fd);
  rmSync(dir, { recursive: true, force: true });

  const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;
  /** The q-quantile of a list (nearest rank). */
  const quantile = (list: number[], q: number) => [...list].sort((a, b) => a - b)[Math.min(list.length - 1, Math.floor(q * list.length))]!;
  const offs = samples.get('everything off')!;
  const base = median(offs);
  const fmt = (n: number) => `${n >= 0 ? '+' : ''}${n.toFixed(2)}`;
  console.log(`\n${caseId} through api.fetch, ${rounds} rounds of ${requests} requests, CPU µs per request (median), Node ${process.version}\n`);
  // The spread: the difference to "everything off" of the same round, its 25th to 75th percentile over the rounds.
  console.log('| configuration | µs/request | vs everything off | same-round difference, 25th-75th percentile |');
  console.log('|---|--:|--:|--:|');
  for (const [name] of apis) {
    const list = samples.get(name)!;
    const value = median(list);
    const differences = list.map((v, i) => v - offs[i]!);
    const spread = name === 'everything off' ? '-' : `${fmt(quantile(differences, 0.25))} to ${fmt(quantile(differences, 0.75))}`;
    console.log(`| ${name} | ${value.toFixed(2)} | ${name === 'everything off' ? '-' : fmt(value - base)} | ${spread} |`);
  }
}
