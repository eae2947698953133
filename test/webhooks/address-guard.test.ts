import fc from 'fast-check';
import { BlockList } from 'node:net';
import { describe, expect, it } from 'vitest';
import { checkWebhookUrl, isPublicAddress, resolveWebhookAddress, WebhookAddressError } from '../../src/webhooks/address-guard.js';

// An independent oracle: node's own BlockList over the ranges as published (RFC 6890 and friends).
const refusedV4 = new BlockList();
for (const [net, prefix] of [['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['127.0.0.0', 8], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.0.2.0', 24], ['192.88.99.0', 24], ['192.168.0.0', 16], ['198.18.0.0', 15], ['198.51.100.0', 24], ['203.0.113.0', 24], ['224.0.0.0', 4], ['240.0.0.0', 4]] as const) {
  refusedV4.addSubnet(net, prefix, 'ipv4');
}
const globalV6 = new BlockList();
globalV6.addSubnet('2000::', 3, 'ipv6');
const specialV6 = new BlockList();
for (const [net, prefix] of [['2001::', 23], ['2001:db8::', 32], ['3fff::', 20], ['2002::', 16]] as const) specialV6.addSubnet(net, prefix, 'ipv6');

const hex = (n: number) => n.toString(16);
function v4Groups(v4: string): [string, string] {
  const [a, b, c, d] = v4.split('.').map(Number) as [number, number, number, number];
  return [hex(a * 256 + b), hex(c * 256 + d)];
}

describe('isPublicAddress', () => {
  it('agrees with node:net BlockList over every IPv4 address', () => {
    fc.assert(fc.property(fc.ipV4(), (v4) => {
      expect(isPublicAddress(v4)).toBe(!refusedV4.check(v4, 'ipv4'));
    }), { numRuns: 5000 });
  });

  it('covers every refused range at its edges', () => {
    for (const address of ['0.0.0.0', '10.255.255.255', '100.64.0.0', '100.127.255.255', '127.0.0.1', '169.254.169.254', '172.16.0.0', '172.31.255.255', '192.168.1.1', '224.0.0.1', '255.255.255.255', '100.100.100.200']) {
      expect(isPublicAddress(address), address).toBe(false);
    }
    for (const address of ['9.255.255.255', '11.0.0.0', '100.63.255.255', '100.128.0.0', '172.15.255.255', '172.32.0.0', '8.8.8.8', '1.1.1.1']) {
      expect(isPublicAddress(address), address).toBe(true);
    }
  });

  it('judges IPv4 inside IPv6 (mapped, dotted or hex, NAT64, 6to4) by the IPv4 it carries', () => {
    fc.assert(
      fc.property(fc.ipV4(), (v4) => {
        const expected = isPublicAddress(v4);
        const [high, low] = v4Groups(v4);
        expect(isPublicAddress(`::ffff:${v4}`)).toBe(expected);
        expect(isPublicAddress(`::ffff:${high}:${low}`)).toBe(expected);
        expect(isPublicAddress(`0:0:0:0:0:ffff:${high}:${low}`)).toBe(expected);
        expect(isPublicAddress(`64:ff9b::${v4}`)).toBe(expected);
        expect(isPublicAddress(`2002:${high}:${low}::1`)).toBe(expected);
        // IPv4-compatible (deprecated) is never public.
        expect(isPublicAddress(`::${v4}`)).toBe(false);
      }),
      { numRuns: 2000 },
    );
  });

  it('IPv6 outside the embedded forms: public only in 2000::/3 less its special ranges', () => {
    fc.assert(
      fc.property(fc.ipV6(), (v6) => {
        fc.pre(!v6.includes('.'));
        const groups = v6.toLowerCase();
        fc.pre(!/^(::ffff:|0:0:0:0:0:ffff:|64:ff9b:|2002:)/.test(groups) && !/^(0:){6}|^::[0-9a-f]*:?[0-9a-f]*$/.test(groups));
        const expected = globalV6.check(v6, 'ipv6') && !specialV6.check(v6, 'ipv6');
        expect(isPublicAddress(v6)).toBe(expected);
      }),
      { numRuns: 5000 },
    );
  });

  it('refuses the well-known IPv6 ranges and zones', () => {
    for (const address of ['::', '::1', 'fe80::1', 'fc00::1', 'fd00:ec2::254', 'ff02::1', '2001:db8::1', '100::1', 'fe80::1%eth0', 'not an address']) {
      expect(isPublicAddress(address), address).toBe(false);
    }
    expect(isPublicAddress('2606:4700:4700::1111')).toBe(true);
  });
});

describe('checkWebhookUrl', () => {
  it('wants https, a host, no credentials and no fragment', () => {
    expect(checkWebhookUrl('https://example.com/hook').hostname).toBe('example.com');
    expect(() => checkWebhookUrl('http://example.com/hook')).toThrow(/https/);
    expect(() => checkWebhookUrl('ftp://example.com/')).toThrow(/https/);
    expect(() => checkWebhookUrl('https://user:pw@example.com/')).toThrow(/credentials/);
    expect(() => checkWebhookUrl('https://example.com/#x')).toThrow(/fragment/);
    expect(() => checkWebhookUrl('not a url')).toThrow(WebhookAddressError);
    expect(() => checkWebhookUrl(`https://example.com/${'a'.repeat(2048)}`)).toThrow(/2048/);
  });

  it('refuses private literals unless allowed, and http unless allowed', () => {
    for (const url of ['https://127.0.0.1/', 'https://[::1]/', 'https://169.254.169.254/latest', 'https://[::ffff:10.0.0.1]/', 'https://0x7f000001/', 'https://2130706433/']) {
      expect(() => checkWebhookUrl(url), url).toThrow(/private/);
    }
    expect(checkWebhookUrl('http://127.0.0.1:9/', { allowHttp: true, allowPrivate: true }).port).toBe('9');
  });
});

describe('resolveWebhookAddress', () => {
  const fixed = (addresses: string[]) => async () => addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));

  it('connects to the first address, all of them public', async () => {
    expect(await resolveWebhookAddress(new URL('https://hooks.example/'), {}, fixed(['93.184.216.34', '2606:2800::1']))).toEqual({ address: '93.184.216.34', family: 4 });
  });

  it('refuses a name with any private address among public ones (a rebinding answer)', async () => {
    await expect(resolveWebhookAddress(new URL('https://hooks.example/'), {}, fixed(['93.184.216.34', '127.0.0.1']))).rejects.toThrow(/private/);
    await expect(resolveWebhookAddress(new URL('https://hooks.example/'), {}, fixed(['::ffff:169.254.169.254']))).rejects.toThrow(/private/);
    expect((await resolveWebhookAddress(new URL('https://hooks.example/'), { allowPrivate: true }, fixed(['127.0.0.1']))).address).toBe('127.0.0.1');
  });

  it('a host that does not resolve is refused', async () => {
    await expect(resolveWebhookAddress(new URL('https://hooks.example/'), {}, async () => { throw new Error('ENOTFOUND'); })).rejects.toThrow(/does not resolve/);
    await expect(resolveWebhookAddress(new URL('https://hooks.example/'), {}, fixed([]))).rejects.toThrow(/does not resolve/);
  });
});
