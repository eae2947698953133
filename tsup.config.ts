import { existsSync } from 'node:fs';
import { defineConfig } from 'tsup';

/**
 * One entry per public subpath of package.json "exports" (checked by
 * test/package/package.test.ts), plus the CLI. ESM and CJS, with declarations.
 */
export const entries = {
  index: 'src/index.ts',
  signing: 'src/signing/index.ts',
  metrics: 'src/observe/metrics.ts',
  node: 'adapters/node.ts',
  bun: 'adapters/bun.ts',
  deno: 'adapters/deno.ts',
  'storage/memory': 'src/storage/memory/index.ts',
  'storage/mysql': 'src/storage/mysql/index.ts',
  'storage/redis': 'src/storage/redis/index.ts',
  client: 'src/client/index.ts',
} as const;

export default defineConfig([
  {
    // test/package/package.test.ts fails if an entry is missing, so this filter cannot hide one.
    entry: Object.fromEntries(Object.entries(entries).filter(([, file]) => existsSync(file))),
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    target: 'es2022',
    platform: 'neutral',
    // Dependencies stay external by default; node: built-ins are resolved by each runtime.
    external: [/^node:/],
  },
  {
    // The bin per runtime: each passes its adapter's serve to the same CLI.
    entry: { cli: 'src/cli/main.ts', 'cli-bun': 'src/cli/main-bun.ts', 'cli-deno': 'src/cli/main-deno.ts' },
    format: ['esm'],
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    banner: { js: '#!/usr/bin/env node' },
  },
]);
