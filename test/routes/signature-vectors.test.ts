/**
 * The handler accepts what Python signed (the "python" vectors of test/fixtures/signing-vectors.json,
 * made by test/fixtures/signing-vectors-python.py with `urllib.parse.quote(s, safe='')`): each one's
 * query string sent as that merchant sends it, with `~` beside spaces, `%`, `*`, `!'()` and non-ASCII
 * in keys, values, the salt, the merchant id, the key and the path. Nothing here signs with the
 * library: a `pct` that escaped `~` would refuse every one of them.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createMerchantApi } from '../../src/api.js';
import { silentLogger } from '../../src/observe/logger.js';
import { MemoryStorage } from '../../src/storage/memory/index.js';
import { call } from '../support/api.js';

interface Vector {
  source: string;
  secret: string;
  method: string;
  url: string;
  pairs: [string, string][];
  query?: string;
}

const { vectors } = JSON.parse(readFileSync(new URL('../fixtures/signing-vectors.json', import.meta.url), 'utf8')) as { vectors: Vector[] };
const sent = vectors.filter((v) => v.source === 'python' && v.query !== undefined);

describe('the handler accepts the requests Python signed', () => {
  it('has such requests, one under a path with "~"', () => {
    expect(sent.length).toBeGreaterThanOrEqual(4);
    expect(sent.some((v) => new URL(v.url).pathname !== '/validatesignature')).toBe(true);
  });

  for (const vector of sent) {
    it(`${vector.url}?${vector.query!.slice(0, 60)}…`, async () => {
      const value = (key: string) => vector.pairs.find(([k]) => k === key)![1];
      const url = new URL(vector.url);
      const storage = new MemoryStorage();
      storage.putMerchant({ id: value('cp'), status: 'active', keys: [vector.secret] });
      const api = createMerchantApi({
        storage,
        // The vector's clock.
        now: () => Number(value('ts')) * 1000,
        logger: silentLogger,
        throttle: false,
        publicUrl: url.origin,
        basePath: url.pathname.slice(0, -'/validatesignature'.length) || '/',
      });
      const request = `${vector.url}?${vector.query}`;
      const answer = await call(api, request);
      expect(answer.body, answer.text).toEqual({ status: 'ok', is_valid: true });
      // It reached the replay store: the same request again is a replay, not a bad signature.
      expect((await call(api, request)).body.message).toMatch(/salt was already used/);
    });
  }
});
