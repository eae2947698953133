/**
 * What fair sharing costs a request while nobody contends: api.fetch in this
 * process (memory storage, access log and tracing off, so nothing hides it)
 * with fair sharing on and off, in alternating rounds of the same requests (a
 * single-user read and a validatesignature); the median of the paired ratios
 * of time per request. Part of `npm run bench:abuse`.
 *
 * Options: --rounds=N (default 15), --requests=N per round and case (default 20000).
 */
import { createHmac } from 'node:crypto';
import { parseArgs } from 'node:util';
import { createMerchantApi, type MerchantApi } from '../src/api.js';
import { silentLogger } from '../src/observe/logger.js';
import { MemoryStorage } from '../src/storage/memory/index.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '15' }, requests: { type: 'string', default: '20000' } } });
const ROUNDS = Number(values.rounds);
const REQUESTS = Number(values.requests);
const ORIGIN = 'http://cost.bench.example';
const user = (i: number) => ({
  merchant_id: 'm', shared_user_id: `u-${i}`, first_name: 'Ada', last_name: 'Lovelace', email_address: `u${i}@example.com`, street: 'Street 1', zip_code: '10000', city: 'Berlin',
  state: null, country: 'de', preferred_language: 'de', date_joined: '2020-01-01T00:00:00.000000+00:00', deactivated_at: null, agreed_to_terms_and_conditions: null, agreed_to_marketing: null,
});
const seed = { merchants: [{ id: 'm', status: 'active' as const, keys: ['k'] }], users: Array.from({ length: 100 }, (_, i) => user(i)) };
const authorization = `Basic ${Buffer.from('m:k').toString('base64')}`;

function api(fairShare: boolean): MerchantApi {
  return createMerchantApi({ storage: new MemoryStorage(seed), logger: silentLogger, accessLog: false, tracing: false, throttle: false, fairShare: fairShare ? {} : false, publicUrl: ORIGIN, timestampTolerance: 86_400 });
}

let saltCounter = 0;
function signed(): string {
  // A minute ahead: the memory replay store refuses a ts from before it started.
  const query = `cp=m&salt=s${++saltCounter}&ts=${Math.floor(Date.now() / 1000) + 60}`;
  const hmac = createHmac('sha224', 'k').update(`GET&${encodeURIComponent(`${ORIGIN}/validatesignature`)}&${encodeURIComponent(query)}`).digest('hex');
  return `${ORIGIN}/validatesignature?${query}&hmac=${hmac}`;
}

/** µs per request over `REQUESTS` sequential requests. */
async function time(target: MerchantApi, make: () => Request): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < REQUESTS; i++) {
    const response = await target.fetch(make(), { clientAddress: '127.0.0.1' });
    if (response.status !== 200) throw new Error(`answered ${response.status}`);
    await response.arrayBuffer();
  }
  return ((performance.now() - started) * 1000) / REQUESTS;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const on = api(true);
const off = api(false);
const cases = {
  user: () => new Request(`${ORIGIN}/merchant/users/u-42`, { headers: { authorization } }),
  validatesignature: () => new Request(signed()),
};
console.log(`fair sharing's cost while uncontended: ${ROUNDS} alternating rounds of ${REQUESTS} requests per case, in-process\n`);
for (const [name, make] of Object.entries(cases)) {
  await time(on, make);
  await time(off, make);
  const ratios: number[] = [];
  const onTimes: number[] = [];
  const offTimes: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    let a: number;
    let b: number;
    if (round % 2) {
      a = await time(off, make);
      b = await time(on, make);
    } else {
      b = await time(on, make);
      a = await time(off, make);
    }
    offTimes.push(a);
    onTimes.push(b);
    ratios.push(b / a);
  }
  const sorted = [...ratios].sort((x, y) => x - y);
  console.log(
    `${name}: on ${median(onTimes).toFixed(2)} µs/request, off ${median(offTimes).toFixed(2)} µs/request; on/off median ${median(ratios).toFixed(3)} (rounds ${sorted[0]!.toFixed(3)}-${sorted.at(-1)!.toFixed(3)})`,
  );
}
