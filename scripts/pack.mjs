/**
 * Packs the package into a tarball whose package.json has no `prepare` script:
 *
 *   node scripts/pack.mjs [--pack-destination DIR] [--json]     (npm run pack)
 *
 * `prepare` builds dist/ for an install from the git repository. A tarball already holds dist/,
 * and npm does not run `prepare` when it installs one, but npm 11 still lists the script of any
 * dependency that is not from a registry in an `install-scripts` warning, asking the user to
 * approve or decline a script that will never run (docs/install.md). So the files `npm pack` would
 * take are copied into a staging folder, with package.json minus `prepare`, and packed from
 * there: the same files, the same output as `npm pack` (--json included). dist/ must be built
 * (`npm run build`); the repository's own package.json is never changed (tests read it).
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const args = process.argv.slice(2);
const destinationAt = args.indexOf('--pack-destination');
const destination = destinationAt >= 0 ? args[destinationAt + 1] : process.cwd();
const json = args.includes('--json');

function npm(argv, cwd) {
  const result = spawnSync('npm', argv, { cwd, encoding: 'utf8' });
  if (result.status !== 0) {
    process.stderr.write(result.stdout + result.stderr);
    process.exit(result.status ?? 1);
  }
  return result.stdout;
}

const listed = JSON.parse(npm(['pack', '--dry-run', '--json', '--ignore-scripts'], ROOT).replace(/^[^[]*/, ''));
const staging = mkdtempSync(join(tmpdir(), 'merchant-api-pack-'));
try {
  for (const { path } of listed[0].files) {
    if (path === 'package.json') continue;
    mkdirSync(dirname(join(staging, path)), { recursive: true });
    copyFileSync(join(ROOT, path), join(staging, path));
  }
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  delete manifest.scripts.prepare;
  writeFileSync(join(staging, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  const output = npm(['pack', '--ignore-scripts', '--pack-destination', destination, ...(json ? ['--json'] : [])], staging);
  process.stdout.write(output);
} finally {
  rmSync(staging, { recursive: true, force: true });
}
