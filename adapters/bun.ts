/**
 * Bun adapter: `serve(api, options)` over `Bun.serve`, with the same options
 * and result as `merchant-api/node`. Bun already speaks `Request`/`Response`,
 * so this only maps options and bounds the graceful close.
 */
import { errorResponse, MerchantApiError, type MerchantApi } from '../src/index.js';
import { unmetExpectation } from './expectation.js';
import type { BunGlobal } from './runtime-types.js';
import { closeWithin, listenUrl, resolveServeOptions, type Served, type ServeOptions } from './serve-options.js';

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
  const { port, hostname, shutdownTimeout, tls, limits, reusePort } = resolveServeOptions(options);
  const server = Bun.serve({
    port,
    hostname,
    // With a missing or invalid Host, Bun hands over a bare path ("/healthz")
    // instead of an absolute URL; Node's adapter answers those 400, so do we.
    // Bun joins repeated Host lines into one value ("a, b"), which no valid
    // Host contains; RFC 9112 section 3.2 makes such a request a 400.
    // The adapter's own refusals go through the pipeline too: JSON, logged and counted, with the request's id.
    fetch: (request, bunServer) => {
      const badHost = request.url.startsWith('/') || request.headers.get('host')?.includes(',');
      const peer = bunServer.requestIP(request);
      // No `dotSegments`: Bun resolved `.` and `..` in request.url before this runs and keeps no raw target (docs/protocol.md#endpoints).
      return api.fetch(request, { clientAddress: peer?.address, clientPort: peer?.port, pathAsSent: true, refusal: badHost ? BAD_HOST : unmetExpectation(request.headers.get('expect')) });
    },
    // api.fetch never rejects; should Bun itself fail, answer our JSON 500, not Bun's HTML page.
    error: (error) => errorResponse(error),
    tls: tls && { cert: tls.cert, key: tls.key },
    development: false,
    reusePort,
    // Bun's only connection limit: seconds without traffic. At least 30 s,
    // leaving room for a streamed list whose storage reads near the 5 s
    // storageTimeout; Bun allows at most 255.
    idleTimeout: Math.min(255, Math.max(30, Math.ceil(limits.keepAliveTimeout / 1000), Math.ceil(limits.headersTimeout / 1000))),
  });
  let closing: Promise<void> | undefined;
  // stop() stops accepting, closes idle keep-alive connections and lets
  // in-flight responses (streams included) finish; stop(true) cuts the rest.
  return {
    url: listenUrl(Boolean(tls), hostname, server.port),
    close: () =>
      (closing ??= closeWithin(server.stop(), shutdownTimeout, () => {
        // Cut by the handler first, so each cut stream is logged (stream_aborted, its access line) before close() resolves.
        api.abortStreams?.();
        return server.stop(true);
      })),
  };
}
