/**
 * The webhook operations of the storage contract (`Storage.listWebhookEndpoints` and the rest),
 * for `/merchant/webhooks`: the endpoint functions of `endpoints.ts`, which the CLI uses too, each
 * scoped to the authenticated merchant, their refusals turned into the API's errors. A storage
 * failure is a `StorageUnavailableError`; another merchant's endpoint is not found, like none, and
 * so is one of the other mode (`live` unless the test view of the storage says `test`).
 */
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { CausalReads } from '../causal-reads.js';
import { MerchantApiError } from '../../../errors.js';
import type { Storage, WEBHOOK_OPERATIONS } from '../../contract.js';
import type { MasterKey } from '../../sql/key-sealing.js';
import { webhookTestRefused, type NewWebhookEndpoint, type RotatedWebhookSecret, type WebhookChangeOptions, type WebhookEndpointMode, type WebhookEndpointSummary } from '../../webhook-endpoints.js';
import type { MerchantApiDatabase } from '../schema.js';
import { storageError } from '../sql-values.js';
import { listEndpointDeliveryPage, redeliverEndpointDeliveries } from './deliveries.js';
import type { RedeliveryResult, WebhookDeliveryPage, WebhookDeliveryQuery, WebhookRedelivery } from '../../webhook-deliveries.js';
import { REDELIVER_DISABLED } from '../../webhook-deliveries.js';
import { addWebhookEndpoint, listWebhookEndpoints, removeWebhookEndpoint, rotateWebhookSecret, sendWebhookTest, WebhookAdminError } from './endpoints.js';

type Db = Kysely<MerchantApiDatabase>;

/** Runs one endpoint operation: not found as `undefined`, the test budget as 429, the limit, a disabled endpoint and a running overlap as 409, anything else a 503. */
async function scoped<T>(what: string, body: () => Promise<T>): Promise<T | undefined> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof WebhookAdminError) {
      if (error.code === 'endpoint_not_found' || error.code === 'merchant_not_found') return undefined;
      if (error.code === 'too_many_tests') throw webhookTestRefused(error.retryAfter ?? 1);
      if (error.code === 'endpoint_disabled' && what === 'webhook redelivery') throw REDELIVER_DISABLED;
      throw new MerchantApiError('conflict', error.message);
    }
    throw storageError(error, what);
  }
}

/** `causal`: the listing waits for the cluster's latest commit on a Galera node (a merchant lists what it just added through another node). */
export function merchantWebhookEndpoints(db: Db, masterKey: MasterKey, causal?: CausalReads): Required<Pick<Storage, (typeof WEBHOOK_OPERATIONS)[number]>> {
  const read = causal && (<R>(query: RawBuilder<R>) => causal.executeRaw(query));
  // Before an endpoint is changed, tested, or its deliveries read or sent again, a Galera node
  // applies every commit in the cluster: the endpoint a merchant just added, and the events it just
  // caused, through another node are found here too (without the wait, a test sent right after the
  // add through another node was "not found" under load). After one wait on the node, every
  // connection to it sees them. Elsewhere: nothing.
  const caughtUp = <T>(what: string, body: () => Promise<T>): Promise<T | undefined> =>
    scoped(what, async () => {
      if (causal) await causal.executeRaw(sql`SELECT 1`);
      return body();
    });
  return {
    listWebhookEndpoints: async (merchantId: string, mode: WebhookEndpointMode = 'live'): Promise<WebhookEndpointSummary[]> => (await scoped('webhook endpoint list', () => listWebhookEndpoints(db, merchantId, read, mode))) ?? [],
    addWebhookEndpoint: async (endpoint: NewWebhookEndpoint) => {
      const added = await scoped('webhook endpoint add', () => addWebhookEndpoint(db, masterKey, endpoint.merchantId, endpoint.url, endpoint.events, endpoint.maxPerMerchant, endpoint.actor, endpoint.keyId, endpoint.mode ?? 'live'));
      // The merchant was deleted while it asked: as any request of a merchant that is gone.
      if (added === undefined) throw new MerchantApiError('unauthorized', 'Valid merchant credentials are required (HTTP Basic: merchant id and API key).');
      return added;
    },
    removeWebhookEndpoint: async (merchantId: string, endpointId: string, options?: WebhookChangeOptions): Promise<boolean> =>
      (await caughtUp('webhook endpoint remove', () => removeWebhookEndpoint(db, endpointId, merchantId, options?.actor, options?.keyId, options?.mode ?? 'live').then(() => true))) ?? false,
    rotateWebhookSecret: (merchantId: string, endpointId: string, expireOldInMs: number, options?: WebhookChangeOptions): Promise<RotatedWebhookSecret | undefined> =>
      caughtUp('webhook secret rotation', () => rotateWebhookSecret(db, masterKey, endpointId, expireOldInMs, merchantId, options?.actor, options?.keyId, options?.mode ?? 'live')),
    sendWebhookTest: (merchantId: string, endpointId: string, mode: WebhookEndpointMode = 'live'): Promise<string | undefined> =>
      caughtUp('webhook test', () => sendWebhookTest(db, endpointId, merchantId, mode)),
    listEndpointDeliveries: (query: WebhookDeliveryQuery): Promise<WebhookDeliveryPage | undefined> =>
      caughtUp('webhook delivery list', () => listEndpointDeliveryPage(db, { ...query, mode: query.mode ?? 'live' })),
    redeliverEndpointDeliveries: (request: WebhookRedelivery): Promise<RedeliveryResult | undefined> =>
      caughtUp('webhook redelivery', () => redeliverEndpointDeliveries(db, { ...request, mode: request.mode ?? 'live' }, request.actor)),
  };
}
