import { defineConfig } from 'tsup';

/**
 * One entry per public subpath of package.json "exports" (checked by
 * test/package.test.ts), plus the CLI. ESM and CJS, with declarations.
 */
export const entries = {
  index: 'src/index.ts',
  node: 'adapters/node.ts',
  bun: 'adapters/bun.ts',
  deno: 'adapters/deno.ts',
  'storage/memory': 'src/storage/memory.ts',
  'storage/mysql': 'src/storage/mysql/index.ts',
} as const;

export default defineConfig([
  {
    entry: entries,
    format: ['esm', 'cjs'],
    dts: true,
    sourcemap: true,
    target: 'es2022',
    platform: 'neutral',
    external: ['node:crypto', 'node:http', 'node:https', 'node:fs', 'node:fs/promises', 'node:net', 'node:util', 'node:path', 'node:url', 'node:process', 'node:readline', 'node:stream', 'kysely', 'mysql2', 'jose', '@hono/node-server'],
  },
  {
    entry: { cli: 'src/cli/main.ts' },
    format: ['esm'],
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    banner: { js: '#!/usr/bin/env node' },
  },
]);
