/**
 * The base of a storage wrapped around another (salts on Redis in front of a storage, reads on a
 * replica): every operation of `STORAGE_OPERATIONS`, and each optional part the inner storage has,
 * goes to the inner storage unless the wrapper writes its own. So a new operation of the contract
 * needs no line in any wrapper, and a wrapper's file holds only what it changes.
 *
 * The forwarding methods are put on the prototype once, when this module loads: a call costs what
 * a hand-written forwarding method costs, with no per-call lookup or proxy.
 */
import { OPTIONAL_OPERATIONS, STORAGE_OPERATIONS, type Storage, type StorageOperation } from './contract.js';

/** Every member of the contract, typed from it: the operations come from the prototype, the optional parts from the constructor. */
export interface ForwardingStorage extends Storage {}

/** What the constructor copies from the inner storage. */
type Parts = { -readonly [K in 'concurrency' | 'pooledOperations' | 'health' | 'throttleStore' | 'recordKeyUse' | 'cachedMerchant' | 'testChanges']?: Storage[K] };

export abstract class ForwardingStorage {
  /** The storage this one wraps. */
  protected readonly inner: Storage;

  constructor(inner: Storage) {
    this.inner = inner;
    // Own properties only where the inner storage has the part and the wrapper writes none (its
    // methods are on its prototype already, its fields assigned after this): a part the inner
    // storage lacks stays absent, as the handler asks `storage.health?.()` and reads
    // `pooledOperations === undefined` as "every operation".
    const parts = this as Parts;
    if (inner.concurrency !== undefined) parts.concurrency = inner.concurrency;
    if (inner.pooledOperations !== undefined) parts.pooledOperations = inner.pooledOperations;
    if (this.health === undefined && inner.health !== undefined) parts.health = () => inner.health!();
    if (this.throttleStore === undefined && inner.throttleStore !== undefined) parts.throttleStore = () => inner.throttleStore!();
    if (this.testChanges === undefined && inner.testChanges !== undefined) parts.testChanges = () => inner.testChanges!();
    if (this.recordKeyUse === undefined && inner.recordKeyUse !== undefined) parts.recordKeyUse = (uses) => inner.recordKeyUse!(uses);
    // Only where the wrapper reads merchants from the inner storage, as the Redis and replica wrappers do.
    if (this.cachedMerchant === undefined && inner.cachedMerchant !== undefined && this.getMerchant === ForwardingStorage.prototype.getMerchant) parts.cachedMerchant = (id) => inner.cachedMerchant!(id);
    // An optional operation the inner storage lacks stays absent here too (the guard answers it 501).
    for (const operation of OPTIONAL_OPERATIONS) if (inner[operation] === undefined) (this as Record<string, unknown>)[operation] = undefined;
  }

  /** Releases the inner storage; a wrapper that holds more releases that too. */
  close(): Promise<void> {
    return this.inner.close();
  }
}

type Operations = Record<StorageOperation, (...args: unknown[]) => unknown>;

for (const operation of STORAGE_OPERATIONS) {
  Object.defineProperty(ForwardingStorage.prototype, operation, {
    value: function forward(this: ForwardingStorage, ...args: unknown[]): unknown {
      return (this.inner as unknown as Operations)[operation](...args);
    },
    writable: true,
    configurable: true,
  });
}
