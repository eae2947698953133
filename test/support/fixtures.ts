/** Seed data shared by the unit and contract suites. */
import type { Seed, SeedUser } from '../../src/storage/seed.js';

export function user(merchantId: string, sharedUserId: string, overrides: Partial<SeedUser> = {}): SeedUser {
  return {
    merchant_id: merchantId,
    shared_user_id: sharedUserId,
    first_name: 'Ada',
    last_name: 'Lovelace',
    email_address: `${sharedUserId}@example.com`,
    street: 'Hauptstraße 1',
    zip_code: '10115',
    city: 'Berlin',
    state: null,
    country: 'de',
    preferred_language: 'de',
    date_joined: '2019-12-12T12:19:17.193961+00:00',
    deactivated_at: null,
    agreed_to_terms_and_conditions: '2019-12-12T12:19:17.000001+00:00',
    agreed_to_marketing: null,
    ...overrides,
  };
}

/**
 * Two merchants and a disabled one. `m1` has ids chosen to catch ordering
 * bugs: upper before lower case, U+E000-U+FFFF before astral (emoji), CJK.
 */
export function contractSeed(): Seed {
  return {
    merchants: [
      { id: 'm1', status: 'active', keys: ['key-one', 'key-one-rotated'] },
      { id: 'M1', status: 'active', keys: ['case-differs'] },
      { id: 'm2', status: 'active', keys: ['key-two'] },
      { id: 'off', status: 'disabled', keys: ['key-off'] },
    ],
    users: [
      user('m1', 'a-001', { date_joined: '2020-01-01T00:00:00.000001+00:00' }),
      user('m1', 'B-002', { date_joined: '2020-01-02T00:00:00.000000+00:00', deactivated_at: '2021-03-04T05:06:07.123456+00:00' }),
      user('m1', 'b-003', { date_joined: '2020-01-03T00:00:00.999999+00:00', first_name: '🦄 Ünïcødé', city: '東京', state: 'Tōkyō' }),
      user('m1', '\ufb01-ligature', { date_joined: '2020-01-04T00:00:00.500000+00:00' }),
      user('m1', '😀-emoji', { date_joined: '2020-01-05T00:00:00.000000+00:00', deactivated_at: '2020-06-01T00:00:00.000000+00:00' }),
      user('m1', '中文-id', { date_joined: '2020-01-06T00:00:00.000000+00:00', agreed_to_marketing: '2020-01-06T00:00:01.000009+00:00' }),
      user('m1', 'shared', { first_name: 'Shared-as-m1' }),
      user('m2', 'other-id-for-shared', { first_name: 'Shared-as-m2' }),
      user('m2', 'a-001', { first_name: 'Same id, other merchant' }),
    ],
  };
}

/** The ids of merchant m1 in code-point order. */
export const M1_ORDER = ['B-002', 'a-001', 'b-003', 'shared', '中文-id', '\ufb01-ligature', '😀-emoji'];
