/** The published shape: package.json "exports" matches the tsup entries one to one, and every subpath loads. */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { entries } from '../tsup.config.js';
import { ROOT, runProcess } from './support/spawn.js';

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

  it('ships a bin that prints its usage', async () => {
    expect(pkg.bin['merchant-api']).toBe('./dist/cli.js');
    const { code, output } = await runProcess('node', ['dist/cli.js', 'help']);
    expect(code).toBe(0);
    expect(output).toMatch(/^Usage: merchant-api <command>/);
  });
});
