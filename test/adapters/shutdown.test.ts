/**
 * Graceful shutdown of the standalone server on every runtime: SIGTERM while
 * a slow client is halfway through the streamed full list. The server must
 * stop accepting, finish that response, close the storage (the "stopped" event is
 * printed after it) and exit 0 within 10 s.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { send } from '../support/http-client.js';
import { readRest, startSlowList } from '../support/slow-list.js';
import { CLI, RUNTIMES, startServer } from '../support/processes.js';
import { largeSeed, writeSeed } from '../support/seeds.js';
import { sleep } from '../support/sleep.js';

// About 18 MB of JSON: far more than the loopback socket buffers hold, so a
// client that stops reading leaves the server mid-stream.
const USERS = 40_000;

let seed: { path: string; remove(): void };
beforeAll(() => {
  seed = writeSeed(largeSeed(USERS));
});
afterAll(() => seed.remove());


for (const runtime of RUNTIMES) {
  describe(`graceful shutdown on ${runtime}`, () => {
    it('on SIGTERM finishes an in-flight streamed list, refuses new connections, closes the storage and exits 0 within 10 s', async () => {
      const server = await startServer(runtime, CLI[runtime], { SEED_FILE: seed.path }, ['serve']);
      try {
        const { response, firstChunk } = await startSlowList(server.url);
        expect(response.statusCode).toBe(200);

        const signalledAt = Date.now();
        server.child.kill('SIGTERM');
        // The server has taken the signal (on a busy machine that may take a while), and still waits
        // for the client, which has read nothing more.
        await server.waitFor(/"event":"shutdown","signal":"SIGTERM"/);
        await sleep(200);
        expect(server.child.exitCode).toBeNull();
        await expect(send(`${server.url}/healthz`)).rejects.toThrow(/ECONNREFUSED|ECONNRESET|socket hang up/);

        const body = await readRest(response, firstChunk);
        const answer = JSON.parse(body) as { status: string; data: { shared_user_id: string }[] };
        expect(answer.status).toBe('ok');
        expect(answer.data).toHaveLength(USERS);
        expect(new Set(answer.data.map((u) => u.shared_user_id)).size).toBe(USERS);

        expect(await server.exited).toBe(0);
        expect(Date.now() - signalledAt).toBeLessThan(10_000);
        // serve.ts logs "stopped" only after storage.close() resolved.
        expect(server.output()).toMatch(/"event":"shutdown","signal":"SIGTERM"[^]*"event":"stopped"/);
      } finally {
        await server.stop(1000);
      }
    });
  });
}

for (const runtime of RUNTIMES) {
  describe(`serve() close() on ${runtime}`, () => {
    it('stops waiting for a stuck response after shutdownTimeout; the response is cut by then or at exit', async () => {
      const server = await startServer(runtime, 'test/fixtures/serve-adapter.ts', { SEED_FILE: seed.path, SHUTDOWN_TIMEOUT: '700' }, [runtime]);
      try {
        const { response, firstChunk } = await startSlowList(server.url);
        server.child.kill('SIGTERM');
        // The client never reads on: close() must give up after the timeout instead of waiting for it.
        expect(await server.exited).toBe(0);
        const took = Number(/closed after (\d+) ms/.exec(server.output())?.[1]);
        expect(took).toBeGreaterThanOrEqual(600);
        expect(took).toBeLessThan(5000);
        await expect(readRest(response, firstChunk)).rejects.toThrow();
      } finally {
        await server.stop(1000);
      }
    });
  });
}

/** The access line and the stream_aborted event of the one streamed list, from the server's output. */
function cutStreamLines(output: string): { access: Record<string, unknown>[]; aborted: Record<string, unknown>[] } {
  const lines = output.split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
  return {
    access: lines.filter((line) => line.event === 'request' && line.route === '/merchant/users'),
    aborted: lines.filter((line) => line.event === 'stream_aborted'),
  };
}

for (const runtime of RUNTIMES) {
  describe(`a streamed list cut on ${runtime}`, () => {
    it('cut at shutdown (SHUTDOWN_TIMEOUT passed): its access line with aborted and a stream_aborted event are written before exit', async () => {
      const server = await startServer(runtime, CLI[runtime], { SEED_FILE: seed.path, SHUTDOWN_TIMEOUT: '500' }, ['serve']);
      try {
        const { response, firstChunk } = await startSlowList(server.url);
        server.child.kill('SIGTERM');
        expect(await server.exited).toBe(0);
        const { access, aborted } = cutStreamLines(server.output());
        expect(aborted).toHaveLength(1);
        expect(access).toHaveLength(1);
        expect(access[0]).toMatchObject({ status: 200, aborted: true, request_id: aborted[0]!.request_id });
        expect(aborted[0]!.bytes).toBe(access[0]!.bytes);
        await expect(readRest(response, firstChunk)).rejects.toThrow();
      } finally {
        await server.stop(1000);
      }
    });

    it('cut by the client: its access line with aborted and a stream_aborted event', async () => {
      const server = await startServer(runtime, CLI[runtime], { SEED_FILE: seed.path }, ['serve']);
      try {
        const { response } = await startSlowList(server.url);
        response.destroy();
        await server.waitFor(/"event":"request"[^\n]*"aborted":true/);
        const { access, aborted } = cutStreamLines(server.output());
        expect(access).toHaveLength(1);
        expect(aborted).toHaveLength(1);
        expect(access[0]).toMatchObject({ status: 200, aborted: true, request_id: aborted[0]!.request_id });
      } finally {
        await server.stop(1000);
      }
    });
  });
}

