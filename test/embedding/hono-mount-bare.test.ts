/**
 * Hono's bare `app.mount(prefix, api.fetch)` (docs/embedding.md#hono): with
 * `basePath` a signed call and a page work with nothing else, but Hono hands
 * `api.fetch` no client address, so wrong keys are never throttled, and the
 * handler says so once per process, naming `clientAddress`.
 */
import { describe, expect, it } from 'vitest';
import { basic as basicAuth } from '../support/basic-auth.js';
import { signedUrl } from '../support/test-signer.js';
import { sleep } from '../support/sleep.js';
import { PREFIX } from './host-suite.js';
import { processHost } from './process-host.js';

const basic = (key: string) => basicAuth('demo-merchant', key);

describe('embedded with Hono’s bare app.mount', () => {
  const host = processHost('node', 'hono-mount-bare.ts');

  it('answers a call signed over the URL with the prefix, and a page whose Link carries it', async () => {
    const signed = await fetch(signedUrl({ secret: 'demo-secret', url: `${host.origin()}${PREFIX}/validatesignature`, cp: 'demo-merchant' }));
    expect(await signed.json()).toEqual({ status: 'ok', is_valid: true });
    const page = await fetch(`${host.origin()}${PREFIX}/merchant/users?limit=2`, { headers: basic('demo-secret') });
    expect(page.headers.get('link')).toMatch(new RegExp(`^<${host.origin().replace(/[.:/]/g, '\\$&')}${PREFIX}/merchant/users\\?`));
  });

  it('never throttles without the address, and warns once naming clientAddress', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 15; i++) {
      const response = await fetch(`${host.origin()}${PREFIX}/merchant/users?limit=1`, { headers: basic(`wrong-${i}`) });
      statuses.push(response.status);
      await response.body?.cancel();
    }
    expect(statuses).toEqual(Array<number>(15).fill(401));
    await sleep(100);
    const warnings = host.output!().split('\n').filter((line) => line.includes('"event":"throttle_no_client_address"'));
    expect(warnings).toHaveLength(1);
    // Logged by the first request with authentication: the signed call of the test above.
    expect(JSON.parse(warnings[0]!)).toMatchObject({ level: 'warn', missing: 'clientAddress', route: '/validatesignature' });
    expect(JSON.parse(warnings[0]!).msg).toContain('clientAddress');
  });
});
