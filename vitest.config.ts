import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Suites that start servers and databases on real ports run one file at a time per worker.
    fileParallelism: true,
    maxWorkers: 2,
  },
});
