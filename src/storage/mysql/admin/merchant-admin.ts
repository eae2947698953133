/**
 * Merchant administration on MySQL (the CLI's `merchant` commands and the
 * seed import). New keys are random and returned once; only their sealed
 * form is stored. Changes reach running instances when their key cache
 * entry expires (`keyCacheTtlMs`).
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import { MAX_ID_LENGTH } from '../../contract.js';
import type { SeedMerchant } from '../../seed/seed.js';
import { generateApiKey, openApiKey, sealApiKey, type MasterKey } from '../merchants/key-sealing.js';
import type { MerchantApiDatabase } from '../schema.js';
import { canonicalColumn } from '../sql-values.js';

type Db = Kysely<MerchantApiDatabase> | Transaction<MerchantApiDatabase>;

/** An admin operation that cannot be done, with a `code` callers can switch on. */
export class MerchantAdminError extends Error {
  override name = 'MerchantAdminError';
  constructor(
    readonly code: 'merchant_exists' | 'merchant_not_found' | 'invalid_merchant_id',
    message: string,
  ) {
    super(message);
  }
}

/** A merchant as `merchant list` shows it: no key material. */
export interface MerchantSummary {
  id: string;
  status: 'active' | 'disabled';
  activeKeys: number;
  revokedKeys: number;
  createdAt: string;
}

/** Checks an id the way the seed format does (non-empty, at most 128 characters, no NUL). */
export function assertMerchantId(id: string): void {
  if (id.length === 0 || id.length > MAX_ID_LENGTH || id.includes('\u0000')) {
    throw new MerchantAdminError('invalid_merchant_id', `A merchant id must be 1-${MAX_ID_LENGTH} characters without NUL.`);
  }
}

/**
 * Adds a merchant with a new random key; resolves to that key, which is
 * stored only sealed, so show it to the operator once.
 */
export async function addMerchant(db: Kysely<MerchantApiDatabase>, masterKey: MasterKey, id: string, options: { status?: 'active' | 'disabled' } = {}): Promise<{ apiKey: string }> {
  assertMerchantId(id);
  const apiKey = generateApiKey();
  const sealed = await sealApiKey(masterKey, id, apiKey);
  await db.transaction().execute(async (trx) => {
    const existing = await trx.selectFrom('merchants').select('id').where('id', '=', id).forUpdate().executeTakeFirst();
    if (existing) throw new MerchantAdminError('merchant_exists', `Merchant "${id}" already exists.`);
    await trx.insertInto('merchants').values({ id, status: options.status ?? 'active' }).execute();
    await trx.insertInto('merchant_keys').values({ merchant_id: id, sealed_key: sealed, revoked_at: null }).execute();
  });
  return { apiKey };
}

/** Enables or disables a merchant; throws `merchant_not_found`. */
export async function setMerchantStatus(db: Db, id: string, status: 'active' | 'disabled'): Promise<void> {
  const result = await db.updateTable('merchants').set({ status, updated_at: sql`UTC_TIMESTAMP(6)` }).where('id', '=', id).executeTakeFirst();
  if (result.numUpdatedRows === 0n) {
    // With FOUND_ROWS off, an unchanged row counts 0 too: look before calling it unknown.
    const found = await db.selectFrom('merchants').select('id').where('id', '=', id).executeTakeFirst();
    if (!found) throw new MerchantAdminError('merchant_not_found', `No merchant "${id}".`);
  }
}

/**
 * Adds a new random key to a merchant; with `revokeOld`, revokes every key
 * it had. Resolves to the new key and how many keys were revoked.
 */
export async function rotateMerchantKey(db: Kysely<MerchantApiDatabase>, masterKey: MasterKey, id: string, options: { revokeOld?: boolean } = {}): Promise<{ apiKey: string; revoked: number }> {
  const apiKey = generateApiKey();
  const sealed = await sealApiKey(masterKey, id, apiKey);
  const revoked = await db.transaction().execute(async (trx) => {
    const merchant = await trx.selectFrom('merchants').select('id').where('id', '=', id).forUpdate().executeTakeFirst();
    if (!merchant) throw new MerchantAdminError('merchant_not_found', `No merchant "${id}".`);
    let count = 0n;
    if (options.revokeOld) {
      const result = await trx.updateTable('merchant_keys').set({ revoked_at: sql`UTC_TIMESTAMP(6)` }).where('merchant_id', '=', id).where('revoked_at', 'is', null).executeTakeFirst();
      count = result.numUpdatedRows;
    }
    await trx.insertInto('merchant_keys').values({ merchant_id: id, sealed_key: sealed, revoked_at: null }).execute();
    return Number(count);
  });
  return { apiKey, revoked };
}

/** Every merchant in id order, with key counts. */
export async function listMerchants(db: Db): Promise<MerchantSummary[]> {
  const rows = await db
    .selectFrom('merchants as m')
    .leftJoin('merchant_keys as k', 'k.merchant_id', 'm.id')
    .select((eb) => [
      'm.id',
      'm.status',
      canonicalColumn<string>('m.created_at').as('created_at'),
      eb.fn.count<string>('k.id').as('keys'),
      eb.fn.count<string>('k.revoked_at').as('revoked'),
    ])
    .groupBy(['m.id', 'm.status', 'm.created_at'])
    .orderBy('m.id')
    .execute();
  return rows.map((row) => ({
    id: row.id,
    status: row.status,
    activeKeys: Number(row.keys) - Number(row.revoked),
    revokedKeys: Number(row.revoked),
    createdAt: row.created_at,
  }));
}

/** What importing one seed merchant changed. */
export interface SeedMerchantResult {
  created: boolean;
  keysAdded: number;
  /** Seed keys matching a revoked key: left revoked, an import never revives a key. */
  keysLeftRevoked: number;
}

/**
 * Upserts a seed merchant: creates it or sets its status, and adds each seed
 * key it does not hold yet (compared in the clear after opening the stored
 * ones, since sealing is randomised). Keys absent from the seed are kept.
 */
export async function upsertSeedMerchant(trx: Transaction<MerchantApiDatabase>, masterKey: MasterKey, merchant: SeedMerchant): Promise<SeedMerchantResult> {
  const existing = await trx.selectFrom('merchants').select('id').where('id', '=', merchant.id).forUpdate().executeTakeFirst();
  if (existing) await setMerchantStatus(trx, merchant.id, merchant.status);
  else await trx.insertInto('merchants').values({ id: merchant.id, status: merchant.status }).execute();
  const stored = await trx.selectFrom('merchant_keys').select(['sealed_key', 'revoked_at']).where('merchant_id', '=', merchant.id).execute();
  const active = new Set<string>();
  const revoked = new Set<string>();
  for (const row of stored) (row.revoked_at === null ? active : revoked).add(await openApiKey(masterKey, merchant.id, row.sealed_key));
  const result: SeedMerchantResult = { created: !existing, keysAdded: 0, keysLeftRevoked: 0 };
  for (const key of new Set(merchant.keys)) {
    if (active.has(key)) continue;
    if (revoked.has(key)) {
      result.keysLeftRevoked++;
      continue;
    }
    await trx.insertInto('merchant_keys').values({ merchant_id: merchant.id, sealed_key: await sealApiKey(masterKey, merchant.id, key), revoked_at: null }).execute();
    result.keysAdded++;
  }
  return result;
}
