import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds dist/ first when a source is newer (scripts/build.mjs --if-stale): a run of one file never tests a stale build.
    globalSetup: ['test/support/build-if-stale.ts'],
    // Caps for a test or hook that hangs, not claims about speed: on a loaded 2-core machine a suite
    // that takes 10 s when quiet (many CLI processes, a MariaDB under other suites) can take 40.
    testTimeout: 120_000,
    hookTimeout: 180_000,
    // vi.waitFor without a timeout of its own waits 20 s, not 1 s (test/support/wait-defaults.ts).
    setupFiles: ['test/support/wait-defaults.ts'],
    // Three files at a time, each in a worker process of its own: suites listen on ephemeral ports and
    // create databases of their own (test/support/mysql.ts), so files running together do not clash.
    // Three on two cores because most of a file's time is spent waiting on the processes it starts
    // (MariaDB, Galera nodes, Redis, CLI servers, npm): with two workers the cores were idle for a
    // third of a run (vitest 793 s at 124% CPU), with three 540 s at 159% (docs/testing.md#suite-time).
    fileParallelism: true,
    maxWorkers: 3,
  },
});
