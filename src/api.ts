/**
 * `createMerchantApi`: the composition root. It resolves the options, puts
 * the parts together (storage views, hooks, limits, the route table) and
 * hands them to the pipeline (`src/pipeline/pipeline.ts`), which answers every
 * request; docs/architecture.md shows how a request flows through them.
 */
import { KeyGate } from './auth/key-gate.js';
import { KeyUseRecorder } from './auth/key-use.js';
import type { RequestContext, RequestInfo } from './http/context.js';
import { composeHooks, type MerchantApiHooks } from './http/hooks.js';
import { createPublicBaseResolver } from './http/public-url.js';
import { FairShare } from './limits/fair-share.js';
import { limitPoints } from './limits/limit.js';
import { ListingSlots } from './limits/listing-slots.js';
import { MerchantStorageShare } from './limits/storage-share.js';
import { Tarpit } from './limits/tarpit.js';
import { FailureThrottle } from './limits/throttle.js';
import { ThrottleGate } from './limits/throttle-gate.js';
import { shareThrottle } from './limits/throttle-sharing.js';
import { CursorCodec } from './listing/cursor.js';
import { accessLogHooks } from './observe/access-log.js';
import { createJsonLogger, describeError } from './observe/logger.js';
import { tracingHooks } from './observe/tracing.js';
import { openApiDocument } from './openapi/document.js';
import { resolveOptions, type MerchantApiOptions } from './options.js';
import { authenticatedStep } from './pipeline/authentication.js';
import { createPipeline, DIRECT_ENTRY } from './pipeline/pipeline.js';
import type { HandlerDeps } from './routes/route.js';
import { docsRoutes } from './routes/docs/page.js';
import { swaggerUiDist } from './routes/docs/swagger-ui-dist.js';
import { ROUTES } from './routes/table.js';
import { DEFAULTS } from './defaults.js';
import { storageViews } from './storage/guard.js';
import type { StorageOperation } from './storage/contract.js';
import { createTestMode } from './testmode/test-mode.js';
import { testModeGate } from './testmode/test-share.js';
import type { PartHealth } from './storage/contract.js';

export type { MerchantApiOptions } from './options.js';

export interface MerchantApi {
  /** Answers one request. Never rejects: every failure is a JSON response. */
  fetch(request: Request, info?: RequestInfo): Promise<Response>;
  /**
   * Cuts every streamed answer still being written (a shutdown that stops
   * waiting for them): each ends unfinished for its client, and is logged as
   * `stream_aborted` and by its access line with `aborted`. The adapters'
   * `close()` calls it once `shutdownTimeout` has passed.
   */
  abortStreams?(): void;
}

/**
 * Creates the handler.
 *
 * @example
 * const api = createMerchantApi({ storage: createMemoryStorage({ seed }), publicUrl: 'https://api.example.com' });
 * const response = await api.fetch(new Request('https://api.example.com/healthz'));
 */
export function createMerchantApi(options: MerchantApiOptions): MerchantApi {
  const resolved = resolveOptions(options);
  const { storage } = options;
  const logger = options.logger ?? createJsonLogger();
  const given = options.hooks === undefined ? [] : Array.isArray(options.hooks) ? options.hooks : [options.hooks as MerchantApiHooks];
  // Off unless asked for: in an application's own process, the CPU it samples is not only ours.
  const fairShare = options.fairShare === undefined || options.fairShare === false ? undefined : new FairShare(options.fairShare, logger);
  const tracing = options.tracing === false ? undefined : tracingHooks();
  const hooks = composeHooks([
    ...(fairShare ? [fairShare.hooks] : []),
    ...(tracing ? [tracing] : []),
    ...(options.accessLog === false ? [] : [accessLogHooks(logger)]),
    ...given,
  ]);

  // Shared by every instance when the storage offers a store (MySQL, Redis); the local throttle still decides.
  const throttle =
    options.throttle === false
      ? undefined
      : new ThrottleGate(shareThrottle(new FailureThrottle(options.throttle), { store: storage.throttleStore?.(), now: resolved.now, logger }), logger, resolved.now, resolved.ipv6Prefix);
  const limits = limitPoints([
    throttle,
    fairShare,
    new ListingSlots(resolved.merchantConcurrency),
    // An authenticated merchant's calls take at most half of a pooled storage's connections.
    storage.concurrency === undefined ? undefined : new MerchantStorageShare(storage.concurrency),
    options.tarpit === false ? undefined : new Tarpit(options.tarpit, resolved.ipv6Prefix),
  ]);

  const onStorageCall = hooks.onStorageCall;
  const guard = {
    timeoutMs: resolved.storageTimeout,
    onFailure: (operation: StorageOperation, ctx: RequestContext, error: unknown) => logger.error({ event: 'storage_unavailable', request_id: ctx.requestId, operation, ...describeError(error) }),
    watch: onStorageCall && ((operation: StorageOperation, ctx: RequestContext) => onStorageCall(ctx, operation) ?? undefined),
  };
  const views = storageViews<RequestContext>(storage, { ...guard, gate: limits.aroundStorageCall });
  // Test keys read through a storage object of their own (docs/test-mode.md#isolation), within a share of the
  // storage's connections of their own: all test traffic together takes at most a quarter of a pooled storage.
  const testGate = testModeGate(storage.concurrency, limits.aroundStorageCall);
  const testMode = createTestMode(storage, options.testMode, resolved.storageTimeout, testGate);
  const testViews = storageViews<RequestContext>(testMode.storage, { ...guard, gate: testGate });

  // last_used_at: noted per request in a map, written in batches at most once a minute per key.
  const keyUses = storage.recordKeyUse && new KeyUseRecorder({
    write: (uses) => storage.recordKeyUse!(uses),
    onError: (error) => logger.warn({ event: 'key_use_not_recorded', ...describeError(error) }),
  });

  const deps: HandlerDeps = {
    // The key's mode, known once it matched, picks the view: a live request costs one comparison.
    storage: (ctx) => (ctx.mode === 'test' ? testViews(ctx) : views(ctx)),
    testMode,
    cursors: new CursorCodec(options.cursorSecret),
    resolveBases: createPublicBaseResolver(options),
    tolerance: resolved.timestampTolerance,
    futureTolerance: resolved.timestampFutureTolerance,
    now: resolved.now,
    basePath: resolved.basePath,
    streamBatchSize: resolved.streamBatchSize,
    openApiBody: JSON.stringify(openApiDocument(resolved.basePath, ROUTES)),
    storageHealth: healthDetails(storage.health?.bind(storage), options.healthParts),
    keys: new KeyGate(resolved.now, keyUses),
    idempotencyKeys: storage.claimIdempotencyKey !== undefined,
    authenticated: authenticatedStep(limits.afterAuthentication, hooks.onAuthenticated),
    logger,
    webhooks: {
      allowPrivate: options.webhooks?.allowPrivate === true,
      allowHttp: options.webhooks?.allowHttp === true,
      maxEndpointsPerMerchant: options.webhooks?.maxEndpointsPerMerchant ?? DEFAULTS.webhooks.maxEndpointsPerMerchant,
      retentionMs: options.webhooks?.retentionMs ?? DEFAULTS.webhooks.retentionMs,
      // A storage without them (memory) answers 501 before a body is read or a name resolved.
      supported: storage.addWebhookEndpoint !== undefined,
    },
  };

  const inFlight = new Set<() => void>();
  const { fetch, direct } = createPipeline({
    // The reference page is not part of the API: beside the table, not in its document.
    routes: options.docsPage === false ? ROUTES : [...ROUTES, ...docsRoutes(options.docsAssets ?? swaggerUiDist)],
    deps,
    hooks,
    logger,
    basePath: resolved.basePath,
    trustProxy: resolved.trustProxy,
    limits,
    begin: tracing?.begin,
    inFlight,
  });
  return {
    fetch,
    abortStreams() {
      for (const cut of [...inFlight]) cut();
    },
    // The Node adapter's direct path (adapters/node-direct.ts), kept off the public type.
    [DIRECT_ENTRY]: direct,
  } as MerchantApi;
}

/** The details of `/healthz`: the storage's parts, then the instance's own (`healthParts`); undefined when there are none. */
function healthDetails(storage: (() => Record<string, PartHealth>) | undefined, parts: MerchantApiOptions['healthParts']): HandlerDeps['storageHealth'] {
  if (parts === undefined) return storage;
  return () => {
    const details = { ...storage?.(), ...parts() };
    return Object.keys(details).length === 0 ? undefined : details;
  };
}
