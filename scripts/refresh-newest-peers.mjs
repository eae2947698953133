#!/usr/bin/env node
/**
 * The newest release of each peer that package.json's peerDependencies range allows, as the npm
 * registry lists them today, against test/fixtures/newest-peers/versions.json, which
 * test/package/newest-peers.test.ts installs (pinned, so a run is reproducible):
 *
 *   node scripts/refresh-newest-peers.mjs           write the file (then commit it)
 *   node scripts/refresh-newest-peers.mjs --check   compare only (CI, .ci/run):
 *       exit 0  the file names the newest releases;
 *       exit 1  a peer has a newer release in its range: the suite does not test what a team
 *               installing today gets, so CI fails until the file is refreshed and the suite passes;
 *       exit 0  with a notice when the registry cannot be reached: offline CI is not failed.
 *   --file PATH   another versions file (the script's own test)
 *
 * The registry is npm's configured one (npm_config_registry).
 */
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);
const ROOT = new URL('../', import.meta.url);
const args = process.argv.slice(2);
const check = args.includes('--check');
const fileAt = args.indexOf('--file');
const file = fileAt >= 0 ? args[fileAt + 1] : new URL('test/fixtures/newest-peers/versions.json', ROOT);
const { peerDependencies } = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8'));

/** Release versions (x.y.z, no pre-release: a range does not match one) in ascending order. */
const byVersion = (a, b) => {
  const [x, y] = [a, b].map((version) => version.split('.').map(Number));
  return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
};

/** The newest release of `name` in `range`; throws when the registry does not answer. */
async function newest(name, range) {
  // `npm view name@range version --json` lists every matching release (or one string), in publication order.
  const { stdout } = await run('npm', ['view', `${name}@${range}`, 'version', '--json', '--fetch-timeout=20000', '--fetch-retries=1'], { encoding: 'utf8', timeout: 60_000 });
  return [JSON.parse(stdout)].flat().sort(byVersion).at(-1);
}

let versions;
try {
  versions = Object.fromEntries(await Promise.all(Object.entries(peerDependencies).map(async ([name, range]) => [name, await newest(name, range)])));
} catch (error) {
  const reason = /E[A-Z0-9_]+/.exec(`${error.stderr ?? ''} ${error.code ?? ''}`)?.[0] ?? 'no answer';
  if (!check) {
    console.error(`The registry did not answer (${reason}); ${file} is unchanged.`);
    process.exit(1);
  }
  console.log(`newest peers: not checked, the registry did not answer (${reason}); the suite ran with the pinned versions.`);
  process.exit(0);
}

if (!check) {
  writeFileSync(file, `${JSON.stringify({ refreshed: new Date().toISOString().slice(0, 10), versions }, null, 2)}\n`);
  console.log(versions);
  process.exit(0);
}

const pinned = JSON.parse(readFileSync(file, 'utf8')).versions;
const behind = Object.entries(versions).filter(([name, version]) => pinned[name] !== version).map(([name, version]) => `${name} ${pinned[name] ?? 'missing'} -> ${version}`);
if (behind.length === 0) {
  console.log(`newest peers: current (${Object.entries(versions).map(([name, version]) => `${name} ${version}`).join(', ')}).`);
} else {
  console.log(`newest peers: behind the registry: ${behind.join(', ')}. Run node scripts/refresh-newest-peers.mjs, run test/package/newest-peers.test.ts, and commit the file.`);
  process.exitCode = 1;
}
