/**
 * A streamed listing (`GET /merchant/users` without `limit` and `cursor`) names itself to the
 * storage: every batch carries the same `listing` object, so a storage reading from a replica
 * answers the whole document from one source (docs/mysql.md#read-replicas); a page carries none.
 */
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import type { Storage, UserPageQuery } from '../../src/storage/contract.js';
import { basic, ORIGIN } from '../support/api.js';
import { recordingLogger } from '../support/recording.js';
import { contractSeed, M1_ORDER } from '../support/seeds.js';

function recordingStorage() {
  const inner = new MemoryStorage(contractSeed());
  const queries: UserPageQuery[] = [];
  const storage: Storage = {
    getMerchant: (id) => inner.getMerchant(id),
    recordSalt: (record) => inner.recordSalt(record),
    listUsers: (query) => {
      queries.push(query);
      return inner.listUsers(query);
    },
    getUser: (merchantId, sharedUserId) => inner.getUser(merchantId, sharedUserId),
    ping: () => inner.ping(),
    listKeys: (merchantId: string) => inner.listKeys(merchantId),
    close: () => inner.close(),
  };
  return { storage, queries };
}

describe('the streamed listing names one listing to the storage', () => {
  it('every batch of one stream carries the same listing object; another stream another; a page none', async () => {
    const { storage, queries } = recordingStorage();
    const api = createMerchantApi({ storage, streamBatchSize: 2, logger: recordingLogger().logger });
    const stream = async () => JSON.parse(await (await api.fetch(new Request(`${ORIGIN}/merchant/users`, { headers: basic('m1', 'key-one') }))).text());
    expect((await stream()).data.map((u: { shared_user_id: string }) => u.shared_user_id)).toEqual(M1_ORDER);
    const first = queries.splice(0);
    expect(first.length).toBe(Math.ceil(M1_ORDER.length / 2));
    expect(first[0]!.listing).toBeTypeOf('object');
    for (const query of first) expect(query.listing).toBe(first[0]!.listing);
    await stream();
    expect(queries[0]!.listing).toBeTypeOf('object');
    expect(queries[0]!.listing).not.toBe(first[0]!.listing);
    queries.length = 0;
    await api.fetch(new Request(`${ORIGIN}/merchant/users?limit=2`, { headers: basic('m1', 'key-one') }));
    expect(queries.map((query) => query.listing)).toEqual([undefined]);
  });
});
