/**
 * The refusals of /validatesignature that answer 400 in the signature shape (a mismatch, a reused salt, a `ts`
 * outside the window) carry a code for operators: on the access line and in merchant_api_errors_total, named as
 * the client derives it from the message (src/client/decode-error.ts). The answer's bytes stay as they were.
 */
import { describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/observe/metrics.js';
import { NOW, ORIGIN, signedUrl, testApi } from '../support/api.js';
import { recordingLogger } from '../support/recording.js';

describe('/validatesignature refusals name their code in logs and metrics', () => {
  it.each([
    ['signature_mismatch', () => signedUrl({ key: 'not-the-key' }), '{"status":"error","message":"Signature does not match.","is_valid":false}'],
    ['timestamp_out_of_window', () => signedUrl({ ts: NOW - 3600 }), '{"status":"error","message":"Invalid timestamp: ts is outside the accepted window of 300 seconds from the server\'s time.","is_valid":false}'],
    ['salt_reused', () => signedUrl({ salt: 'once' }), '{"status":"error","message":"This salt was already used: every request needs a new salt.","is_valid":false}'],
  ])('%s', async (code, url, body) => {
    const { logger, access } = recordingLogger();
    const metrics = createMetrics({ processMetrics: false });
    const { api } = testApi({ logger, hooks: metrics.hooks });
    if (code === 'salt_reused') expect((await api.fetch(new Request(url()))).status).toBe(200);
    const response = await api.fetch(new Request(url()));
    expect(response.status).toBe(400);
    expect(await response.text()).toBe(body);
    expect(access().at(-1)).toMatchObject({ status: 400, code });
    expect(await metrics.registry.metrics()).toContain(`merchant_api_errors_total{code="${code}"} 1`);
  });

  it('a valid signature has no code', async () => {
    const { logger, access } = recordingLogger();
    const { api } = testApi({ logger });
    expect((await api.fetch(new Request(signedUrl()))).status).toBe(200);
    expect(access().at(-1)!.code).toBeUndefined();
    void ORIGIN;
  });
});
