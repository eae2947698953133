/**
 * Bun adapter: `serve(api, options)` over `Bun.serve`, with the same options
 * and result as `merchant-api/node`. Bun already speaks `Request`/`Response`,
 * so this only maps options and bounds the graceful close.
 */
import type { MerchantApi } from '../src/api.js';
import { MerchantApiError } from '../src/errors.js';
import { errorResponse } from '../src/responses.js';
import type { BunGlobal } from './runtime-types.js';
import { listenUrl, type Served, type ServeOptions } from './serve-options.js';

export type { Served, ServeOptions } from './serve-options.js';

const BAD_HOST = new MerchantApiError('malformed_request', 'The request could not be parsed (missing, repeated or bad Host header).');

/**
 * Starts a `Bun.serve` server for the API; resolves once it listens.
 *
 * @example
 * import { serve } from 'merchant-api/bun';
 * const server = await serve(api, { port: 8787 });
 * process.on('SIGTERM', () => server.close());
 */
export async function serve(api: MerchantApi, options: ServeOptions = {}): Promise<Served> {
  const { Bun } = globalThis as unknown as { Bun?: BunGlobal };
  if (!Bun) throw new TypeError('merchant-api/bun runs only under Bun; use merchant-api/node or merchant-api/deno.');
  const hostname = options.hostname ?? '127.0.0.1';
  const server = Bun.serve({
    port: options.port ?? 8787,
    hostname,
    // With a missing or invalid Host, Bun hands over a bare path ("/healthz")
    // instead of an absolute URL; Node's adapter answers those 400, so do we.
    // Bun joins repeated Host lines into one value ("a, b"), which no valid
    // Host contains; RFC 9112 section 3.2 makes such a request a 400.
    fetch: (request) =>
      request.url.startsWith('/') || request.headers.get('host')?.includes(',')
        ? errorResponse(BAD_HOST, 'envelope', request.method === 'HEAD')
        : api.fetch(request),
    // api.fetch never rejects; should Bun itself fail, answer our JSON 500, not Bun's HTML page.
    error: (error) => errorResponse(error, 'envelope', false),
    tls: options.tls && { cert: options.tls.cert, key: options.tls.key },
    development: false,
    // Bun's default cuts a connection after 10 s without traffic; leave room
    // for a streamed list whose storage reads near the 5 s storageTimeout.
    idleTimeout: 30,
  });
  const timeoutMs = options.shutdownTimeout ?? 8000;
  let closing: Promise<void> | undefined;
  return {
    url: listenUrl(Boolean(options.tls), hostname, server.port),
    close: () => (closing ??= closeGracefully(server.stop(), () => server.stop(true), timeoutMs)),
  };
}

/**
 * `stop()` stops accepting, closes idle keep-alive connections and lets
 * in-flight responses (streams included) finish; after `timeoutMs` the rest
 * are cut.
 */
async function closeGracefully(stopped: Promise<void>, cut: () => Promise<void>, timeoutMs: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const outcome = await Promise.race([stopped, deadline]);
  clearTimeout(timer);
  if (outcome === 'timeout') await cut();
}
