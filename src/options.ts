/**
 * The options of `createMerchantApi`, their defaults (from `src/defaults.ts`)
 * and their validation: a bad option throws a `TypeError` naming it when the
 * handler is created, never later on a request.
 */
import type { TestModeOptions } from './testmode/test-mode.js';
import { DEFAULTS } from './defaults.js';
import type { MerchantApiHooks } from './http/hooks.js';
import { normaliseBasePath } from './http/url.js';
import { checkIpv6Prefix } from './limits/address-key.js';
import type { FairShareOptions } from './limits/fair-share.js';
import type { TarpitOptions } from './limits/tarpit.js';
import type { ThrottleOptions } from './limits/throttle.js';
import type { Logger } from './observe/logger.js';
import type { DocsAssets } from './routes/docs/assets.js';
import type { PartHealth, Storage } from './storage/contract.js';

export interface MerchantApiOptions {
  /** Where merchants, keys, salts and users live. The caller owns it and closes it. */
  storage: Storage;
  /** Mount path inside another server, e.g. `/merchant-api`. Default: none. */
  basePath?: string;
  /**
   * The public URL(s) merchants call, e.g. `https://api.example.com`; the
   * signature covers it. The only trusted source in production.
   */
  publicUrl?: string | readonly string[];
  /**
   * Behind a proxy: take the public origin from `X-Forwarded-Proto`/`-Host`, and the client
   * address from the last `X-Forwarded-For` entry, its port dropped (`a.b.c.d:p`, `[v6]:p`); a last
   * entry that is no address is a 400 (only behind a proxy that sets them).
   */
  trustProxy?: boolean;
  /**
   * Without `publicUrl`: the host names a request may name, in its `Host` (or, with `trustProxy`, its
   * `X-Forwarded-Host`), such as `['api.example.com']`; the port is not compared. Where the handler uses
   * the host (the URL a signature covers, the `Link` of a list page), another host is a 400
   * `malformed_request` instead of being echoed (docs/embedding.md#the-host-header). Default: any host.
   */
  allowedHosts?: readonly string[];
  /**
   * IPv6 clients are counted per network of this prefix length by the failed-authentication
   * throttle and late refusals (docs/security.md#ipv6-clients); IPv4 clients per address.
   * A whole number from 32 to 128 (128: per address). Default 64.
   */
  ipv6Prefix?: number;
  /** Accepted distance of `ts` from now, in seconds, either way. Default 300. */
  timestampTolerance?: number;
  /**
   * How far ahead of now `ts` may be, in seconds, at most `timestampTolerance` (its default: the
   * symmetric window). A shorter bound shortens the refusal after salts on Redis are lost
   * (docs/protocol.md#replay-and-timestamps); 30 suits clocks on NTP.
   */
  timestampFutureTolerance?: number;
  /** Deadline of every storage call in milliseconds; later is a 503. Default 5000. */
  storageTimeout?: number;
  /** Secret sealing page cursors, shared by every instance (32+ bytes). Default: random per process. */
  cursorSecret?: string | Uint8Array;
  /** Users per storage read while streaming the whole list. Default 1000. */
  streamBatchSize?: number;
  /** Clock in milliseconds since the epoch, for tests. Default `Date.now`. */
  now?: () => number;
  /** Where the access log and events go: any logger with pino's shape. Default: JSON lines on standard output. */
  logger?: Logger;
  /** One line per request on the logger. Default true. */
  accessLog?: boolean;
  /**
   * `GET /docs` under the base path: the OpenAPI document as an interactive page (Swagger UI), served from
   * this server only (docs/embedding.md#the-api-reference-page). Needs the optional package `swagger-ui-dist`
   * (without it the page answers 404 naming it) or `docsAssets`. Default true.
   */
  docsPage?: boolean;
  /** Where the page reads Swagger UI's files, where the runtime has no `node:fs`. Default: the package `swagger-ui-dist`, read from disk. */
  docsAssets?: () => Promise<DocsAssets>;
  /** Your own hooks (quota, metrics, tracing); several sets run in order. */
  hooks?: MerchantApiHooks | readonly MerchantApiHooks[];
  /** A span per request and storage call through `@opentelemetry/api`: a no-op until an SDK is registered. Default true. */
  tracing?: boolean;
  /**
   * Throttling of failed authentication per client address and per
   * (merchant, address) (docs/security.md#throttling); `false` turns it off.
   * Needs the client address, which the adapters pass to `fetch`.
   */
  throttle?: ThrottleOptions | false;
  /** Listing requests (`GET /merchant/users`) one merchant may have running at once; the next gets 429. Default 4. */
  merchantConcurrency?: number;
  /**
   * While the instance is busy, a merchant keeping several connections busy and using more
   * than its share gets 429 (docs/security.md#fair-sharing); `{}` turns it on with the defaults.
   * It counts connections by `RequestInfo.clientPort`, which our adapters give. Default off in
   * the library: the CPU it samples is the whole process's, in your server not only this
   * handler's (on by default in the standalone server, `FAIR_SHARE`).
   */
  fairShare?: FairShareOptions | false;
  /**
   * A connection refused with 429 and `Retry-After` that sends again before
   * that time gets its next refusal only when the time is up (at most
   * `maxDelayMs`, default 5000, later), so that a client ignoring
   * `Retry-After` costs a timer instead of a core (docs/security.md#clients-that-ignore-retry-after).
   * Needs `RequestInfo.clientPort`, which our adapters give. Default on; `false` turns it off.
   */
  tarpit?: TarpitOptions | false;
  /**
   * The merchant's webhook endpoints (`/merchant/webhooks`, docs/webhooks.md#endpoints): the address
   * rules a URL must pass (`https`, a public address; lifted only for development and tests) and the
   * most endpoints per merchant (default 10). The endpoints themselves need a storage that has them (MySQL).
   */
  webhooks?: WebhookEndpointOptions;
  /**
   * Parts of the instance besides the storage, added to the `details` of `/healthz` beside the
   * storage's own (`serve`: `webhooks`, its dispatcher). Called on every `/healthz`: it
   * must answer from memory. A part that is not ok leaves the instance live.
   */
  healthParts?: () => Record<string, HealthPart> | undefined;
  /**
   * Test mode (docs/test-mode.md): requests made with a test key (`test_…`) see the merchant's
   * generated test dataset, never live data. On by default with 100 users per merchant; `false`
   * (or `{ enabled: false }`, `TEST_MODE=false`) refuses test keys with 403 `test_mode_disabled`.
   */
  testMode?: TestModeOptions | false;
}

/** A part of `/healthz`'s details: `ok` and, when not, a `problem`; figures of its own beside them (never a secret). */
export type HealthPart = PartHealth & { [figure: string]: string | number | boolean | null | undefined };

/** What `/merchant/webhooks` checks (`MerchantApiOptions.webhooks`). */
export interface WebhookEndpointOptions {
  /** Private, loopback and reserved addresses allowed (`WEBHOOK_ALLOW_PRIVATE`): development and tests only. */
  allowPrivate?: boolean;
  /** `http` URLs allowed (`WEBHOOK_ALLOW_HTTP`): development and tests only. */
  allowHttp?: boolean;
  /** Endpoints per merchant (`WEBHOOK_MAX_ENDPOINTS`, default 10). */
  maxEndpointsPerMerchant?: number;
  /** How long deliveries are kept (`WEBHOOK_RETENTION`, default 7 days): how far back `POST /merchant/webhooks/{id}/redeliver` may reach with `since`. */
  retentionMs?: number;
}

/** The options with every default applied and every value checked. */
export interface ResolvedOptions {
  basePath: string;
  timestampTolerance: number;
  timestampFutureTolerance: number;
  storageTimeout: number;
  streamBatchSize: number;
  merchantConcurrency: number;
  trustProxy: boolean;
  ipv6Prefix: number;
  now: () => number;
}

export function resolveOptions(options: MerchantApiOptions): ResolvedOptions {
  if (!options?.storage) throw new TypeError('createMerchantApi: the storage option is required.');
  const resolved: ResolvedOptions = {
    basePath: normaliseBasePath(options.basePath),
    timestampTolerance: options.timestampTolerance ?? DEFAULTS.timestampTolerance,
    timestampFutureTolerance: options.timestampFutureTolerance ?? options.timestampTolerance ?? DEFAULTS.timestampTolerance,
    storageTimeout: options.storageTimeout ?? DEFAULTS.storageTimeout,
    streamBatchSize: options.streamBatchSize ?? DEFAULTS.streamBatchSize,
    merchantConcurrency: options.merchantConcurrency ?? DEFAULTS.merchantConcurrency,
    trustProxy: options.trustProxy === true,
    ipv6Prefix: options.ipv6Prefix ?? DEFAULTS.ipv6Prefix,
    now: options.now ?? Date.now,
  };
  const wholeAtLeastOne = (name: 'timestampTolerance' | 'merchantConcurrency' | 'streamBatchSize', unit: string) => {
    if (!Number.isInteger(resolved[name]) || resolved[name] < 1) throw new TypeError(`${name} must be a whole number${unit}, at least 1.`);
  };
  wholeAtLeastOne('timestampTolerance', ' of seconds');
  const future = resolved.timestampFutureTolerance;
  if (!Number.isInteger(future) || future < 0 || future > resolved.timestampTolerance) throw new TypeError('timestampFutureTolerance must be a whole number of seconds, from 0 to timestampTolerance.');
  wholeAtLeastOne('merchantConcurrency', '');
  wholeAtLeastOne('streamBatchSize', '');
  checkIpv6Prefix(resolved.ipv6Prefix, 'ipv6Prefix');
  if (!(resolved.storageTimeout > 0)) throw new TypeError('storageTimeout must be a positive number of milliseconds.');
  return resolved;
}
