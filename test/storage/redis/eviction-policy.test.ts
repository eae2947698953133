/**
 * What the Redis state asks of every master before it records a salt
 * (docs/scaling.md#memory-and-eviction), against a connection whose INFO and
 * CONFIG answers the test writes: Redis 7 or newer, `maxmemory-policy
 * noeviction` read with CONFIG GET, a refusal of CONFIG explained (and
 * accepted only with assumeNoEviction), and a connection that answers; a
 * good verdict is read again in the background. The same against real
 * servers is in redis-salts.test.ts and redis-serve.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { StorageUnavailableError } from '../../../src/errors.js';
import { EvictionPolicyCheck, RedisSetupError } from '../../../src/storage/redis/eviction-policy.js';
import type { RedisConnection } from '../../../src/storage/redis/connection.js';
import { sleep } from '../../support/sleep.js';

const info = (version: string) => `# Server\r\nredis_version:${version}\r\n`;
const replyError = (message: string) => Object.assign(new Error(message), { name: 'ReplyError' });

function fakeConnection(answers: () => { versions: string[]; policies: string[] | Error; maxmemory?: string[] } | Error) {
  let asked = 0;
  const connection = {
    async infoOfEveryMaster() {
      asked++;
      const answer = answers();
      if (answer instanceof Error) throw answer;
      return answer.versions.map(info);
    },
    async configOfEveryMaster(parameter: string) {
      expect(['maxmemory-policy', 'maxmemory']).toContain(parameter);
      const answer = answers();
      if (answer instanceof Error) throw answer;
      if (answer.policies instanceof Error) throw answer.policies;
      return parameter === 'maxmemory' ? (answer.maxmemory ?? answer.policies.map(() => '268435456')) : answer.policies;
    },
  } as unknown as RedisConnection;
  return { connection, asked: () => asked };
}

describe('the eviction policy and version check', () => {
  it('lets salts through when every master runs Redis 7 or newer with noeviction', async () => {
    const { connection } = fakeConnection(() => ({ versions: ['7.0.15', '7.2.4'], policies: ['noeviction', 'noeviction'] }));
    await expect(new EvictionPolicyCheck(connection).ensure()).resolves.toBeUndefined();
  });

  it('refuses with a setup error (503, and no start) when one master may evict, naming maxmemory-policy', async () => {
    const { connection } = fakeConnection(() => ({ versions: ['7.0.15', '7.0.15'], policies: ['noeviction', 'allkeys-lru'] }));
    const refused = new EvictionPolicyCheck(connection).ensure();
    await expect(refused).rejects.toBeInstanceOf(RedisSetupError);
    await expect(refused).rejects.toBeInstanceOf(StorageUnavailableError);
    await expect(refused).rejects.toThrow('maxmemory-policy is allkeys-lru on a master, and salts could be evicted, letting replays through; set maxmemory-policy to noeviction');
  });

  it('refuses a master without a memory limit (maxmemory 0), naming the setting, unless the operator assumes one (issue 34 §2)', async () => {
    const { connection } = fakeConnection(() => ({ versions: ['7.0.15', '7.0.15'], policies: ['noeviction', 'noeviction'], maxmemory: ['268435456', '0'] }));
    const refused = new EvictionPolicyCheck(connection).ensure();
    await expect(refused).rejects.toBeInstanceOf(RedisSetupError);
    await expect(refused).rejects.toThrow(/maxmemory is 0 \(no limit\) on a master.*set maxmemory.*REDIS_ASSUME_NOEVICTION=true/);
    await expect(new EvictionPolicyCheck(connection, { assumeNoEviction: true }).ensure()).resolves.toBeUndefined();
  });

  it('says how to check the policy where CONFIG is refused, and accepts it only with assumeNoEviction', async () => {
    const { connection } = fakeConnection(() => ({ versions: ['7.0.15'], policies: replyError("ERR unknown command 'CONFIG', with args beginning with: 'GET' 'maxmemory-policy'") }));
    const refused = new EvictionPolicyCheck(connection).ensure();
    await expect(refused).rejects.toBeInstanceOf(RedisSetupError);
    await expect(refused).rejects.toThrow(/refuses CONFIG GET maxmemory-policy .*redis-cli INFO memory.*REDIS_ASSUME_NOEVICTION=true/);
    await expect(new EvictionPolicyCheck(connection, { assumeNoEviction: true }).ensure()).resolves.toBeUndefined();
  });

  it('refuses a master older than Redis 7, whose scripts cannot declare flags, even with assumeNoEviction', async () => {
    const { connection } = fakeConnection(() => ({ versions: ['6.2.14'], policies: ['noeviction'] }));
    await expect(new EvictionPolicyCheck(connection, { assumeNoEviction: true }).ensure()).rejects.toThrow('a master runs Redis 6.2.14, and the scripts need 7 or newer');
  });

  it('refuses while Redis does not answer (not a setup error), and asks again at the next call', async () => {
    let down = true;
    const { connection, asked } = fakeConnection(() => (down ? new Error('connect ECONNREFUSED') : { versions: ['7.0.15'], policies: ['noeviction'] }));
    const check = new EvictionPolicyCheck(connection);
    const refused = check.ensure();
    await expect(refused).rejects.toThrow('the eviction policy could not be read (connect ECONNREFUSED)');
    await expect(refused).rejects.not.toBeInstanceOf(RedisSetupError);
    down = false;
    await expect(check.ensure()).resolves.toBeUndefined();
    expect(asked()).toBe(2);
  });

  it('does not make a request wait while the last verdict was good, and notices a change at the next reading', async () => {
    let policy = 'noeviction';
    const { connection, asked } = fakeConnection(() => ({ versions: ['7.0.15'], policies: [policy] }));
    const check = new EvictionPolicyCheck(connection, { recheckMs: 0 });
    await check.ensure();
    policy = 'allkeys-lru';
    // Good before: answered at once, the reading goes on in the background.
    await expect(check.ensure()).resolves.toBeUndefined();
    await sleep(0);
    await expect(check.ensure()).rejects.toThrow('allkeys-lru');
    expect(asked()).toBeGreaterThanOrEqual(3);
  });
});
