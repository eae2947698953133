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
  /** Without `publicUrl`: the host names a request may name (Host, or X-Forwarded-Host with `trustProxy`); any other is a 400. */
  allowedHosts?: readonly string[];
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
  const allowed = allowedHostSet(options.allowedHosts);
  if (configured.length > 0) {
    if (allowed) throw new TypeError('allowedHosts has no effect with publicUrl (the Host is then never read): give one or the other.');
    const bases = configured.map(normalisePublicUrl);
    return () => bases;
  }
  const resolve: PublicBaseResolver = options.trustProxy ? (request, requestOrigin) => [forwardedOrigin(request) ?? requestOrigin] : (_request, requestOrigin) => [requestOrigin];
  if (!allowed) return resolve;
  return (request, requestOrigin) => {
    const bases = resolve(request, requestOrigin);
    if (!allowed.has(new URL(bases[0]!).hostname)) throw new MerchantApiError('malformed_request', NOT_ALLOWED);
    return bases;
  };
}

/** Thrown for a host outside `allowedHosts`; the host itself is not repeated, it is the client's to choose. */
const NOT_ALLOWED = 'The request names a host this API is not served at (allowedHosts).';

/**
 * `allowedHosts` as URL host names (lower case, IPv6 in brackets), or undefined when not given.
 * Throws a clear error for an entry that is no host name, or that has a port, a path or a scheme.
 */
function allowedHostSet(hosts: readonly string[] | undefined): Set<string> | undefined {
  if (hosts === undefined) return undefined;
  if (!Array.isArray(hosts) || hosts.length === 0) throw new TypeError('allowedHosts must be a non-empty array of host names, e.g. ["api.example.com"].');
  return new Set(hosts.map(normaliseAllowedHost));
}

/** `API.Example.com` becomes `api.example.com`; `api.example.com:443`, `https://api.example.com` or `a b` throw. */
export function normaliseAllowedHost(value: string): string {
  let hostname: string | undefined;
  try {
    const url = new URL(`http://${value}`);
    if (url.host === url.hostname && url.pathname === '/' && !url.search && !url.hash && !url.username) hostname = url.hostname;
  } catch {
    // Named below.
  }
  if (typeof value !== 'string' || hostname === undefined || !HOST.test(value) || hostname !== value.toLowerCase()) {
    throw new TypeError(`allowedHosts: "${String(value)}" is not a host name (no scheme, port or path; e.g. api.example.com or [2001:db8::1]).`);
  }
  return hostname;
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

