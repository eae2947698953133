import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { verifyWebhook, WebhookVerificationError } from '../../src/client/index.js';
import { generateWebhookSecret, webhookHeaders } from '../../src/webhooks/signature.js';

const json = fc.jsonValue().map((value) => JSON.stringify(value) ?? 'null');
const reason = (fn: () => unknown) => {
  try {
    fn();
  } catch (error) {
    return error instanceof WebhookVerificationError ? error.reason : String(error);
  }
  return 'verified';
};

describe('verifyWebhook', () => {
  it('verifies what the standardwebhooks package signs, with Headers or a plain object, and refuses any change', () => {
    fc.assert(
      fc.property(json, fc.integer({ min: 1_600_000_000, max: 2_000_000_000 }), fc.string({ minLength: 1, maxLength: 3 }), (body, seconds, extra) => {
        const secret = generateWebhookSecret();
        const id = 'evt_prop';
        const signature = new Webhook(secret).sign(id, new Date(seconds * 1000), body);
        const headers = { 'webhook-id': id, 'webhook-timestamp': String(seconds), 'webhook-signature': signature };
        const now = seconds * 1000;
        expect(verifyWebhook([secret], new Headers(headers), body, { now })).toEqual(JSON.parse(body));
        expect(verifyWebhook([generateWebhookSecret(), secret], headers, body, { now })).toEqual(JSON.parse(body));
        expect(reason(() => verifyWebhook([secret], headers, body + extra, { now }))).toBe('no_matching_signature');
        expect(reason(() => verifyWebhook([secret], { ...headers, 'webhook-id': `${id}x` }, body, { now }))).toBe('no_matching_signature');
        expect(reason(() => verifyWebhook([generateWebhookSecret()], headers, body, { now }))).toBe('no_matching_signature');
      }),
      { numRuns: 100 },
    );
  });

  it('accepts either of two signatures during a rotation', () => {
    const [newer, older] = [generateWebhookSecret(), generateWebhookSecret()];
    const headers = webhookHeaders([newer, older], 'evt_r', 1_700_000_000, '{"a":1}');
    expect(verifyWebhook([older], headers, '{"a":1}', { now: 1_700_000_000_000 })).toEqual({ a: 1 });
    expect(verifyWebhook([newer], headers, '{"a":1}', { now: 1_700_000_000_000 })).toEqual({ a: 1 });
  });

  it('refuses a timestamp outside the tolerance (300 s by default), and missing headers', () => {
    const secret = generateWebhookSecret();
    const headers = webhookHeaders([secret], 'evt_t', 1_700_000_000, '{}');
    expect(verifyWebhook([secret], headers, '{}', { now: 1_700_000_300_000 })).toEqual({});
    expect(reason(() => verifyWebhook([secret], headers, '{}', { now: 1_700_000_301_000 }))).toBe('timestamp_out_of_tolerance');
    expect(reason(() => verifyWebhook([secret], headers, '{}', { now: 1_699_999_699_000 }))).toBe('timestamp_out_of_tolerance');
    expect(verifyWebhook([secret], headers, '{}', { now: 1_700_000_900_000, tolerance: 900 })).toEqual({});
    expect(reason(() => verifyWebhook([secret], { ...headers, 'webhook-timestamp': 'soon' }, '{}', { now: 1_700_000_000_000 }))).toBe('missing_headers');
    expect(reason(() => verifyWebhook([secret], { 'webhook-id': 'evt_t', 'webhook-timestamp': '1700000000' }, '{}', { now: 1_700_000_000_000 }))).toBe('missing_headers');
  });

  it('a signed body that is not JSON is invalid_body, not a verified event', () => {
    const secret = generateWebhookSecret();
    const headers = webhookHeaders([secret], 'evt_b', 1_700_000_000, 'not json');
    expect(reason(() => verifyWebhook([secret], headers, 'not json', { now: 1_700_000_000_000 }))).toBe('invalid_body');
  });
});
