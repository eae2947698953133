/**
 * A merchant's generated test dataset (docs/test-mode.md#the-test-dataset): `count` users made from
 * the merchant id alone, so that every instance, every restart and every storage answers the same
 * records without storing any of them. Every field type a live listing can hold is exercised: a
 * null `state`, deactivated users, non-ASCII names and cities, timestamps with microseconds, a
 * null `agreed_to_marketing`.
 */
import { createHash } from 'node:crypto';
import type { ChangedUserRecord } from '../storage/contract.js';
import { formatEpochSeconds } from '../storage/timestamps.js';

/** The users a test dataset has unless the deployment says otherwise (`TEST_MODE_USERS`). */
export const DEFAULT_TEST_USERS = 100;
/** The most a deployment may ask for: the dataset is held in memory per merchant while in use. */
export const MAX_TEST_USERS = 10_000;

/** The id of generated user `index` (0-based): recognisable, and in id order as generated. */
export function testUserId(index: number): string {
  return `test_user_${String(index + 1).padStart(5, '0')}`;
}

const FIRST_NAMES = ['Anna', 'Zoë', 'Łukasz', 'José', 'Søren', 'Amélie', 'Björn', 'Chloé', 'Ольга', '陽菜', 'Fatima', 'Nguyễn', 'Siobhán', 'Ada', 'Ömer', 'Maximilian'];
const LAST_NAMES = ['Müller', "O'Brien", 'García', 'Kowalski', 'Ødegaard', 'Dubois', '山田', 'Смирнова', 'Nakamura', 'Ó Súilleabháin', 'Smith', 'Çelik', 'Schröder', 'Novák', 'Lindqvist', 'Rossi'];
/** City, zip, state (null where the country has none in use), country, language. */
const PLACES: readonly (readonly [string, string, string | null, string, string])[] = [
  ['Düsseldorf', '40212', null, 'de', 'de'],
  ['Dublin', 'D02 K277', 'Leinster', 'ie', 'en'],
  ['Málaga', '29001', 'Andalucía', 'es', 'es'],
  ['Kraków', '31-001', null, 'pl', 'pl'],
  ['Tromsø', '9008', null, 'no', 'nb'],
  ['Montréal', 'H2X 1Y4', 'Québec', 'ca', 'fr'],
  ['東京', '100-0001', '東京都', 'jp', 'ja'],
  ['São Paulo', '01310-100', 'SP', 'br', 'pt'],
];
const STREETS = ['Königsallee', 'Harcourt Street', 'Calle Larios', 'ulica Floriańska', 'Storgata', 'Rue Sainte-Catherine', '丸の内', 'Avenida Paulista'];

/** 2023-01-01T00:00:00Z: the earliest `date_joined` of a generated user. */
const EPOCH_START = 1_672_531_200;
/** Two years, in seconds: the span generated users joined over. */
const SPAN = 2 * 365 * 86_400;

/**
 * The generated users of `merchantId`, in id order, each with the `updated_at` it has until it is
 * changed (its latest timestamp: every one is in the past, before any change the simulator stamps).
 * User 1 has a null `state` and user 2 is deactivated, whatever the hash, so even a dataset of two
 * users has both; the rest vary by a hash of the merchant id and the index.
 */
export function generateTestUsers(merchantId: string, count: number): ChangedUserRecord[] {
  const users: ChangedUserRecord[] = [];
  const seed = createHash('sha256').update(`merchant-api test dataset\0${merchantId}`).digest();
  for (let index = 0; index < count; index++) users.push(generatedUser(seed, index));
  return users;
}

function generatedUser(seed: Buffer, index: number): ChangedUserRecord {
  const bytes = createHash('sha256').update(seed).update(String(index)).digest();
  const word = (at: number) => bytes.readUInt32BE(at);
  const first = FIRST_NAMES[word(0) % FIRST_NAMES.length]!;
  const last = LAST_NAMES[word(4) % LAST_NAMES.length]!;
  const [city, zip, state, country, language] = PLACES[word(8) % PLACES.length]!;
  const joinedSeconds = EPOCH_START + (word(12) % SPAN);
  const stamp = (seconds: number, micros: number) => formatEpochSeconds(seconds, String(micros % 1_000_000).padStart(6, '0'));
  const dateJoined = stamp(joinedSeconds, word(16));
  const termsAt = stamp(joinedSeconds + (word(20) % 600), word(24));
  const marketing = word(28) % 3 === 0 ? null : stamp(joinedSeconds + 3600 + (word(20) % 86_400), word(24) >>> 3);
  const deactivated = index === 1 || (index > 1 && word(8) % 10 === 0) ? stamp(joinedSeconds + 86_400 * (1 + (word(4) % 300)), word(0) >>> 5) : null;
  const id = testUserId(index);
  const record: ChangedUserRecord = {
    shared_user_id: id,
    first_name: first,
    last_name: last,
    email_address: `${id}@example.com`,
    street: `${STREETS[word(8) % STREETS.length]} ${1 + (word(12) % 200)}`,
    zip_code: zip,
    city,
    state: index === 0 ? null : state,
    country,
    preferred_language: language,
    date_joined: dateJoined,
    deactivated_at: deactivated,
    agreed_to_terms_and_conditions: termsAt,
    agreed_to_marketing: marketing,
    updated_at: '',
  };
  // Canonical stamps of one form compare as strings: the latest is the last change the record had.
  record.updated_at = [dateJoined, termsAt, marketing ?? '', deactivated ?? ''].reduce((a, b) => (b > a ? b : a));
  return record;
}
