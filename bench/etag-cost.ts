/**
 * `npm run bench:etag`: what conditional reads cost on the request path
 * (docs/protocol.md#conditional-requests), in CPU microseconds per request,
 * in process through `api.fetch` on the built package: for one user and for
 * pages of 100 and 1000 users, the whole request (which now computes the
 * ETag), the tag alone (SHA-256 of the same body, as the pipeline does it),
 * and the same request answered 304. Interleaved round by round; medians.
 * Then the RateLimit fields of the listing slots (docs/protocol.md#ratelimit-fields):
 * a page of one user, whole, against the fields' own work (the state string
 * and two more headers in the answer's object), timed alone.
 *
 *   npm run bench:etag [-- --rounds=N --requests=N]
 */
import { createHash } from 'node:crypto';
import { parseArgs } from 'node:util';
import type { MerchantApiOptions } from '../src/index.js';
import { makeUsers, MERCHANT_ID, MERCHANT_KEY, PUBLIC_URL, SINGLE_USER_ID } from './servers/data.mjs';

const dist = new URL('../dist/', import.meta.url);
const { createMerchantApi, silentLogger } = (await import(new URL('index.js', dist).href)) as typeof import('../src/index.js');
const { createMemoryStorage } = (await import(new URL('storage/memory.js', dist).href)) as typeof import('../src/storage/memory/index.js');

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '11' }, requests: { type: 'string', default: '2000' } } });
const rounds = Number(values.rounds);
const requests = Number(values.requests);

const storage = createMemoryStorage({ seed: { merchants: [{ id: MERCHANT_ID, status: 'active', keys: [MERCHANT_KEY] }], users: makeUsers(2000).map((user) => ({ merchant_id: MERCHANT_ID, ...user })) } });
const OFF: Partial<MerchantApiOptions> = { accessLog: false, tracing: false, throttle: false, tarpit: false, fairShare: false };
const api = createMerchantApi({ storage, publicUrl: PUBLIC_URL, logger: silentLogger, merchantConcurrency: 1_000_000, ...OFF });
const authorization = `Basic ${Buffer.from(`${MERCHANT_ID}:${MERCHANT_KEY}`).toString('base64')}`;
const CASES: [string, string][] = [
  ['one user', `/merchant/users/${SINGLE_USER_ID}`],
  ['page of 100', '/merchant/users?limit=100'],
  ['page of 1000', '/merchant/users?limit=1000'],
];

async function fetchOnce(path: string, tag?: string): Promise<Response> {
  const headers: Record<string, string> = { authorization };
  if (tag !== undefined) headers['if-none-match'] = tag;
  return api.fetch(new Request(`${PUBLIC_URL}${path}`, { headers }), { clientAddress: '127.0.0.1', clientPort: 40_000 });
}

/** CPU µs per call of `work`, over `count` calls. */
async function cpu(count: number, work: () => Promise<unknown> | unknown): Promise<number> {
  const before = process.cpuUsage();
  for (let i = 0; i < count; i++) await work();
  const used = process.cpuUsage(before);
  return (used.user + used.system) / count;
}

const results = new Map<string, { whole: number[]; tag: number[]; notModified: number[] }>();
for (const [name, path] of CASES) {
  const first = await fetchOnce(path);
  const body = await first.text();
  const tag = first.headers.get('etag')!;
  const count = Math.max(50, Math.floor(requests / (name === 'page of 1000' ? 20 : name === 'page of 100' ? 4 : 1)));
  const samples = { whole: [] as number[], tag: [] as number[], notModified: [] as number[] };
  for (let round = 0; round < rounds + 1; round++) {
    const whole = await cpu(count, async () => (await fetchOnce(path)).arrayBuffer());
    const hashed = await cpu(count, () => createHash('sha256').update(body, 'utf8').digest('base64url'));
    const notModified = await cpu(count, async () => {
      const answer = await fetchOnce(path, tag);
      if (answer.status !== 304) throw new Error(`status ${answer.status}`);
      await answer.arrayBuffer();
    });
    if (round === 0) continue;
    samples.whole.push(whole);
    samples.tag.push(hashed);
    samples.notModified.push(notModified);
  }
  results.set(`${name} (${body.length} B)`, samples);
}

const median = (list: number[]) => [...list].sort((a, b) => a - b)[Math.floor(list.length / 2)]!;
console.log(`\nConditional reads through api.fetch, ${rounds} rounds, CPU µs per request (median), Node ${process.version}\n`);
console.log('| answer | 200 with ETag | of which the tag | tag share | 304 |');
console.log('|---|--:|--:|--:|--:|');
for (const [name, s] of results) {
  const whole = median(s.whole);
  const tag = median(s.tag);
  console.log(`| ${name} | ${whole.toFixed(1)} | ${tag.toFixed(1)} | ${((100 * tag) / whole).toFixed(1)}% | ${median(s.notModified).toFixed(1)} |`);
}

// The RateLimit fields: the work they add, as the pipeline does it, against the request that carries them.
const page = '/merchant/users?limit=1';
const fieldSamples = { whole: [] as number[], fields: [] as number[] };
let sink = 0;
for (let round = 0; round < rounds + 1; round++) {
  const whole = await cpu(requests, async () => (await fetchOnce(page)).arrayBuffer());
  const fields = await cpu(requests * 10, () => {
    const limit = { policy: '"listings";q=4;qu="concurrent-requests"', state: `"listings";r=${4 - ((sink & 3) + 1)}` };
    const headers: Record<string, string> = { 'content-type': 'application/json', 'cache-control': 'no-store', link: '<x>; rel="next"', etag: 'W/"x"' };
    headers['ratelimit-policy'] = limit.policy;
    headers.ratelimit = limit.state;
    sink += Object.keys(headers).length;
  });
  if (round === 0) continue;
  fieldSamples.whole.push(whole);
  fieldSamples.fields.push(fields);
}
console.log(`\nRateLimit fields of the listing slots, CPU µs per request (median)\n`);
console.log('| answer | whole request | of which the fields | share |');
console.log('|---|--:|--:|--:|');
const whole = median(fieldSamples.whole);
const fieldCost = median(fieldSamples.fields);
console.log(`| page of 1 user | ${whole.toFixed(1)} | ${fieldCost.toFixed(2)} | ${((100 * fieldCost) / whole).toFixed(2)}% |`);
