/**
 * The key a client address is counted under by every per-address limit (the
 * failed-authentication throttle, the connection cap, late refusals;
 * docs/security.md#ipv6-clients). An IPv4 address is its own key. An IPv6
 * client is keyed by its network prefix (`/64` by default): a home or a
 * server gets a whole /64, so keying by the full address would give an
 * attacker 2^64 fresh addresses for nothing. An IPv4-mapped IPv6 address
 * (`::ffff:192.0.2.1`, how a server bound to `::` sees IPv4 clients) is the
 * IPv4 address.
 */
import { isIP } from 'node:net';
import { ipv6Text } from '../storage/key-limits.js';

/** Longest key: an IPv6 prefix (`ffff:...:ffff/127`, 43 characters) fits; any other value is cut here. */
export const MAX_ADDRESS_KEY_LENGTH = 64;

/** The smallest and largest IPv6 prefix lengths accepted: a /32 is an internet provider's whole allocation. */
export const MIN_IPV6_PREFIX = 32;
export const MAX_IPV6_PREFIX = 128;

/** Throws a TypeError naming `name` unless `value` is a whole number from 32 to 128. */
export function checkIpv6Prefix(value: number, name: string): void {
  if (!Number.isInteger(value) || value < MIN_IPV6_PREFIX || value > MAX_IPV6_PREFIX) {
    throw new TypeError(`${name} must be a whole number from ${MIN_IPV6_PREFIX} to ${MAX_IPV6_PREFIX}.`);
  }
}

/**
 * The key of `address`: IPv4 as it is; IPv6 as its first `ipv6PrefixLength`
 * bits in canonical form with the length (`2001:db8:1:2::/64`; at 128 the
 * canonical address alone); IPv4-mapped IPv6 as the IPv4 address; anything
 * else (not an IP: a host's own label) as given, cut to MAX_ADDRESS_KEY_LENGTH.
 *
 * @example
 * addressKey('2001:db8:1:2:aaaa::5', 64); // '2001:db8:1:2::/64'
 * addressKey('::ffff:192.0.2.1', 64); // '192.0.2.1'
 */
export function addressKey(address: string, ipv6PrefixLength: number): string {
  const kind = isIP(address);
  if (kind === 4) return address;
  if (kind !== 6) return address.slice(0, MAX_ADDRESS_KEY_LENGTH);
  const groups = ipv6Groups(address);
  if (groups.slice(0, 5).every((group) => group === 0) && groups[5] === 0xffff) {
    return `${groups[6]! >> 8}.${groups[6]! & 0xff}.${groups[7]! >> 8}.${groups[7]! & 0xff}`;
  }
  for (let i = 0; i < 8; i++) {
    const kept = Math.min(16, Math.max(0, ipv6PrefixLength - i * 16));
    groups[i] = groups[i]! & (kept === 0 ? 0 : (0xffff << (16 - kept)) & 0xffff);
  }
  const network = ipv6Text(groups);
  return ipv6PrefixLength >= 128 ? network : `${network}/${ipv6PrefixLength}`;
}

/** The eight 16-bit groups of a valid IPv6 address (a zone after `%` dropped, a dotted IPv4 tail read as two groups). */
function ipv6Groups(address: string): number[] {
  const zone = address.indexOf('%');
  let text = zone < 0 ? address : address.slice(0, zone);
  const lastColon = text.lastIndexOf(':');
  if (text.includes('.', lastColon)) {
    const [a, b, c, d] = text.slice(lastColon + 1).split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, lastColon + 1)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const groups = [0, 0, 0, 0, 0, 0, 0, 0];
  const gap = text.indexOf('::');
  const front = gap < 0 ? text : text.slice(0, gap);
  const back = gap < 0 ? '' : text.slice(gap + 2);
  if (front !== '') front.split(':').forEach((group, i) => (groups[i] = parseInt(group, 16)));
  if (back !== '') {
    const parts = back.split(':');
    parts.forEach((group, i) => (groups[8 - parts.length + i] = parseInt(group, 16)));
  }
  return groups;
}

