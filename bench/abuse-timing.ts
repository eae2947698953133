/**
 * Part of `npm run bench:abuse`: does a merchant id that does not exist cost
 * more, or answer slower, than one that does? Against the standalone server
 * on MySQL (a database of its own on MYSQL_URL, default
 * mysql://root@127.0.0.1:3306/test, made with the build's own `migrate` and
 * `merchant add`; THROTTLE_AUTH=false, so that every attempt reaches the
 * lookup; KEY_CACHE_TTL its default 10 s), one request at a time over one
 * connection, the kinds interleaved: Basic credentials of the existing
 * merchant with a wrong key, of one unknown id again and again, and of a new
 * unknown id every time (a guesser's); then validatesignature with the
 * existing merchant and a wrong signature, and with an unknown `cp`. Printed:
 * each kind's p50 and p99, and the ratio of unknown to known p50.
 *
 * Options: --requests=N per kind (default 3000), --cli=path/to/cli.js
 * (another build, for before/after figures). Skipped when MariaDB does not answer.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { createConnection } from 'mysql2/promise';
import { percentile, ROOT, startAbuseServer } from './abuse-server.js';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '3000' }, cli: { type: 'string', default: 'dist/cli.js' } } });
const REQUESTS = Number(values.requests);
const MYSQL_URL = process.env.MYSQL_URL ?? 'mysql://root@127.0.0.1:3306/test';
const PUBLIC_URL = 'http://abuse.bench.example';

const database = `merchant_api_abuse_${randomBytes(4).toString('hex')}`;
let admin;
try {
  admin = await createConnection({ uri: MYSQL_URL });
} catch (error) {
  console.log(`unknown merchant ids: skipped, MariaDB does not answer at ${MYSQL_URL} (${(error as Error).message})`);
  process.exit(0);
}
await admin.query(`CREATE DATABASE ${database}`);
const url = new URL(MYSQL_URL);
url.pathname = `/${database}`;
const env = { DATABASE_URL: url.href, MASTER_KEY: randomBytes(32).toString('base64url') };
const cli = (...args: string[]) => execFileSync(process.execPath, [values.cli!, ...args], { cwd: ROOT, env: { ...process.env, ...env }, encoding: 'utf8' });

try {
  cli('migrate');
  const known = JSON.parse(cli('merchant', 'add', 'known-merchant', '--json')) as { merchant_id: string; api_key: string };
  const server = await startAbuseServer(values.cli!, { ...env, THROTTLE_AUTH: 'false', PUBLIC_URL });
  try {
    const basic = (id: string, key: string) => ({ authorization: `Basic ${Buffer.from(`${id}:${key}`).toString('base64')}` });
    let guess = 0;
    const ts = () => Math.floor(Date.now() / 1000);
    const kinds: Record<string, { expect: number; request: () => [string, Record<string, string>] }> = {
      'Basic, existing merchant, wrong key': { expect: 401, request: () => [`${server.url}/merchant/users?limit=1`, basic(known.merchant_id, 'wrong-key')] },
      'Basic, the same unknown id': { expect: 401, request: () => [`${server.url}/merchant/users?limit=1`, basic('no-such-merchant', 'wrong-key')] },
      'Basic, a new unknown id each time': { expect: 401, request: () => [`${server.url}/merchant/users?limit=1`, basic(`guess-${++guess}`, 'wrong-key')] },
      'validatesignature, existing merchant, wrong signature': { expect: 400, request: () => [`${server.url}/validatesignature?cp=${known.merchant_id}&salt=s&ts=${ts()}&hmac=${'0'.repeat(56)}`, {}] },
      'validatesignature, a new unknown cp each time': { expect: 404, request: () => [`${server.url}/validatesignature?cp=guess-${++guess}&salt=s&ts=${ts()}&hmac=${'0'.repeat(56)}`, {}] },
    };
    const times = new Map<string, number[]>(Object.keys(kinds).map((k) => [k, []]));
    for (let round = -200; round < REQUESTS; round++) {
      for (const [name, kind] of Object.entries(kinds)) {
        const [target, headers] = kind.request();
        const started = performance.now();
        const response = await fetch(target, { headers });
        await response.arrayBuffer();
        const took = performance.now() - started;
        if (response.status !== kind.expect) throw new Error(`${name}: answered ${response.status}, expected ${kind.expect}`);
        if (round >= 0) times.get(name)!.push(took);
      }
    }
    const p50 = (name: string) => percentile([...times.get(name)!].sort((a, b) => a - b), 0.5);
    console.log(`unknown merchant ids on MySQL (${values.cli}), ${REQUESTS} requests of each kind, interleaved, one at a time\n`);
    for (const name of Object.keys(kinds)) {
      const sorted = [...times.get(name)!].sort((a, b) => a - b);
      console.log(`${name}: p50 ${(percentile(sorted, 0.5) * 1000).toFixed(0)} µs, p99 ${(percentile(sorted, 0.99) * 1000).toFixed(0)} µs`);
    }
    const known401 = p50('Basic, existing merchant, wrong key');
    console.log(`\nunknown / known p50: the same unknown id ${(p50('Basic, the same unknown id') / known401).toFixed(2)}x, a new unknown id ${(p50('Basic, a new unknown id each time') / known401).toFixed(2)}x (Basic); ` +
      `a new unknown cp ${(p50('validatesignature, a new unknown cp each time') / p50('validatesignature, existing merchant, wrong signature')).toFixed(2)}x (validatesignature)`);
  } finally {
    await server.stop();
  }
} finally {
  await admin.query(`DROP DATABASE ${database}`);
  await admin.end();
}
