/**
 * The storage a request made with a test key sees (docs/test-mode.md#isolation): its own object,
 * chosen by the key's mode once the key matched (`TestMode.views`), so that no test request can
 * reach a live user and no live request a test one by construction: the live storage's
 * `listUsers` and `getUser` are never called from here, and the test dataset is never read by the
 * live view. The merchant, its keys and the storage's health are the live storage's (one
 * merchant, two modes); salts are recorded under a name no live merchant can have.
 *
 * A merchant's test dataset is its generated users with its stored changes laid over them
 * (`./dataset.ts`, `./changes.ts`), indexed by the memory storage's own index, so that pages,
 * filters, orders, `updated_since` and cursors behave exactly as on a live listing; the change
 * feed's tombstones are the stored unshares.
 */
import { NO_TEST_KEY_CHANGES } from './mode-check.js';
import type { RedeliveryResult, WebhookDeliveryPage, WebhookDeliveryQuery, WebhookRedelivery } from '../storage/webhook-deliveries.js';
import type { NewWebhookEndpoint, RotatedWebhookSecret, WebhookChangeOptions, WebhookEndpointSummary } from '../storage/webhook-endpoints.js';
import type { ChangedUserRecord, SaltRecord, ShareRemoval, Storage, UserPageQuery, UserRecord, UserRecordPage } from '../storage/contract.js';
import { ForwardingStorage } from '../storage/forwarding-storage.js';
import type { ClaimOutcome, IdempotencyClaim, IdempotencyCompletion, IdempotencyRelease } from '../storage/idempotency.js';
import { MemoryUserIndex } from '../storage/memory/users.js';
import { compareCodePoints } from '../storage/order.js';
import { testSaltNamespace, type TestChange, type TestChangeStore } from '../storage/test-changes.js';
import { generateTestUsers } from './dataset.js';

/** One merchant's test dataset as it is now. */
export interface TestDataset {
  /** The users, indexed as the memory storage indexes its own. */
  index: MemoryUserIndex;
  /** Each user's record with its `updated_at`, by id. */
  records: Map<string, ChangedUserRecord>;
  /** The shares removed, by `(removed_at, shared_user_id)`. */
  removals: ShareRemoval[];
  /** The latest `updated_at` or `removed_at` in it: a new change is stamped after it. */
  latest: string;
}

/** Merchants whose dataset is held built (each at most `MAX_TEST_USERS` records); the least recently used is rebuilt when asked again. */
const MAX_HELD_DATASETS = 256;

/**
 * Builds and holds test datasets, rebuilding one only when its changes differ from those it was
 * built from: a test listing costs one read of the changes (none are held in memory storages) and
 * a page of an index.
 */
export class TestDatasets {
  readonly #held = new Map<string, { version: string; dataset: TestDataset }>();
  readonly #store: () => TestChangeStore;
  #changes: TestChangeStore | undefined;

  /** `store` is asked the first time a test request needs it: a live-only handler never touches it. */
  constructor(
    readonly users: number,
    store: () => TestChangeStore,
  ) {
    this.#store = store;
  }

  /** Where the changes are kept. */
  get changes(): TestChangeStore {
    return (this.#changes ??= this.#store());
  }

  /** The merchant's dataset with its stored changes. */
  async of(merchantId: string): Promise<TestDataset> {
    const changes = await this.changes.changes(merchantId);
    changes.sort((x, y) => (x.at < y.at ? -1 : x.at > y.at ? 1 : compareCodePoints(x.shared_user_id, y.shared_user_id)));
    const version = changes.map((change) => `${change.shared_user_id}\0${change.at}`).join('\n');
    const held = this.#held.get(merchantId);
    if (held !== undefined && held.version === version) {
      // Most recently used last: the map's order is the eviction order.
      this.#held.delete(merchantId);
      this.#held.set(merchantId, held);
      return held.dataset;
    }
    const dataset = buildDataset(merchantId, this.users, changes);
    this.#held.delete(merchantId);
    if (this.#held.size >= MAX_HELD_DATASETS) this.#held.delete(this.#held.keys().next().value!);
    this.#held.set(merchantId, { version, dataset });
    return dataset;
  }
}

/** The generated users with `changes` (in time order) applied. */
export function buildDataset(merchantId: string, users: number, changes: readonly TestChange[]): TestDataset {
  const records = new Map<string, ChangedUserRecord>();
  let latest = '';
  for (const user of generateTestUsers(merchantId, users)) {
    records.set(user.shared_user_id, user);
    if (user.updated_at > latest) latest = user.updated_at;
  }
  const removed = new Map<string, ShareRemoval>();
  for (const change of changes) {
    if (change.record === null) {
      records.delete(change.shared_user_id);
      removed.set(change.shared_user_id, { shared_user_id: change.shared_user_id, removed_at: change.at });
    } else {
      records.set(change.shared_user_id, { ...change.record, shared_user_id: change.shared_user_id, updated_at: change.at });
      removed.delete(change.shared_user_id);
    }
    if (change.at > latest) latest = change.at;
  }
  const index = new MemoryUserIndex();
  for (const { updated_at, ...record } of records.values()) index.add(merchantId, record, updated_at);
  index.seal();
  const removals = [...removed.values()].sort(byRemoval);
  return { index, records, removals, latest };
}

function byRemoval(x: ShareRemoval, y: ShareRemoval): number {
  return x.removed_at < y.removed_at ? -1 : x.removed_at > y.removed_at ? 1 : compareCodePoints(x.shared_user_id, y.shared_user_id);
}


/** The test view of a storage: see the file's comment. */
export class TestModeStorage extends ForwardingStorage {
  readonly #datasets: TestDatasets;

  constructor(inner: Storage, datasets: TestDatasets) {
    super(inner);
    this.#datasets = datasets;
  }

  override recordSalt(record: SaltRecord): Promise<boolean> {
    return this.inner.recordSalt({ ...record, merchantId: testSaltNamespace(record.merchantId) });
  }

  override async listUsers(query: UserPageQuery): Promise<UserRecordPage> {
    const dataset = await this.#datasets.of(query.merchantId);
    const page = dataset.index.page(query);
    if (query.includeRemoved && query.order === 'updated_at') page.removals = removalsAfter(dataset.removals, query);
    return page;
  }

  override async getUser(merchantId: string, sharedUserId: string): Promise<UserRecord | undefined> {
    const found = (await this.#datasets.of(merchantId)).records.get(sharedUserId);
    if (found === undefined) return undefined;
    const { updated_at: _, ...record } = found;
    return record;
  }

  // Webhook endpoints: the merchant's test endpoints only (docs/test-mode.md#webhooks). Every call
  // names the mode, so a test key adds test endpoints and never finds a live one (nor a live key a
  // test one: the live storage's default is `live`). Each is the inner storage's when it has it.
  override listWebhookEndpoints(merchantId: string): Promise<WebhookEndpointSummary[]> {
    return this.inner.listWebhookEndpoints!(merchantId, 'test');
  }
  override addWebhookEndpoint(endpoint: NewWebhookEndpoint): Promise<WebhookEndpointSummary & { secret: string }> {
    return this.inner.addWebhookEndpoint!({ ...endpoint, mode: 'test' });
  }
  override removeWebhookEndpoint(merchantId: string, endpointId: string, options?: WebhookChangeOptions): Promise<boolean> {
    return this.inner.removeWebhookEndpoint!(merchantId, endpointId, { ...options, mode: 'test' });
  }
  override rotateWebhookSecret(merchantId: string, endpointId: string, expireOldInMs: number, options?: WebhookChangeOptions): Promise<RotatedWebhookSecret | undefined> {
    return this.inner.rotateWebhookSecret!(merchantId, endpointId, expireOldInMs, { ...options, mode: 'test' });
  }
  override sendWebhookTest(merchantId: string, endpointId: string): Promise<string | undefined> {
    return this.inner.sendWebhookTest!(merchantId, endpointId, 'test');
  }
  override listEndpointDeliveries(query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage | undefined> {
    return this.inner.listEndpointDeliveries!({ ...query, mode: 'test' });
  }
  override redeliverEndpointDeliveries(request: WebhookRedelivery): Promise<RedeliveryResult | undefined> {
    return this.inner.redeliverEndpointDeliveries!({ ...request, mode: 'test' });
  }

  // Key changes: refused before the handler runs (src/pipeline/authentication.ts), and here again.
  override createKey(): never {
    throw NO_TEST_KEY_CHANGES;
  }
  override rotateKey(): never {
    throw NO_TEST_KEY_CHANGES;
  }
  override revokeKey(): never {
    throw NO_TEST_KEY_CHANGES;
  }
  override updateKey(): never {
    throw NO_TEST_KEY_CHANGES;
  }

  // Idempotency keys under the test namespace, as salts are: a test key's Idempotency-Key never
  // meets (and is never answered with) a live request's stored answer.
  override claimIdempotencyKey(claim: IdempotencyClaim): Promise<ClaimOutcome> {
    return this.inner.claimIdempotencyKey!({ ...claim, merchantId: testSaltNamespace(claim.merchantId) });
  }
  override completeIdempotencyKey(completion: IdempotencyCompletion): Promise<void> {
    return this.inner.completeIdempotencyKey!({ ...completion, merchantId: testSaltNamespace(completion.merchantId) });
  }
  override releaseIdempotencyKey(release: IdempotencyRelease): Promise<void> {
    return this.inner.releaseIdempotencyKey!({ ...release, merchantId: testSaltNamespace(release.merchantId) });
  }
}

/** The next `limit` removals at or after `updatedSince` and after the position, as `UserRecordPage.removals` says. */
function removalsAfter(removals: readonly ShareRemoval[], { filter, after, afterUpdated, limit }: UserPageQuery): ShareRemoval[] {
  const found: ShareRemoval[] = [];
  for (const removal of removals) {
    if (found.length >= limit) break;
    if (filter.updatedSince !== undefined && removal.removed_at < filter.updatedSince) continue;
    if (after !== undefined && afterUpdated !== undefined && byRemoval(removal, { shared_user_id: after, removed_at: afterUpdated }) <= 0) continue;
    found.push(removal);
  }
  return found;
}
