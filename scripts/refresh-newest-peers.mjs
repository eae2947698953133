#!/usr/bin/env node
/**
 * Writes test/fixtures/newest-peers/versions.json: the newest release of each
 * peer that package.json's peerDependencies range allows, as the npm registry
 * lists them today. test/package/newest-peers.test.ts installs exactly these,
 * so the suite is reproducible; run this (and commit the file) to move it on:
 *
 *   node scripts/refresh-newest-peers.mjs
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

const ROOT = new URL('../', import.meta.url);
const { peerDependencies } = JSON.parse(readFileSync(new URL('package.json', ROOT), 'utf8'));
const versions = {};
/** Release versions (x.y.z, no pre-release: a range does not match one) in ascending order. */
const byVersion = (a, b) => {
  const [x, y] = [a, b].map((version) => version.split('.').map(Number));
  return x[0] - y[0] || x[1] - y[1] || x[2] - y[2];
};
for (const [name, range] of Object.entries(peerDependencies)) {
  // `npm view name@range version --json` lists every matching release (or one string), in publication order.
  const listed = [JSON.parse(execFileSync('npm', ['view', `${name}@${range}`, 'version', '--json'], { encoding: 'utf8' }))].flat();
  versions[name] = listed.sort(byVersion).at(-1);
}
const file = new URL('test/fixtures/newest-peers/versions.json', ROOT);
writeFileSync(file, `${JSON.stringify({ refreshed: new Date().toISOString().slice(0, 10), versions }, null, 2)}\n`);
console.log(versions);
