/**
 * Server-side request forgery (docs/webhooks.md#addresses): a webhook URL must be `https` and every
 * address its host resolves to must be public. Loopback, private, link-local, CGNAT, metadata,
 * documentation, multicast and reserved ranges are refused, IPv4 and IPv6, with IPv4 inside IPv6
 * (mapped, compatible, NAT64, 6to4) judged by the IPv4 it carries. The check runs at registration
 * and at each delivery, which connects to the address checked (resolved once), so DNS rebinding
 * cannot move it. Names are resolved by `./name-resolver.ts` (DNS on the event loop, never the
 * thread pool `dns.lookup` holds), and every address of the answer is judged here, whether it came
 * from DNS, its cache, /etc/hosts or a `localhost` name. `allowPrivate` and `allowHttp`
 * (`WEBHOOK_ALLOW_PRIVATE`, `WEBHOOK_ALLOW_HTTP`) lift the rules for development and tests.
 */
import { isIP } from 'node:net';
import { NameResolutionError, NameResolver } from './name-resolver.js';

/** What the guard lets through: only for development and tests. */
export interface AddressPolicy {
  allowPrivate?: boolean;
  allowHttp?: boolean;
}

/**
 * A URL or address the guard refuses; the message names the rule, for the 422 and the log.
 * `liftedBy` is the server setting that lifts the rule, which the operator's CLI names and the
 * merchant's API answer does not (a merchant cannot change the server's settings).
 */
export class WebhookAddressError extends Error {
  override name = 'WebhookAddressError';
  /** `refused` (the URL or an address breaks a rule, or the name does not exist), or why its name did not resolve. */
  readonly reason: 'refused' | 'dns_timeout' | 'dns_failed';

  constructor(message: string, reason: WebhookAddressError['reason'] = 'refused', readonly liftedBy?: 'WEBHOOK_ALLOW_HTTP' | 'WEBHOOK_ALLOW_PRIVATE') {
    super(message);
    this.reason = reason;
  }
}

/** IPv4 ranges that are not the public internet: [first octets as a number, prefix length]. */
const IPV4_REFUSED: ReadonlyArray<readonly [string, number]> = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // CGNAT (and Alibaba's metadata 100.100.100.200)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, cloud metadata 169.254.169.254
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];

/** The 32 bits of a dotted IPv4 address (already validated by `isIP`). */
function ipv4Bits(address: string): number {
  return address.split('.').reduce((bits, octet) => bits * 256 + Number(octet), 0);
}

function inIpv4Range(bits: number, [base, prefix]: readonly [string, number]): boolean {
  const size = 2 ** (32 - prefix);
  return Math.floor(bits / size) === Math.floor(ipv4Bits(base) / size);
}

function ipv4IsPublic(bits: number): boolean {
  return !IPV4_REFUSED.some((range) => inIpv4Range(bits, range));
}

/** The eight 16-bit groups of an IPv6 address (validated by `isIP`; a zone `%eth0` is refused earlier). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    // A dotted IPv4 tail is the last two groups.
    const bits = ipv4Bits(dotted[1]!);
    text = `${text.slice(0, -dotted[1]!.length)}${Math.floor(bits / 65536).toString(16)}:${(bits % 65536).toString(16)}`;
  }
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((group) => parseInt(group, 16)));
  const gap = text.indexOf('::');
  if (gap < 0) return parse(text);
  const left = parse(text.slice(0, gap));
  const right = parse(text.slice(gap + 2));
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function ipv6IsPublic(groups: number[]): boolean {
  const [a = 0, b = 0] = groups;
  const embedded = (high: number, low: number) => ipv4IsPublic(high * 65536 + low);
  const zeros = (from: number, to: number) => groups.slice(from, to).every((g) => g === 0);
  // IPv4 carried in IPv6 is judged by the IPv4: mapped ::ffff:a.b.c.d, compatible ::a.b.c.d
  // (deprecated; ::, ::1 among them), NAT64 64:ff9b::a.b.c.d, 6to4 2002:aabb:ccdd::.
  if (zeros(0, 5) && groups[5] === 0xffff) return embedded(groups[6]!, groups[7]!);
  if (zeros(0, 6)) return false;
  if (a === 0x64 && b === 0xff9b && zeros(2, 6)) return embedded(groups[6]!, groups[7]!);
  if (a === 0x2002) return embedded(b, groups[2]!);
  // Only global unicast 2000::/3, less its special parts: IETF assignments 2001::/23 (Teredo
  // 2001::/32 among them), documentation 2001:db8::/32 and 3fff::/20.
  if ((a & 0xe000) !== 0x2000) return false; // ULA fc00::/7, link-local fe80::/10, multicast ff00::/8, discard 100::/64, …
  if (a === 0x2001 && b < 0x200) return false;
  if (a === 0x2001 && b === 0xdb8) return false;
  if (a === 0x3fff && b < 0x1000) return false;
  return true;
}

/** True when `address` (an IPv4 or IPv6 literal) is a public internet address. */
export function isPublicAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return ipv4IsPublic(ipv4Bits(address));
  if (family === 6 && !address.includes('%')) return ipv6IsPublic(ipv6Groups(address.toLowerCase()));
  return false;
}

/** Longest URL an endpoint may have, as stored: normalized and percent-encoded (`URL.href`, ASCII). */
export const MAX_WEBHOOK_URL_LENGTH = 2048;

/**
 * Checks a URL's form before any lookup: `https` (or `http` with `allowHttp`), a host, no
 * credentials, no fragment, at most 2048 characters as given and as stored (`href`: a non-ASCII
 * character is percent-encoded into up to 12, so a short URL can store long). Returns the parsed
 * URL, whose `href` is what is stored; throws `WebhookAddressError`.
 */
export function checkWebhookUrl(text: string, policy: AddressPolicy = {}): URL {
  if (typeof text !== 'string' || text.length > MAX_WEBHOOK_URL_LENGTH) throw new WebhookAddressError(`The URL must be text of at most ${MAX_WEBHOOK_URL_LENGTH} characters.`);
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    throw new WebhookAddressError('The URL is not a valid absolute URL.');
  }
  if (url.href.length > MAX_WEBHOOK_URL_LENGTH) {
    throw new WebhookAddressError(`The URL must be at most ${MAX_WEBHOOK_URL_LENGTH} characters once normalized and percent-encoded, as it is stored; this one is ${url.href.length}.`);
  }
  if (url.protocol !== 'https:' && !(policy.allowHttp && url.protocol === 'http:')) throw new WebhookAddressError('The URL must use https.', 'refused', 'WEBHOOK_ALLOW_HTTP');
  if (url.username !== '' || url.password !== '') throw new WebhookAddressError('The URL must not hold credentials.');
  if (url.hash !== '') throw new WebhookAddressError('The URL must not have a fragment.');
  if (url.hostname === '') throw new WebhookAddressError('The URL must name a host.');
  const literal = hostLiteral(url.hostname);
  if (literal !== undefined && !policy.allowPrivate && !isPublicAddress(literal)) throw new WebhookAddressError('The URL points to a private, loopback, link-local or reserved address.', 'refused', 'WEBHOOK_ALLOW_PRIVATE');
  return url;
}

/** The address in a URL's hostname when it is an IP literal (`[::1]` → `::1`), else undefined. */
function hostLiteral(hostname: string): string | undefined {
  const bare = hostname.startsWith('[') ? hostname.slice(1, -1) : hostname;
  return isIP(bare) ? bare : undefined;
}

/** A resolver: every address of a host name, as `dns.lookup` with `all: true` answers. */
export type Resolve = (hostname: string) => Promise<Array<{ address: string; family: number }>>;

/** The process's resolver (its cache shared by the dispatcher, the API's endpoint checks and the CLI). */
export const sharedNameResolver = new NameResolver();

/** The system's DNS servers through `sharedNameResolver`: within 5 s, without the thread pool. */
export const systemResolve: Resolve = (hostname) => sharedNameResolver.resolve(hostname);

/**
 * Resolves the URL's host once and returns the address to connect to: the literal itself, or the
 * first address of the name. Every address the name has must be public (one private address among
 * public ones is refused too: the next lookup could pick it), unless `allowPrivate`.
 */
export async function resolveWebhookAddress(url: URL, policy: AddressPolicy = {}, resolve: Resolve = systemResolve): Promise<{ address: string; family: 4 | 6 }> {
  const literal = hostLiteral(url.hostname);
  const addresses = literal !== undefined ? [{ address: literal, family: isIP(literal) }] : await resolve(url.hostname).catch((error: unknown) => {
    // A timeout or a failing server (not a name that does not exist) is said, and retried as such.
    if (error instanceof NameResolutionError && error.code !== 'not_found') throw new WebhookAddressError(`The URL's host does not resolve: ${error.message}`, error.code === 'timeout' ? 'dns_timeout' : 'dns_failed');
    throw new WebhookAddressError('The URL\'s host does not resolve.');
  });
  if (addresses.length === 0) throw new WebhookAddressError('The URL\'s host does not resolve.');
  if (!policy.allowPrivate && addresses.some(({ address }) => !isPublicAddress(address))) {
    throw new WebhookAddressError('The URL\'s host resolves to a private, loopback, link-local or reserved address.', 'refused', 'WEBHOOK_ALLOW_PRIVATE');
  }
  const first = addresses[0]!;
  return { address: first.address, family: first.family === 6 ? 6 : 4 };
}
