/**
 * `client.test`: the test simulator of a test key (docs/test-mode.md#the-simulator). A test key
 * needs nothing else: every other method works unchanged, on the merchant's test dataset. Each
 * call is a change, sent once and never retried (a lost answer may have been a change made:
 * listing with `updated_since` tells), so a 503 or a connection failure is thrown at once.
 */
import { MerchantResponseError } from './errors.js';
import type { Transport } from './transport.js';
import type { RequestOptions } from './types.js';
import type { WebhookEventType } from './webhooks.js';

/** What one `events()` call asks: one event (of a named user, or the simulator's pick), or a whole scenario. */
export type TestEventRequest = { type: WebhookEventType; sharedUserId?: string } | { scenario: 'churn' };

/** One event the simulator made, as a webhook sends it: `data` is the record with `updated_at`, or `{shared_user_id, unshared_at}`. */
export interface SimulatedTestEvent {
  type: WebhookEventType;
  timestamp: string;
  data: Record<string, string | null>;
}

export interface TestModeClient {
  /** Changes the test dataset; the events made, in order. A live key: `MerchantResponseError` with code `test_key_required`. */
  events(request: TestEventRequest, options?: RequestOptions): Promise<SimulatedTestEvent[]>;
  /** Forgets every change: the generated test dataset again. */
  reset(options?: RequestOptions): Promise<void>;
}

export function testModeClient(baseUrl: string, transport: Transport, auth: () => Record<string, string>): TestModeClient {
  return {
    events: (request, options = {}) => {
      const given = (request ?? {}) as { type?: unknown; sharedUserId?: unknown; scenario?: unknown };
      if ((given.type === undefined) === (given.scenario === undefined)) throw new TypeError('test.events(): give exactly one of type and scenario.');
      const body = given.scenario !== undefined ? { scenario: given.scenario } : given.sharedUserId === undefined ? { type: given.type } : { type: given.type, shared_user_id: given.sharedUserId };
      const url = `${baseUrl}/merchant/test/events`;
      return transport.call({ method: 'POST', url, body: JSON.stringify(body), once: true }, () => url, { ...auth(), 'content-type': 'application/json' }, options.signal, (answer) => {
        const parsed = answer as { status?: unknown; data?: unknown };
        if (typeof parsed !== 'object' || parsed === null || parsed.status !== 'ok' || !Array.isArray(parsed.data)) throw new Error('not {"status":"ok","data":[…]}');
        return parsed.data as SimulatedTestEvent[];
      });
    },
    reset: async (options = {}) => {
      const url = `${baseUrl}/merchant/test/reset`;
      await transport.send({ method: 'POST', url, once: true }, () => url, auth(), options.signal, async (response) => {
        await response.body?.cancel().catch(() => undefined);
        if (response.status !== 204) throw new MerchantResponseError({ status: response.status, code: 'invalid_response', message: `${url} answered ${response.status}, not 204.`, headers: response.headers }, { method: 'POST', url });
      });
    },
  };
}
