/**
 * The storage as one request sees it (`deps.storage(ctx).recordSalt(...)`):
 * every call bounded in time, every failure the documented 503
 * (docs/protocol.md#failures), watched by the hooks, and run inside the
 * share of the storage its merchant may hold. The storage itself recovers
 * (a pool reconnects), so the next request after the backend is back succeeds.
 */
import { MerchantApiError, StorageUnavailableError } from '../errors.js';
import { KEY_OPERATIONS, STORAGE_OPERATIONS, type Merchant, type Storage, type StorageOperation } from './contract.js';
import { KEYS_NOT_CHANGED } from './key-changes.js';
import { WEBHOOKS_NOT_KEPT } from './webhook-endpoints.js';

/** The 501 of an optional operation the storage lacks: the key changes', else the webhooks'. */
const KEY_OPERATION_NAMES: ReadonlySet<string> = new Set(KEY_OPERATIONS);

/**
 * Watches one storage call: called as it starts, it returns what to call when
 * it ends (with the error, if it failed). Metrics and traces hang here.
 */
export type StorageWatcher<C> = (operation: StorageOperation, context: C) => ((error?: unknown) => void) | undefined;

/** Runs a storage call with a deadline; a late or failed call throws `StorageUnavailableError`. */
export type StorageCall<C> = <T>(operation: StorageOperation, context: C, call: (storage: Storage) => Promise<T>) => Promise<T>;

/** Runs a call within a limit of the request's (the merchant's share of the connections), inside the deadline. */
export type StorageGate<C> = <T>(context: C, call: () => Promise<T>) => Promise<T>;

/**
 * The storage calls a request makes (`STORAGE_OPERATIONS`), each bounded, watched and shared; an optional one the storage lacks is 501.
 * And `cachedMerchant`: the storage's synchronous answer from memory, watched as a `getMerchant` call when it has one, else undefined.
 */
export type StorageView = Required<Pick<Storage, StorageOperation | 'cachedMerchant'>>;

export interface StorageGuardOptions<C> {
  /** Milliseconds before a call is a 503. */
  timeoutMs: number;
  /** Told of every failure of the backend (not of a storage's own refusals). */
  onFailure: (operation: StorageOperation, context: C, error: unknown) => void;
  watch?: StorageWatcher<C>;
  gate?: StorageGate<C>;
}

/** The most arguments a storage operation takes (`getUser(merchantId, id)`, `rotateWebhookSecret(merchantId, id, ms, options)`): checked by the build. */
type MostArguments = MustFit<Parameters<NonNullable<Storage[StorageOperation]>>['length']>;
type MustFit<N extends 0 | 1 | 2 | 3 | 4> = N;

/** The per-request views of `storage`: `views(ctx).getUser(...)`. */
export function storageViews<C>(storage: Storage, options: StorageGuardOptions<C>): (context: C) => StorageView {
  const { gate } = options;
  const guarded = guardStorage(storage, options.timeoutMs, options.onFailure, options.watch);
  const pooled = storage.pooledOperations === undefined ? undefined : new Set(storage.pooledOperations);
  const run: StorageCall<C> =
    gate === undefined
      ? guarded
      : (operation, context, call) => (pooled !== undefined && !pooled.has(operation) ? guarded(operation, context, call) : guarded(operation, context, (s) => gate(context, () => call(s))));
  // A merchant held in memory needs no deadline or share: the watchers see it as a getMerchant call that took no time.
  const { watch } = options;
  const cached: CachedLookup<C> | undefined =
    storage.cachedMerchant === undefined
      ? undefined
      : (context, id) => {
          const merchant = storage.cachedMerchant!(id);
          if (merchant !== undefined && watch !== undefined) watch('getMerchant', context)?.();
          return merchant;
        };
  return (context) => new GuardedView(run, context, cached);
}

type CachedLookup<C> = (context: C, id: string) => Merchant | undefined;

/**
 * A plain class rather than an object of closures: one small allocation per request. Its
 * methods, one per operation, are put on the prototype once, when the class is defined.
 */
class GuardedView<C> {
  readonly #run: StorageCall<C>;
  readonly #context: C;
  readonly #cached: CachedLookup<C> | undefined;

  constructor(run: StorageCall<C>, context: C, cached: CachedLookup<C> | undefined) {
    this.#run = run;
    this.#context = context;
    this.#cached = cached;
  }

  cachedMerchant(id: string): Merchant | undefined {
    return this.#cached === undefined ? undefined : this.#cached(this.#context, id);
  }

  static {
    for (const operation of STORAGE_OPERATIONS) {
      const missing = KEY_OPERATION_NAMES.has(operation) ? KEYS_NOT_CHANGED : WEBHOOKS_NOT_KEPT;
      Object.defineProperty(this.prototype, operation, {
        // Four parameters, the most any operation has, rather than `...args`: no array per call. The
        // storage gets as many arguments as the caller gave (a missing option stays missing).
        value: function guarded(this: GuardedView<unknown>, a?: unknown, b?: unknown, c?: unknown, d?: unknown): Promise<unknown> {
          const count = arguments.length;
          return this.#run(operation, this.#context, (storage) => {
            const method = (storage as unknown as Partial<Operations>)[operation];
            // An optional operation the storage lacks (webhooks or key changes on a storage of an embedder's own): passed through as its documented 501.
            if (method === undefined) return Promise.reject(missing);
            return count === 0 ? method.call(storage) : count === 1 ? method.call(storage, a) : count === 2 ? method.call(storage, a, b) : count === 3 ? method.call(storage, a, b, c) : method.call(storage, a, b, c, d);
          });
        },
        writable: true,
        configurable: true,
      });
    }
  }
}

interface GuardedView<C> extends StorageView {}

type Operations = Record<StorageOperation, (...args: unknown[]) => Promise<unknown>>;

interface Pending {
  deadline: number;
  reject: (error: Error) => void;
  /** Its neighbours in `DeadlineSweep`'s list while it is pending; undefined once settled. */
  previous: Pending | undefined;
  next: Pending | undefined;
}

function guardStorage<C>(
  storage: Storage,
  timeoutMs: number,
  onFailure: (operation: StorageOperation, context: C, error: unknown) => void,
  watch?: StorageWatcher<C>,
): StorageCall<C> {
  const deadlines = new DeadlineSweep(timeoutMs);
  return <T>(operation: StorageOperation, context: C, call: (storage: Storage) => Promise<T>): Promise<T> => {
    const done = watch?.(operation, context);
    return new Promise<T>((resolve, reject) => {
      const pending: Pending = { deadline: Date.now() + timeoutMs, reject: fail, previous: undefined, next: undefined };
      function fail(error: unknown): void {
        if (!deadlines.delete(pending)) return;
        done?.(error);
        // A storage may refuse with an answer of its own (a full replay store
        // is a 503 with Retry-After, a merchant over its share a 429): passed
        // through as it is. Anything else is a failure of the backend.
        if (error instanceof MerchantApiError && !(error instanceof StorageUnavailableError)) {
          reject(error);
          return;
        }
        onFailure(operation, context, error);
        reject(error instanceof StorageUnavailableError ? error : new StorageUnavailableError(`The storage ${operation} failed.`, { cause: error }));
      }
      deadlines.add(pending);
      let result: Promise<T>;
      try {
        result = call(storage);
      } catch (error) {
        fail(error);
        return;
      }
      result.then((value) => {
        if (!deadlines.delete(pending)) return;
        done?.();
        resolve(value);
      }, fail);
    });
  };
}

/**
 * One coarse timer for every call in flight instead of a timer per call:
 * arming and clearing a timer and racing two promises per call was a visible
 * share of every request on a fast storage. A late call is failed
 * within a tenth of the timeout (at most 250 ms) after its deadline.
 */
class DeadlineSweep {
  /**
   * The calls pending, in a ring through this node, rather than a Set: adding
   * and removing one touches no table (V8 allocates a Set's table anew when a
   * delete empties it, and most calls are the only one pending).
   */
  readonly #ring: Pending;
  readonly #interval: number;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(timeoutMs: number) {
    this.#interval = Math.max(1, Math.min(250, Math.floor(timeoutMs / 10)));
    const ring: Pending = { deadline: Number.POSITIVE_INFINITY, reject: () => {}, previous: undefined, next: undefined };
    ring.previous = ring.next = ring;
    this.#ring = ring;
  }

  add(pending: Pending): void {
    const last = this.#ring.previous!;
    pending.previous = last;
    pending.next = this.#ring;
    last.next = this.#ring.previous = pending;
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => this.#sweep(), this.#interval);
      unref(this.#timer);
    }
  }

  /** False when the call was already settled (it timed out first). */
  delete(pending: Pending): boolean {
    const { previous, next } = pending;
    if (previous === undefined || next === undefined) return false;
    previous.next = next;
    next.previous = previous;
    pending.previous = pending.next = undefined;
    return true;
  }

  #sweep(): void {
    const now = Date.now();
    for (let pending = this.#ring.next!; pending !== this.#ring; ) {
      // Read before `reject`, which takes the call out of the ring.
      const next = pending.next!;
      if (pending.deadline <= now) pending.reject(Object.assign(new Error('timed out'), { name: 'TimeoutError' }));
      // Settled meanwhile (by what the failure ran): start again from the first, each due call is gone by then.
      pending = next.next === undefined ? this.#ring.next! : next;
    }
    if (this.#ring.next === this.#ring) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}

/** The sweep alone must not keep a process alive (Node and Bun: `unref()`, Deno: `Deno.unrefTimer`). */
function unref(timer: ReturnType<typeof setInterval>): void {
  if (typeof timer === 'object' && timer !== null && 'unref' in timer) (timer as { unref(): void }).unref();
  else (globalThis as { Deno?: { unrefTimer?(id: number): void } }).Deno?.unrefTimer?.(timer as unknown as number);
}
