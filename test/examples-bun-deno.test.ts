/** examples/bun.ts and examples/deno.ts run under their runtime (Deno with the start:deno permissions), on the demo seed. */
import { describe, expect, it } from 'vitest';
import { basicAuth, send } from './fixtures/http-client.js';
import { startServer, type Runtime } from './fixtures/runtime.js';
import { signedUrl } from './fixtures/test-signer.js';

for (const runtime of ['bun', 'deno'] as Runtime[]) {
  describe(`examples/${runtime}.ts`, () => {
    it('serves the demo data, prints a working curl, and stops cleanly on SIGTERM', async () => {
      const example = await startServer(runtime, `examples/${runtime}.ts`, {});
      try {
        const [, printed] = await example.waitFor(/Try: curl '([^']+)'/);
        expect((await send(printed!)).body).toBe('{"status":"ok","is_valid":true}');
        const signed = await send(signedUrl({ secret: 'demo-secret', url: `${example.url}/validatesignature`, cp: 'demo-merchant' }));
        expect(signed.body).toBe('{"status":"ok","is_valid":true}');
        const page = JSON.parse((await send(`${example.url}/merchant/users?limit=2`, { headers: basicAuth('demo-merchant', 'demo-secret') })).body);
        expect(page.data).toHaveLength(2);
        expect(await example.stop()).toBe(0);
        expect(example.output()).toContain('stopped');
      } finally {
        await example.stop(1000);
      }
    });
  });
}
