/**
 * What every runtime adapter's `serve(api, options)` takes and returns, so
 * that Node, Bun and Deno deploys are configured the same way.
 */
import { DEFAULTS } from '../src/defaults.js';
import { checkIpv6Prefix } from '../src/limits/address-key.js';

export interface ServeOptions {
  /** TCP port; 0 picks a free one (see `url`). Default 8787. */
  port?: number;
  /** Interface to listen on. Default `127.0.0.1`; `0.0.0.0` for every interface. */
  hostname?: string;
  /** Serve HTTPS with this PEM certificate chain and private key. */
  tls?: { cert: string; key: string };
  /** On `close()`, how long in-flight requests may take before connections are cut. Default 8000 ms. */
  shutdownTimeout?: number;
  /**
   * Connection limits (docs/runtimes.md#connection-limits). Node applies all
   * five; Bun has only an idle timeout (from `keepAliveTimeout`, at least
   * its own minimum); Deno none, so put a proxy in front of it.
   */
  limits?: ConnectionLimits;
  /**
   * Let several processes listen on this port, the kernel spreading new
   * connections among them (SO_REUSEPORT; Linux). Bun and Deno only (Deno
   * needs `--unstable-net`); the Node adapter ignores it: use `node:cluster`
   * there, as the standalone server's WORKERS does. Default false.
   */
  reusePort?: boolean;
  /**
   * Told when an address (an IPv6 one: its network) reaches `limits.maxConnectionsPerAddress` and its
   * next connection is refused (answered 429 and closed; over TLS closed before its handshake, each
   * refusal logged and counted all the same); once until the address holds fewer
   * again, so a flood of connections is one call, not thousands. Node only.
   */
  onConnectionsCapped?: (clientAddress: string, limit: number) => void;
  /**
   * `limits.maxConnectionsPerAddress` counts IPv6 clients per network of this
   * prefix length (docs/security.md#ipv6-clients): a client holds a whole /64,
   * so a full address is no limit. 32 to 128; default 64 (as `createMerchantApi`'s `ipv6Prefix`).
   */
  ipv6Prefix?: number;
}

export interface ConnectionLimits {
  /** Time for a client to send the request headers, ms. Default 10,000. */
  headersTimeout?: number;
  /** Time for a client to send the whole request, ms. Default 30,000. */
  requestTimeout?: number;
  /** How long an idle keep-alive connection is kept, ms. Default 5,000. */
  keepAliveTimeout?: number;
  /** Most connections at once; further ones are refused as they arrive (a 429, over TLS a close before the handshake). Default 10,000. */
  maxConnections?: number;
  /**
   * Most connections at once from one address (the socket's peer; an IPv6 one by its `ipv6Prefix` network), so that
   * one client cannot hold all of `maxConnections`; further ones are refused
   * as they arrive, as over `maxConnections`. Behind a proxy every connection comes from the proxy:
   * set it to `maxConnections` there. Default 256.
   */
  maxConnectionsPerAddress?: number;
}

export interface Served {
  /** Where the server listens, e.g. `http://127.0.0.1:8787`. */
  url: string;
  /** Stops accepting, lets in-flight requests finish (up to `shutdownTimeout`), then resolves. */
  close(): Promise<void>;
}

/** A URL for people: the wildcard addresses are reachable as localhost. */
export function listenUrl(secure: boolean, hostname: string, port: number): string {
  const host = hostname === '0.0.0.0' || hostname === '::' || hostname === '' ? 'localhost' : hostname.includes(':') ? `[${hostname}]` : hostname;
  return `${secure ? 'https' : 'http'}://${host}:${port}`;
}

/** The options with every default filled in, the same on every runtime. */
export function resolveServeOptions(options: ServeOptions): {
  port: number;
  hostname: string;
  shutdownTimeout: number;
  tls: ServeOptions['tls'];
  limits: Required<ConnectionLimits>;
  reusePort: boolean;
  ipv6Prefix: number;
} {
  const limits: Required<ConnectionLimits> = { ...DEFAULTS.connectionLimits, ...options.limits };
  for (const [name, value] of Object.entries(limits)) {
    if (!Number.isInteger(value) || value < 1) throw new TypeError(`limits.${name} must be a whole number, at least 1.`);
  }
  const ipv6Prefix = options.ipv6Prefix ?? DEFAULTS.ipv6Prefix;
  checkIpv6Prefix(ipv6Prefix, 'ipv6Prefix');
  return {
    port: options.port ?? DEFAULTS.port,
    hostname: options.hostname ?? DEFAULTS.hostname,
    shutdownTimeout: options.shutdownTimeout ?? DEFAULTS.shutdownTimeoutMs,
    tls: options.tls,
    limits,
    reusePort: options.reusePort ?? false,
    ipv6Prefix,
  };
}

/**
 * Waits for a graceful stop, at most `timeoutMs`; then calls `cut` (when the
 * runtime can cut what is left) and resolves.
 */
export async function closeWithin(stopped: Promise<unknown>, timeoutMs: number, cut?: () => unknown): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<'timeout'>((resolve) => {
    timer = setTimeout(() => resolve('timeout'), timeoutMs);
  });
  const outcome = await Promise.race([stopped.catch(() => undefined), deadline]);
  clearTimeout(timer);
  if (outcome === 'timeout') await cut?.();
}
