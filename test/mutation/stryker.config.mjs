// @ts-check
/**
 * Mutation testing of the security-critical modules (docs/testing.md#mutation-testing):
 * `npm run test:mutation`. Slow (tens of minutes on two cores), so not in CI.
 * @type {import('@stryker-mutator/api/core').PartialStrykerOptions}
 */
export default {
  testRunner: 'vitest',
  vitest: { configFile: 'test/mutation/vitest.config.ts', related: false },
  coverageAnalysis: 'perTest',
  mutate: [
    // Signing and its check, the replay stores (memory)
    'src/signing/*.ts',
    'src/routes/validate-signature.ts',
    'src/storage/memory/salts.ts',
    'src/storage/memory/salt-expiry.ts',
    // The failed-authentication throttle, and what it shares between instances
    'src/limits/throttle.ts',
    'src/limits/throttle-sharing.ts',
    // Page cursors
    'src/listing/cursor.ts',
    // Basic auth, and the check of credentials against a merchant that Basic and signatures share
    'src/auth/basic-auth.ts',
    'src/auth/merchant-check.ts',
    // The client address behind a trusted proxy, which a key's networks and the throttle read
    'src/http/forwarded-for.ts',
    // Tenant lookups: merchants, and users only of their merchant
    'src/storage/memory/memory-storage.ts',
    'src/routes/user.ts',
  ],
  // Static mutants (module-level constants) need a fresh module graph per test run: half the
  // time for a sixth of the mutants. Stryker counts them as ignored, not in the score.
  ignoreStatic: true,
  concurrency: 1,
  timeoutMS: 20_000,
  reporters: ['clear-text', 'progress', 'html', 'json'],
  htmlReporter: { fileName: 'reports/mutation/mutation.html' },
  jsonReporter: { fileName: 'reports/mutation/mutation.json' },
  tempDirName: '.stryker-tmp',
  cleanTempDir: 'always',
};
