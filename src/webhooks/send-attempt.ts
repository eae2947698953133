/**
 * One delivery attempt (docs/webhooks.md#delivery): `POST` of the event body to the endpoint, with
 * the Standard Webhooks headers, `content-type: application/json` and a `user-agent` naming the
 * product. It connects to the address the guard checked (`lookup` answers only that address; the
 * host name still goes in `Host` and TLS SNI, and the certificate is checked against it), follows
 * no redirect (a 3xx is a failure like any non-2xx), gives up after `timeoutMs` from the start, and
 * reads at most `readBytes` of the answer, of which `keepBytes` are kept.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { DEFAULTS } from '../defaults.js';
import { PACKAGE_VERSION } from '../version.js';

/** `merchant-api-webhooks/<version>` of package.json: receivers' logs name the sender and its release. */
export const WEBHOOK_USER_AGENT = `merchant-api-webhooks/${PACKAGE_VERSION} (+https://www.standardwebhooks.com)`;

export interface AttemptRequest {
  url: URL;
  /** The checked address to connect to, never looked up again. */
  address: { address: string; family: 4 | 6 };
  headers: Record<string, string>;
  body: string;
  timeoutMs?: number;
  readBytes?: number;
  keepBytes?: number;
}

/** What became of one attempt: a status (any), or an error that names what failed without the body. */
export interface AttemptResult {
  status?: number;
  /** The answer's start, at most `keepBytes` bytes as text. */
  responseBody?: string;
  retryAfter?: string;
  /** `timeout`, `connection`, …: never the body nor a secret. */
  error?: string;
  durationMs: number;
}

let rootsPermitted: boolean | undefined;

/**
 * Whether this runtime can check a receiver's certificate. Deno (2.9) reads the root certificates of
 * its `node:tls` under the `sys` permission, and without it an `https` request throws where no
 * handler catches it, which ends the process: there an https attempt is not made without
 * `--allow-sys` (docs/webhooks.md#runtimes). Node and Bun: always.
 */
export function tlsRootsPermitted(): boolean {
  if (rootsPermitted === undefined) {
    const deno = (globalThis as { Deno?: { permissions: { querySync(descriptor: { name: string }): { state: string } } } }).Deno;
    rootsPermitted = deno === undefined || deno.permissions.querySync({ name: 'sys' }).state === 'granted';
  }
  return rootsPermitted;
}

/** True for a 2xx: the only success. */
export function isDelivered(result: AttemptResult): boolean {
  return result.status !== undefined && result.status >= 200 && result.status < 300;
}

/** Sends one attempt; resolves with its result, never rejects. */
export function sendAttempt(attempt: AttemptRequest): Promise<AttemptResult> {
  const started = performance.now();
  const timeoutMs = attempt.timeoutMs ?? DEFAULTS.webhooks.timeoutMs;
  const readBytes = attempt.readBytes ?? DEFAULTS.webhooks.responseReadBytes;
  const keepBytes = attempt.keepBytes ?? DEFAULTS.webhooks.responseKeptBytes;
  const pinned: LookupFunction = (_hostname, options, callback) => {
    // Node asks for all addresses (autoSelectFamily) or one; either way, only the checked address.
    if ((options as { all?: boolean }).all) (callback as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [attempt.address]);
    else callback(null, attempt.address.address, attempt.address.family);
  };
  const body = Buffer.from(attempt.body, 'utf8');
  // A failed attempt (retried on the schedule) rather than a process that ends.
  if (attempt.url.protocol === 'https:' && !tlsRootsPermitted()) return Promise.resolve({ error: 'tls_roots_not_permitted', durationMs: 0 });
  return new Promise<AttemptResult>((resolve) => {
    let settled = false;
    const finish = (result: Omit<AttemptResult, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...result, durationMs: performance.now() - started });
    };
    const send = attempt.url.protocol === 'https:' ? httpsRequest : httpRequest;
    const req = send(attempt.url, {
      method: 'POST',
      lookup: pinned,
      agent: false,
      headers: {
        ...attempt.headers,
        'content-type': 'application/json',
        'content-length': String(body.length),
        'user-agent': WEBHOOK_USER_AGENT,
      },
    });
    const timer = setTimeout(() => {
      finish({ error: 'timeout' });
      req.destroy();
    }, timeoutMs);
    req.on('error', (error: NodeJS.ErrnoException) => finish({ error: error.code === 'ECONNREFUSED' ? 'connection_refused' : error.code?.startsWith('ERR_TLS') || error.code?.includes('CERT') ? 'tls' : 'connection' }));
    req.on('response', (res: IncomingMessage) => {
      const chunks: Buffer[] = [];
      let read = 0;
      const done = () => {
        const kept = Buffer.concat(chunks).subarray(0, keepBytes).toString('utf8');
        const retryAfter = res.headers['retry-after'];
        finish({ status: res.statusCode, responseBody: kept, ...(typeof retryAfter === 'string' ? { retryAfter } : {}) });
        // Whatever is left of a long answer is not read: the socket goes.
        res.destroy();
      };
      res.on('data', (chunk: Buffer) => {
        chunks.push(chunk);
        read += chunk.length;
        if (read >= readBytes) done();
      });
      res.on('end', done);
      res.on('error', done);
    });
    req.end(body);
  });
}
