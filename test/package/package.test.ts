/** The published shape: package.json "exports" matches the tsup entries one to one, and every subpath loads. */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { entries } from '../../tsup.config.js';
import { ROOT, runProcess } from '../support/processes.js';

const pkg = JSON.parse(readFileSync(`${ROOT}package.json`, 'utf8'));
const subpaths = Object.keys(pkg.exports).filter((key) => key !== './package.json');

describe('package exports', () => {
  it('has one subpath per tsup entry, and every entry file exists', () => {
    const expected = Object.keys(entries).map((name) => (name === 'index' ? '.' : `./${name}`));
    expect(subpaths.sort()).toEqual(expected.sort());
    for (const file of Object.values(entries)) expect(existsSync(`${ROOT}${file}`), file).toBe(true);
  });

  it('points every subpath at built ESM, CJS and declaration files', () => {
    for (const subpath of subpaths) {
      const target = pkg.exports[subpath];
      for (const file of [target.import.default, target.import.types, target.require.default, target.require.types]) {
        expect(existsSync(`${ROOT}${file}`), `${subpath}: ${file}`).toBe(true);
      }
    }
  });

  it('loads every runtime-neutral subpath with import and require in a real Node process', async () => {
    // bun and deno adapters reference their runtime's globals only when serve() is called.
    const names = subpaths.map((s) => (s === '.' ? 'merchant-api' : `merchant-api/${s.slice(2)}`));
    const script = `
      const names = ${JSON.stringify(names)};
      for (const name of names) {
        const esm = await import(name);
        const cjs = require(name);
        if (Object.keys(esm).length === 0 || Object.keys(cjs).length === 0) throw new Error(name + ' exports nothing');
      }
      const { createMerchantApi } = await import('merchant-api');
      const { createMemoryStorage } = require('merchant-api/storage/memory');
      const api = createMerchantApi({ storage: createMemoryStorage(), accessLog: false });
      console.log((await api.fetch(new Request('http://x/healthz'))).status);
    `;
    const { code, output } = await runProcess('node', ['--input-type=module', '-e', `import { createRequire } from 'node:module'; const require = createRequire(import.meta.url + '/../package.json');${script}`]);
    expect(output.trim()).toBe('200');
    expect(code).toBe(0);
  });

  it('maps every subpath in typesVersions to its import types, for TypeScript with moduleResolution node10', () => {
    // node10 ignores "exports"; typesVersions is how it finds a subpath's types (and the same files as "types" for ".").
    const mapped = pkg.typesVersions['*'];
    expect(Object.keys(mapped).sort()).toEqual(subpaths.filter((s) => s !== '.').map((s) => s.slice(2)).sort());
    for (const subpath of subpaths.filter((s) => s !== '.')) expect(mapped[subpath.slice(2)], subpath).toEqual([pkg.exports[subpath].import.types]);
    expect(pkg.types).toBe(pkg.exports['.'].import.types);
  });

  it('ships a bin that prints its usage', async () => {
    expect(pkg.bin['merchant-api']).toBe('./dist/cli.js');
    const { code, output } = await runProcess('node', ['dist/cli.js', 'help']);
    expect(code).toBe(0);
    expect(output).toMatch(/^Usage: merchant-api <command>/);
  });
});

describe('package metadata', () => {
  it('has a LICENSE with the license package.json names, and a CHANGELOG with an Unreleased section and this version', () => {
    expect(pkg.license).toBe('MIT');
    expect(readFileSync(`${ROOT}LICENSE`, 'utf8')).toMatch(/^MIT License\n/);
    const changelog = readFileSync(`${ROOT}CHANGELOG.md`, 'utf8');
    expect(changelog).toMatch(/^## \[Unreleased\]$/m);
    expect(changelog).toMatch(new RegExp(`^## \\[${pkg.version.replaceAll('.', '\\.')}\\] - \\d{4}-\\d{2}-\\d{2}$`, 'm'));
  });

  it('builds dist/ on prepare, so an install from a git URL has it, and only when it is stale', () => {
    expect(pkg.scripts.prepare).toBe('node scripts/build.mjs --if-stale');
    expect(pkg.scripts.start).toMatch(/^node scripts\/build\.mjs --if-stale && node dist\/cli\.js serve$/);
  });

  it('decides every install script of its dependencies in allowScripts (npm install prints no install-scripts warning)', async () => {
    const { code, output } = await runProcess('npm', ['install-scripts', 'ls']);
    expect(output).toContain('No packages with unreviewed install scripts.');
    expect(code).toBe(0);
  });
});
