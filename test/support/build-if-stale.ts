/**
 * vitest's global setup (vitest.config.ts): builds dist/ when a source is newer than it, or it lacks
 * an entry (`node scripts/build.mjs --if-stale`, as `npm start` does), before any suite runs. So
 * `npx vitest run FILE` never tests a stale dist/: many suites spawn the built server and the
 * built CLI, and without this a single-file run after an edit to src/ tested the code before it,
 * silently. `npm test` builds first anyway (pretest); the check then finds dist/ current and costs
 * one short node process (about a tenth of a second of CPU). In a fresh clone (CI) `npm install`
 * and `pretest` have built it. The mutation runs (test/mutation/vitest.config.ts) have no global
 * setup: they test src/ in process and must not build for every mutant.
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Runs `scripts/build.mjs --if-stale` in `root`; throws when the build fails, rather than test what dist/ held. */
export function buildIfStale(root: string = ROOT): void {
  const result = spawnSync(process.execPath, ['scripts/build.mjs', '--if-stale'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  if (result.error) throw result.error;
  if (result.status !== 0) throw new Error(`node scripts/build.mjs --if-stale failed (exit ${result.status ?? result.signal}): not testing a stale dist/.`);
}

export default function setup(): void {
  buildIfStale();
}
