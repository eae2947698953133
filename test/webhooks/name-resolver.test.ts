/**
 * The webhook resolver (src/webhooks/name-resolver.ts) against a DNS server of the test's own, in
 * process: answers cached for their TTL and no longer, bounded in names, a missing name remembered
 * briefly, callers of one name sharing one question, a name that never answers given up within the
 * bound; localhost names and /etc/hosts without DNS. (Inside a namespace, on every runtime:
 * test/webhooks/webhook-dns.test.ts.)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { NameResolutionError, NameResolver, parseHosts } from '../../src/webhooks/name-resolver.js';
import { startDnsServer, type TestDnsServer } from '../support/dns-server.js';

let dns: TestDnsServer;
let hostsFile: string;
const dir = mkdtempSync(join(tmpdir(), 'merchant-api-resolver-'));
beforeAll(async () => {
  dns = await startDnsServer({ port: 0, hang: (name) => name.startsWith('hang') });
  hostsFile = join(dir, 'hosts');
  writeFileSync(hostsFile, '# a comment\n10.1.2.3 db.internal  Alias.Internal # trailing\nfd00::5 db.internal\n');
});
afterAll(async () => {
  await dns?.close();
  rmSync(dir, { recursive: true, force: true });
});

const resolver = (options: ConstructorParameters<typeof NameResolver>[0] = {}) => new NameResolver({ servers: [`${dns.address}:${dns.port}`], hostsFile, ...options });
const asked = (name: string) => dns.queries.get(`${name}/A`) ?? 0;

describe('NameResolver', () => {
  it('answers A and AAAA, IPv4 first, and keeps them for the shortest TTL', async () => {
    dns.answers.set('ttl.test', { a: ['93.184.216.34'], aaaa: ['2606:2800::1'], ttl: 1 });
    const r = resolver();
    expect(await r.resolve('ttl.test')).toEqual([{ address: '93.184.216.34', family: 4 }, { address: '2606:2800::1', family: 6 }]);
    expect(await r.resolve('TTL.test.')).toHaveLength(2);
    expect(asked('ttl.test')).toBe(1);
    // Once the TTL has passed, asked again.
    await vi.waitFor(async () => {
      await r.resolve('ttl.test');
      expect(asked('ttl.test')).toBe(2);
    }, { timeout: 5000, interval: 100 });
  });

  it('does not keep an answer of TTL 0; callers at once share one question', async () => {
    dns.answers.set('zero.test', { a: ['93.184.216.35'], ttl: 0 });
    const r = resolver();
    await Promise.all(Array.from({ length: 10 }, () => r.resolve('zero.test')));
    expect(asked('zero.test')).toBe(1);
    await r.resolve('zero.test');
    expect(asked('zero.test')).toBe(2);
    expect(r.size).toBe(0);
  });

  it('holds at most maxEntries names', async () => {
    const r = resolver({ maxEntries: 3 });
    for (let i = 0; i < 8; i++) {
      dns.answers.set(`n${i}.bound.test`, { a: [`93.184.216.${i + 1}`], ttl: 300 });
      await r.resolve(`n${i}.bound.test`);
      expect(r.size).toBeLessThanOrEqual(3);
    }
    // The newest are kept.
    await r.resolve('n7.bound.test');
    expect(asked('n7.bound.test')).toBe(1);
  });

  it('a name that does not exist is not_found, remembered for negativeTtlMs', async () => {
    const r = resolver({ negativeTtlMs: 60_000 });
    for (let i = 0; i < 3; i++) await expect(r.resolve('missing.test')).rejects.toMatchObject({ code: 'not_found' });
    expect(asked('missing.test')).toBe(1);
  });

  it('gives up on a name that never answers within timeoutMs, and does not remember it', async () => {
    const r = resolver({ timeoutMs: 600 });
    const started = performance.now();
    const error = await r.resolve('hang.test').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(NameResolutionError);
    expect((error as NameResolutionError).code).toBe('timeout');
    expect(performance.now() - started).toBeLessThan(3000);
    expect(r.size).toBe(0);
  });

  it('localhost names are loopback and /etc/hosts answers before DNS', async () => {
    const r = resolver();
    expect(await r.resolve('localhost')).toEqual([{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }]);
    expect(await r.resolve('api.localhost')).toEqual([{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }]);
    expect(await r.resolve('alias.internal')).toEqual([{ address: '10.1.2.3', family: 4 }]);
    expect(await r.resolve('DB.internal.')).toEqual([{ address: '10.1.2.3', family: 4 }, { address: 'fd00::5', family: 6 }]);
    expect(asked('db.internal') + asked('localhost') + asked('alias.internal')).toBe(0);
    expect(await r.resolve('10.0.0.1')).toEqual([{ address: '10.0.0.1', family: 4 }]);
  });

  it('parseHosts: comments, aliases, IPv4 first, malformed lines skipped', () => {
    expect(Object.fromEntries(parseHosts('::1 a\n127.0.0.1 a b\nnot-an-ip c\n#1.2.3.4 d\n'))).toEqual({
      a: [{ address: '127.0.0.1', family: 4 }, { address: '::1', family: 6 }],
      b: [{ address: '127.0.0.1', family: 4 }],
    });
  });
});
