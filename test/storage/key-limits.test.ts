/**
 * Networks of a key's allowlist (src/storage/key-limits.ts): for every address and prefix, an
 * address is inside a network exactly when its first `prefix` bits are the network's, in IPv4
 * and IPv6 (checked against a BigInt reference); canonical text reads back as the same network;
 * IPv4 clients of dual-stack sockets count as IPv4.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { canonicalNetwork, networksContain, parseAllowFrom, parseIpAddress, parseNetwork, parseScopes, type IpNetwork } from '../../src/storage/key-limits.js';

const v4 = fc.integer({ min: 0, max: 0xffffffff });
const v6 = fc.bigInt({ min: 0n, max: (1n << 128n) - 1n });
const v4Text = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
const v6Text = (n: bigint) => Array.from({ length: 8 }, (_, i) => ((n >> BigInt(112 - 16 * i)) & 0xffffn).toString(16)).join(':');
const masked = (n: bigint, prefix: number, bits: number) => (prefix === 0 ? 0n : (n >> BigInt(bits - prefix)) << BigInt(bits - prefix));

describe('allowlist networks', () => {
  it('IPv4: an address is inside exactly when its first prefix bits are the network\'s', () => {
    fc.assert(
      fc.property(v4, v4, fc.integer({ min: 0, max: 32 }), (net, address, prefix) => {
        const base = Number(masked(BigInt(net), prefix, 32));
        const network = parseNetwork(`${v4Text(base)}/${prefix}`) as IpNetwork;
        const inside = masked(BigInt(address), prefix, 32) === BigInt(base);
        expect(networksContain([network], parseIpAddress(v4Text(address))!)).toBe(inside);
        expect(networksContain([network], parseIpAddress(`::ffff:${v4Text(address)}`)!)).toBe(inside);
        expect(networksContain([network], parseIpAddress(v4Text(base))!)).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  it('IPv6: the same, and the canonical text is the same network', () => {
    fc.assert(
      fc.property(v6, v6, fc.integer({ min: 0, max: 128 }), (net, address, prefix) => {
        const base = masked(net, prefix, 128);
        const network = parseNetwork(`${v6Text(base)}/${prefix}`);
        if (typeof network === 'string') {
          // Only an IPv4-mapped network (::ffff:a.b.c.d) reads as IPv4, with a prefix beyond 32.
          expect(base >> 32n).toBe(0xffffn);
          return;
        }
        const parsed = parseIpAddress(v6Text(address))!;
        if (parsed.family === 6) expect(networksContain([network], parsed)).toBe(masked(address, prefix, 128) === base);
        expect(parseNetwork(canonicalNetwork(network))).toEqual(network);
      }),
      { numRuns: 2000 },
    );
  });

  it('an IPv4 network never holds an IPv6 client, nor the reverse', () => {
    const nets = (parseAllowFrom(['0.0.0.0/0']) as { networks: string[] }).networks.map((text) => parseNetwork(text) as IpNetwork);
    expect(networksContain(nets, parseIpAddress('2001:db8::1')!)).toBe(false);
    expect(networksContain([parseNetwork('::/0') as IpNetwork], parseIpAddress('192.0.2.1')!)).toBe(false);
  });

  it('refuses what is no network, naming the entry, and writes each network once in one form', () => {
    expect(parseAllowFrom(['203.0.113.0/24', ' 2001:0DB8:0000::/48 ', '', '203.0.113.0/24'])).toEqual({ networks: ['203.0.113.0/24', '2001:db8::/48'] });
    expect(parseAllowFrom(['203.0.113.7/24', 'example.com', '10.0.0.0/33', '1.2.3.4%eth0'])).toEqual({
      problems: [
        '"203.0.113.7/24" has bits set after its /24 prefix (the network is 203.0.113.0/24)',
        '"example.com" is not an IPv4 or IPv6 network in CIDR notation (such as 203.0.113.0/24 or 2001:db8::/48)',
        '"10.0.0.0/33" has a prefix length that is not 0-32',
        '"1.2.3.4%eth0" is not an IPv4 or IPv6 network in CIDR notation (such as 203.0.113.0/24 or 2001:db8::/48)',
      ],
    });
    expect(parseAllowFrom(Array.from({ length: 101 }, (_, i) => `10.0.${i}.0/24`))).toEqual({ problems: ['at most 100 networks per key (this list has 101)'] });
    expect(parseScopes(['users:read', 'signature', 'users:read'])).toEqual(['signature', 'users:read']);
    expect(parseScopes(['webhooks:manage', 'users:read'])).toEqual(['users:read', 'webhooks:manage']);
    expect(parseScopes(['users:write'])).toBe('"users:write" is not a scope (the scopes are signature, users:read, webhooks:manage, keys:manage)');
    expect(parseScopes([''])).toMatch(/at least one scope/);
  });
});
