/**
 * scripts/refresh-newest-peers.mjs --check, the CI step that tells whether the pinned newest peers
 * (test/fixtures/newest-peers/versions.json) are still the newest: against a registry of our own
 * (an HTTP server answering npm's package documents), so each outcome is certain: current, behind
 * (exit 1, naming the peer and both versions; a release outside the range does not count), and a
 * registry that does not answer (exit 0 with a notice: offline CI is not failed). npm's cache is a
 * fresh folder, so the made-up documents never reach the machine's cache.
 */
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';

const { versions: pinned } = JSON.parse(readFileSync(`${ROOT}test/fixtures/newest-peers/versions.json`, 'utf8')) as { versions: Record<string, string> };
/** What the registry lists for each peer: the pinned release, an older one, and what a test adds. */
let releases: Record<string, string[]> = {};
let server: Server;
let registry = '';
let work = '';

beforeAll(async () => {
  work = mkdtempSync(join(tmpdir(), 'merchant-api-refresh-peers-'));
  server = createServer((request, response) => {
    const name = decodeURIComponent(request.url!.slice(1));
    const list = releases[name];
    if (!list) return void response.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"Not found"}');
    const versions = Object.fromEntries(list.map((version) => [version, { name, version, dist: { tarball: `${registry}${name}/-/x-${version}.tgz`, shasum: '0' } }]));
    const time = Object.fromEntries(list.map((version, i) => [version, new Date(Date.UTC(2026, 0, 1 + i)).toISOString()]));
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ name, 'dist-tags': { latest: list.at(-1) }, versions, time }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  registry = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  if (work) rmSync(work, { recursive: true, force: true });
});

function check(registryUrl: string): Promise<{ code: number; output: string }> {
  // A cache of its own per run: npm must ask the registry, and keeps nothing made up.
  const cache = mkdtempSync(join(work, 'cache-'));
  return new Promise((resolve) => {
    execFile(process.execPath, [`${ROOT}scripts/refresh-newest-peers.mjs`, '--check'], { env: { ...process.env, npm_config_registry: registryUrl, npm_config_cache: cache, npm_config_offline: 'false', npm_config_prefer_offline: 'false' }, encoding: 'utf8' }, (error, stdout, stderr) =>
      resolve({ code: error ? Number(error.code ?? 1) : 0, output: `${stdout}${stderr}`.trim() }),
    );
  });
}

describe('scripts/refresh-newest-peers.mjs --check', () => {
  it('passes when the pinned versions are the newest the registry lists in each range', async () => {
    releases = Object.fromEntries(Object.entries(pinned).map(([name, version]) => [name, ['0.0.1', version]]));
    const { code, output } = await check(registry);
    expect(output).toMatch(/^newest peers: current \(/);
    expect(code).toBe(0);
  }, 60_000);

  it('fails naming the peer and both versions when a newer release is in range, and ignores one outside it', async () => {
    releases = Object.fromEntries(Object.entries(pinned).map(([name, version]) => [name, ['0.0.1', version]]));
    const [major, minor] = pinned.kysely!.split('.');
    releases.kysely!.push(`${major}.${minor}.999`, '0.30.0');
    releases.ioredis!.push('7.0.0');
    const { code, output } = await check(registry);
    expect(output).toBe(`newest peers: behind the registry: kysely ${pinned.kysely} -> ${major}.${minor}.999. Run node scripts/refresh-newest-peers.mjs, run test/package/newest-peers.test.ts, and commit the file.`);
    expect(code).toBe(1);
  }, 60_000);

  it('does not fail CI when the registry does not answer, and says it did not check', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const { code, output } = await check(`http://127.0.0.1:${port}/`);
    expect(output).toMatch(/^newest peers: not checked, the registry did not answer \(ECONNREFUSED\)/);
    expect(code).toBe(0);
  }, 60_000);
});

// The file the script writes without --check: the same shape the suite reads.
describe('the pinned file', () => {
  it('pins one version of every peer, and says when it was refreshed', () => {
    const file = JSON.parse(readFileSync(`${ROOT}test/fixtures/newest-peers/versions.json`, 'utf8')) as { refreshed: string; versions: Record<string, string> };
    expect(file.refreshed).toMatch(/^\d{4}-\d{2}-\d{2}$/);
    const { peerDependencies } = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { peerDependencies: Record<string, string> };
    expect(Object.keys(file.versions).sort()).toEqual(Object.keys(peerDependencies).sort());
  });
});
