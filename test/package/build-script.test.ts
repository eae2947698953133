/**
 * scripts/build.mjs, which `build`, `prepare` and `npm start` run
 * (docs/install.md#building-in-this-repository): `--if-stale` builds only
 * when dist/ lacks a file or a source is newer, and a build never removes
 * dist/ from under a reader. Run in a project of its own with a stand-in
 * for tsup that writes the entry files and one chunk named by CHUNK, and
 * notes whether dist/ was there while it ran.
 */
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';

const FAKE_TSUP = `
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
const outDir = process.argv[process.argv.indexOf('--out-dir') + 1];
appendFileSync('calls.log', (existsSync('dist/index.js') ? 'dist present' : 'dist absent') + '\\n');
mkdirSync(outDir + '/storage', { recursive: true });
for (const file of ['index.js', 'index.cjs', 'index.d.ts', 'cli.js', 'cli-bun.js', 'cli-deno.js', 'client.js', 'storage/memory.js', 'chunk-' + process.env.CHUNK + '.js']) {
  writeFileSync(outDir + '/' + file, '// ' + process.env.CHUNK);
}
`;

const project = mkdtempSync(join(tmpdir(), 'merchant-api-build-'));
mkdirSync(join(project, 'scripts'));
copyFileSync(`${ROOT}scripts/build.mjs`, join(project, 'scripts', 'build.mjs'));
mkdirSync(join(project, 'node_modules', 'tsup', 'dist'), { recursive: true });
writeFileSync(join(project, 'node_modules', 'tsup', 'dist', 'cli-default.js'), FAKE_TSUP);
writeFileSync(join(project, 'package.json'), JSON.stringify({ type: 'module', private: true }));
mkdirSync(join(project, 'src'));
writeFileSync(join(project, 'src', 'index.ts'), 'export {};');

function build(chunk: string, ...args: string[]): void {
  const result = spawnSync(process.execPath, ['scripts/build.mjs', ...args], { cwd: project, env: { ...process.env, CHUNK: chunk }, encoding: 'utf8' });
  expect(result.status, result.stderr).toBe(0);
}
const calls = () => (existsSync(join(project, 'calls.log')) ? readFileSync(join(project, 'calls.log'), 'utf8').trim().split('\n') : []);
const dist = () => readdirSync(join(project, 'dist'), { recursive: true, encoding: 'utf8' }).sort();

afterAll(() => rmSync(project, { recursive: true, force: true }));

describe('scripts/build.mjs', () => {
  it('--if-stale builds when dist/ is missing', () => {
    build('one', '--if-stale');
    expect(calls()).toEqual(['dist absent']);
    expect(dist()).toContain('chunk-one.js');
    expect(readdirSync(project).filter((name) => name.startsWith('.dist-build-'))).toEqual([]);
  });

  it('--if-stale does nothing while dist/ is newer than every source', () => {
    build('unused', '--if-stale');
    expect(calls()).toHaveLength(1);
  });

  it('--if-stale builds once a source is newer, with dist/ in place throughout, and then drops the files the build no longer has', () => {
    const later = new Date(Date.now() + 60_000);
    utimesSync(join(project, 'src', 'index.ts'), later, later);
    build('two', '--if-stale');
    expect(calls()).toEqual(['dist absent', 'dist present']);
    expect(dist()).toContain('chunk-two.js');
    expect(dist()).not.toContain('chunk-one.js');
    expect(readFileSync(join(project, 'dist', 'index.js'), 'utf8')).toBe('// two');
  });

  it('--if-stale builds when dist/ lacks an entry file', () => {
    rmSync(join(project, 'dist', 'cli-deno.js'));
    const later = new Date(Date.now() + 120_000);
    utimesSync(join(project, 'dist', 'index.js'), later, later);
    build('three', '--if-stale');
    expect(calls()).toHaveLength(3);
    expect(dist()).toContain('cli-deno.js');
  });

  it('builds every time without --if-stale', () => {
    build('four');
    expect(calls()).toHaveLength(4);
    expect(dist()).toContain('chunk-four.js');
  });
});
