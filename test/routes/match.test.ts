/**
 * The route matcher (src/routes/match.ts) walks a path's segments in place;
 * for every path it finds what splitting the path on `/` and comparing the
 * segments found (the matcher before issue 29), errors included.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodePathSegment } from '../../src/http/query.js';
import { createMatcher } from '../../src/routes/match.js';
import type { Route } from '../../src/routes/route.js';

const PATTERNS = ['/healthz', '/merchant/users', '/merchant/users/{shared_user_id}', '/a/{x}/b/{y}', '/{only}', '/c/{z}/'];
const routes = PATTERNS.map((pattern) => ({ pattern, method: 'GET', handle: () => ({ status: 200, body: '' }) }) as unknown as Route);

/** The matcher by split segments. */
function bySplit(path: string): { pattern: string; params: Record<string, string> } | undefined {
  const exact = PATTERNS.find((p) => !p.includes('{') && p === path);
  if (exact) return { pattern: exact, params: {} };
  const received = path.split('/');
  for (const pattern of PATTERNS.filter((p) => p.includes('{'))) {
    const segments = pattern.split('/');
    const names = segments.map((s) => /^\{(\w+)\}$/.exec(s)?.[1]);
    if (received.length !== segments.length) continue;
    if (!segments.every((s, i) => (names[i] === undefined ? s === received[i] : received[i] !== ''))) continue;
    const params: Record<string, string> = {};
    for (let i = 0; i < names.length; i++) if (names[i] !== undefined) params[names[i]!] = decodePathSegment(received[i]!);
    return { pattern, params };
  }
  return undefined;
}

const outcome = (f: () => { pattern: string; params: Record<string, string> } | undefined) => {
  try {
    const found = f();
    return found && { pattern: found.pattern, params: { ...found.params } };
  } catch (error) {
    return { error: String(error) };
  }
};

describe('createMatcher', () => {
  const match = createMatcher(routes);
  const segment = fc.oneof(fc.constantFrom('', 'merchant', 'users', 'healthz', 'a', 'b', 'c', 'u-1', '%E4%B8%AD', '%zz', '%C3%28'), fc.string({ maxLength: 4 }));
  const path = fc.array(segment, { maxLength: 6 }).map((segments) => `/${segments.join('/')}`);

  it('finds for every path what comparing split segments finds, bad escapes included', () => {
    fc.assert(
      fc.property(fc.oneof(path, fc.string({ maxLength: 12 })), (p) => {
        const found = outcome(() => {
          const hit = match(p);
          return hit && { pattern: hit.route.pattern, params: hit.params };
        });
        expect(found).toEqual(outcome(() => bySplit(p)));
      }),
      { numRuns: 5000 },
    );
  });

  it('matches the user route and decodes its parameter', () => {
    expect(match('/merchant/users/%E4%B8%AD')?.params).toEqual({ shared_user_id: '中' });
    expect(match('/merchant/users/')).toBeUndefined();
  });
});
