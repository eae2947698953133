/**
 * vitest's global setup (test/support/build-if-stale.ts, named in vitest.config.ts) builds dist/
 * before the suites when a source is newer, so `npx vitest run FILE` never tests a stale build;
 * it leaves a current dist/ alone (the quick check `npm test` pays after pretest's build), and a
 * failed build stops the run instead of testing what dist/ held. Run in a project of its own with
 * scripts/build.mjs and a stand-in for tsup, as test/package/build-script.test.ts does.
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import config from '../../vitest.config.js';
import { buildIfStale } from '../support/build-if-stale.js';
import { ROOT } from '../support/processes.js';

/** A tsup that writes the entry files, notes each run, and fails when told to. */
const FAKE_TSUP = `
import { appendFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
if (existsSync('fail')) { console.error('a type error'); process.exit(1); }
const outDir = process.argv[process.argv.indexOf('--out-dir') + 1];
appendFileSync('calls.log', 'built\\n');
mkdirSync(outDir, { recursive: true });
for (const file of ['index.js', 'index.cjs', 'index.d.ts', 'cli.js', 'cli-bun.js', 'cli-deno.js', 'client.js']) writeFileSync(outDir + '/' + file, '//');
`;

const project = mkdtempSync(join(tmpdir(), 'merchant-api-global-setup-'));
mkdirSync(join(project, 'scripts'));
copyFileSync(`${ROOT}scripts/build.mjs`, join(project, 'scripts', 'build.mjs'));
mkdirSync(join(project, 'node_modules', 'tsup', 'dist'), { recursive: true });
writeFileSync(join(project, 'node_modules', 'tsup', 'dist', 'cli-default.js'), FAKE_TSUP);
writeFileSync(join(project, 'package.json'), JSON.stringify({ type: 'module', private: true }));
mkdirSync(join(project, 'src'));
writeFileSync(join(project, 'src', 'index.ts'), 'export {};');

const builds = () => (existsSync(join(project, 'calls.log')) ? readFileSync(join(project, 'calls.log'), 'utf8').trim().split('\n').length : 0);
/** An edit of a source since the last build: dist/ two minutes old, the source one. */
const editSource = () => {
  const at = (secondsAgo: number) => new Date(Date.now() - secondsAgo * 1000);
  for (const file of readdirSync(join(project, 'dist'))) utimesSync(join(project, 'dist', file), at(120), at(120));
  utimesSync(join(project, 'src', 'index.ts'), at(60), at(60));
};

afterAll(() => rmSync(project, { recursive: true, force: true }));

describe('the global setup builds a stale dist/ before the suites', () => {
  it('is the global setup of vitest.config.ts', () => {
    expect(config.test?.globalSetup).toEqual(['test/support/build-if-stale.ts']);
  });

  it('builds a missing dist/, then leaves a current one alone', () => {
    buildIfStale(project);
    expect(builds()).toBe(1);
    buildIfStale(project);
    expect(builds()).toBe(1);
  });

  it('builds again once a source is newer than dist/', () => {
    editSource();
    buildIfStale(project);
    expect(builds()).toBe(2);
    buildIfStale(project);
    expect(builds()).toBe(2);
  });

  it('stops the run when the build fails, rather than test the dist/ it had', () => {
    editSource();
    writeFileSync(join(project, 'fail'), '');
    expect(() => buildIfStale(project)).toThrow(/build\.mjs --if-stale failed \(exit 1\): not testing a stale dist\//);
    rmSync(join(project, 'fail'));
    buildIfStale(project);
    expect(builds()).toBe(3);
  });
});
