import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Two files at a time, each in a worker process of its own: suites listen on ephemeral ports and
    // create databases of their own (test/support/mysql.ts), so files running together do not clash.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
