/**
 * A client holding a whole IPv6 /64, as any home or server does, against the
 * standalone server on Node: in a network namespace of its own (`unshare -n`,
 * which needs root), `lo` gets 40 addresses of one /64 and the server listens
 * on `::`; test/fixtures/ipv6-network.mjs sends wrong keys and opens
 * connections from those addresses and reports what it got. The /64 is one
 * client to the failed-authentication throttle and to the connection cap
 * (docs/security.md#ipv6-clients); with IPV6_PREFIX=128 each address is its
 * own, which shows what the default closes. Where `unshare -n` cannot run,
 * the suite is skipped loudly, and in CI it fails.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inCi } from '../support/ci.js';
import { ROOT } from '../support/processes.js';
import { conformanceSeed, MERCHANTS, writeSeed } from '../support/seeds.js';

interface Report {
  pair: number[];
  pairRightKeySame64: number;
  pairRightKeyOther64: number;
  address: number[];
  addressOtherMerchant: { status: number; policy: string | null };
  addressOtherMerchantOther64: number;
  connections: { extraClosed: boolean; heldOpen: boolean[]; other64: number };
  cappedLog: string[];
  error?: string;
  output?: string;
}

function namespacesAvailable(): boolean {
  const probe = spawnSync('unshare', ['-n', 'ip', '-6', 'addr', 'add', '2001:db8::1/64', 'dev', 'lo', 'nodad'], { encoding: 'utf8' });
  if (probe.status === 0) return true;
  const why = probe.error?.message ?? probe.stderr.trim();
  if (inCi()) throw new Error(`The IPv6 network suite must run in CI, but \`unshare -n\` with \`ip\` failed (it needs root and util-linux/iproute2): ${why}`);
  console.warn(['', `!!! IPv6 /64 network suite SKIPPED: \`unshare -n\` cannot run here (${why})`, '!!! Run the tests as root with util-linux and iproute2 installed.', ''].join('\n'));
  return false;
}

/** Runs the fixture in a namespace of its own with these server variables; resolves with its report. */
function attack(seedFile: string, env: Record<string, string>): Promise<Report> {
  const { main, other } = MERCHANTS;
  const scenario = { seedFile, main: { id: main.id, key: main.keys[0] }, other: { id: other.id, key: other.keys[0] }, env };
  return new Promise((resolve, reject) => {
    const child = spawn('unshare', ['-n', process.execPath, 'test/fixtures/ipv6-network.mjs'], { cwd: ROOT, env: { ...process.env, SCENARIO: JSON.stringify(scenario) }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.once('error', reject);
    child.once('exit', (code) => {
      try {
        const report = JSON.parse(stdout.trim().split('\n').at(-1)!) as Report;
        if (report.error) reject(new Error(`${report.error}\n${report.output}`));
        else resolve(report);
      } catch {
        reject(new Error(`the namespace fixture exited with ${code}:\n${stdout}\n${stderr}`));
      }
    });
  });
}

describe.skipIf(!namespacesAvailable())('a client holding an IPv6 /64, on Node in a network namespace', () => {
  const seed = writeSeed(conformanceSeed());
  const limits = { MAX_CONNECTIONS_PER_ADDRESS: '5', FAIR_SHARE: 'false' };
  let grouped: Report;
  let perAddress: Report;

  beforeAll(async () => {
    if (!existsSync(`${ROOT}dist/cli.js`)) throw new Error('dist/cli.js is missing: run npm run build first.');
    [grouped, perAddress] = await Promise.all([attack(seed.path, limits), attack(seed.path, { ...limits, IPV6_PREFIX: '128' })]);
  }, 120_000);
  afterAll(() => seed.remove());

  it('blocks a merchant for the whole /64 after 10 wrong keys from 10 of its addresses; another /64 is served', () => {
    expect(grouped.pair).toEqual([...Array(10).fill(401), 429, 429]);
    expect(grouped.pairRightKeySame64).toBe(429);
    expect(grouped.pairRightKeyOther64).toBe(200);
  });

  it('blocks the /64 for every merchant after 100 failures spread over its 40 addresses', () => {
    // 10 failures counted above (the refused ones are not failures), 90 here, then the block.
    expect(grouped.address.filter((status) => status === 401)).toHaveLength(90);
    expect(grouped.address.slice(90)).toEqual(Array(30).fill(429));
    expect(grouped.addressOtherMerchant).toEqual({ status: 429, policy: '"auth-address";q=100;w=3600' });
    expect(grouped.addressOtherMerchantOther64).toBe(200);
  });

  it('caps the connections of the /64, not of each of its addresses, and logs the /64 once', () => {
    expect(grouped.connections).toEqual({ extraClosed: true, heldOpen: [true, true, true, true, true], other64: 200 });
    expect(grouped.cappedLog).toEqual(['"event":"connections_per_address_reached","client_address":"2001:db8:1:2::/64"']);
  });

  it('with IPV6_PREFIX=128 counts each address alone: the attack the default stops goes through', () => {
    expect(perAddress.pair).toEqual(Array(12).fill(401));
    expect(perAddress.address).toEqual(Array(120).fill(401));
    expect(perAddress.connections.extraClosed).toBe(false);
  });
});
