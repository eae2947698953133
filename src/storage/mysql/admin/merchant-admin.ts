/**
 * Merchant administration on MySQL (the CLI's `merchant` commands and the
 * seed import). New keys are random and returned once; only their sealed
 * form is stored, with a public id and a fingerprint (key-ids.ts). A new
 * key works at once on running instances (a key their cache does not hold
 * makes them read the merchant again); every other change reaches them when
 * their key cache entry expires (`keyCacheTtlMs`).
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import { merchantIdProblem } from '../../contract.js';
import type { SeedMerchant } from '../../seed/seed.js';
import { generateApiKey, openApiKey, sealApiKey, type MasterKey } from '../../sql/key-sealing.js';
import type { MerchantApiDatabase } from '../schema.js';
import { canonicalColumn } from '../sql-values.js';
import { KEY_ID_PATTERN, keyFingerprint, newKeyId } from '../../sql/key-ids.js';

type Db = Kysely<MerchantApiDatabase> | Transaction<MerchantApiDatabase>;

/** An admin operation that cannot be done, with a `code` callers can switch on. */
export class MerchantAdminError extends Error {
  override name = 'MerchantAdminError';
  constructor(
    readonly code: 'merchant_exists' | 'merchant_not_found' | 'invalid_merchant_id' | 'key_not_found' | 'invalid_key_id',
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

/** Checks a new merchant id by the one rule (`merchantIdProblem`): throws `invalid_merchant_id` naming it. */
export function assertMerchantId(id: string): void {
  const problem = merchantIdProblem(id);
  if (problem !== undefined) throw new MerchantAdminError('invalid_merchant_id', `Merchant id ${JSON.stringify(id)}: ${problem}.`);
}

/** A key as `merchant keys` shows it: its public id and fingerprint, never the key. */
export interface MerchantKeySummary {
  key_id: string;
  /** First 8 bytes of the key's SHA-256, hex. */
  fingerprint: string;
  /** Canonical UTC timestamps (`YYYY-MM-DDTHH:MM:SS.ffffff+00:00`). */
  created_at: string;
  revoked_at: string | null;
  expires_at: string | null;
  /** Works now: not revoked, not past its end. */
  active: boolean;
}

/** A key added: the key itself (show it once) and how to name it later. */
export interface NewKey {
  apiKey: string;
  keyId: string;
  fingerprint: string;
}

/** The row of a new key: sealed, with its public id and fingerprint. */
async function newKeyRow(masterKey: MasterKey, merchantId: string, apiKey: string) {
  return { merchant_id: merchantId, sealed_key: await sealApiKey(masterKey, merchantId, apiKey), key_id: newKeyId(), fingerprint: keyFingerprint(apiKey), revoked_at: null };
}

/** Adds a given key to an existing merchant (a key a merchant already holds, or a test's); resolves to its id. */
export async function addMerchantKey(db: Db, masterKey: MasterKey, merchantId: string, apiKey: string): Promise<NewKey> {
  const row = await newKeyRow(masterKey, merchantId, apiKey);
  await db.insertInto('merchant_keys').values(row).execute();
  return { apiKey, keyId: row.key_id, fingerprint: row.fingerprint };
}

/**
 * Adds a merchant with a new random key; resolves to that key, which is
 * stored only sealed, so show it to the operator once.
 */
export async function addMerchant(db: Kysely<MerchantApiDatabase>, masterKey: MasterKey, id: string, options: { status?: 'active' | 'disabled' } = {}): Promise<NewKey> {
  assertMerchantId(id);
  const apiKey = generateApiKey();
  const row = await newKeyRow(masterKey, id, apiKey);
  await db.transaction().execute(async (trx) => {
    const existing = await trx.selectFrom('merchants').select('id').where('id', '=', id).forUpdate().executeTakeFirst();
    if (existing) throw new MerchantAdminError('merchant_exists', `Merchant "${id}" already exists.`);
    await trx.insertInto('merchants').values({ id, status: options.status ?? 'active' }).execute();
    await trx.insertInto('merchant_keys').values(row).execute();
  });
  return { apiKey, keyId: row.key_id, fingerprint: row.fingerprint };
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

/** How `rotateMerchantKey` treats the keys a merchant had. */
export interface RotateOptions {
  /** Revoke every older key now. */
  revokeOld?: boolean;
  /** Let every older key work this many more seconds, then stop (Stripe's "roll key"); an earlier end stays. */
  expireOldInSeconds?: number;
}

/** What a rotation did: the new key, and the older keys it revoked or gave an end. */
export interface RotateResult extends NewKey {
  revoked: number;
  /** Key ids of the older keys revoked or given an end. */
  oldKeyIds: string[];
  /** With `expireOldInSeconds`: when the older keys stop working (canonical UTC). */
  oldKeysExpireAt: string | undefined;
}

/**
 * Adds a new random key to a merchant; with `revokeOld`, revokes every key it had; with
 * `expireOldInSeconds`, lets them work until then. Resolves to the new key and what changed.
 */
export async function rotateMerchantKey(db: Kysely<MerchantApiDatabase>, masterKey: MasterKey, id: string, options: RotateOptions = {}): Promise<RotateResult> {
  if (options.revokeOld && options.expireOldInSeconds !== undefined) throw new TypeError('rotateMerchantKey: revokeOld and expireOldInSeconds exclude each other.');
  const apiKey = generateApiKey();
  const row = await newKeyRow(masterKey, id, apiKey);
  return db.transaction().execute(async (trx) => {
    const merchant = await trx.selectFrom('merchants').select('id').where('id', '=', id).forUpdate().executeTakeFirst();
    if (!merchant) throw new MerchantAdminError('merchant_not_found', `No merchant "${id}".`);
    const working = await workingKeys(trx, id).select('k.key_id').execute();
    const oldKeyIds = working.map((key) => key.key_id);
    let oldKeysExpireAt: string | undefined;
    if (options.revokeOld && oldKeyIds.length > 0) {
      await trx.updateTable('merchant_keys').set({ revoked_at: sql`UTC_TIMESTAMP(6)` }).where('key_id', 'in', oldKeyIds).execute();
    } else if (options.expireOldInSeconds !== undefined) {
      const end = sql<string>`UTC_TIMESTAMP(6) + INTERVAL ${options.expireOldInSeconds} SECOND`;
      if (oldKeyIds.length > 0) {
        await trx
          .updateTable('merchant_keys')
          .set({ expires_at: sql`LEAST(COALESCE(expires_at, ${end}), ${end})` })
          .where('key_id', 'in', oldKeyIds)
          .execute();
      }
      oldKeysExpireAt = (await sql<{ end: string }>`SELECT DATE_FORMAT(${end}, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS end`.execute(trx)).rows[0]!.end;
    }
    await trx.insertInto('merchant_keys').values(row).execute();
    return { apiKey, keyId: row.key_id, fingerprint: row.fingerprint, revoked: options.revokeOld ? oldKeyIds.length : 0, oldKeyIds, oldKeysExpireAt };
  });
}

/** The keys of a merchant that work now: not revoked, not past their end. */
function workingKeys(db: Db, merchantId: string) {
  return db
    .selectFrom('merchant_keys as k')
    .where('k.merchant_id', '=', merchantId)
    .where('k.revoked_at', 'is', null)
    .where((eb) => eb.or([eb('k.expires_at', 'is', null), eb('k.expires_at', '>', sql<string>`UTC_TIMESTAMP(6)`)]));
}

/**
 * Every key of a merchant, oldest first, by public id and fingerprint. Keys from before
 * migration 0004 have no fingerprint yet: theirs is computed here (opening them with the
 * master key) and stored. Throws `merchant_not_found`.
 */
export async function listMerchantKeys(db: Db, masterKey: MasterKey, merchantId: string): Promise<MerchantKeySummary[]> {
  await assertMerchantExists(db, merchantId);
  const rows = await db
    .selectFrom('merchant_keys')
    .select([
      'id',
      'key_id',
      'fingerprint',
      'sealed_key',
      canonicalColumn<string>('created_at').as('created_at'),
      canonicalColumn('revoked_at').as('revoked_at'),
      canonicalColumn('expires_at').as('expires_at'),
      sql<number>`revoked_at IS NULL AND (expires_at IS NULL OR expires_at > UTC_TIMESTAMP(6))`.as('active'),
    ])
    .where('merchant_id', '=', merchantId)
    .orderBy('id')
    .execute();
  const keys: MerchantKeySummary[] = [];
  for (const row of rows) {
    let fingerprint = row.fingerprint;
    if (fingerprint === null) {
      fingerprint = keyFingerprint(await openApiKey(masterKey, merchantId, row.sealed_key));
      await db.updateTable('merchant_keys').set({ fingerprint }).where('id', '=', row.id).execute();
    }
    keys.push({ key_id: row.key_id, fingerprint, created_at: row.created_at, revoked_at: row.revoked_at, expires_at: row.expires_at, active: Number(row.active) === 1 });
  }
  return keys;
}

/** Revokes one key by its public id; resolves to false when it was revoked already. Throws `merchant_not_found`, `key_not_found`. */
export async function revokeMerchantKey(db: Db, merchantId: string, keyId: string): Promise<boolean> {
  if (!KEY_ID_PATTERN.test(keyId)) throw new MerchantAdminError('invalid_key_id', `${JSON.stringify(keyId)} is not a key id: they look like key_0123456789ab (see \`merchant keys ID\`).`);
  await assertMerchantExists(db, merchantId);
  const key = await db.selectFrom('merchant_keys').select(['id', 'revoked_at']).where('merchant_id', '=', merchantId).where('key_id', '=', keyId).executeTakeFirst();
  if (!key) throw new MerchantAdminError('key_not_found', `Merchant "${merchantId}" has no key ${keyId} (see \`merchant keys ${merchantId}\`).`);
  if (key.revoked_at !== null) return false;
  await db.updateTable('merchant_keys').set({ revoked_at: sql`UTC_TIMESTAMP(6)` }).where('id', '=', key.id).where('revoked_at', 'is', null).execute();
  return true;
}

/** What deleting a merchant removed. */
export interface DeletedMerchant {
  keys: number;
  shares: number;
  /** Users no other merchant shared, removed with their last share. */
  users: number;
}

/** Shares removed per transaction when deleting a merchant: no lock held long, whatever its size. */
const DELETE_BATCH = 5000;

/**
 * Deletes a merchant with its keys, its user shares, the users no other merchant shares, and
 * its used salts. Shares go in batches of their own transactions, the merchant row last: if it
 * stops half way, running it again finishes it. Throws `merchant_not_found`.
 */
export async function deleteMerchant(db: Kysely<MerchantApiDatabase>, merchantId: string): Promise<DeletedMerchant> {
  await assertMerchantExists(db, merchantId);
  const deleted: DeletedMerchant = { keys: 0, shares: 0, users: 0 };
  for (;;) {
    const batch = await db.transaction().execute(async (trx) => {
      const shares = await trx.selectFrom('user_shares').select(['shared_user_id', 'user_id']).where('merchant_id', '=', merchantId).orderBy('shared_user_id').limit(DELETE_BATCH).forUpdate().execute();
      if (shares.length === 0) return 0;
      const last = shares.at(-1)!.shared_user_id;
      await trx.deleteFrom('user_shares').where('merchant_id', '=', merchantId).where('shared_user_id', '<=', last).execute();
      const userIds = [...new Set(shares.map((share) => String(share.user_id)))];
      const gone = await trx
        .deleteFrom('users')
        .where('id', 'in', userIds)
        .where(({ not, exists, selectFrom }) => not(exists(selectFrom('user_shares as s').select('s.user_id').whereRef('s.user_id', '=', 'users.id'))))
        .executeTakeFirst();
      deleted.users += Number(gone.numDeletedRows);
      return shares.length;
    });
    deleted.shares += batch;
    if (batch < DELETE_BATCH) break;
  }
  await db.transaction().execute(async (trx) => {
    const keys = await trx.deleteFrom('merchant_keys').where('merchant_id', '=', merchantId).executeTakeFirst();
    deleted.keys = Number(keys.numDeletedRows);
    await trx.deleteFrom('used_salts').where('merchant_id', '=', merchantId).execute();
    // Webhook events hold the merchant's view of its users: they go with it (its endpoints and their
    // deliveries follow the merchant row by foreign key). Not indexed by merchant: a rare command, a bounded table.
    await trx.deleteFrom('webhook_events').where('merchant_id', '=', merchantId).execute();
    await trx.deleteFrom('merchants').where('id', '=', merchantId).execute();
  });
  return deleted;
}

async function assertMerchantExists(db: Db, id: string): Promise<void> {
  const found = await db.selectFrom('merchants').select('id').where('id', '=', id).executeTakeFirst();
  if (!found) throw new MerchantAdminError('merchant_not_found', `No merchant "${id}".`);
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
      // Revoked, or past the end a roll gave it: no longer working.
      sql<string>`COUNT(CASE WHEN k.revoked_at IS NOT NULL OR k.expires_at <= UTC_TIMESTAMP(6) THEN 1 END)`.as('revoked'),
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
  /** An existing merchant whose status the import changed (only with `setStatus`). */
  statusChanged: boolean;
  /** An existing merchant whose status differs from the file's and was left as it is. */
  statusKept: boolean;
  keysAdded: number;
  /** Seed keys matching a revoked key: left revoked, an import never revives a key. */
  keysLeftRevoked: number;
}

/**
 * Upserts a seed merchant: creates it with the seed's status, and adds each seed key it does
 * not hold yet (compared in the clear after opening the stored ones, since sealing is
 * randomised). Keys absent from the seed are kept. An existing merchant keeps its status
 * (an operator may have disabled it) unless `setStatus`: then it takes the seed's.
 */
export async function upsertSeedMerchant(trx: Transaction<MerchantApiDatabase>, masterKey: MasterKey, merchant: SeedMerchant, options: { setStatus?: boolean } = {}): Promise<SeedMerchantResult> {
  assertMerchantId(merchant.id);
  const existing = await trx.selectFrom('merchants').select(['id', 'status']).where('id', '=', merchant.id).forUpdate().executeTakeFirst();
  const differs = existing !== undefined && existing.status !== merchant.status;
  if (differs && options.setStatus) await setMerchantStatus(trx, merchant.id, merchant.status);
  if (!existing) await trx.insertInto('merchants').values({ id: merchant.id, status: merchant.status }).execute();
  const stored = await trx.selectFrom('merchant_keys').select(['sealed_key', 'revoked_at']).where('merchant_id', '=', merchant.id).execute();
  const active = new Set<string>();
  const revoked = new Set<string>();
  for (const row of stored) (row.revoked_at === null ? active : revoked).add(await openApiKey(masterKey, merchant.id, row.sealed_key));
  const result: SeedMerchantResult = { created: !existing, statusChanged: differs && Boolean(options.setStatus), statusKept: differs && !options.setStatus, keysAdded: 0, keysLeftRevoked: 0 };
  for (const key of new Set(merchant.keys)) {
    if (active.has(key)) continue;
    if (revoked.has(key)) {
      result.keysLeftRevoked++;
      continue;
    }
    await addMerchantKey(trx, masterKey, merchant.id, key);
    result.keysAdded++;
  }
  return result;
}
