/**
 * `serve` refuses a Redis without a memory limit (issue 34 §2, docs/scaling.md#memory-and-eviction):
 * with `maxmemory 0` Redis grows until the system kills it and the salts go with it. A real
 * redis-server started with `--maxmemory 0`: `serve` exits 2 naming the setting; with
 * REDIS_ASSUME_NOEVICTION=true (the operator checked it where CONFIG cannot) it starts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLEAN_ENV, CLI, runProcess, startServer } from '../../support/processes.js';
import { redisAvailable, useRedis } from '../../support/redis.js';
import { contractSeed, writeSeed } from '../../support/seeds.js';

describe.skipIf(!redisAvailable())('serve on a Redis with maxmemory 0 (Node)', () => {
  const redis = useRedis({ extra: ['--maxmemory', '0'] });
  let seed: { path: string; remove(): void };
  beforeAll(() => {
    seed = writeSeed(contractSeed());
  });
  afterAll(() => seed?.remove());

  it('refuses to start, exit 2, naming maxmemory', async () => {
    const { code, output } = await runProcess(process.execPath, [CLI.node, 'serve'], { ...CLEAN_ENV, SEED_FILE: seed.path, REDIS_URL: redis.url, PORT: '0' });
    expect(output).toMatch(/Refusing to start: REDIS_URL: maxmemory is 0 \(no limit\) on a master.*set maxmemory/);
    expect(code).toBe(2);
  });

  it('starts with REDIS_ASSUME_NOEVICTION=true', async () => {
    const server = await startServer('node', CLI.node, { SEED_FILE: seed.path, REDIS_URL: redis.url, REDIS_ASSUME_NOEVICTION: 'true' }, ['serve']);
    try {
      expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    } finally {
      await server.stop();
    }
  });
});
