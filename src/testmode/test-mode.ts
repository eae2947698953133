/**
 * Test mode as the handler holds it (docs/test-mode.md): whether it is on, how many users a
 * generated dataset has, where changes are stored, and the test view of the storage that a
 * request made with a test key reads through (`TestModeStorage`).
 */
import { MerchantApiError, StorageUnavailableError } from '../errors.js';
import type { RequestContext } from '../http/context.js';
import type { Storage } from '../storage/contract.js';
import type { StorageGate } from '../storage/guard.js';
import { MemoryTestChanges } from '../storage/test-changes.js';
import { DEFAULT_TEST_USERS, MAX_TEST_USERS } from './dataset.js';
import { TestDatasets, TestModeStorage } from './test-storage.js';

/** `MerchantApiOptions.testMode`. */
export interface TestModeOptions {
  /** false: every test key is refused, 403 `test_mode_disabled` (`TEST_MODE=false`). Default true. */
  enabled?: boolean;
  /** Users in each merchant's generated dataset (`TEST_MODE_USERS`), 0-10,000. Default 100. */
  users?: number;
}

/** What the handler's routes use of test mode (`HandlerDeps.testMode`). */
export interface TestModeDeps {
  enabled: boolean;
  /** Users in a generated dataset. */
  users: number;
  datasets: TestDatasets;
  /**
   * Runs the simulator's storage work as every storage call runs: within the test traffic's share
   * and the request's merchant's, and failed with 503 `storage_unavailable` past the storage timeout.
   */
  guarded<T>(ctx: RequestContext, call: () => Promise<T>): Promise<T>;
}

/** The resolved test mode and the test view of `storage`. */
export function createTestMode(storage: Storage, options: TestModeOptions | false | undefined, timeoutMs: number, gate: StorageGate<RequestContext> | undefined): TestModeDeps & { storage: TestModeStorage } {
  const given = options === false ? { enabled: false } : (options ?? {});
  const users = given.users ?? DEFAULT_TEST_USERS;
  if (!Number.isInteger(users) || users < 0 || users > MAX_TEST_USERS) throw new TypeError(`testMode.users must be a whole number from 0 to ${MAX_TEST_USERS}.`);
  const datasets = new TestDatasets(users, () => storage.testChanges?.() ?? new MemoryTestChanges());
  const guarded = <T>(ctx: RequestContext, call: () => Promise<T>): Promise<T> => withDeadline(gate === undefined ? call() : gate(ctx, call), timeoutMs);
  return { enabled: given.enabled !== false, users, datasets, guarded, storage: new TestModeStorage(storage, datasets) };
}

function withDeadline<T>(work: Promise<T>, timeoutMs: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new StorageUnavailableError('The storage did not store the test change in time.')), timeoutMs);
  });
  return Promise.race([work, late])
    .catch((error: unknown) => {
      // The store's own answers (a full test dataset: 409) pass as they are; anything else is the storage failing.
      throw error instanceof MerchantApiError ? error : new StorageUnavailableError('The storage failed to read or store a test change.', { cause: error });
    })
    .finally(() => clearTimeout(timer));
}
