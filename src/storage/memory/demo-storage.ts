/**
 * The demo data (examples/seed.json: three merchants, twelve users) in a memory storage, for trying
 * the API from an installed package: the JSON is bundled into the build, so no file has to be found
 * at run time and it works the same on Node, Bun, Deno and runtimes without a file system.
 * Its keys are public (they are in the docs): never serve it where merchants call.
 */
import demoSeed from '../../../examples/seed.json';
import { createMemoryStorage, type MemoryStorage, type MemoryStorageOptions } from './memory-storage.js';

/**
 * A memory storage holding the demo merchants and users: `demo-merchant` with the key `demo-secret`,
 * `acme-books` with two keys, the disabled `closed-shop`. Each call gives a storage of its own.
 *
 * @example
 * const api = createMerchantApi({ storage: createDemoStorage() });
 */
export function createDemoStorage(options: MemoryStorageOptions = {}): MemoryStorage {
  // A copy per storage: the bundled document is one object shared by every call.
  return createMemoryStorage({ ...options, seed: structuredClone(demoSeed) });
}
