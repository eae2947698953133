/** examples/bun.ts and examples/deno.ts run under their runtime (Deno with the start:deno permissions), on the demo seed. */
import { describe, expect, it } from 'vitest';
import { basic } from '../support/basic-auth.js';
import { freePort } from '../support/ports.js';
import { send } from '../support/http-client.js';
import { startServer, type Runtime, type ServerProcess } from '../support/processes.js';
import { signedUrl } from '../support/test-signer.js';

for (const runtime of ['bun', 'deno'] as Runtime[]) {
  describe(`examples/${runtime}.ts`, () => {
    it('serves the demo data, prints a working curl, and stops cleanly on SIGTERM', async () => {
      const example = await startServer(runtime, `examples/${runtime}.ts`, {});
      try {
        const [, printed] = await example.waitFor(/Try: curl '([^']+)'/);
        expect((await send(printed!)).body).toBe('{"status":"ok","is_valid":true}');
        const signed = await send(signedUrl({ secret: 'demo-secret', url: `${example.url}/validatesignature`, cp: 'demo-merchant' }));
        expect(signed.body).toBe('{"status":"ok","is_valid":true}');
        const page = JSON.parse((await send(`${example.url}/merchant/users?limit=2`, { headers: basic('demo-merchant', 'demo-secret') })).body);
        expect(page.data).toHaveLength(2);
        expect(await example.stop()).toBe(0);
        expect(example.output()).toContain('stopped');
      } finally {
        await example.stop(1000);
      }
    });
  });
}

describe('examples/bun.ts and examples/deno.ts side by side', () => {
  it('each listens on the PORT it is given', async () => {
    const ports = [await freePort(), await freePort()];
    const started: ServerProcess[] = [];
    try {
      started.push(...(await Promise.all([startServer('bun', 'examples/bun.ts', { PORT: String(ports[0]) }), startServer('deno', 'examples/deno.ts', { PORT: String(ports[1]) })])));
      expect(started.map((server) => server.url)).toEqual(ports.map((port) => `http://127.0.0.1:${port}`));
      for (const server of started) expect((await send(`${server.url}/healthz`)).body).toBe('{"status":"ok"}');
    } finally {
      await Promise.all(started.map((server) => server.stop()));
    }
  });

  it('refuses a PORT that is not a port', async () => {
    await expect(startServer('bun', 'examples/bun.ts', { PORT: 'eighty' })).rejects.toThrow(/PORT must be a whole number from 0 to 65535 \(got "eighty"\)/);
  });
});
