/**
 * The streamed seed loader (src/storage/seed/seed-stream.ts, src/storage/memory/load.ts) against the
 * whole-document path (`JSON.parse` + `parseSeed`): the same storage and the same problems for
 * any document, any formatting and any split into chunks (down to single bytes inside UTF-8
 * characters and escapes); syntax errors by byte offset without quoting the file; NDJSON seeds.
 */
import fc from 'fast-check';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMemoryStorage, loadMemoryStorage, MemoryStorage, SeedError } from '../../../src/storage/memory/index.js';
import { readMemoryStorage } from '../../../src/storage/memory/load.js';
import { isCanonicalTimestamp, parseSeedUser, type Seed } from '../../../src/storage/seed/seed.js';
import { SeedSyntaxError } from '../../../src/storage/seed/seed-stream.js';
import { canonicalTimestamp } from '../../../src/storage/timestamps.js';
import type { UserRecord } from '../../../src/storage/contract.js';
import { user } from '../../support/seeds.js';

const encoder = new TextEncoder();

/** `text` as UTF-8 in chunks cut at `cuts` (byte offsets, any of them inside a character). */
async function* chunked(text: string, cuts: number[]): AsyncGenerator<Uint8Array> {
  const bytes = encoder.encode(text);
  let at = 0;
  for (const cut of [...new Set(cuts.map((c) => c % (bytes.length + 1)))].sort((a, b) => a - b)) {
    if (cut > at) yield bytes.subarray(at, cut);
    at = Math.max(at, cut);
  }
  if (at < bytes.length) yield bytes.subarray(at);
}

/** Every user of every merchant, by listing, in a comparable form. */
async function contents(storage: MemoryStorage, merchantIds: string[]): Promise<Record<string, UserRecord[]>> {
  const out: Record<string, UserRecord[]> = {};
  for (const id of merchantIds) out[id] = [...(await storage.listUsers({ merchantId: id, filter: {}, limit: 100_000 }))];
  return out;
}

async function outcome(run: () => Promise<MemoryStorage> | MemoryStorage, merchantIds: string[]) {
  try {
    const storage = await run();
    return { users: await contents(storage, merchantIds), merchants: await Promise.all(merchantIds.map((id) => storage.getMerchant(id))) };
  } catch (error) {
    if (error instanceof SeedError) return { problems: [...error.problems].sort(), count: error.problemCount };
    if (error instanceof SeedSyntaxError || error instanceof SyntaxError) return { syntax: true };
    throw error;
  }
}

const text = fc.string({ unit: fc.constantFrom('a', 'Z', ' ', '"', '\\', '/', '\n', '\t', '😀', 'é', '東', '\u2028', '{', '}', '[', ']', ',', ':'), maxLength: 8 });
const stamp = fc.constantFrom('2020-01-01T00:00:00.000000+00:00', '2020-01-01T01:00:00+01:00', '2019-12-12T12:19:17.193961Z', 'yesterday', '2020-02-30');
const seedUser = fc.record({
  merchant_id: fc.constantFrom('m1', 'm2', 'nobody'),
  shared_user_id: fc.constantFrom('u1', 'u2', 'u3', '😀', '.', 'a"b', 'c\\d'),
  first_name: text,
  last_name: text,
  email_address: text,
  street: text,
  zip_code: fc.oneof(text, fc.constant(12345 as unknown as string)),
  city: text,
  state: fc.option(text, { nil: null }),
  country: fc.constantFrom('de', 'DE'),
  preferred_language: fc.constantFrom('en', 'En'),
  date_joined: stamp,
  deactivated_at: fc.option(stamp, { nil: null }),
  agreed_to_terms_and_conditions: fc.option(stamp, { nil: null }),
  agreed_to_marketing: fc.option(stamp, { nil: null }),
});
const document = fc.record({
  // Now and then a field the format does not know (a typo of status): refused, the same way on every path.
  merchants: fc.uniqueArray(
    fc.record(
      { id: fc.constantFrom('m1', 'm2', 'm3'), status: fc.constantFrom('active', 'disabled'), keys: fc.array(fc.string({ minLength: 1, maxLength: 4 }), { maxLength: 2 }), statuss: fc.constant('disabled') },
      { requiredKeys: ['id', 'status', 'keys'] },
    ),
    { selector: (m) => m.id, maxLength: 3 },
  ),
  users: fc.array(seedUser, { maxLength: 8 }),
});

describe('the streamed seed document', () => {
  it('loads what JSON.parse + parseSeed load, or refuses with the same problems, however formatted and cut', async () => {
    await fc.assert(
      fc.asyncProperty(document, fc.constantFrom(undefined, 2, '\t'), fc.boolean(), fc.array(fc.nat(), { maxLength: 40 }), fc.boolean(), async (seed, indent, usersFirst, cuts, extra) => {
        const body = usersFirst ? { ...(extra ? { comment: [1, { x: '"]}' }] } : {}), users: seed.users, merchants: seed.merchants } : { merchants: seed.merchants, users: seed.users, ...(extra ? { version: 2 } : {}) };
        const json = JSON.stringify(body, null, indent);
        const ids = ['m1', 'm2', 'm3'];
        const expected = await outcome(() => createMemoryStorage({ seed: JSON.parse(json) }), ids);
        const streamed = await outcome(async () => (await readMemoryStorage(chunked(json, cuts), 'json')).storage, ids);
        expect(streamed).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a member or a merchant field the format does not know, as parseSeed does and as NDJSON does for a merchant line', async () => {
    const merchants = [{ id: 'm1', keys: ['k'], statuss: 'disabled' }];
    const json = JSON.stringify({ merchants, user: [user('m1', 'u1')] });
    const problems = ['"user": unknown member (a seed has "merchants" and "users")', 'merchants[0].statuss: unknown field'];
    expect(await outcome(() => createMemoryStorage({ seed: JSON.parse(json) }), ['m1'])).toEqual({ problems, count: 2 });
    expect(await outcome(async () => (await readMemoryStorage(chunked(json, [7, 30]), 'json')).storage, ['m1'])).toEqual({ problems, count: 2 });
    // A document without the arrays is not a seed (package.json as SEED_FILE): that alone is named, not each member.
    for (const notSeed of [{ name: 'x', version: '1' }, { merchants: 5, extra: 1 }]) {
      const text = JSON.stringify(notSeed);
      const only = { problems: ['"merchants" must be an array'], count: 1 };
      expect(await outcome(() => createMemoryStorage({ seed: JSON.parse(text) }), ['m1'])).toEqual(only);
      expect(await outcome(async () => (await readMemoryStorage(chunked(text, [3]), 'json')).storage, ['m1'])).toEqual(only);
    }
    const lines = [JSON.stringify(merchants[0]), JSON.stringify({ ...user('m1', 'u1'), nickname: 'x' })].join('\n');
    expect(await outcome(async () => (await readMemoryStorage(chunked(lines, []), 'ndjson')).storage, ['m1'])).toEqual({ problems: ['line 1: statuss: unknown field', 'line 2: nickname: unknown field'], count: 2 });
  });

  it('loads the same as NDJSON, merchants and users one a line, however cut', async () => {
    await fc.assert(
      fc.asyncProperty(document, fc.array(fc.nat(), { maxLength: 40 }), fc.constantFrom('\n', '\r\n'), async (seed, cuts, newline) => {
        const ids = ['m1', 'm2', 'm3'];
        const expected = await outcome(() => createMemoryStorage({ seed }), ids);
        const lines = [...seed.merchants, ...seed.users].map((value) => JSON.stringify(value)).join(newline);
        const streamed = await outcome(async () => (await readMemoryStorage(chunked(lines, cuts), 'ndjson')).storage, ids);
        if ('problems' in expected) expect(streamed).toMatchObject({ count: expected.count });
        else expect(streamed).toEqual(expected);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses what is not JSON, saying where by byte offset and never quoting the file', async () => {
    const secret = 'Top Secret Street 9';
    const valid = JSON.stringify({ merchants: [{ id: 'm', keys: ['k'] }], users: [user('m', 'u', { street: secret })] });
    const cases: [string, RegExp][] = [
      [valid.slice(0, -5), /unexpected end of the file/],
      [valid.replace('}]}', '},]}'), /unexpected "]" at byte \d+/],
      [valid.replace('"users"', '"users" '), /^$/], // still valid: checked below
      [`${valid} x`, /unexpected "x" at byte \d+/],
      [valid.replace(secret, `${secret}\u0001`), /the value starting at byte \d+ is not valid JSON/],
      [valid.replace('[{"id"', '[{"id" {'), /not valid JSON/],
      [`{"merchants": [], "merchants": []}`, /"merchants" appears twice/],
      ['', /unexpected end of the file/],
    ];
    for (const [input, message] of cases) {
      const result = await readMemoryStorage(chunked(input, [3, 50, 51]), 'json').then(
        () => undefined,
        (error: unknown) => error as Error,
      );
      if (message.source === '^$') {
        expect(result).toBeUndefined();
        continue;
      }
      expect(result, input.slice(0, 40)).toBeInstanceOf(SeedSyntaxError);
      expect(result!.message).toMatch(message);
      expect(result!.message).not.toContain('Secret');
    }
  });

  it('skips a byte-order mark however it is cut, and counts its bytes in offsets', async () => {
    const valid = JSON.stringify({ merchants: [{ id: 'm', keys: ['k'] }], users: [user('m', 'u')] });
    for (const cuts of [[], [1], [2], [1, 2]]) {
      const { users } = await readMemoryStorage(chunked(`\uFEFF${valid}`, cuts), 'json');
      expect(users, `cut at ${cuts.join(',')}`).toBe(1);
      const error = await readMemoryStorage(chunked(`\uFEFF${valid} x`, cuts), 'json').catch((e: unknown) => e as Error);
      expect(error).toBeInstanceOf(SeedSyntaxError);
      expect((error as Error).message).toBe(`unexpected "x" at byte ${3 + encoder.encode(valid).length + 1}`);
    }
  });

  it('refuses a document that is JSON but not an object, or has no merchants array, as parseSeed does', async () => {
    for (const input of ['[]', '"seed"', '42', '{}', '{"merchants": {}, "users": 3}']) {
      const expected = await outcome(() => createMemoryStorage({ seed: JSON.parse(input) }), []);
      expect(await outcome(async () => (await readMemoryStorage(chunked(input, [1]), 'json')).storage, []), input).toEqual(expected);
    }
  });

  it('keeps at most 1000 problems and counts them all', async () => {
    const users = Array.from({ length: 1500 }, (_, i) => ({ ...user('m', `u${i}`), date_joined: 'never' }));
    const error = (await readMemoryStorage(chunked(JSON.stringify({ merchants: [{ id: 'm', keys: ['k'] }], users }), []), 'json').catch((e: unknown) => e)) as SeedError;
    expect(error.problems).toHaveLength(1000);
    expect(error.problemCount).toBe(1500);
    expect(error.message).toMatch(/and 1490 more$/);
  });
});

describe('NDJSON seeds', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'merchant-api-seed-'));
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it('reads merchant lines and user lines, with CRLF, blank lines and a byte-order mark', async () => {
    const file = join(dir, 'seed.ndjson');
    const users = [user('m', 'b'), user('m', 'a', { deactivated_at: '2021-01-01T00:00:00Z' }), user('n', 'x')];
    await writeFile(file, `\uFEFF${JSON.stringify({ id: 'm', keys: ['k'] })}\r\n\r\n${users.map((u) => JSON.stringify(u)).join('\r\n')}\r\n   \r\n${JSON.stringify({ id: 'n', status: 'disabled', keys: ['k2'] })}`);
    const { storage, merchants, users: count } = await loadMemoryStorage(file);
    expect([merchants, count]).toEqual([2, 3]);
    expect((await storage.listUsers({ merchantId: 'm', filter: {}, limit: 10 })).map((u) => u.shared_user_id)).toEqual(['a', 'b']);
    expect(await storage.getUser('m', 'a')).toMatchObject({ deactivated_at: '2021-01-01T00:00:00.000000+00:00' });
    expect(await storage.getMerchant('n')).toMatchObject({ id: 'n', status: 'disabled', keys: ['k2'] });
  });

  it('names problems by line, never quoting a user field', async () => {
    const file = join(dir, 'bad.jsonl');
    await writeFile(file, [JSON.stringify({ id: 'm', keys: ['k'] }), '{"merchant_id": "m", oops', JSON.stringify({ ...user('m', 'u'), date_joined: 'private value' }), JSON.stringify(user('ghost', 'g')), JSON.stringify(user('m', 'u2')), JSON.stringify(user('m', 'u2')), JSON.stringify({ id: 'm', keys: [] })].join('\n'));
    const error = (await loadMemoryStorage(file).catch((e: unknown) => e)) as SeedError;
    expect(error).toBeInstanceOf(SeedError);
    expect(error.problems).toEqual([
      'line 2: not valid JSON',
      'line 3: date_joined: not an ISO 8601 timestamp',
      'line 6: shared_user_id: appears twice for merchant "m"',
      'line 7: id: "m" appears twice',
      'line 4: merchant_id: no merchant "ghost" in the seed',
    ]);
    expect(error.message).not.toContain('private');
  });
});

describe('the fast path of seed validation', () => {
  it('takes a timestamp as canonical exactly when canonicalTimestamp leaves it unchanged', () => {
    const digits = (n: number) => fc.integer({ min: 0, max: 10 ** n - 1 }).map((v) => String(v).padStart(n, '0'));
    const shaped = fc.tuple(digits(4), digits(2), digits(2), digits(2), digits(2), digits(2), digits(6)).map(([y, mo, d, h, mi, s, f]) => `${y}-${mo}-${d}T${h}:${mi}:${s}.${f}+00:00`);
    fc.assert(
      fc.property(fc.oneof(shaped, fc.string(), fc.constantFrom('2020-02-29T00:00:00.000000+00:00', '2019-02-29T00:00:00.000000+00:00', '0000-01-01T00:00:00.000000+00:00', '9999-12-31T23:59:59.999999+00:00', '2020-01-01T23:59:60.000000+00:00')), (text) => {
        expect(isCanonicalTimestamp(text)).toBe(canonicalTimestamp(text) === text);
      }),
      { numRuns: 5000 },
    );
  });

  it('gives the record the general path gives (codes in upper case and offsets force that path)', () => {
    fc.assert(
      fc.property(seedUser.filter((u) => u.merchant_id !== 'nobody'), (raw) => {
        const fast = parseSeedUser({ ...raw, country: raw.country.toLowerCase(), preferred_language: raw.preferred_language.toLowerCase() }, 'users[0]', []);
        const general = parseSeedUser({ ...raw, country: raw.country.toUpperCase(), preferred_language: raw.preferred_language.toUpperCase() }, 'users[0]', []);
        expect(fast).toEqual(general);
        if (fast) expect(Object.keys(fast)).toEqual(['merchant_id', 'shared_user_id', 'first_name', 'last_name', 'email_address', 'street', 'zip_code', 'city', 'state', 'country', 'preferred_language', 'date_joined', 'deactivated_at', 'agreed_to_terms_and_conditions', 'agreed_to_marketing']);
      }),
      { numRuns: 500 },
    );
  });
});

// A seed built in code still loads through the constructor, repeated ids keeping their last record.
describe('MemoryStorage from a Seed', () => {
  it('keeps the last record of a repeated id', async () => {
    const seed: Seed = { merchants: [], users: [user('m', 'a', { first_name: 'First' }), user('m', 'b'), user('m', 'a', { first_name: 'Last', deactivated_at: '2021-01-01T00:00:00.000000+00:00' })] };
    const storage = new MemoryStorage(seed);
    expect((await storage.getUser('m', 'a'))!.first_name).toBe('Last');
    expect((await storage.listUsers({ merchantId: 'm', filter: { active: false }, limit: 10 })).map((u) => u.first_name)).toEqual(['Last']);
    expect((await storage.listUsers({ merchantId: 'm', filter: {}, limit: 10 })).map((u) => u.shared_user_id)).toEqual(['a', 'b']);
  });
});
