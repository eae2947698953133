/**
 * The access log: one line per request, health checks included
 * (docs/observability.md#access-log). The route is the pattern, never the
 * raw path or query: those hold user ids and signatures.
 */
import type { RequestContext } from '../http/context.js';
import type { MerchantApiHooks, RequestSummary } from '../http/hooks.js';
import { WRITE_INFO_LINE, type InfoLineWriter, type Logger } from './logger.js';

export function accessLogHooks(logger: Logger): MerchantApiHooks {
  const writer = (logger as { [WRITE_INFO_LINE]?: InfoLineWriter })[WRITE_INFO_LINE];
  if (writer) {
    // The built-in logger: the line is written as one string made of as few
    // pieces as possible, without an object in between. What repeats from
    // line to line is made once: the start (once per millisecond), the
    // members from the method to the status (once per method, route and
    // status: methods are few, any other than GET and HEAD is made each
    // time), the merchant's and the address's members.
    let lastHead = '';
    let start = '';
    const lineStart = () => {
      const head = writer.head();
      if (head !== lastHead) {
        lastHead = head;
        start = `${head}"event":"request","request_id":"`;
      }
      return start;
    };
    const routes = new Map<string, Map<string | undefined, string[]>>();
    /** `","method":"GET","route":"/x","status":200,"duration_ms":`: closes the request id, opens the duration. */
    const middle = (method: string, pattern: string | undefined, status: number) => {
      const key = method === 'GET' || method === 'HEAD' ? method : '';
      if (key === '' || !Number.isInteger(status) || status < 100 || status > 599) return middleText(method, pattern, status);
      let byRoute = routes.get(key);
      if (byRoute === undefined) routes.set(key, (byRoute = new Map()));
      let byStatus = byRoute.get(pattern);
      if (byStatus === undefined) byRoute.set(pattern, (byStatus = []));
      return (byStatus[status - 100] ??= middleText(method, pattern, status));
    };
    const merchantId = cachedMember(',"merchant_id":', QUOTED_KEPT);
    const clientAddress = cachedMember(',"client_address":', QUOTED_KEPT);
    return {
      onFinish(ctx, summary) {
        let line = `${lineStart()}${requestIdText(ctx.requestId)}${middle(ctx.method, ctx.route, summary.status)}${Math.round(summary.durationMs * 1000) / 1000},"bytes":${summary.bytes}`;
        if (ctx.merchantId !== undefined) line += merchantId(ctx.merchantId);
        // Only on test requests (docs/test-mode.md#operations): a live line keeps its bytes.
        if (ctx.mode === 'test') line += ',"mode":"test"';
        if (ctx.clientAddress !== undefined) line += clientAddress(ctx.clientAddress);
        if (ctx.errorCode !== undefined) line += `,"code":${quote(ctx.errorCode)}`;
        if (summary.aborted) line += ',"aborted":true';
        writer.push(`${line}}\n`);
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
      if (ctx.mode === 'test') line.mode = 'test';
      if (ctx.clientAddress !== undefined) line.client_address = ctx.clientAddress;
      if (ctx.errorCode !== undefined) line.code = ctx.errorCode;
      if (summary.aborted) line.aborted = true;
      logger.info(line);
    },
  };
}

function middleText(method: string, pattern: string | undefined, status: number): string {
  return `","method":${quote(method)},"route":${pattern === undefined ? 'null' : JSON.stringify(pattern)},"status":${status},"duration_ms":`;
}

/** Printable ASCII but `"` and `\`: as a JSON string it needs no escaping. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;

/** Request ids, methods, addresses and codes are nearly always plain: quoted without JSON.stringify. */
function quote(text: string): string {
  return PLAIN.test(text) ? `"${text}"` : JSON.stringify(text);
}

/** A request id as the text between its quotes: visible ASCII (the context keeps no other), so only `"` and `\\` need escaping. */
function requestIdText(id: string): string {
  return id.includes('"') || id.includes('\\') ? JSON.stringify(id).slice(1, -1) : id;
}

/** Members kept per kind of value: enough for the merchants and addresses of a busy instance. */
const QUOTED_KEPT = 4096;

/** The member (`,"name":"value"`) of values that repeat from line to line (merchant ids, client addresses), kept up to `max`, then started afresh. */
function cachedMember(name: string, max: number): (text: string) => string {
  const members = new Map<string, string>();
  return (text) => {
    let result = members.get(text);
    if (result === undefined) {
      if (members.size >= max) members.clear();
      members.set(text, (result = `${name}${quote(text)}`));
    }
    return result;
  };
}
