/**
 * The access log: one line per request, health checks included
 * (docs/observability.md#access-log). The route is the pattern, never the
 * raw path or query: those hold user ids and signatures.
 */
import type { RequestContext } from '../http/context.js';
import type { MerchantApiHooks, RequestSummary } from '../http/hooks.js';
import { WRITE_INFO_MEMBERS, type Logger } from './logger.js';

export function accessLogHooks(logger: Logger): MerchantApiHooks {
  const writeMembers = (logger as { [WRITE_INFO_MEMBERS]?: (members: string) => void })[WRITE_INFO_MEMBERS];
  if (writeMembers) {
    // The built-in logger: the line is written as text, without an object in
    // between, and the method and route, the same for most lines, as one
    // member string made once per pair (methods are few: any other is one key).
    const methodRoutes = new Map<string, Map<string | undefined, string>>();
    const methodRoute = (method: string, pattern: string | undefined) => {
      const key = method === 'GET' || method === 'HEAD' ? method : '';
      let routes = methodRoutes.get(key);
      if (routes === undefined) methodRoutes.set(key, (routes = new Map()));
      let members = routes.get(pattern);
      if (members === undefined) {
        members = `,"method":${quote(method)},"route":${pattern === undefined ? 'null' : JSON.stringify(pattern)}`;
        if (key !== '') routes.set(pattern, members);
      }
      return members;
    };
    const merchantId = cachedQuote(QUOTED_KEPT);
    const clientAddress = cachedQuote(QUOTED_KEPT);
    return {
      onFinish(ctx, summary) {
        let members =
          `"event":"request","request_id":${quoteRequestId(ctx.requestId)}${methodRoute(ctx.method, ctx.route)}` +
          `,"status":${summary.status},"duration_ms":${Math.round(summary.durationMs * 1000) / 1000},"bytes":${summary.bytes}`;
        if (ctx.merchantId !== undefined) members += `,"merchant_id":${merchantId(ctx.merchantId)}`;
        if (ctx.clientAddress !== undefined) members += `,"client_address":${clientAddress(ctx.clientAddress)}`;
        if (ctx.errorCode !== undefined) members += `,"code":${quote(ctx.errorCode)}`;
        if (summary.aborted) members += ',"aborted":true';
        writeMembers(members);
      },
    };
  }
  return {
    onFinish(ctx: RequestContext, summary: RequestSummary) {
      const line: Record<string, unknown> = {
        event: 'request',
        request_id: ctx.requestId,
        method: ctx.method,
        route: ctx.route ?? null,
        status: summary.status,
        duration_ms: Math.round(summary.durationMs * 1000) / 1000,
        bytes: summary.bytes,
      };
      if (ctx.merchantId !== undefined) line.merchant_id = ctx.merchantId;
      if (ctx.clientAddress !== undefined) line.client_address = ctx.clientAddress;
      if (ctx.errorCode !== undefined) line.code = ctx.errorCode;
      if (summary.aborted) line.aborted = true;
      logger.info(line);
    },
  };
}

/** Printable ASCII but `"` and `\`: as a JSON string it needs no escaping. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** Request ids, methods, addresses and codes are nearly always plain: quoted without JSON.stringify. */
function quote(text: string): string {
  return PLAIN.test(text) ? `"${text}"` : JSON.stringify(text);
}

/** A request id is visible ASCII (the context keeps no other): only `"` and `\` need escaping. */
function quoteRequestId(id: string): string {
  return id.includes('"') || id.includes('\\') ? JSON.stringify(id) : `"${id}"`;
}

/** Quoted forms kept per kind of value: enough for the merchants and addresses of a busy instance. */
const QUOTED_KEPT = 4096;

/** The quoted form of values that repeat from line to line (merchant ids, client addresses), kept up to `max`, then started afresh. */
function cachedQuote(max: number): (text: string) => string {
  const quoted = new Map<string, string>();
  return (text) => {
    let result = quoted.get(text);
    if (result === undefined) {
      if (quoted.size >= max) quoted.clear();
      quoted.set(text, (result = quote(text)));
    }
    return result;
  };
}
