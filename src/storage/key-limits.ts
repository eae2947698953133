/**
 * What may limit one API key (docs/security.md#key-scopes-and-allowlists): its scopes, the client
 * networks it may be used from, and when it ends. Said once here for every place that reads or
 * writes them: the seed, the storages, the CLI and the check after a key matched
 * (src/auth/key-gate.ts). Networks are parsed once, when a key is loaded, into words that a
 * client address is compared with; a request never parses a network.
 */

/**
 * What a key may be used for: `signature` (`/validatesignature`), `users:read` (reading: the
 * users and the keys), `webhooks:manage` (`/merchant/webhooks`: listing, adding, removing, rotating
 * and testing the endpoints that push users' changes out), `keys:manage` (adding, rotating,
 * changing and revoking the merchant's own keys through `/merchant/keys`).
 */
export type KeyScope = 'signature' | 'users:read' | 'webhooks:manage' | 'keys:manage';

/**
 * Every scope, in the order they are printed; a key without limits has all of them. A key stored
 * with every scope is stored as one without limits (NULL on MySQL), so keys that had every scope
 * before `webhooks:manage` or `keys:manage` existed have them too (an operator's unlimited key can
 * manage keys, as the CLI can); a key limited to fewer does not gain them.
 */
export const KEY_SCOPES: readonly KeyScope[] = Object.freeze(['signature', 'users:read', 'webhooks:manage', 'keys:manage']);

/**
 * Whether a key reaches the merchant's live data or its test dataset (docs/test-mode.md). Every
 * key that existed before test mode is live; a test key's secret starts with `TEST_KEY_PREFIX`,
 * so that it is told apart at a glance (in a config file, a log a merchant pastes).
 */
export type KeyMode = 'live' | 'test';
export const KEY_MODES: readonly KeyMode[] = Object.freeze(['live', 'test']);
export const TEST_KEY_PREFIX = 'test_';

/** Why `text` is no key mode (a sentence), or undefined. */
export function keyModeProblem(text: string): string | undefined {
  return (KEY_MODES as readonly string[]).includes(text) ? undefined : `${JSON.stringify(text.slice(0, 40))} is not a key mode (live or test)`;
}

/** The most networks one key's allowlist may hold, and the longest key name. */
export const MAX_ALLOW_FROM = 100;
export const MAX_KEY_NAME_LENGTH = 100;

/**
 * The limits of one key. Absent fields do not limit: every scope, from anywhere, no end.
 * `allowFrom` holds networks in their canonical text (`canonicalNetwork`).
 */
export interface KeyLimits {
  readonly scopes?: readonly KeyScope[];
  readonly allowFrom?: readonly string[];
  /** When the key stops matching, canonical (`YYYY-MM-DDTHH:MM:SS.ffffff+00:00`). */
  readonly expiresAt?: string;
  /**
   * `test`: the key reaches the merchant's test dataset only (docs/test-mode.md). Absent: live. Held
   * here, beside the other facts a request checks once the key matched, so that a merchant whose
   * keys are all live and unlimited still has no `keyLimits` at all (and costs the check nothing).
   */
  readonly mode?: 'test';
}

/** True when `limits` limits nothing (such a key is stored and checked as a plain key). */
export function limitsNothing(limits: KeyLimits | undefined): boolean {
  if (limits === undefined) return true;
  const allScopes = limits.scopes === undefined || KEY_SCOPES.every((scope) => limits.scopes!.includes(scope));
  return allScopes && (limits.allowFrom === undefined || limits.allowFrom.length === 0) && limits.expiresAt === undefined && limits.mode !== 'test';
}

/** An IP address as 32-bit words: one for IPv4, four for IPv6. */
export interface IpAddress {
  readonly family: 4 | 6;
  readonly words: Uint32Array;
}

/** A network: its address (host bits zero) and prefix length. */
export interface IpNetwork extends IpAddress {
  readonly prefix: number;
}

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;

function parseIpv4(text: string): number | undefined {
  const match = IPV4.exec(text);
  if (!match) return undefined;
  let value = 0;
  for (let i = 1; i <= 4; i++) {
    const part = match[i]!;
    if (part.length > 1 && part[0] === '0') return undefined; // no octal-looking parts
    const byte = Number(part);
    if (byte > 255) return undefined;
    value = value * 256 + byte;
  }
  return value >>> 0;
}

/** Eight 16-bit groups of an IPv6 address (with an IPv4 tail allowed), or undefined. */
function parseIpv6Groups(text: string): number[] | undefined {
  if (text.length > 45 || !text.includes(':')) return undefined;
  let tail: number[] = [];
  let body = text;
  const lastColon = text.lastIndexOf(':');
  if (text.indexOf('.', lastColon) !== -1) {
    const v4 = parseIpv4(text.slice(lastColon + 1));
    if (v4 === undefined) return undefined;
    tail = [v4 >>> 16, v4 & 0xffff];
    // `::ffff:1.2.3.4` leaves `::ffff`; `::1.2.3.4` and `1::1.2.3.4` leave a colon of their `::`.
    body = text.slice(0, lastColon);
    if (body.endsWith(':')) body += ':';
  }
  const halves = body.split('::');
  if (halves.length > 2) return undefined;
  const groupsOf = (part: string): number[] | undefined => {
    if (part === '') return [];
    const groups: number[] = [];
    for (const group of part.split(':')) {
      if (!/^[0-9a-fA-F]{1,4}$/.test(group)) return undefined;
      groups.push(parseInt(group, 16));
    }
    return groups;
  };
  const head = groupsOf(halves[0]!);
  if (head === undefined) return undefined;
  const want = 8 - tail.length;
  if (halves.length === 1) {
    if (head.length !== want) return undefined;
    return [...head, ...tail];
  }
  const rest = groupsOf(halves[1]!);
  if (rest === undefined || head.length + rest.length > want - 1) return undefined;
  return [...head, ...new Array<number>(want - head.length - rest.length).fill(0), ...rest, ...tail];
}

/**
 * A client address as the adapters give it: IPv4, IPv6 (a zone `%eth0` ignored), and an IPv4
 * address mapped into IPv6 (`::ffff:192.0.2.1`, how a dual-stack socket reports an IPv4 client)
 * read as the IPv4 address it is. Undefined for anything else.
 */
export function parseIpAddress(text: string): IpAddress | undefined {
  const v4 = parseIpv4(text);
  if (v4 !== undefined) return { family: 4, words: Uint32Array.of(v4) };
  const zone = text.indexOf('%');
  const groups = parseIpv6Groups(zone === -1 ? text : text.slice(0, zone));
  if (groups === undefined) return undefined;
  if (groups[0] === 0 && groups[1] === 0 && groups[2] === 0 && groups[3] === 0 && groups[4] === 0 && groups[5] === 0xffff) {
    return { family: 4, words: Uint32Array.of(((groups[6]! << 16) | groups[7]!) >>> 0) };
  }
  const words = new Uint32Array(4);
  for (let i = 0; i < 4; i++) words[i] = ((groups[2 * i]! << 16) | groups[2 * i + 1]!) >>> 0;
  return { family: 6, words };
}

/** The mask of bits `prefix` leaves in word `index` (32 bits a word). */
function wordMask(prefix: number, index: number): number {
  const bits = Math.max(0, Math.min(32, prefix - 32 * index));
  return bits === 0 ? 0 : bits === 32 ? 0xffffffff : (0xffffffff << (32 - bits)) >>> 0;
}

/**
 * A network in CIDR notation (`203.0.113.0/24`, `2001:db8::/48`; a lone address is its /32 or
 * /128), or why not. Bits beyond the prefix must be zero: `203.0.113.7/24` is refused, as it
 * most likely is a typing error.
 */
export function parseNetwork(text: string): IpNetwork | string {
  const slash = text.indexOf('/');
  const address = parseIpAddress(slash === -1 ? text : text.slice(0, slash));
  if (address === undefined || text.includes('%')) return 'is not an IPv4 or IPv6 network in CIDR notation (such as 203.0.113.0/24 or 2001:db8::/48)';
  const max = address.family === 4 ? 32 : 128;
  const prefixText = slash === -1 ? String(max) : text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > max) return `has a prefix length that is not 0-${max}`;
  const prefix = Number(prefixText);
  for (let i = 0; i < address.words.length; i++) {
    if ((address.words[i]! & ~wordMask(prefix, i)) !== 0) return `has bits set after its /${prefix} prefix (the network is ${canonicalNetwork({ ...address, prefix, words: address.words.map((w, j) => (w & wordMask(prefix, j)) >>> 0) })})`;
  }
  return { ...address, prefix };
}

/** The one text of a network: IPv4 dotted, IPv6 as RFC 5952 writes it, always with its prefix. */
export function canonicalNetwork(network: IpNetwork): string {
  if (network.family === 4) {
    const w = network.words[0]!;
    return `${w >>> 24}.${(w >>> 16) & 255}.${(w >>> 8) & 255}.${w & 255}/${network.prefix}`;
  }
  const groups: number[] = [];
  for (const word of network.words) groups.push(word >>> 16, word & 0xffff);
  return `${ipv6Text(groups)}/${network.prefix}`;
}

/**
 * RFC 5952 text of eight 16-bit groups: lower-case hex, no leading zeros, the longest run of two or
 * more zero groups (the first of equals) as `::`. Also how the throttle names an IPv6 network
 * (src/limits/address-key.ts).
 */
export function ipv6Text(groups: readonly number[]): string {
  let bestStart = -1;
  let bestLength = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let end = i;
    while (end < 8 && groups[end] === 0) end++;
    if (end - i > bestLength) [bestStart, bestLength] = [i, end - i];
    i = end;
  }
  const hex = groups.map((group) => group.toString(16));
  if (bestStart < 0) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`;
}

/**
 * A list of networks checked and written canonically, or the problems (each naming its entry).
 * Empty entries of a comma-separated list are ignored; duplicates are kept once.
 */
export function parseAllowFrom(entries: readonly string[]): { networks: string[] } | { problems: string[] } {
  const networks: string[] = [];
  const problems: string[] = [];
  for (const raw of entries) {
    const entry = raw.trim();
    if (entry === '') continue;
    const parsed = parseNetwork(entry);
    if (typeof parsed === 'string') problems.push(`${JSON.stringify(entry.slice(0, 60))} ${parsed}`);
    else if (!networks.includes(canonicalNetwork(parsed))) networks.push(canonicalNetwork(parsed));
  }
  if (networks.length > MAX_ALLOW_FROM) problems.push(`at most ${MAX_ALLOW_FROM} networks per key (this list has ${networks.length})`);
  return problems.length > 0 ? { problems } : { networks };
}

/** Scopes checked and in their printed order, or the problem (naming the scopes that exist). */
export function parseScopes(entries: readonly string[]): KeyScope[] | string {
  const scopes = new Set<string>();
  for (const raw of entries) {
    const scope = raw.trim();
    if (scope === '') continue;
    if (!(KEY_SCOPES as readonly string[]).includes(scope)) return `${JSON.stringify(scope.slice(0, 60))} is not a scope (the scopes are ${KEY_SCOPES.join(', ')})`;
    scopes.add(scope);
  }
  if (scopes.size === 0) return `a key needs at least one scope (${KEY_SCOPES.join(', ')})`;
  return KEY_SCOPES.filter((scope) => scopes.has(scope));
}

/** Why `name` cannot be a key's name, or undefined. */
export function keyNameProblem(name: string): string | undefined {
  if (name.length === 0 || name.length > MAX_KEY_NAME_LENGTH) return `must be 1-${MAX_KEY_NAME_LENGTH} characters`;
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) return 'must not hold a control character';
  return undefined;
}

/** True when `address` is inside one of `networks` (of its family). */
export function networksContain(networks: readonly IpNetwork[], address: IpAddress): boolean {
  for (const network of networks) {
    if (network.family !== address.family) continue;
    let inside = true;
    for (let i = 0; i < network.words.length; i++) {
      const mask = wordMask(network.prefix, i);
      if (mask === 0) break;
      if (((address.words[i]! & mask) >>> 0) !== network.words[i]) {
        inside = false;
        break;
      }
    }
    if (inside) return true;
  }
  return false;
}
