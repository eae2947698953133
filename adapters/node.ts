/**
 * Node adapter over `@hono/node-server`: `createRequestListener(api)` plugs
 * into any existing `http`/`https` server; `serve(api, options)` creates one.
 */
import { getRequestListener } from '@hono/node-server';
import { createServer, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { Http2ServerRequest, Http2ServerResponse } from 'node:http2';
import type { Socket } from 'node:net';
import { Server as TlsServer } from 'node:tls';
import { hasDotSegment } from '../src/http/url.js';
import { EXPECTATION_FAILED } from './expectation.js';
import { errorResponse, MerchantApiError, type MerchantApi } from '../src/index.js';
import { capConnections } from './node-connections.js';
import { endWithAnswer, refuseWithoutRequest } from './node-raw-answer.js';
import { answerDirectly, directEntry, directMethod, NodeRequestHead, plainUrl } from './node-direct.js';
import { keepRequestHeads, refusedHead } from './node-request-heads.js';
import { closeWithin, listenUrl, resolveServeOptions, type Served, type ServeOptions } from './serve-options.js';

export type { Served, ServeOptions } from './serve-options.js';

const BAD_REQUEST = new MerchantApiError('malformed_request', 'The request could not be parsed (bad Host header or request target).');

/**
 * A `(req, res)` listener answering with the API. Requests Node can parse but
 * the Fetch API cannot represent (a bad Host) get our JSON 400.
 *
 * The URL is taken as the client sent it (`req.originalUrl` when a
 * framework such as Express stripped a mount prefix from `req.url`), so with
 * `basePath` a path outside it is a 404.
 *
 * @example
 * const listener = createRequestListener(api);
 * http.createServer((req, res) => req.url?.startsWith('/merchant-api') ? listener(req, res) : other(req, res));
 * expressApp.use('/merchant-api', listener); // with basePath: '/merchant-api'
 */
/**
 * What `createRequestListener` returns: a listener of `node:http` (and
 * `node:https`, Express, Koa's `callback` places) and of `node:http2`'s
 * compatibility API (`http2.createServer(listener)`, `createSecureServer`), without a cast.
 */
export interface MerchantApiRequestListener extends RequestListener {
  (req: Http2ServerRequest, res: Http2ServerResponse): void;
}

export interface RequestListenerOptions {
  /**
   * Build the Fetch `Request` and `Response` of every request, through
   * @hono/node-server and `api.fetch`, rather than run the pipeline directly
   * on Node's request (docs/runtimes.md#node). The answers are
   * the same; it is slower. Defaults to the environment variable
   * `MERCHANT_API_FETCH_OBJECTS=1`.
   */
  fetchObjects?: boolean;
}

export function createRequestListener(api: MerchantApi, options: RequestListenerOptions = {}): MerchantApiRequestListener {
  // The request being handed to Hono's listener: it builds the Request at once, so its error handler runs before the next one.
  let handing: IncomingMessage | undefined;
  // Answers a Hono listener writes from a Response the direct path got (a stream, a hook's Response): by request.
  const responses = new WeakMap<IncomingMessage, Response>();
  const writeResponse = getRequestListener((_request, env) => responses.get((env as { incoming: IncomingMessage }).incoming)!) as (req: IncomingMessage, res: ServerResponse) => Promise<void>;
  const writeDirectResponse = (req: IncomingMessage, res: ServerResponse, response: Response) => {
    responses.set(req, response);
    return writeResponse(req, res);
  };
  const fetchObjects = options.fetchObjects ?? process.env.MERCHANT_API_FETCH_OBJECTS === '1';
  const direct = fetchObjects ? undefined : directEntry(api);
  const listener = getRequestListener(
    (request, env) => {
      const incoming = (env as { incoming: IncomingMessage }).incoming;
      return api.fetch(request, {
        refusal: refusals.get(incoming),
        clientAddress: incoming.socket.remoteAddress,
        clientPort: incoming.socket.remotePort,
        header: nodeHeader(incoming, { request: () => request }),
        pathAsSent: true,
        // req.url is the target as sent; the Request's URL has its dot segments resolved away.
        dotSegments: hasDotSegment(incoming.url ?? ''),
      });
    },
    // Hono could not build the Request (a bad Host): answered by the pipeline from a stand-in, so it is logged and counted.
    { errorHandler: () => refuseWithoutRequest(api, BAD_REQUEST, handing?.socket, { header: handing && headerOf(handing.headers) }) },
  ) as (req: IncomingMessage, res: ServerResponse) => void;
  const answer = (req: IncomingMessage, res: ServerResponse): void => {
    // Express (and Connect) strip the mount prefix from req.url and keep the
    // URL as sent in req.originalUrl: the signature covers the whole path, so
    // the request is rebuilt from that one (docs/embedding.md).
    const { originalUrl } = req as IncomingMessage & { originalUrl?: unknown };
    if (typeof originalUrl === 'string' && originalUrl !== req.url) req.url = originalUrl;
    const lines = duplicatedLines(req.rawHeaders);
    if (lines === TWO_HOST_LINES) {
      refusals.set(req, TWO_HOSTS);
      res.shouldKeepAlive = false;
    }
    if (lines === TWO_AUTHORIZATION_LINES) twoAuthorizations.add(req);
    // The adapter's own refusals (two Host lines, an unmet Expect) take the other path, as does every request the direct path does not take (./node-direct.ts).
    if (direct !== undefined && lines !== TWO_HOST_LINES && !refusals.has(req) && directMethod(req)) {
      const url = plainUrl(req.url ?? '', req.headers.host, (req.socket as { encrypted?: boolean }).encrypted === true);
      if (url !== undefined) {
        const head = new NodeRequestHead(req, res, url);
        head.header = nodeHeader(req, head);
        void answerDirectly(direct, head, req, res, writeDirectResponse);
        return;
      }
    }
    handing = req;
    try {
      listener(req, res);
    } finally {
      handing = undefined;
    }
  };
  // An Http2ServerRequest has what this reads of an IncomingMessage (headers, rawHeaders, url, socket), and Hono's listener takes both.
  return answer as MerchantApiRequestListener;
}

/** Requests the adapter answers itself (two Host lines, an unmet Expect), with the answer: the pipeline renders, logs and counts it. */
const refusals = new WeakMap<IncomingMessage, MerchantApiError>();

/**
 * Answers a request whose `Expect` is not `100-continue` (Node's
 * `checkExpectation` event, which would otherwise answer a bare 417) with the
 * JSON 417, through the pipeline. Node meets `100-continue` itself.
 */
export function answerExpectations(server: Server, listener: RequestListener): void {
  server.on('checkExpectation', (req: IncomingMessage, res: ServerResponse) => {
    refusals.set(req, EXPECTATION_FAILED);
    res.shouldKeepAlive = false;
    listener(req, res);
  });
}

/** A header reader over Node's parsed headers, for a refusal made without a Request. */
function headerOf(headers: IncomingMessage['headers']): (name: string) => string | null {
  return (name) => {
    const value = headers[name];
    return typeof value === 'string' ? value : null;
  };
}

/** Requests with two Authorization lines, of which Node's `req.headers` shows only the first. */
const twoAuthorizations = new WeakSet<IncomingMessage>();

/**
 * Headers Node's `req.headers` does not join with ", " as Fetch `Headers`
 * does: it keeps the first of these (and joins cookies with "; ").
 */
const NOT_JOINED = new Set(['age', 'authorization', 'content-length', 'content-type', 'cookie', 'etag', 'expires', 'from', 'host', 'if-modified-since', 'if-unmodified-since', 'last-modified', 'location', 'max-forwards', 'proxy-authorization', 'referer', 'retry-after', 'server', 'set-cookie', 'user-agent']);

/**
 * A header as `request.headers.get` answers it, read from Node's parsed
 * `req.headers` where that gives the same value: the Fetch `Headers` is
 * then never built for the fields the handler reads.
 */
function nodeHeader(incoming: IncomingMessage, source: { request(): Request }): (name: string) => string | null {
  return (name) => {
    const key = name.toLowerCase();
    if (NOT_JOINED.has(key) && (key !== 'authorization' || twoAuthorizations.has(incoming))) return source.request().headers.get(key);
    const value = incoming.headers[key];
    return value === undefined ? null : typeof value === 'string' ? value : value.join(', ');
  };
}

const TWO_HOSTS = new MerchantApiError('malformed_request', 'The request has more than one Host header.');
const NONE = 0;
const TWO_HOST_LINES = 1;
const TWO_AUTHORIZATION_LINES = 2;

/**
 * Scans the raw header lines once for two that Node would not show:
 * RFC 9112 section 3.2 makes two Host lines a 400, and Node keeps only the
 * first Host and the first Authorization where a Fetch `Headers` joins
 * them, so with two Authorization lines the handler reads `Headers`.
 */
function duplicatedLines(rawHeaders: string[]): number {
  let host = false;
  let authorization = false;
  let found = NONE;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') {
      if (host) return TWO_HOST_LINES;
      host = true;
    } else if (name.length === 13 && name.toLowerCase() === 'authorization') {
      if (authorization) found = TWO_AUTHORIZATION_LINES;
      authorization = true;
    }
  }
  return found;
}

/**
 * Answers what Node's HTTP parser rejects before any listener runs (oversized
 * headers, garbage, a control character in a header, a head too slow to
 * arrive) with JSON instead of a bare status line. Given the API, the answer
 * is the pipeline's: an access line and metrics, the client's X-Request-Id
 * when it can be read from what arrived (./node-request-heads.ts says when),
 * and HSTS over TLS.
 */
export function answerClientErrors(server: Server, api?: MerchantApi): void {
  if (server instanceof TlsServer) keepRequestHeads(server);
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    if (error.code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const refusal =
      error.code === 'HPE_HEADER_OVERFLOW'
        ? new MerchantApiError('headers_too_large', 'The request headers are too large.')
        : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? new MerchantApiError('request_timeout', 'The request took too long to arrive.')
          : new MerchantApiError('malformed_request', 'The request could not be parsed.');
    // The one error renderer writes it; the socket gets it as raw HTTP, since no response object exists yet.
    const packet = refusedHead(socket, (error as { rawPacket?: Buffer }).rawPacket);
    const method = /^[A-Z]{1,16}(?= )/.exec(packet)?.[0];
    const requestId = /\r\nx-request-id:[ \t]*([^\r\n]{1,128})\r\n/i.exec(packet)?.[1]?.trim() ?? null;
    const answered = api ? refuseWithoutRequest(api, refusal, socket, { header: (name) => (name === 'x-request-id' ? requestId : null), method }) : Promise.resolve(errorResponse(refusal));
    void answered.then((response) => endWithAnswer(socket, response));
  });
}

/**
 * Starts a server for the API and resolves once it listens.
 *
 * @example
 * const server = await serve(api, { port: 8787 });
 * console.log(server.url);
 * process.on('SIGTERM', () => server.close());
 */
export async function serve(api: MerchantApi, options: ServeOptions = {}): Promise<Served> {
  const { port, hostname, shutdownTimeout, tls, limits, ipv6Prefix } = resolveServeOptions(options);
  const listener = createRequestListener(api);
  const serverOptions = {
    // Node would answer a missing Host with a bare 400 itself; the listener answers it in JSON.
    requireHostHeader: false,
    headersTimeout: limits.headersTimeout,
    requestTimeout: limits.requestTimeout,
    keepAliveTimeout: limits.keepAliveTimeout,
    // Node checks the two timeouts only this often (30 s by default), so a
    // slow client would hold its connection far past them.
    connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(limits.headersTimeout / 4))),
  };
  const server: Server = tls ? createHttpsServer({ ...serverOptions, cert: tls.cert, key: tls.key }, listener) : createServer(serverOptions, listener);
  // Both caps are the adapter's, not Node's server.maxConnections: Node closes a connection over that one in its accept handler, with no socket to answer on.
  capConnections(server, api, { maxConnections: limits.maxConnections, maxConnectionsPerAddress: limits.maxConnectionsPerAddress, ipv6Prefix, tls: Boolean(tls), onCapped: options.onConnectionsCapped });
  answerClientErrors(server, api);
  answerExpectations(server, listener);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, hostname, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const bound = typeof address === 'object' && address ? address.port : port;
  return { url: listenUrl(Boolean(tls), hostname, bound), close: () => closeGracefully(server, shutdownTimeout, api) };
}

/**
 * Stops accepting and waits for in-flight requests, closing keep-alive
 * connections as soon as they are idle; after `timeoutMs` cuts what is left.
 */
function closeGracefully(server: Server, timeoutMs: number, api: MerchantApi): Promise<void> {
  if (!server.listening) return Promise.resolve();
  const idleSweep = setInterval(() => server.closeIdleConnections(), 50);
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeIdleConnections();
  return closeWithin(closed, timeoutMs, () => {
    // Cut by the handler first, so each cut stream is logged (stream_aborted, its access line) before close() resolves.
    api.abortStreams?.();
    server.closeAllConnections();
    return closed;
  }).finally(() => clearInterval(idleSweep));
}
