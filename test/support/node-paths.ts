/**
 * The Node adapter's two paths (adapters/node-direct.ts): the direct one,
 * the default, and the one through @hono/node-server and `api.fetch`
 * (`MERCHANT_API_FETCH_OBJECTS=1`). Suites of the adapter run on both, so
 * that the two cannot drift.
 */
import { afterAll, beforeAll, describe } from 'vitest';

export const NODE_PATHS = [
  { name: 'direct path', env: {} },
  { name: 'fetch objects path', env: { MERCHANT_API_FETCH_OBJECTS: '1' } },
] as const;

/** Runs `body` once per path, the environment set for the listeners made while it runs (in beforeAll and in tests). */
export function onEachNodePath(body: () => void): void {
  for (const path of NODE_PATHS) {
    describe(`Node ${path.name}`, () => {
      let before: string | undefined;
      beforeAll(() => {
        before = process.env.MERCHANT_API_FETCH_OBJECTS;
        if ('MERCHANT_API_FETCH_OBJECTS' in path.env) process.env.MERCHANT_API_FETCH_OBJECTS = path.env.MERCHANT_API_FETCH_OBJECTS;
        else delete process.env.MERCHANT_API_FETCH_OBJECTS;
      });
      afterAll(() => {
        if (before === undefined) delete process.env.MERCHANT_API_FETCH_OBJECTS;
        else process.env.MERCHANT_API_FETCH_OBJECTS = before;
      });
      body();
    });
  }
}
