/**
 * The users the scale benches load (`bench:mysql`, `bench:seed`): one merchant, ids in key order,
 * 0.1% deactivated, `date_joined` spread over 2010-2023 with no relation to the id, the other
 * fields varied and partly non-ASCII. Deterministic: the same `i` gives the same user.
 */
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import type { SeedUser } from '../src/storage/seed/seed.js';

export const MERCHANT = 'bench-merchant';
export const idOf = (i: number) => `user-${String(i).padStart(7, '0')}`;

export function fakeUser(i: number): SeedUser {
  const micros = String((i * 7919) % 1_000_000).padStart(6, '0');
  const day = String(1 + (i % 28)).padStart(2, '0');
  return {
    merchant_id: MERCHANT,
    shared_user_id: idOf(i),
    first_name: ['Anna', 'Björn', 'Chloé', '美咲', 'Олег', 'Zoë'][i % 6]!,
    last_name: `Lastname${i % 997}`,
    email_address: `user${i}@example.com`,
    street: `Hauptstraße ${i % 300}`,
    zip_code: String(10000 + (i % 89999)),
    city: ['Berlin', 'München', 'Köln', 'Hamburg'][i % 4]!,
    state: i % 3 === 0 ? null : 'BY',
    country: 'de',
    preferred_language: i % 2 ? 'de' : 'en',
    date_joined: `20${10 + (i % 14)}-0${1 + (i % 9)}-${day}T12:00:00.${micros}+00:00`,
    deactivated_at: i % 1000 === 0 ? `2024-01-${day}T00:00:00.000001+00:00` : null,
    agreed_to_terms_and_conditions: `2019-12-12T12:19:17.${micros}+00:00`,
    agreed_to_marketing: i % 4 === 0 ? null : `2020-01-01T00:00:00.${micros}+00:00`,
  };
}

/**
 * Writes `count` users: `ndjson`, one per line (what `merchant-api import` reads); `ndjson-seed`,
 * the same after a line with the merchant (a memory seed); `json`, a seed document.
 */
export async function writeUsersFile(path: string, count: number, format: 'ndjson' | 'ndjson-seed' | 'json', merchantKey = 'bench-key'): Promise<number> {
  const out = createWriteStream(path);
  let bytes = 0;
  const write = async (text: string) => {
    bytes += Buffer.byteLength(text);
    if (!out.write(text)) await once(out, 'drain');
  };
  const merchant = `{"id":${JSON.stringify(MERCHANT)},"status":"active","keys":[${JSON.stringify(merchantKey)}]}`;
  if (format === 'json') await write(`{"merchants":[${merchant}],"users":[\n`);
  if (format === 'ndjson-seed') await write(`${merchant}\n`);
  let chunk = '';
  for (let i = 0; i < count; i++) {
    chunk += `${JSON.stringify(fakeUser(i))}${format === 'json' && i < count - 1 ? ',' : ''}\n`;
    if (chunk.length > 1 << 20) {
      await write(chunk);
      chunk = '';
    }
  }
  await write(`${chunk}${format === 'json' ? ']}\n' : ''}`);
  out.end();
  await once(out, 'close');
  return bytes;
}
