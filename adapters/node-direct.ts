/**
 * The Node adapter's direct path: the pipeline run from Node's
 * `IncomingMessage` (its method, its target and Host, a header reader, the
 * socket's address) and its answer written with `writeHead` and `end`,
 * without the Fetch `Request` and `Response` that @hono/node-server builds
 * and reads back (docs/benchmarks.md#the-node-direct-path-28-november-2026). A `Request` is
 * made only if a hook reads `ctx.request`; a `Response` only for an answer
 * that is one (a stream, a hook's own, an `onResponse` hook's), and then
 * written by @hono/node-server as on the other path.
 *
 * It takes only the requests whose URL needs no parser to be what the
 * `Request` constructor would make of it: GET and HEAD over HTTP/1, an
 * origin-form target of plain characters without dot segments, a plain Host.
 * Every other request goes through @hono/node-server (`api.fetch`), which
 * answers it as before; both paths run the same conformance suite.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { Http2ServerRequest } from 'node:http2';
import type { DirectReply } from '../src/pipeline/answer.js';
import { DIRECT_ENTRY, type Pipeline, type RequestHead } from '../src/pipeline/pipeline.js';
import type { RequestInfo } from '../src/http/context.js';
import type { MerchantApi } from '../src/index.js';

/** The API's direct entry, when it was made by `createMerchantApi` (an embedder's own object has only `fetch`). */
export function directEntry(api: MerchantApi): Pipeline['direct'] | undefined {
  const entry = (api as { [DIRECT_ENTRY]?: Pipeline['direct'] })[DIRECT_ENTRY];
  return typeof entry === 'function' ? entry : undefined;
}

/**
 * Characters the URL parser leaves as they are in a path and a query (no
 * percent-encoding added, no backslash read as a slash, no fragment): a
 * target of only these is, appended to the origin, the `Request`'s URL.
 */
const PLAIN_TARGET = /^\/[A-Za-z0-9\-._~!$&()*+,;=:@/%?]*$/;

/** A `.` or `..` segment (plain or `%2e`) is resolved away by the parser: such targets take the other path. */
const DOT_SEGMENT = /\/(?:\.|%2e){1,2}(?=[/?]|$)/i;

/** A lower-case host name (not an IDNA `xn--` one) or a canonical IPv4 address, with a port. */
const PLAIN_HOST = /^(?:[a-z0-9-]+\.)*[a-z0-9-]+(?::[1-9][0-9]{0,4})?$/;
const IPV4 = /^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$/;

/** The URL `new Request` would have for this request, when it is this plain; else undefined. */
export function plainUrl(target: string, host: string | undefined, secure: boolean): string | undefined {
  if (host === undefined || !PLAIN_HOST.test(host) || host.includes('xn--')) return undefined;
  const colon = host.indexOf(':');
  const name = colon === -1 ? host : host.slice(0, colon);
  if (colon !== -1) {
    const port = Number(host.slice(colon + 1));
    // The parser drops the scheme's default port and refuses one past 65535.
    if (port > 65_535 || port === (secure ? 443 : 80)) return undefined;
  }
  // A last label that starts with a digit makes the parser read the name as an IPv4 address, which it rewrites unless canonical.
  const last = name.slice(name.lastIndexOf('.') + 1);
  if (last.charCodeAt(0) <= 57 && !IPV4.test(name)) return undefined;
  if (!PLAIN_TARGET.test(target)) return undefined;
  const query = target.indexOf('?');
  if (DOT_SEGMENT.test(query === -1 ? target : target.slice(0, query))) return undefined;
  return `${secure ? 'https' : 'http'}://${host}${target}`;
}

/** True when the request may take the direct path (GET or HEAD over HTTP/1: no body to read, no HTTP/2 pseudo-headers). */
export function directMethod(req: IncomingMessage): boolean {
  return (req.method === 'GET' || req.method === 'HEAD') && !(req instanceof Http2ServerRequest);
}

/**
 * A Node request as the direct path hands it to the pipeline: its head
 * (method, URL, header reader, the `Request` made when a hook asks) and what
 * the adapter tells of it (the socket's address and port, the URL as sent),
 * in one object, so that a request costs one allocation here.
 */
export class NodeRequestHead implements RequestHead, RequestInfo {
  readonly method: string;
  readonly url: string;
  /** Set by the adapter right after construction (its reader needs this object for `request()`). */
  header: (name: string) => string | null = NO_HEADER;
  readonly clientAddress: string | undefined;
  readonly clientPort: number | undefined;
  readonly pathAsSent = true;
  readonly #req: IncomingMessage;
  readonly #res: ServerResponse;
  #made: Request | undefined;

  constructor(req: IncomingMessage, res: ServerResponse, url: string) {
    this.method = req.method!;
    this.url = url;
    this.clientAddress = req.socket.remoteAddress;
    this.clientPort = req.socket.remotePort;
    this.#req = req;
    this.#res = res;
  }

  request(): Request {
    return (this.#made ??= requestOf(this.#req, this.#res, this.url));
  }
}

const NO_HEADER = (): string | null => null;

/**
 * Runs the pipeline's direct entry for a request and writes its answer: a
 * whole reply with `writeHead` and `end`, a `Response` through `writeResponse`
 * (@hono/node-server's writer). An async function rather than `.then` and
 * `.catch`: no closure per request.
 */
export async function answerDirectly(
  direct: Pipeline['direct'],
  head: NodeRequestHead,
  req: IncomingMessage,
  res: ServerResponse,
  writeResponse: (req: IncomingMessage, res: ServerResponse, response: Response) => Promise<void>,
): Promise<void> {
  try {
    const answer = await direct(head, head);
    if (!(answer instanceof Response)) writeDirect(res, answer);
    else await writeResponse(req, res, answer);
  } catch {
    // The pipeline never rejects; a header Node refuses to write would throw here: a bare 500, as on the other path, never an unhandled rejection.
    writeFailed(res);
  }
}

/**
 * The `Request` of a request the direct path took, made when a hook asks for
 * it: as @hono/node-server makes it (every header line, the pseudo-headers
 * left out), with a signal aborted when the client goes before the answer is
 * written.
 */
export function requestOf(req: IncomingMessage, res: ServerResponse, url: string): Request {
  const headers: [string, string][] = [];
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.charCodeAt(0) !== 58) headers.push([raw[i]!, raw[i + 1]!]);
  const abort = new AbortController();
  res.once('close', () => {
    if (!res.writableFinished) abort.abort('Client connection prematurely closed.');
  });
  return new Request(url, { method: req.method, headers, signal: abort.signal });
}

/**
 * Writes a whole answer as @hono/node-server writes the `Response` of it:
 * the headers as given with the body, and for HEAD (whose `Response` has no
 * body, so its headers pass through a `Headers`) in name order.
 */
export function writeDirect(res: ServerResponse, answer: DirectReply): void {
  if (answer.body !== undefined) {
    res.writeHead(answer.status, answer.headers);
    res.end(answer.body);
    return;
  }
  const sorted: Record<string, string> = {};
  for (const name of Object.keys(answer.headers).sort()) sorted[name] = answer.headers[name]!;
  res.writeHead(answer.status, sorted);
  res.end();
}

/** What @hono/node-server answers when the handler rejects (it never does): a bare 500. */
export function writeFailed(res: ServerResponse): void {
  try {
    if (!res.headersSent) res.writeHead(500, { 'content-type': 'text/plain; charset=UTF-8' });
    res.end();
  } catch {
    res.destroy();
  }
}
