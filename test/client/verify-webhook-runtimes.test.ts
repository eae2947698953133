/**
 * `verifyWebhook` of the built `dist/client.js` on Node, Bun and Deno: a delivery signed here (two
 * secrets, as during a rotation) verifies with either secret, and a changed body does not, each
 * runtime printing the same.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { generateWebhookSecret, webhookHeaders } from '../../src/webhooks/signature.js';
import { ROOT, RUNTIMES, runProcess, runtimeCommand } from '../support/processes.js';

const [newer, older] = [generateWebhookSecret(), generateWebhookSecret()];
const body = '{"type":"user.updated","timestamp":"2026-11-28T04:00:00.000001+00:00","data":{"shared_user_id":"ü-1"}}';
const headers = webhookHeaders([newer, older], 'evt_runtime', Math.floor(Date.now() / 1000), body);

const SCRIPT = `
const { verifyWebhook, WebhookVerificationError } = await import(${JSON.stringify(pathToFileURL(`${ROOT}dist/client.js`).href)});
const input = ${JSON.stringify({ newer, older, body, headers })};
const reason = (fn) => { try { fn(); return 'verified'; } catch (e) { return e instanceof WebhookVerificationError ? e.reason : String(e); } };
console.log(JSON.stringify({
  withNewer: verifyWebhook([input.newer], new Headers(input.headers), input.body).data.shared_user_id,
  withOlder: verifyWebhook([input.older], input.headers, input.body).type,
  changed: reason(() => verifyWebhook([input.newer], input.headers, input.body + ' ')),
  late: reason(() => verifyWebhook([input.newer], input.headers, input.body, { now: Date.now() + 301_000 })),
}));
`;

const dir = mkdtempSync(join(tmpdir(), 'merchant-api-verify-webhook-'));
const script = join(dir, 'verify.mjs');
writeFileSync(script, SCRIPT);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('verifyWebhook on every runtime', () => {
  for (const runtime of RUNTIMES) {
    it(runtime, async () => {
      const [command, args] = runtimeCommand(runtime, script);
      const { code, output } = await runProcess(command, args, { NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1' });
      expect(code, output).toBe(0);
      expect(JSON.parse(output.trim().split('\n').at(-1)!)).toEqual({ withNewer: 'ü-1', withOlder: 'user.updated', changed: 'no_matching_signature', late: 'timestamp_out_of_tolerance' });
    }, 60_000);
  }
});
