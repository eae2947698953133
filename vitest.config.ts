import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds dist/ first when a source is newer (scripts/build.mjs --if-stale): a run of one file never tests a stale build.
    globalSetup: ['test/support/build-if-stale.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two files at a time, each in a worker process of its own: suites listen on ephemeral ports and
    // create databases of their own (test/support/mysql.ts), so files running together do not clash.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
