/**
 * createDemoStorage(): the demo data of examples/seed.json, bundled, so a recipe from an installed
 * package has a merchant to call (docs/embedding.md). Built from dist/ too, as a user imports it.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../../src/api.js';
import { silentLogger } from '../../../src/observe/logger.js';
import { signUrl } from '../../../src/signing/index.js';
import { createDemoStorage, createMemoryStorage } from '../../../src/storage/memory/index.js';
import { ROOT } from '../../support/processes.js';

const seed = JSON.parse(readFileSync(`${ROOT}examples/seed.json`, 'utf8')) as { merchants: { id: string }[]; users: { merchant_id: string; shared_user_id: string }[] };
const api = (storage = createDemoStorage({ startedAt: Date.now() / 1000 - 60 })) => createMerchantApi({ storage, logger: silentLogger, accessLog: false, tracing: false });

describe('createDemoStorage', () => {
  it('holds exactly what examples/seed.json holds', async () => {
    const demo = createDemoStorage();
    const fromFile = createMemoryStorage({ seed });
    for (const { id } of seed.merchants) expect(await demo.getMerchant(id)).toEqual(await fromFile.getMerchant(id));
    for (const merchantId of new Set(seed.users.map((user) => user.merchant_id))) {
      expect(await demo.listUsers({ merchantId, filter: {}, limit: 100 })).toEqual(await fromFile.listUsers({ merchantId, filter: {}, limit: 100 }));
    }
  });

  it('answers the first signed call of demo-merchant with 200, and Basic auth with its users', async () => {
    const handler = api();
    const url = signUrl('demo-secret', 'http://127.0.0.1/validatesignature', { cp: 'demo-merchant' });
    const response = await handler.fetch(new Request(url));
    expect([response.status, await response.text()]).toEqual([200, '{"status":"ok","is_valid":true}']);
    const users = await handler.fetch(new Request('http://127.0.0.1/merchant/users?limit=2', { headers: { authorization: `Basic ${btoa('demo-merchant:demo-secret')}` } }));
    expect(users.status).toBe(200);
    expect(((await users.json()) as { data: unknown[] }).data).toHaveLength(2);
  });

  it('gives each call a storage of its own: a change to one is not in the next', async () => {
    const first = createDemoStorage();
    first.putMerchant({ id: 'demo-merchant', status: 'disabled', keys: ['demo-secret'] });
    expect((await first.getMerchant('demo-merchant'))?.status).toBe('disabled');
    expect((await createDemoStorage().getMerchant('demo-merchant'))?.status).toBe('active');
  });

  it('is in the built package, with the data bundled (no file read at run time)', async () => {
    const built = (await import(`${ROOT}dist/storage/memory.js`)) as { createDemoStorage: typeof createDemoStorage };
    expect((await built.createDemoStorage().getMerchant('acme-books'))?.keys).toHaveLength(2);
    expect(readFileSync(`${ROOT}dist/storage/memory.js`, 'utf8')).not.toMatch(/['"`][^'"`]*seed\.json['"`]/);
  });
});
