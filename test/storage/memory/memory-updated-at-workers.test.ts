/**
 * `updated_at` of seed users without one, on the memory storage (docs/protocol.md#changed-since):
 * every process loading the same seed file stamps them alike (the file's modification time, not
 * each process's load time), so a cursor of `order=updated_at` sealed by one process goes on in
 * another: with two storages loaded at different times, and with a real `WORKERS=2` server whose
 * fresh connections land on either worker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../../src/api.js';
import { loadMemoryStorage } from '../../../src/storage/memory/index.js';
import { silentLogger } from '../../../src/observe/logger.js';
import type { ChangedUserRecord } from '../../../src/storage/contract.js';
import { basic } from '../../support/basic-auth.js';
import { send } from '../../support/http-client.js';
import { CLI, startServer, type ServerProcess } from '../../support/processes.js';
import { redisAvailable, useRedis } from '../../support/redis.js';
import { largeSeed, MERCHANTS, writeSeed } from '../../support/seeds.js';
import { sleep } from '../../support/sleep.js';

const USERS = 8;
const ids = Array.from({ length: USERS }, (_, i) => `u-${String(i + 1).padStart(7, '0')}`);

describe('two memory storages loaded from one seed file at different times', () => {
  it('stamp the users alike, and a cursor of order=updated_at from either goes on in the other', async () => {
    const seed = writeSeed(largeSeed(USERS));
    try {
      const first = await loadMemoryStorage(seed.path);
      // Later by more than the clock's step: load times would differ.
      await sleep(20);
      const second = await loadMemoryStorage(seed.path);
      const stamps = async (s: typeof first) =>
        ((await s.storage.listUsers({ merchantId: MERCHANTS.main.id, filter: {}, order: 'updated_at', limit: 100 })) as ChangedUserRecord[]).map((u) => [u.shared_user_id, u.updated_at]);
      expect(await stamps(second)).toEqual(await stamps(first));
      const apis = [first, second].map(({ storage }) => createMerchantApi({ storage, cursorSecret: 'c'.repeat(32), logger: silentLogger }));
      const auth = { headers: basic(MERCHANTS.main.id, MERCHANTS.main.keys[0]) };
      for (const start of [0, 1]) {
        const listed: string[] = [];
        let next: string | undefined = 'http://api.test/merchant/users?order=updated_at&limit=2';
        for (let page = 0; next !== undefined && page < USERS; page++) {
          const response = await apis[(start + page) % 2]!.fetch(new Request(next, auth));
          expect(response.status).toBe(200);
          listed.push(...((await response.json()) as { data: { shared_user_id: string }[] }).data.map((u) => u.shared_user_id));
          next = /<([^>]+)>; rel="next"/.exec(response.headers.get('link') ?? '')?.[1];
        }
        expect(listed).toEqual(ids);
      }
    } finally {
      seed.remove();
    }
  });
});

describe.skipIf(!redisAvailable())('WORKERS=2 on the memory storage: order=updated_at across workers', () => {
  const redis = useRedis();
  let seed: { path: string; remove(): void };
  let server: ServerProcess;

  beforeAll(async () => {
    seed = writeSeed(largeSeed(USERS));
    server = await startServer('node', CLI.node, { SEED_FILE: seed.path, REDIS_URL: redis.url, WORKERS: '2', ACCESS_LOG: 'false', CURSOR_SECRET: 'w'.repeat(32) }, ['serve']);
  });
  afterAll(async () => {
    await server?.stop();
    seed?.remove();
  });

  it('lists every user once, one user a page, each page on a fresh connection (either worker)', async () => {
    const auth = { headers: basic(MERCHANTS.main.id, MERCHANTS.main.keys[0]) };
    // Several rounds: fresh connections are spread over the workers, so some pages cross from one to the other.
    for (let round = 0; round < 4; round++) {
      const listed: string[] = [];
      let next: string | undefined = `${server.url}/merchant/users?order=updated_at&limit=1`;
      for (let page = 0; next !== undefined && page <= USERS; page++) {
        const answer = await send(next, auth);
        expect(answer.status).toBe(200);
        listed.push(...(JSON.parse(answer.body) as { data: { shared_user_id: string }[] }).data.map((u) => u.shared_user_id));
        next = /<([^>]+)>; rel="next"/.exec(String(answer.headers.link ?? ''))?.[1];
      }
      expect(listed).toEqual(ids);
    }
  });
});
