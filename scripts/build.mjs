/**
 * Builds dist/ without ever removing it from under a process that reads it
 * (a test run, a server, a project installed from this folder): tsup writes
 * into a fresh directory beside it, then each file is moved into dist/ by
 * rename, which replaces a file in one step; files the new build no longer
 * has are removed last. dist/ exists throughout.
 *
 *   node scripts/build.mjs             build
 *   node scripts/build.mjs --if-stale  build only when dist/ lacks an entry
 *                                      or a source is newer than dist/
 *                                      (`prepare`, `npm start`)
 *
 * It takes no lock of its own: callers that share the folder serialise
 * builds themselves (the tests use flock on /tmp/dist.lock).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, utimesSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const DIST = join(ROOT, 'dist');
/** What the build reads: a change to any of these makes dist/ stale. */
const SOURCES = ['src', 'adapters', 'tsup.config.ts', 'tsconfig.json'];
/** Files every build has; one missing means dist/ is incomplete. */
const REQUIRED = ['index.js', 'index.cjs', 'index.d.ts', 'cli.js', 'cli-bun.js', 'cli-deno.js', 'client.js'];

function files(path) {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { withFileTypes: true }).flatMap((entry) => files(join(path, entry.name)));
}

function newestSource() {
  return Math.max(0, ...SOURCES.flatMap((source) => files(join(ROOT, source))).map((file) => statSync(file).mtimeMs));
}

function isCurrent() {
  if (!REQUIRED.every((file) => existsSync(join(DIST, file)))) return false;
  const built = Math.min(...REQUIRED.map((file) => statSync(join(DIST, file)).mtimeMs));
  return built >= newestSource();
}

if (process.argv.includes('--if-stale') && isCurrent()) process.exit(0);

// A source saved while tsup runs must leave dist/ stale, so the outputs carry the start time.
const started = new Date();
const staging = join(ROOT, `.dist-build-${process.pid}`);
rmSync(staging, { recursive: true, force: true });
try {
  const tsup = join(ROOT, 'node_modules', 'tsup', 'dist', 'cli-default.js');
  const result = spawnSync(process.execPath, [tsup, '--out-dir', staging, ...(process.argv.includes('--verbose') ? [] : ['--silent'])], { cwd: ROOT, stdio: 'inherit' });
  if (result.status !== 0) process.exit(result.status ?? 1);
  const built = new Set();
  for (const file of files(staging)) {
    const name = relative(staging, file);
    built.add(name);
    mkdirSync(dirname(join(DIST, name)), { recursive: true });
    utimesSync(file, started, started);
    renameSync(file, join(DIST, name));
  }
  for (const file of files(DIST)) if (!built.has(relative(DIST, file))) rmSync(file, { force: true });
} finally {
  rmSync(staging, { recursive: true, force: true });
}
