/**
 * Traces through `@opentelemetry/api` (docs/observability.md#traces): a
 * server span per request, continuing an incoming W3C `traceparent` through
 * the registered propagator, and a child span per storage call. Until the
 * embedding application registers an SDK every call here is the API's no-op.
 */
import { context, propagation, ProxyTracerProvider, SpanKind, SpanStatusCode, trace, type Context, type Span, type TextMapGetter } from '@opentelemetry/api';
import type { RequestContext } from '../http/context.js';
import type { MerchantApiHooks } from '../http/hooks.js';

const headerGetter: TextMapGetter<Headers> = {
  keys: (headers) => [...headers.keys()],
  get: (headers, key) => headers.get(key) ?? undefined,
};

interface Traced {
  span: Span;
  context: Context;
}

/** The provider a `ProxyTracerProvider` hands out while no SDK is registered. */
const NO_SDK = new ProxyTracerProvider().getDelegate();

/** True while no SDK is registered: every span would be a no-op, so none is started. */
function noSdk(): boolean {
  const provider = trace.getTracerProvider();
  return provider instanceof ProxyTracerProvider ? provider.getDelegate() === NO_SDK : provider === NO_SDK;
}

export function tracingHooks(): MerchantApiHooks {
  const tracer = trace.getTracer('merchant-api');
  const spans = new WeakMap<RequestContext, Traced>();

  const start = (ctx: RequestContext): Traced | undefined => {
    if (noSdk()) return undefined;
    const parent = propagation.extract(context.active(), ctx.request.headers, headerGetter);
    const span = tracer.startSpan(ctx.route === undefined ? ctx.method : `${ctx.method} ${ctx.route}`, { kind: SpanKind.SERVER, startTime: ctx.startTime }, parent);
    // Without an SDK (or when sampled out) the span records nothing: keep no
    // state and start no child spans, so the no-op stays nearly free.
    if (!span.isRecording()) return undefined;
    span.setAttribute('http.request.method', ctx.method);
    if (ctx.route !== undefined) span.setAttribute('http.route', ctx.route);
    if (ctx.clientAddress !== undefined) span.setAttribute('client.address', ctx.clientAddress);
    span.setAttribute('merchant_api.request_id', ctx.requestId);
    const traced = { span, context: trace.setSpan(parent, span) };
    spans.set(ctx, traced);
    return traced;
  };

  return {
    onRequest(ctx) {
      start(ctx);
    },
    onStorageCall(ctx, operation) {
      const parent = spans.get(ctx)?.context;
      if (parent === undefined) return undefined;
      const span = tracer.startSpan(`storage ${operation}`, { kind: SpanKind.CLIENT, attributes: { 'merchant_api.storage.operation': operation } }, parent);
      return (error) => {
        if (error !== undefined) span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : 'error' });
        span.end();
      };
    },
    onFinish(ctx, summary) {
      // 404 and 405 are answered before onRequest runs: their span starts here, back-dated.
      const traced = spans.get(ctx) ?? (ctx.route === undefined || ctx.errorCode === 'method_not_allowed' ? start(ctx) : undefined);
      if (traced === undefined) return;
      spans.delete(ctx);
      const { span } = traced;
      span.setAttribute('http.response.status_code', summary.status);
      if (ctx.merchantId !== undefined) span.setAttribute('merchant_api.merchant_id', ctx.merchantId);
      if (ctx.errorCode !== undefined) span.setAttribute('merchant_api.error_code', ctx.errorCode);
      if (summary.status >= 500 || summary.aborted) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    },
  };
}
