/**
 * Isolation of test mode, by property (docs/test-mode.md#isolation): over random merchant ids, live
 * users (some with the very ids of generated test users), keys of either mode and random reads and
 * simulator calls, a test key never sees a live record and a live key never a test one, on the
 * memory storage and on MySQL. The records carry their origin in the email domain, so a leak in
 * either direction is seen whichever id it comes under.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import type { Storage } from '../../src/storage/contract.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { importSeed, MysqlStorage } from '../../src/storage/mysql/index.js';
import { parseSeed, type Seed } from '../../src/storage/seed/seed.js';
import { testUserId } from '../../src/testmode/dataset.js';
import { basic } from '../support/basic-auth.js';
import { createTestDatabase, mysqlAvailable, type TestDatabase } from '../support/mysql.js';
import { seedUser } from '../support/seeds.js';

const available = await mysqlAvailable();
const ORIGIN = 'http://api.test';
const TEST_USERS = 12;

/** An id as a merchant may name a user: a generated test user's, or anything printable. */
const userId = fc.oneof(
  fc.integer({ min: 0, max: TEST_USERS + 2 }).map(testUserId),
  fc.string({ minLength: 1, maxLength: 12, unit: 'grapheme' }).filter((id) => !/[\u0000-\u001f\u007f-\u009f/]/.test(id) && id !== '.' && id !== '..'),
);
const merchantId = fc.string({ minLength: 1, maxLength: 20, unit: 'grapheme' }).filter((id) => !/[:\u0000-\u001f\u007f-\u009f]/.test(id));
const step = fc.oneof(
  fc.record({ kind: fc.constant('read' as const), test: fc.boolean(), id: userId }),
  fc.record({ kind: fc.constant('list' as const), test: fc.boolean() }),
  fc.record({ kind: fc.constant('simulate' as const), type: fc.constantFrom('user.shared', 'user.updated', 'user.deactivated', 'user.unshared'), id: fc.option(userId, { nil: undefined }) }),
);
const scenario = fc.record({ merchant: merchantId, live: fc.uniqueArray(userId, { maxLength: 6 }), steps: fc.array(step, { minLength: 1, maxLength: 10 }) });

type Scenario = { merchant: string; live: string[]; steps: { kind: string; test?: boolean; id?: string; type?: string }[] };

function seedOf(merchant: string, live: readonly string[]): Seed {
  return parseSeed({
    merchants: [{ id: merchant, status: 'active', keys: [`live-${merchant}`, { key: `test_${merchant}`, mode: 'test' }] }],
    users: live.map((id, i) => ({ ...seedUser(merchant, id, i), email_address: `live${i}@live.example` })),
  });
}

async function check(storage: Storage, { merchant, live, steps }: Scenario): Promise<void> {
  const api = createMerchantApi({ storage, logger: silentLogger, testMode: { users: TEST_USERS } });
  const keys = { live: basic(merchant, `live-${merchant}`), test: basic(merchant, `test_${merchant}`) };
  const send = async (path: string, test: boolean, init: RequestInit = {}) => {
    const response = await api.fetch(new Request(`${ORIGIN}${path}`, { ...init, headers: { ...(test ? keys.test : keys.live), ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) } }));
    const text = await response.text();
    return { status: response.status, body: text === '' ? undefined : JSON.parse(text) };
  };
  const emailsOf = (data: { email_address?: string }[]) => data.flatMap((user) => (user.email_address === undefined ? [] : [user.email_address]));
  for (const action of steps) {
    if (action.kind === 'simulate') {
      const answer = await send('/merchant/test/events', true, { method: 'POST', body: JSON.stringify({ type: action.type, ...(action.id !== undefined && { shared_user_id: action.id }) }) });
      expect([200, 404, 409]).toContain(answer.status);
      continue;
    }
    const path = action.kind === 'read' ? `/merchant/users/${encodeURIComponent(action.id!)}` : '/merchant/users?include_removed=true';
    const answer = await send(path, action.test!);
    if (answer.status === 404) continue;
    expect(answer.status).toBe(200);
    const emails = emailsOf(answer.body.data);
    // A test key: generated or simulated users only (example.com); a live key: the live users only (live.example).
    if (action.test) expect(emails.every((email) => email.endsWith('@example.com'))).toBe(true);
    else expect(emails.every((email) => email.endsWith('@live.example'))).toBe(true);
  }
  // Whatever the simulator did, the live data is exactly as imported.
  const after = await send('/merchant/users', false);
  expect(after.body.data.map((user: { shared_user_id: string }) => user.shared_user_id).sort()).toEqual([...live].sort());
}

describe('test mode isolation, by property', () => {
  it('on the memory storage: no record crosses between modes, whatever the ids and the simulator do', async () => {
    await fc.assert(
      fc.asyncProperty(scenario, async (run) => {
        await check(new MemoryStorage(seedOf(run.merchant, run.live)), run as Scenario);
      }),
      { numRuns: 60 },
    );
  });

  describe.skipIf(!available)('on MySQL', () => {
    let database: TestDatabase;
    let storage: MysqlStorage;
    beforeAll(async () => {
      database = await createTestDatabase();
      storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey, keyCacheTtlMs: 0 });
    });
    afterAll(async () => {
      await storage?.close();
      await database?.drop();
    });

    it('no record crosses between modes, whatever the ids and the simulator do', async () => {
      let run = 0;
      await fc.assert(
        fc.asyncProperty(scenario, async (given) => {
          // One database: each run its own merchant (a prefix keeps generated ids apart).
          const merchant = `r${++run}-${given.merchant}`.slice(0, 128);
          await importSeed(database.db, database.masterKey, seedOf(merchant, given.live));
          await check(storage, { ...given, merchant } as Scenario);
        }),
        { numRuns: 15 },
      );
    });
  });
});
