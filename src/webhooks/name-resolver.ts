/**
 * Webhook host names resolved without holding anything else (docs/webhooks.md#addresses).
 * `dns.lookup` is getaddrinfo on libuv's pool of 4 threads, which file reads, `crypto.scrypt` and
 * the database driver's own look-ups share: ten names whose DNS never answers held every thread,
 * and the API's new database connections with them. Here names are asked of the DNS servers of
 * /etc/resolv.conf with `node:dns`'s `Resolver` (c-ares on Node and Bun, Deno's resolver on Deno:
 * sockets on the event loop, no thread), A and AAAA side by side, within `timeoutMs` in all.
 * Answers are cached for their TTL (at most `maxTtlMs`), a name that does not exist for
 * `negativeTtlMs`; at most `maxEntries` names, the oldest forgotten first; callers asking for a
 * name being resolved share the one question. `localhost` and `*.localhost` are loopback
 * (RFC 6761), and names in /etc/hosts answer from it, as getaddrinfo answered; the address guard
 * judges every address, whichever the source.
 */
import { promises as dnsPromises } from 'node:dns';
import { readFile } from 'node:fs/promises';
import { isIP } from 'node:net';

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** A name that did not resolve: `code` says why (`not_found`, `timeout`, `failed`). */
export class NameResolutionError extends Error {
  override name = 'NameResolutionError';
  constructor(
    readonly code: 'not_found' | 'timeout' | 'failed',
    message: string,
  ) {
    super(message);
  }
}

export interface NameResolverOptions {
  /** Longest a name takes to resolve, both questions and their retries (default 5 s). */
  timeoutMs?: number;
  /** Names remembered (default 10,000). */
  maxEntries?: number;
  /** Longest an answer is kept, whatever its TTL (default 1 h). */
  maxTtlMs?: number;
  /** How long a name that does not exist stays so (default 30 s). */
  negativeTtlMs?: number;
  /** The hosts file (default /etc/hosts), read again every 30 s at most. */
  hostsFile?: string;
  /** DNS servers (`address` or `address:port`) instead of those of /etc/resolv.conf. */
  servers?: readonly string[];
}

interface Entry {
  addresses: ResolvedAddress[] | undefined;
  expiresAt: number;
}

const LOOPBACK: ResolvedAddress[] = [
  { address: '127.0.0.1', family: 4 },
  { address: '::1', family: 6 },
];
/** A `Resolver` reads /etc/resolv.conf when made: made again this often, so a changed file is seen. */
const RESOLVER_LIFETIME_MS = 60_000;
const HOSTS_LIFETIME_MS = 30_000;

type TtlAnswer = Array<{ address: string; ttl: number }>;

export class NameResolver {
  readonly #timeoutMs: number;
  readonly #maxEntries: number;
  readonly #maxTtlMs: number;
  readonly #negativeTtlMs: number;
  readonly #hostsFile: string;
  readonly #servers: readonly string[] | undefined;
  readonly #cache = new Map<string, Entry>();
  readonly #asking = new Map<string, Promise<ResolvedAddress[]>>();
  #resolver: InstanceType<typeof dnsPromises.Resolver> | undefined;
  #resolverMadeAt = 0;
  #hosts: Promise<Map<string, ResolvedAddress[]>> | undefined;
  #hostsReadAt = 0;

  constructor(options: NameResolverOptions = {}) {
    this.#timeoutMs = options.timeoutMs ?? 5000;
    this.#maxEntries = options.maxEntries ?? 10_000;
    this.#maxTtlMs = options.maxTtlMs ?? 3_600_000;
    this.#negativeTtlMs = options.negativeTtlMs ?? 30_000;
    this.#hostsFile = options.hostsFile ?? '/etc/hosts';
    this.#servers = options.servers;
  }

  /** Names held in the cache now (for tests and metrics). */
  get size(): number {
    return this.#cache.size;
  }

  /** Every address of `hostname`, IPv4 first; rejects with `NameResolutionError` within `timeoutMs`. */
  async resolve(hostname: string): Promise<ResolvedAddress[]> {
    const name = hostname.toLowerCase().replace(/\.$/, '');
    const family = isIP(name);
    if (family !== 0) return [{ address: name, family: family as 4 | 6 }];
    if (name === 'localhost' || name.endsWith('.localhost')) return LOOPBACK;
    const listed = (await this.#hostsEntries()).get(name);
    if (listed !== undefined) return listed;
    const cached = this.#cache.get(name);
    if (cached !== undefined) {
      if (cached.expiresAt > Date.now()) {
        if (cached.addresses === undefined) throw new NameResolutionError('not_found', `${name} does not exist.`);
        return cached.addresses;
      }
      this.#cache.delete(name);
    }
    let asking = this.#asking.get(name);
    if (asking === undefined) {
      asking = this.#ask(name).finally(() => this.#asking.delete(name));
      this.#asking.set(name, asking);
    }
    return asking;
  }

  async #ask(name: string): Promise<ResolvedAddress[]> {
    const resolver = this.#currentResolver();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new NameResolutionError('timeout', `${name} did not resolve within ${this.#timeoutMs / 1000} s.`)), this.#timeoutMs);
    });
    try {
      // Both families at once; one that has no record (ENODATA, or ENOTFOUND on Bun) is an empty answer.
      const [v4, v6] = await Promise.race([Promise.allSettled([resolver.resolve4(name, { ttl: true }), resolver.resolve6(name, { ttl: true })]), deadline]);
      const answered = (result: PromiseSettledResult<TtlAnswer>) => (result.status === 'fulfilled' ? result.value : []);
      const addresses: ResolvedAddress[] = [...answered(v4).map(({ address }) => ({ address, family: 4 as const })), ...answered(v6).map(({ address }) => ({ address, family: 6 as const }))];
      if (addresses.length > 0) {
        // Kept for the shortest TTL of the answer (a family that failed is not waited for again before then).
        const ttls = [...answered(v4), ...answered(v6)].map(({ ttl }) => ttl * 1000);
        this.#remember(name, addresses, Math.min(this.#maxTtlMs, ...ttls));
        return addresses;
      }
      const codes = [v4, v6].map((result) => (result.status === 'rejected' ? (result.reason as { code?: string }).code : 'ENODATA'));
      if (codes.every((code) => code === 'ENOTFOUND' || code === 'ENODATA')) {
        this.#remember(name, undefined, this.#negativeTtlMs);
        throw new NameResolutionError('not_found', `${name} does not exist.`);
      }
      if (codes.includes('ETIMEOUT')) throw new NameResolutionError('timeout', `${name} did not resolve within ${this.#timeoutMs / 1000} s.`);
      throw new NameResolutionError('failed', `${name} did not resolve (${codes.filter((code) => code !== 'ENODATA').join(', ')}).`);
    } finally {
      clearTimeout(timer);
    }
  }

  #remember(name: string, addresses: ResolvedAddress[] | undefined, ttlMs: number): void {
    if (ttlMs <= 0) return;
    if (this.#cache.size >= this.#maxEntries) {
      // Expired entries first; else the oldest (insertion order).
      const now = Date.now();
      for (const [key, entry] of this.#cache) if (entry.expiresAt <= now) this.#cache.delete(key);
      if (this.#cache.size >= this.#maxEntries) this.#cache.delete(this.#cache.keys().next().value!);
    }
    this.#cache.set(name, { addresses, expiresAt: Date.now() + ttlMs });
  }

  #currentResolver(): InstanceType<typeof dnsPromises.Resolver> {
    const now = Date.now();
    if (this.#resolver === undefined || now - this.#resolverMadeAt >= RESOLVER_LIFETIME_MS) {
      // Each server asked twice, a third of the time each: the answer (or not) comes within timeoutMs.
      this.#resolver = new dnsPromises.Resolver({ timeout: Math.max(100, Math.floor(this.#timeoutMs / 3)), tries: 2 });
      if (this.#servers !== undefined) this.#resolver.setServers(this.#servers);
      this.#resolverMadeAt = now;
    }
    return this.#resolver;
  }

  /** The hosts file by name, read again every 30 s; a file that cannot be read is empty. */
  #hostsEntries(): Promise<Map<string, ResolvedAddress[]>> {
    const now = Date.now();
    if (this.#hosts === undefined || now - this.#hostsReadAt >= HOSTS_LIFETIME_MS) {
      this.#hostsReadAt = now;
      this.#hosts = readFile(this.#hostsFile, 'utf8').then(parseHosts, () => new Map());
    }
    return this.#hosts;
  }
}

/** `address name alias…` lines, `#` comments; IPv4 first for each name. */
export function parseHosts(text: string): Map<string, ResolvedAddress[]> {
  const byName = new Map<string, ResolvedAddress[]>();
  for (const line of text.split('\n')) {
    const [address, ...names] = line.replace(/#.*/, '').trim().split(/\s+/);
    const family = isIP(address ?? '');
    if (family === 0) continue;
    for (const name of names) {
      const key = name.toLowerCase().replace(/\.$/, '');
      const list = byName.get(key) ?? [];
      if (!list.some((entry) => entry.address === address)) list.push({ address: address!, family: family as 4 | 6 });
      byName.set(key, list);
    }
  }
  for (const list of byName.values()) list.sort((a, b) => a.family - b.family);
  return byName;
}
