/**
 * The key every per-address limit counts a client under
 * (docs/security.md#ipv6-clients): IPv4 per address, IPv6 per prefix,
 * IPv4-mapped IPv6 as the IPv4 address; for all inputs.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { addressKey, checkIpv6Prefix, MAX_ADDRESS_KEY_LENGTH } from '../../src/limits/address-key.js';

const group = fc.integer({ min: 0, max: 0xffff });
const groups = (n: number) => fc.array(group, { minLength: n, maxLength: n });

/** One address written several ways: full with leading zeros and upper case, or as WHATWG URL serialises it. */
function spellings(address: number[]): string[] {
  const full = address.map((g) => g.toString(16).padStart(4, '0')).join(':');
  return [full, full.toUpperCase(), new URL(`http://[${full}]/`).hostname.slice(1, -1)];
}

/** Not an IPv4-mapped address: the first five groups zero and the sixth 0xffff. */
const notMapped = (address: number[]) => !(address.slice(0, 5).every((g) => g === 0) && address[5] === 0xffff);

describe('addressKey', () => {
  it('gives every address of one /64 the same key, however it is written', () => {
    fc.assert(
      fc.property(groups(4), groups(4), groups(4), (network, a, b) => {
        fc.pre(notMapped([...network, ...a]));
        const keys = new Set([...spellings([...network, ...a]), ...spellings([...network, ...b])].map((s) => addressKey(s, 64)));
        expect(keys.size).toBe(1);
        expect([...keys][0]).toMatch(/\/64$/);
      }),
    );
  });

  it('gives addresses of different /64 networks different keys', () => {
    fc.assert(
      fc.property(groups(8), groups(8), (a, b) => {
        fc.pre(notMapped(a) && notMapped(b) && a.slice(0, 4).join() !== b.slice(0, 4).join());
        expect(addressKey(spellings(a)[0]!, 64)).not.toBe(addressKey(spellings(b)[0]!, 64));
      }),
    );
  });

  it('keys by the configured prefix: the bits past it do not count, the bits before it do', () => {
    fc.assert(
      fc.property(groups(8), fc.integer({ min: 32, max: 127 }), fc.integer({ min: 0, max: 127 }), (address, prefix, bit) => {
        fc.pre(notMapped(address));
        const flipped = [...address];
        flipped[bit >> 4] = flipped[bit >> 4]! ^ (0x8000 >> (bit & 15));
        fc.pre(notMapped(flipped));
        const same = addressKey(spellings(address)[0]!, prefix) === addressKey(spellings(flipped)[0]!, prefix);
        expect(same).toBe(bit >= prefix);
      }),
    );
  });

  it('at /128 is the address in canonical form (as a URL writes it)', () => {
    fc.assert(
      fc.property(fc.ipV6(), (address) => {
        const url = new URL(`http://[${address}]/`).hostname.slice(1, -1);
        fc.pre(!url.startsWith('::ffff:'));
        expect(addressKey(address, 128)).toBe(url);
      }),
    );
  });

  it('leaves IPv4 as it is, and takes IPv4-mapped IPv6 (dotted or hex) as the IPv4 address', () => {
    fc.assert(
      fc.property(fc.ipV4(), fc.integer({ min: 32, max: 128 }), (v4, prefix) => {
        expect(addressKey(v4, prefix)).toBe(v4);
        expect(addressKey(`::ffff:${v4}`, prefix)).toBe(v4);
        expect(addressKey(`0:0:0:0:0:FFFF:${v4}`, prefix)).toBe(v4);
        expect(addressKey(new URL(`http://[::ffff:${v4}]/`).hostname.slice(1, -1), prefix)).toBe(v4);
      }),
    );
  });

  it('drops a zone, and cuts anything that is not an IP to a bounded key', () => {
    expect(addressKey('fe80::1%eth0', 64)).toBe('fe80::/64');
    expect(addressKey('2001:db8::1.2.3.4', 128)).toBe('2001:db8::102:304');
    expect(addressKey('::1', 64)).toBe('::/64');
    fc.assert(
      fc.property(fc.string({ maxLength: 5000 }), (text) => {
        expect(addressKey(text, 64).length).toBeLessThanOrEqual(MAX_ADDRESS_KEY_LENGTH);
      }),
    );
  });

  it('accepts prefix lengths from 32 to 128 only', () => {
    for (const good of [32, 48, 64, 128]) expect(() => checkIpv6Prefix(good, 'ipv6Prefix')).not.toThrow();
    for (const bad of [0, 31, 129, 64.5, Number.NaN]) expect(() => checkIpv6Prefix(bad, 'ipv6Prefix')).toThrow(/ipv6Prefix must be a whole number from 32 to 128/);
  });
});
