/**
 * `npm install` on the oldest Node the package supports (package.json `engines`, the Node the
 * README names) prints no EBADENGINE: every package of the lockfile, dev dependencies included,
 * accepts that Node. cookie@2 (Node >=22, through fastify's light-my-request) did not; the
 * `overrides` entry of package.json gives light-my-request cookie 1.1, the same API
 * (stringifySetCookie) on Node 18 and later.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';

// semver is npm's own range logic; it is in node_modules through many dev dependencies.
const semver = createRequire(`${ROOT}package.json`)('semver') as { minVersion(range: string): { version: string }; satisfies(version: string, range: string): boolean };
const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8')) as { engines: { node: string }; overrides?: Record<string, unknown> };
const lock = JSON.parse(readFileSync(`${ROOT}package-lock.json`, 'utf8')) as { packages: Record<string, { version?: string; engines?: { node?: string } | string[] }> };

describe('the lockfile on the oldest supported Node', () => {
  const oldest = semver.minVersion(pkg.engines.node).version;

  it(`has no package that refuses Node ${oldest} (no EBADENGINE on npm install)`, () => {
    const refusing = Object.entries(lock.packages)
      .filter(([, entry]) => !Array.isArray(entry.engines) && typeof entry.engines?.node === 'string' && !semver.satisfies(oldest, entry.engines.node))
      .map(([path, entry]) => `${path}@${entry.version} (node ${(entry.engines as { node: string }).node})`);
    expect(refusing).toEqual([]);
  });

  it('gives light-my-request a cookie 1 through overrides, and the lockfile follows it', () => {
    expect(pkg.overrides).toEqual({ 'light-my-request': { cookie: '^1.1.1' } });
    const cookies = Object.entries(lock.packages).filter(([path]) => path.endsWith('node_modules/cookie'));
    expect(cookies.length).toBeGreaterThan(0);
    for (const [path, entry] of cookies) expect(semver.satisfies(entry.version!, '<2'), `${path}@${entry.version}`).toBe(true);
  });
});
