/**
 * Deno adapter: `serve(api, options)` over `Deno.serve`, with the same
 * options and result as `merchant-api/node`. Deno already speaks
 * `Request`/`Response`, so this only maps options and bounds the graceful close.
 */
import { hasDotSegment } from '../src/http/url.js';
import { errorResponse, MerchantApiError, type MerchantApi } from '../src/index.js';
import { unmetExpectation } from './expectation.js';
import type { DenoGlobal } from './runtime-types.js';
import { closeWithin, listenUrl, resolveServeOptions, type Served, type ServeOptions } from './serve-options.js';

export type { Served, ServeOptions } from './serve-options.js';

const BAD_TARGET = new MerchantApiError('malformed_request', 'The request could not be parsed (bad Host header or request target).');
/** RFC 3986 host (reg-name or IP literal) with an optional port. */
const HOST = /^(?:(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})+|\[[0-9A-Fa-f:.]+\])(?::\d{0,5})?$/;

/**
 * Deno builds `request.url` from the raw Host header and target without
 * checking or normalising them ("http://a b/x", "/a/../x" stay as sent), so
 * a Host such as "x/merchant" would shift the path. Like Node, answer a bad
 * Host 400 and hand the handler a normalised URL.
 */
function normalised(request: Request): Request | undefined {
  const host = request.headers.get('host');
  if (host !== null && !HOST.test(host)) return undefined;
  let url: URL;
  try {
    url = new URL(request.url);
  } catch {
    return undefined;
  }
  // The API reads no request body (every method but GET and HEAD is a 405), so none is carried over.
  return url.href === request.url ? request : new Request(url.href, { method: request.method, headers: request.headers });
}

/**
 * Starts a `Deno.serve` server for the API; resolves once it listens.
 *
 * @example
 * import { serve } from 'merchant-api/deno';
 * const server = await serve(api, { port: 8787 });
 * Deno.addSignalListener('SIGTERM', () => server.close());
 */
export async function serve(api: MerchantApi, options: ServeOptions = {}): Promise<Served> {
  const { Deno } = globalThis as unknown as { Deno?: DenoGlobal };
  if (!Deno) throw new TypeError('merchant-api/deno runs only under Deno; use merchant-api/node or merchant-api/bun.');
  const { hostname, shutdownTimeout, tls, reusePort } = resolveServeOptions(options);
  let { port } = resolveServeOptions(options);
  const server = Deno.serve(
    {
      port,
      hostname,
      ...(tls && { cert: tls.cert, key: tls.key }),
      // Deno 2.9 refuses reusePort without --unstable-net, so it is passed only when asked for.
      ...(reusePort && { reusePort }),
      // Deno.serve listens synchronously and calls onListen before returning.
      onListen: (address) => {
        port = address.port;
      },
      // api.fetch never rejects; should Deno itself fail, answer our JSON 500, not plain text.
      onError: (error) => errorResponse(error),
    },
    (request, info) => {
      const checked = normalised(request);
      const peer = { clientAddress: info.remoteAddr.hostname, clientPort: info.remoteAddr.port, pathAsSent: true };
      // The adapter's own refusals go through the pipeline too: JSON, logged and counted, with the request's id.
      if (!checked) return api.fetch(request, { ...peer, refusal: BAD_TARGET });
      // Deno's request.url is the target as sent, dot segments included (normalised() resolves them).
      return api.fetch(checked, { ...peer, dotSegments: hasDotSegment(request.url), refusal: unmetExpectation(request.headers.get('expect')) });
    },
  );
  let closing: Promise<void> | undefined;
  // shutdown() stops accepting and resolves when in-flight requests (streams
  // included) have finished. Deno (2.9) cannot cut the connections left after
  // the timeout (aborting the server's signal once a graceful shutdown has
  // begun throws BadResource), but the handler can cut its streamed answers:
  // Deno then ends those responses unfinished, and each is logged.
  return {
    url: listenUrl(Boolean(tls), hostname, port),
    close: () => (closing ??= closeWithin(server.shutdown(), shutdownTimeout, () => api.abortStreams?.())),
  };
}
