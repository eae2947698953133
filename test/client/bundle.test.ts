/**
 * `merchant-api/client` is tree-shakeable: bundling it pulls in no server
 * code. esbuild (tsup's own) bundles the built entry as a merchant's bundler
 * would, for a runtime-neutral target where only `crypto` and `buffer`
 * (HMAC-SHA224, through src/signing/crypto.ts) may stay external: any other Node
 * built-in would fail the build. The bundle must be small and name nothing
 * of the server; bundled from source, its modules must be the client's, the
 * signing and crypto modules, the shared JSON splitter, and nothing else.
 */
import { build, type Metafile } from 'esbuild';
import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../support/processes.js';

const NODE_EXTERNALS = ['node:crypto', 'node:buffer', 'crypto', 'buffer'];
const SERVER_MARKERS = ['createMerchantApi', 'MemoryStorage', 'MysqlStorage', 'kysely', 'mysql2', 'prom-client', '@opentelemetry', 'jose', 'hono', 'openApiDocument', 'cursorSecret', 'StorageUnavailableError'];
/** The budget for the minified bundle (it is about 18 KB today). */
const MAX_BYTES = 40_000;

async function bundle(entry: string): Promise<{ code: string; inputs: string[] }> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: 'esm',
    platform: 'neutral',
    target: 'es2022',
    minify: true,
    treeShaking: true,
    external: NODE_EXTERNALS,
    metafile: true,
    logLevel: 'silent',
    absWorkingDir: ROOT,
  });
  return { code: result.outputFiles[0]!.text, inputs: Object.keys((result.metafile as Metafile).inputs).sort() };
}

describe('bundling merchant-api/client', () => {
  it('from the built package: small, with no server code and no Node built-in but crypto and buffer', async () => {
    expect(existsSync(`${ROOT}dist/client.js`), 'run npm run build first').toBe(true);
    const { code } = await bundle(`${ROOT}dist/client.js`);
    expect(code.length).toBeLessThan(MAX_BYTES);
    for (const marker of SERVER_MARKERS) expect(code, marker).not.toContain(marker);
    // What it must contain: the client and the signing it reuses.
    for (const marker of ['createMerchantClient', 'MerchantResponseError', 'MerchantNetworkError', 'MerchantTimeoutError', 'sha224', '/validatesignature', '/merchant/users']) expect(code, marker).toContain(marker);
    console.log(`merchant-api/client bundle: ${code.length} bytes minified`);
  });

  it('from source: only src/client/, the signing modules (signing, signing-params, crypto) and the JSON splitter are bundled (the server types are type-only imports)', async () => {
    const { inputs } = await bundle(`${ROOT}src/client/index.ts`);
    expect(inputs.filter((file) => !file.startsWith('src/client/')).sort()).toEqual(['src/json/array-splitter.ts', 'src/json/pending-scan.ts', 'src/json/string-text.ts', 'src/signing/crypto.ts', 'src/signing/index.ts', 'src/signing/params.ts']);
  });

  it('the CommonJS build has the same names (see test/package/public-api.test.ts) and no server code either', async () => {
    const { code } = await bundle(`${ROOT}dist/client.cjs`);
    expect(code.length).toBeLessThan(MAX_BYTES);
    for (const marker of SERVER_MARKERS) expect(code, marker).not.toContain(marker);
  });
});
