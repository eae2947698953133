/**
 * Part of `npm run bench:abuse`: credentials tried at full speed. Against the
 * standalone server (memory storage, pinned to core 0), wrk on core 1 sends
 * for 10 s, over 8 connections from one address, (a) one merchant's Basic
 * credentials with a wrong key, (b) a validatesignature URL of that merchant
 * with a wrong signature; a fresh server for each. Printed: answers per
 * second and by status: how many were checked against the keys (401 or 400)
 * and how many refused by the throttle (429) after the block.
 *
 * Options: --seconds=S (default 10), --cli=path/to/cli.js (another build, for
 * before/after figures).
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT, startAbuseServer } from './abuse-server.js';

const { values } = parseArgs({ options: { seconds: { type: 'string', default: '10' }, cli: { type: 'string', default: 'dist/cli.js' } } });
const SECONDS = Number(values.seconds);
const MERCHANT = { id: 'target', key: 'target-key-0123456789' };
const PUBLIC_URL = 'http://abuse.bench.example';

const work = mkdtempSync(join(tmpdir(), 'merchant-api-abuse-auth-'));
const seed = join(work, 'seed.json');
writeFileSync(seed, JSON.stringify({ merchants: [{ id: MERCHANT.id, keys: [MERCHANT.key] }], users: [] }));

/** wrk on core 1 against one URL; answers by status (bench/wrk/retry-after.lua, not waiting). */
function wrk(url: string, headers: string[]): Promise<{ rps: number; answers: Record<string, number> }> {
  const args = ['-c', '1', 'wrk', '-t1', '-c8', `-d${SECONDS}s`, '-s', join(ROOT, 'bench/wrk/retry-after.lua'), ...headers.flatMap((h) => ['-H', h]), url, '--', 'ignore'];
  return new Promise((done, fail) =>
    execFile('taskset', args, { timeout: (SECONDS + 30) * 1000 }, (error, out) => {
      const line = /WRKSTATUS (\{.*\})/.exec(out);
      if (error || !line) return fail(error ?? new Error(`wrk printed no summary: ${out}`));
      const r = JSON.parse(line[1]!) as { requests: number; duration_us: number; answers: Record<string, number> };
      done({ rps: r.requests / (r.duration_us / 1e6), answers: r.answers });
    }),
  );
}

const describe = (answers: Record<string, number>) =>
  Object.entries(answers)
    .map(([status, n]) => `${n.toLocaleString('en')} x ${status}`)
    .join(', ');

try {
  console.log(`credentials at full speed (${values.cli}), ${SECONDS} s each, 8 connections from 127.0.0.1\n`);
  for (const kind of ['wrong Basic key', 'wrong signature'] as const) {
    const server = await startAbuseServer(values.cli!, { SEED_FILE: seed, PUBLIC_URL });
    try {
      const ts = Math.floor(Date.now() / 1000);
      const result =
        kind === 'wrong Basic key'
          ? await wrk(`${server.url}/merchant/users?limit=1`, [`Authorization: Basic ${Buffer.from(`${MERCHANT.id}:not-the-key`).toString('base64')}`])
          : await wrk(`${server.url}/validatesignature?cp=${MERCHANT.id}&salt=s1&ts=${ts}&hmac=${'0'.repeat(56)}`, []);
      const checked = (result.answers['401'] ?? 0) + (result.answers['400'] ?? 0);
      console.log(`${kind}: ${Math.round(result.rps).toLocaleString('en')} answers/s; ${describe(result.answers)}`);
      console.log(`  checked against the keys: ${checked.toLocaleString('en')} (${Math.round(checked / SECONDS).toLocaleString('en')}/s); refused by the throttle: ${(result.answers['429'] ?? 0).toLocaleString('en')}`);
    } finally {
      await server.stop();
    }
  }
} finally {
  rmSync(work, { recursive: true, force: true });
}
