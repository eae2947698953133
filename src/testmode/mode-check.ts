/**
 * The answers of a key's mode (docs/test-mode.md): a test key on a server with test mode off, and
 * a live key on the simulator. Said once here for the Basic routes, `/validatesignature` (which
 * answers the message in its own shape) and the simulator.
 */
import { MerchantApiError } from '../errors.js';

export const TEST_MODE_DISABLED_MESSAGE = 'Test mode is turned off on this server (TEST_MODE=false): test keys (test_…) are refused; use a live key.';
export const TEST_MODE_DISABLED = new MerchantApiError('test_mode_disabled', TEST_MODE_DISABLED_MESSAGE);

export const TEST_KEY_REQUIRED = new MerchantApiError(
  'test_key_required',
  'The test simulator changes only test datasets: call it with a test key (test_…). A live key never changes or reaches test data.',
);

/**
 * The refusal of the key changes to a test key: a test key never creates, rotates, changes or
 * revokes a key, so it can never make or end a live one. A live key with `keys:manage` makes test
 * keys (`"mode": "test"`).
 */
export const NO_TEST_KEY_CHANGES = new MerchantApiError(
  'not_implemented',
  'Keys cannot be managed with a test key: a test key never creates, changes or revokes a key. Use a live key with keys:manage (it can create test keys with "mode": "test").',
);
