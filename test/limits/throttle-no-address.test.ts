/**
 * A host that calls `api.fetch(request)` without `{ clientAddress }` turns
 * the failed-authentication throttle off for its requests: the handler says
 * so once per process, naming `clientAddress` (docs/observability.md#events).
 */
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { basic, ORIGIN } from '../support/api.js';
import { contractSeed } from '../support/seeds.js';
import { recordingLogger } from '../support/recording.js';

describe('a request at the throttle without a client address', () => {
  it('logs one warning per process naming clientAddress, and none for routes without authentication or with an address', async () => {
    const { logger, lines } = recordingLogger();
    const api = createMerchantApi({ storage: new MemoryStorage(contractSeed()), logger, accessLog: false });
    const warnings = () => lines.filter((line) => line.event === 'throttle_no_client_address');

    await api.fetch(new Request(`${ORIGIN}/healthz`));
    await api.fetch(new Request(`${ORIGIN}/merchant/users?limit=1`, { headers: basic('m1', 'key-one') }), { clientAddress: '192.0.2.1' });
    expect(warnings()).toEqual([]);

    for (let i = 0; i < 3; i++) await api.fetch(new Request(`${ORIGIN}/merchant/users?limit=1`, { headers: basic('m1', `wrong-${i}`) }));
    // A second handler in the same process: still the one warning.
    const other = createMerchantApi({ storage: new MemoryStorage(contractSeed()), logger, accessLog: false });
    await other.fetch(new Request(`${ORIGIN}/merchant/users?limit=1`, { headers: basic('m1', 'wrong') }));
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]!.level).toBe('warn');
    expect(warnings()[0]!).toMatchObject({ missing: 'clientAddress', route: '/merchant/users' });
    expect(warnings()[0]!.msg).toContain('clientAddress');
  });
});
