/**
 * The `X-Forwarded-For` reader (src/http/forwarded-for.ts), over every address and port: each form
 * a proxy writes is read as the address alone; anything else is no address (the pipeline answers
 * 400), and what is read is always an IP address. The pipeline's use of it, on both of its entries
 * (the Fetch path and the Node adapter's direct path): a last entry that is no address is a 400
 * naming the header, never the socket's address; on every runtime: test/limits/forwarded-for.test.ts.
 */
import { isIP } from 'node:net';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createServer } from 'node:http';
import { createRequestListener } from '../../adapters/node.js';
import { forwardedEntryAddress, forwardedForAddress } from '../../src/http/forwarded-for.js';
import { basic, call, testApi } from '../support/api.js';

const ipv4 = fc.ipV4();
const ipv6 = fc.ipV6();
const port = fc.integer({ min: 0, max: 65_535 });
/** Entries before the last: whatever a client sent. */
const earlier = fc.array(fc.oneof(fc.ipV4(), fc.string({ maxLength: 20 }).filter((s) => !s.includes(','))), { maxLength: 3 });
const list = (before: string[], last: string) => [...before, last].join(', ');

describe('forwardedForAddress', () => {
  it('reads a.b.c.d and a.b.c.d:port as a.b.c.d, whatever came before', () => {
    fc.assert(
      fc.property(earlier, ipv4, port, (before, address, p) => {
        expect(forwardedForAddress(list(before, address))).toBe(address);
        expect(forwardedForAddress(list(before, `${address}:${p}`))).toBe(address);
        expect(forwardedForAddress(list(before, ` ${address}:${p} `))).toBe(address);
      }),
    );
  });

  it('reads an IPv6 address bare, in brackets and in brackets with a port as the address', () => {
    fc.assert(
      fc.property(earlier, ipv6, port, (before, address, p) => {
        expect(forwardedForAddress(list(before, address))).toBe(address);
        expect(forwardedForAddress(list(before, `[${address}]`))).toBe(address);
        expect(forwardedForAddress(list(before, `[${address}]:${p}`))).toBe(address);
      }),
    );
  });

  it('reads anything else as no address, and whatever it reads is an IP address', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 60 }), (value) => {
        const read = forwardedForAddress(value);
        if (read !== undefined) expect(isIP(read)).not.toBe(0);
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(ipv4, fc.integer({ min: 65_536, max: 10_000_000 }), (address, p) => {
        expect(forwardedEntryAddress(`${address}:${p}`)).toBeUndefined();
      }),
    );
    for (const entry of ['', ' ', 'unknown', 'not-an-ip', '8.8.8.8:', '8.8.8.8:x', '8.8.8.8:-1', '8.8.8.8:123456', '8.8.8.8:1:2', '[2001:db8::1', '2001:db8::1]', '[2001:db8::1]x', '[2001:db8::1]x80', '[2001:db8::1]80', '[2001:db8::1]:', '[2001:db8::1]:70000', '[192.0.2.1]', '[192.0.2.1]:80', '"192.0.2.1"', '_hidden', 'for=192.0.2.1']) {
      expect(forwardedEntryAddress(entry.trim()), entry).toBeUndefined();
    }
    expect(forwardedForAddress('192.0.2.1, ')).toBeUndefined();
    expect(forwardedForAddress('')).toBeUndefined();
  });
});

describe('the pipeline behind a trusted proxy', () => {
  const local = { ...basic('m1', 'key-one') };
  const { api } = testApi({ trustProxy: true });

  it('on the Fetch path: an entry with a port is the client; one that is no address is a 400 naming the header, not the peer', async () => {
    const peer = { clientAddress: '127.0.0.1' };
    const ok = await call(api, 'http://api.test/merchant/users?limit=1', { headers: { ...local, 'x-forwarded-for': '192.0.2.7:1234' } }, peer);
    expect(ok.status).toBe(200);
    for (const forwarded of ['garbage', '', '192.0.2.7, ']) {
      const refused = await call(api, 'http://api.test/merchant/users?limit=1', { headers: { ...local, 'x-forwarded-for': forwarded } }, peer);
      expect(refused.status, forwarded).toBe(400);
      expect(refused.body.errors[0].code).toBe('malformed_request');
      expect(refused.body.errors[0].message).toMatch(/X-Forwarded-For/);
    }
    // Without trustProxy the header is not read at all.
    const { api: direct } = testApi();
    expect((await call(direct, 'http://api.test/merchant/users?limit=1', { headers: { ...local, 'x-forwarded-for': 'garbage' } }, peer)).status).toBe(200);
  });

  it('on the Node direct path the same, read by the same function', async () => {
    const server = createServer(createRequestListener(api));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    try {
      expect((await fetch(`${base}/merchant/users?limit=1`, { headers: { ...local, 'x-forwarded-for': '[2001:db8::7]:443' } })).status).toBe(200);
      const refused = await fetch(`${base}/merchant/users?limit=1`, { headers: { ...local, 'x-forwarded-for': '2001:db8::7]:443' } });
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { errors: Array<{ message: string }> }).errors[0]!.message).toMatch(/X-Forwarded-For/);
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
