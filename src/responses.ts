/**
 * Every response the handler writes, and the one place where an error
 * becomes the documented JSON shape for its endpoint (docs/protocol.md).
 */
import { MerchantApiError, type ErrorDetail } from './errors.js';

/** Which JSON shape an endpoint answers errors in. */
export type ErrorShape = 'signature' | 'envelope';

const utf8 = new TextEncoder();

/**
 * Answers to HEAD carry the headers of GET, Content-Length included, and no
 * body. (The streamed whole list has no length to give; it does not come here.)
 */
export function json(status: number, body: string, head: boolean, extra?: Record<string, string>): Response {
  // A fresh object each time: @hono/node-server's Response writes Content-Length into it.
  const headers: Record<string, string> = { 'content-type': 'application/json', 'cache-control': 'no-store' };
  if (extra) Object.assign(headers, extra);
  if (!head) return new Response(body, { status, headers });
  headers['content-length'] = String(utf8.encode(body).byteLength);
  return new Response(null, { status, headers });
}

/**
 * HEAD of a streamed answer: the headers of GET, whose length is not known in
 * advance. The body is an empty stream rather than null, because Bun and Deno
 * write `Content-Length: 0` for a null body; given a stream they frame the
 * HEAD answer as they would frame GET's, and never read it.
 */
export function streamedHead(): Response {
  const body = new ReadableStream<Uint8Array>({ pull: (controller) => controller.close() }, { highWaterMark: 0 });
  return new Response(body, { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' } });
}

/** The validatesignature body for an error; `message` absent for the 404. */
export function signatureError(message: string | undefined): string {
  return message === undefined
    ? '{"status":"error","is_valid":false}'
    : `{"status":"error","message":${JSON.stringify(message)},"is_valid":false}`;
}

export const SIGNATURE_OK = '{"status":"ok","is_valid":true}';

/** The envelope with `status` "error" and the problems listed. */
export function envelopeError(details: readonly ErrorDetail[]): string {
  return `{"status":"error","data":[],"errors":${JSON.stringify(details)}}`;
}

const INTERNAL = new MerchantApiError('internal_error', 'Internal server error.');

/**
 * Renders any thrown value. A `MerchantApiError` speaks for itself; anything
 * else is a bare 500 that says nothing of its internals.
 */
export function errorResponse(error: unknown, shape: ErrorShape, head: boolean): Response {
  const e = error instanceof MerchantApiError ? error : INTERNAL;
  const extra: Record<string, string> = {};
  if (e.code === 'unauthorized') extra['www-authenticate'] = 'Basic realm="merchant", charset="UTF-8"';
  if (e.code === 'method_not_allowed') extra.allow = 'GET, HEAD';
  if (e.code === 'storage_unavailable') extra['retry-after'] = '1';
  const body = shape === 'signature' ? signatureError(e.details.map((d) => d.message).join(' ')) : envelopeError(e.details);
  return json(e.status, body, head, extra);
}
