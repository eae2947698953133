/**
 * MAX_CONNECTIONS_PER_ADDRESS with WORKERS (docs/runtimes.md#connection-limits):
 * the cap is counted in each worker, as MAX_CONNECTIONS is, so one address
 * holds up to cap × WORKERS connections of the whole server, and never more.
 * The standalone server on Node (the one runtime with connection caps) with
 * WORKERS=2 on the memory storage and Redis, a cap of 5, and 12 connections
 * held open at once from one address: at most 10 are served, and more than
 * 5 (per worker, not per server: the documented behaviour).
 */
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, startServer, type ServerProcess } from '../support/processes.js';
import { redisAvailable, useRedis } from '../support/redis.js';
import { conformanceSeed, writeSeed } from '../support/seeds.js';

const CAP = 5;
const WORKERS = 2;
const CONNECTIONS = 12;

/** Opens a connection and resolves once it is connected. */
function open(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1', () => resolve(socket));
    socket.once('error', reject);
  });
}

/** The status of the first answer on `socket` to a keep-alive GET /healthz (a refused connection has its 429 written already). */
function firstStatus(socket: Socket): Promise<number> {
  return new Promise((resolve, reject) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (match) resolve(Number(match[1]));
    });
    socket.once('error', reject);
    socket.once('close', () => reject(new Error(`closed before an answer: ${JSON.stringify(text)}`)));
    socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
  });
}

// Skips loudly without redis-server, and throws in CI.
const redis = redisAvailable();

describe.skipIf(!redis)('MAX_CONNECTIONS_PER_ADDRESS with WORKERS=2 (Node): per worker', () => {
  const server = useRedis();
  let served: ServerProcess;
  let seed: { path: string; remove(): void };

  beforeAll(async () => {
    seed = writeSeed(conformanceSeed());
    served = await startServer('node', CLI.node, { SEED_FILE: seed.path, REDIS_URL: server.url, WORKERS: String(WORKERS), MAX_CONNECTIONS_PER_ADDRESS: String(CAP) }, ['serve']);
  }, 60_000);
  afterAll(async () => {
    await served?.stop();
    seed?.remove();
  });

  it(`serves at most cap × WORKERS (${CAP * WORKERS}) of ${CONNECTIONS} connections held at once from one address, and more than the cap`, async () => {
    const port = Number(new URL(served.url).port);
    const sockets = await Promise.all(Array.from({ length: CONNECTIONS }, () => open(port)));
    try {
      const statuses = await Promise.all(sockets.map(firstStatus));
      const accepted = statuses.filter((status) => status === 200).length;
      expect(statuses.filter((status) => status !== 200 && status !== 429)).toEqual([]);
      expect(accepted).toBeLessThanOrEqual(CAP * WORKERS);
      expect(accepted).toBeGreaterThan(CAP);
    } finally {
      for (const socket of sockets) socket.destroy();
    }
  });
});
