/**
 * Which public URL did the merchant call? The signature covers it (docs/protocol.md#signing),
 * so the handler must know it: the `publicUrl` option (the only trusted
 * source in production), else `X-Forwarded-Proto`/`X-Forwarded-Host`
 * when `trustProxy` is on, else the request URL.
 */
import { MerchantApiError } from '../errors.js';
import { lastListValue } from './context.js';

export interface PublicUrlOptions {
  /** Public origins, optionally with a path prefix that a proxy strips. */
  publicUrl?: string | readonly string[];
  trustProxy?: boolean;
}

/** What the resolver reads of a request: its headers. */
interface RequestHeaders {
  header(name: string): string | null;
}

/** Resolves public base URLs (no trailing slash) for requests. */
export type PublicBaseResolver = (request: RequestHeaders, requestOrigin: string) => string[];

/** Validates the configured public URLs once, at start-up. */
export function createPublicBaseResolver(options: PublicUrlOptions): PublicBaseResolver {
  const configured = options.publicUrl === undefined ? [] : typeof options.publicUrl === 'string' ? [options.publicUrl] : [...options.publicUrl];
  if (configured.length > 0) {
    const bases = configured.map(normalisePublicUrl);
    return () => bases;
  }
  if (options.trustProxy) {
    return (request, requestOrigin) => [forwardedOrigin(request) ?? requestOrigin];
  }
  return (_request, requestOrigin) => [requestOrigin];
}

/**
 * `https://api.example.com:443/prefix/` becomes `https://api.example.com/prefix`.
 * Throws a clear error for anything that is not an http(s) URL.
 */
export function normalisePublicUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new TypeError(`publicUrl "${value}" is not a URL; expected e.g. https://api.example.com`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`publicUrl "${value}" must be http or https`);
  if (url.search || url.hash || url.username || url.password) throw new TypeError(`publicUrl "${value}" must have no query, fragment or credentials`);
  return url.origin + url.pathname.replace(/\/+$/, '');
}

// Proxies append to these headers: only the last value, from the nearest
// proxy (the one trusted), is used; earlier ones are the client's to choose.
const HOST = /^(?:[a-z0-9.-]+|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

/** Thrown for an `X-Forwarded-Host` that names no host: the request's public URL cannot be known. */
const NOT_A_HOST = 'The X-Forwarded-Host header is not a host name or address with a valid port.';

function forwardedOrigin(request: RequestHeaders): string | undefined {
  const host = lastListValue(request.header('x-forwarded-host'));
  if (host === undefined) return undefined;
  if (!HOST.test(host)) throw new MerchantApiError('malformed_request', NOT_A_HOST);
  const proto = lastListValue(request.header('x-forwarded-proto'))?.toLowerCase();
  // URL drops the default port, as the signature's base_url does; it refuses what the pattern
  // lets through but is no host (`1.2.3.999`, a port above 65535, `[::1::]`), whatever the proto.
  let origin: string;
  try {
    origin = new URL(`${proto === 'https' ? 'https' : 'http'}://${host}`).origin;
  } catch {
    throw new MerchantApiError('malformed_request', NOT_A_HOST);
  }
  return proto === 'http' || proto === 'https' ? origin : undefined;
}

