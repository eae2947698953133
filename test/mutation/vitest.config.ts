/**
 * The tests `npm run test:mutation` runs against each mutant: those that pin
 * down the security-critical modules of ./stryker.config.mjs through the
 * handler and the modules themselves (the shared throttle's needs MariaDB, as
 * in CI). Suites that only spawn servers from dist/ cannot see a mutant in src/.
 */
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: [
      'test/signing/signing.test.ts',
      'test/routes/signature.test.ts',
      'test/routes/signature-checks.test.ts',
      'test/auth/basic-auth-refresh.test.ts',
      'test/http/forwarded-for.test.ts',
      'test/routes/users.test.ts',
      'test/limits/throttle.test.ts',
      'test/limits/throttle-shared.test.ts',
      'test/limits/throttle-sharing.test.ts',
      'test/observe/observability.test.ts',
      'test/listing/users-order.test.ts',
      'test/listing/users-changed.test.ts',
      'test/storage/memory/memory.test.ts',
      'test/storage/memory/memory-salts.test.ts',
      'test/storage/memory/memory-salt-expiry.test.ts',
      'test/storage/memory/memory-salts-limits.test.ts',
    ],
    testTimeout: 30_000,
  },
});
