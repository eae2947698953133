/**
 * The demo merchant's key is published in the docs: `serve` without DATABASE_URL and without
 * SEED_FILE serves it only on a loopback address, and on any other HOST exits with 2 saying
 * what to pass. The real built server, as an operator starts it.
 */
import { execFile } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { CLEAN_ENV, ROOT, startServer } from '../support/processes.js';

function serve(env: Record<string, string>): Promise<{ code: number; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, ['dist/cli.js', 'serve'], { cwd: ROOT, env: { ...process.env, ...CLEAN_ENV, ...env }, timeout: 30_000 }, (error, _stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stderr });
    });
  });
}

describe('the demo merchant stays on this machine', () => {
  it.each(['0.0.0.0', '::', '192.0.2.10'])('refuses HOST=%s without DATABASE_URL or SEED_FILE, exit 2, saying what to set', async (host) => {
    const { code, stderr } = await serve({ HOST: host, SEED_FILE: '' });
    expect(code).toBe(2);
    expect(stderr).toContain(`HOST ${host} is reachable from other machines`);
    expect(stderr).toMatch(/Set DATABASE_URL \(MySQL\) or SEED_FILE \(a seed with your merchants\), or HOST=127\.0\.0\.1/);
  });

  it('serves the demo on loopback, and any HOST with a SEED_FILE', async () => {
    const local = await startServer('node', 'dist/cli.js', { HOST: '127.0.0.1', SEED_FILE: '' });
    expect(local.output()).toMatch(/Demo merchant: id "demo-merchant"/);
    await local.stop();
    const seeded = await startServer('node', 'dist/cli.js', { HOST: '0.0.0.0', SEED_FILE: 'examples/seed.json', PUBLIC_URL: 'http://127.0.0.1' });
    expect(seeded.url).toMatch(/^http:\/\//);
    await seeded.stop();
  });
});
