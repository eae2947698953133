/**
 * Test mode on Node, Bun and Deno (docs/test-mode.md): the standalone server of each runtime, loaded
 * from a seed with a live and a test key, answers the test key with the generated dataset (sized by
 * TEST_MODE_USERS), runs the simulator's scenario into the change feed, accepts the test key's
 * signature with salts apart from the live key's, and keeps the live data apart throughout.
 */
import { describe, expect, it } from 'vitest';
import { parseSeed, type Seed } from '../../src/storage/seed/seed.js';
import { generateTestUsers } from '../../src/testmode/dataset.js';
import { basic } from '../support/basic-auth.js';
import { RUNTIMES, useCliServer } from '../support/processes.js';
import { seedUser } from '../support/seeds.js';
import { hmacSha224, queryString, signatureMessage } from '../support/test-signer.js';

// The seed file's own form (a key object with "mode"), as an operator writes it: checked by parseSeed first.
const SEED_FILE = {
  merchants: [{ id: 'rt', status: 'active', keys: ['live-rt', { key: 'test_rt', mode: 'test' }] }],
  users: [seedUser('rt', 'live-only', 1)],
};
parseSeed(SEED_FILE);
const SEED = SEED_FILE as unknown as Seed;
const LIVE = basic('rt', 'live-rt');
const TEST = basic('rt', 'test_rt');

function signedPath(base: string, key: string, salt: string): string {
  const pairs: [string, string][] = [
    ['cp', 'rt'],
    ['ts', String(Math.floor(Date.now() / 1000))],
    ['salt', salt],
  ];
  return `${base}/validatesignature?${queryString([...pairs, ['hmac', hmacSha224(key, signatureMessage('GET', `${base}/validatesignature`, pairs))]])}`;
}

for (const runtime of RUNTIMES) {
  describe(`test mode on ${runtime}`, () => {
    const server = useCliServer(runtime, SEED, { TEST_MODE_USERS: '25' });

    it('a test key: the generated dataset, the simulator into the change feed, signatures with salts of its own; live data apart', async () => {
      const json = async (path: string, headers: Record<string, string>, init: RequestInit = {}) => {
        const response = await fetch(`${server.url}${path}`, { ...init, headers: { ...headers, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) } });
        return { status: response.status, body: await response.json() };
      };
      const listed = await json('/merchant/users', TEST);
      expect(listed.body.data.map((user: { shared_user_id: string }) => user.shared_user_id)).toEqual(generateTestUsers('rt', 25).map((user) => user.shared_user_id));
      expect((await json('/merchant/users', LIVE)).body.data.map((user: { shared_user_id: string }) => user.shared_user_id)).toEqual(['live-only']);

      const churn = await json('/merchant/test/events', TEST, { method: 'POST', body: JSON.stringify({ scenario: 'churn' }) });
      expect(churn.status).toBe(200);
      const id = churn.body.data[0].data.shared_user_id;
      const feed = await json(`/merchant/users?include_removed=true&updated_since=${encodeURIComponent(churn.body.data[0].timestamp)}`, TEST);
      expect(feed.body.data).toEqual([{ shared_user_id: id, removed_at: churn.body.data[4].timestamp }]);
      expect((await json('/merchant/test/events', LIVE, { method: 'POST', body: JSON.stringify({ scenario: 'churn' }) })).status).toBe(403);

      const salt = `salt-${Math.random()}`;
      const test = await fetch(signedPath(server.url, 'test_rt', salt));
      const live = await fetch(signedPath(server.url, 'live-rt', salt));
      expect([test.status, live.status]).toEqual([200, 200]);
      expect(await test.text()).toBe(await live.text());
    });
  });
}
