import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it } from 'vitest';
import { generateWebhookSecret, signWebhook, webhookHeaders, webhookSecretBytes } from '../../src/webhooks/signature.js';

// The spec's own example (standard-webhooks/spec, "Signature scheme"): an independent answer.
const SPEC_SECRET = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
const SPEC_ID = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
const SPEC_TIMESTAMP = 1614265330;
const SPEC_BODY = '{"test": 2432232314}';
const SPEC_SIGNATURE = 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=';

describe('Standard Webhooks v1 signatures', () => {
  it('matches the specification\'s example', () => {
    expect(signWebhook(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY)).toBe(SPEC_SIGNATURE);
  });

  it('a generated secret is whsec_ + base64 of 32 bytes, different each time', () => {
    const a = generateWebhookSecret();
    expect(a).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(webhookSecretBytes(a)).toHaveLength(32);
    expect(generateWebhookSecret()).not.toBe(a);
  });

  it('refuses malformed secrets', () => {
    expect(() => webhookSecretBytes('whsec_not base64!')).toThrow(/base64/);
    expect(() => webhookSecretBytes('whsec_AAAA')).toThrow(/24 to 64 bytes/);
  });

  it('every body, id and time signed by us verifies with the standardwebhooks package, and a changed body does not', () => {
    fc.assert(
      fc.property(fc.jsonValue().map((value) => JSON.stringify(value) ?? 'null'), fc.stringMatching(/^evt_[A-Za-z0-9_-]{1,40}$/), fc.integer({ min: -200, max: 200 }), fc.string({ minLength: 1, maxLength: 5 }), (body, id, skew, extra) => {
        const secret = generateWebhookSecret();
        const now = Math.floor(Date.now() / 1000) + skew;
        const headers = webhookHeaders([secret], id, now, body);
        expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body));
        expect(() => new Webhook(secret).verify(body + extra, headers)).toThrow();
        expect(() => new Webhook(generateWebhookSecret()).verify(body, headers)).toThrow();
      }),
      { numRuns: 200 },
    );
  });

  it('during a rotation both secrets sign, separated by a space, and either verifies alone', () => {
    fc.assert(
      fc.property(fc.jsonValue().map((value) => JSON.stringify(value) ?? 'null'), (body) => {
        const [newer, older] = [generateWebhookSecret(), generateWebhookSecret()];
        const headers = webhookHeaders([newer, older], 'evt_x', Math.floor(Date.now() / 1000), body);
        const parts = headers['webhook-signature'].split(' ');
        expect(parts).toHaveLength(2);
        expect(parts.every((part) => part.startsWith('v1,'))).toBe(true);
        expect(new Webhook(newer).verify(body, headers)).toEqual(JSON.parse(body));
        expect(new Webhook(older).verify(body, headers)).toEqual(JSON.parse(body));
      }),
      { numRuns: 50 },
    );
  });

  it('refuses to sign with no secret', () => {
    expect(() => webhookHeaders([], 'evt_x', 1, '{}')).toThrow();
  });
});
