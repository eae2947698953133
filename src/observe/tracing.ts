/**
 * Traces through `@opentelemetry/api` (docs/observability.md#traces): a
 * server span per request, refused ones included, continuing an incoming W3C
 * `traceparent` through the registered propagator, and a child span per
 * storage call. Until the embedding application registers an SDK no span is
 * started at all, not even the API's no-op one.
 *
 * `@opentelemetry/api` is an optional peer dependency (docs/install.md): an
 * application that registers an SDK has it installed. It is loaded once, as
 * this module loads; without it, or until it has loaded (a few event-loop
 * turns), no span is started.
 */
import type { Context, Span, TextMapGetter, Tracer } from '@opentelemetry/api';
import type { RequestContext } from '../http/context.js';
import type { MerchantApiHooks } from '../http/hooks.js';

const headerGetter: TextMapGetter<Headers> = {
  keys: (headers) => [...headers.keys()],
  get: (headers, key) => headers.get(key) ?? undefined,
};

interface Traced {
  span: Span;
  context: Context;
  api: OpenTelemetryApi;
}

type OpenTelemetryApi = typeof import('@opentelemetry/api');

/** The API once loaded, with the provider a `ProxyTracerProvider` hands out while no SDK is registered. */
let otel: { api: OpenTelemetryApi; noSdk: unknown } | undefined;
void import('@opentelemetry/api').then(
  (api) => (otel = { api, noSdk: new api.ProxyTracerProvider().getDelegate() }),
  () => undefined,
);

/** The API while an SDK is registered; undefined while every span would be a no-op, so that none is started. */
function withSdk(): OpenTelemetryApi | undefined {
  if (otel === undefined) return undefined;
  const provider = otel.api.trace.getTracerProvider();
  const delegate = provider instanceof otel.api.ProxyTracerProvider ? provider.getDelegate() : provider;
  return delegate === otel.noSdk ? undefined : otel.api;
}

/** The tracing hooks, and `begin`, which the pipeline calls as soon as the route is known, before any limit may refuse the request. */
export interface TracingHooks extends MerchantApiHooks {
  begin(ctx: RequestContext): void;
}

export function tracingHooks(): TracingHooks {
  const spans = new WeakMap<RequestContext, Traced>();
  // A proxy that follows whichever SDK is registered, got once the API has loaded.
  let tracer: Tracer | undefined;

  const start = (ctx: RequestContext): Traced | undefined => {
    const api = withSdk();
    if (api === undefined) return undefined;
    const { context, propagation, SpanKind, trace } = api;
    tracer ??= trace.getTracer('merchant-api');
    const parent = propagation.extract(context.active(), ctx.request.headers, headerGetter);
    const span = tracer.startSpan(ctx.route === undefined ? ctx.method : `${ctx.method} ${ctx.route}`, { kind: SpanKind.SERVER, startTime: ctx.startTime }, parent);
    // Without an SDK (or when sampled out) the span records nothing: keep no
    // state and start no child spans, so the no-op stays nearly free.
    if (!span.isRecording()) return undefined;
    span.setAttribute('http.request.method', ctx.method);
    if (ctx.route !== undefined) span.setAttribute('http.route', ctx.route);
    if (ctx.clientAddress !== undefined) span.setAttribute('client.address', ctx.clientAddress);
    span.setAttribute('merchant_api.request_id', ctx.requestId);
    const traced = { span, context: trace.setSpan(parent, span), api };
    spans.set(ctx, traced);
    return traced;
  };

  return {
    begin(ctx) {
      start(ctx);
    },
    onStorageCall(ctx, operation) {
      const traced = spans.get(ctx);
      if (traced === undefined) return undefined;
      const { context: parent, api } = traced;
      const { SpanKind, SpanStatusCode } = api;
      const span = tracer!.startSpan(`storage ${operation}`, { kind: SpanKind.CLIENT, attributes: { 'merchant_api.storage.operation': operation } }, parent);
      return (error) => {
        if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : 'error' });
        span.end();
      };
    },
    onFinish(ctx, summary) {
      // A request without a route (a 404, an adapter's refusal) never reaches `begin`: its span starts here, back-dated.
      const traced = spans.get(ctx) ?? (ctx.route === undefined ? start(ctx) : undefined);
      if (traced === undefined) return;
      spans.delete(ctx);
      const { span, api } = traced;
      span.setAttribute('http.response.status_code', summary.status);
      if (ctx.merchantId !== undefined) span.setAttribute('merchant_api.merchant_id', ctx.merchantId);
      if (ctx.errorCode !== undefined) span.setAttribute('merchant_api.error_code', ctx.errorCode);
      if (summary.status >= 500 || summary.aborted) span.setStatus({ code: api.SpanStatusCode.ERROR });
      span.end();
    },
  };
}
