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
import { canonicalColumn, toSqlDatetime } from '../sql-values.js';
import { KEY_ID_PATTERN, keyFingerprint, newKeyId } from '../../sql/key-ids.js';
import { retryOnConflict, retryUnlessInTransaction } from '../write-conflicts.js';
import { KEY_SCOPES, TEST_KEY_PREFIX, type KeyMode, type KeyScope } from '../../key-limits.js';
import { allowFromColumn, keyInfoOf, scopesColumn } from '../statements/key-rows.js';
import { writeAuditEvent, type AuditValue } from './audit.js';
import { testSaltNamespace } from '../../test-changes.js';

/** The actor of a change made without one (a program calling these functions): docs/cli.md#the-audit-trail. */
export const LIBRARY_ACTOR = 'library';

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
  /** What the operator called it; null if unnamed. */
  name: string | null;
  /** Its scopes (every scope unless limited). */
  scopes: KeyScope[];
  /** When it was last used, to within about a minute; null if not seen in use. */
  last_used_at: string | null;
  /** The networks it may be used from (canonical CIDR); empty: anywhere. */
  allow_from: string[];
  /** `test`: it reaches the test dataset only (docs/test-mode.md); else `live`. */
  mode: KeyMode;
}

/** A key added: the key itself (show it once) and how to name it later. */
export interface NewKey {
  apiKey: string;
  keyId: string;
  fingerprint: string;
}

/**
 * What an operator may set on a key (docs/cli.md#keys): a name, scopes, networks (canonical
 * CIDR, checked by `parseAllowFrom`), an end. Absent: unchanged on `updateMerchantKey`, and on a
 * new key no name, every scope, anywhere, no end. `null` clears (name, end); an empty
 * `allowFrom` is anywhere again.
 */
export interface KeySettings {
  name?: string | null;
  scopes?: readonly KeyScope[];
  allowFrom?: readonly string[];
  /** The end, canonical UTC; or `expiresInSeconds` from the database's now. */
  expiresAt?: string | null;
  expiresInSeconds?: number;
  /** The key's public id (a seed's own), else a new random one. */
  keyId?: string;
  /**
   * `test`: the key reaches the merchant's test dataset only, and a new random key starts with
   * `test_` (docs/test-mode.md). Set when a key is made, never changed after: default live.
   */
  mode?: KeyMode;
}

/** The columns `settings` sets (only those it names). */
function settingsColumns(settings: KeySettings) {
  const columns: Record<string, unknown> = {};
  if (settings.name !== undefined) columns.name = settings.name;
  if (settings.scopes !== undefined) columns.scopes = scopesColumn(settings.scopes);
  if (settings.allowFrom !== undefined) columns.allow_from = allowFromColumn(settings.allowFrom);
  if (settings.expiresAt !== undefined) columns.expires_at = settings.expiresAt === null ? null : toSqlDatetime(settings.expiresAt);
  if (settings.expiresInSeconds !== undefined) columns.expires_at = sql`UTC_TIMESTAMP(6) + INTERVAL ${Math.floor(settings.expiresInSeconds)} SECOND`;
  return columns as { name?: string | null; scopes?: string | null; allow_from?: string | null; expires_at?: string | null };
}

/** What the audit trail records of key settings: which were set, and to what (scopes, networks, end; never the name itself). */
export function settingsSummary(settings: KeySettings | undefined, expiresAt?: string | null): Record<string, AuditValue> {
  const summary: Record<string, AuditValue> = {};
  if (settings?.name !== undefined) summary.name_changed = true;
  if (settings?.scopes !== undefined) summary.scopes = [...settings.scopes];
  if (settings?.allowFrom !== undefined) summary.allow_from = [...settings.allowFrom];
  if (expiresAt !== undefined) summary.expires_at = expiresAt;
  if (settings?.mode === 'test') summary.mode = 'test';
  return summary;
}

/** The row of a new key: sealed, with its public id, fingerprint and settings. */
export async function newKeyRow(masterKey: MasterKey, merchantId: string, apiKey: string, settings: KeySettings = {}) {
  return {
    merchant_id: merchantId,
    sealed_key: await sealApiKey(masterKey, merchantId, apiKey),
    key_id: settings.keyId ?? newKeyId(),
    fingerprint: keyFingerprint(apiKey),
    revoked_at: null,
    ...(settings.mode === 'test' && { mode: 'test' as const }),
    ...settingsColumns(settings),
  };
}

/** Adds a given key to an existing merchant (a key a merchant already holds, or a test's); resolves to its id. */
export async function addMerchantKey(db: Db, masterKey: MasterKey, merchantId: string, apiKey: string, settings: KeySettings = {}): Promise<NewKey> {
  const row = await newKeyRow(masterKey, merchantId, apiKey, settings);
  await retryUnlessInTransaction(db, () => db.insertInto('merchant_keys').values(row).execute());
  return { apiKey, keyId: row.key_id, fingerprint: row.fingerprint };
}

/**
 * Adds a new random key beside the merchant's others (`merchant add-key`); resolves to it (show it
 * once) with its end as stored. Throws `merchant_not_found`.
 */
export async function addRandomMerchantKey(db: Kysely<MerchantApiDatabase>, masterKey: MasterKey, merchantId: string, settings: KeySettings = {}, actor = LIBRARY_ACTOR): Promise<NewKey & { expiresAt: string | null }> {
  // A test key is recognisable at a glance (docs/test-mode.md): its secret says so.
  const apiKey = settings.mode === 'test' ? `${TEST_KEY_PREFIX}${generateApiKey()}` : generateApiKey();
  return retryOnConflict(() => db.transaction().execute(async (trx) => {
    await assertMerchantExists(trx, merchantId, true);
    const added = await addMerchantKey(trx, masterKey, merchantId, apiKey, settings);
    const expiresAt = await keyEnd(trx, added.keyId);
    await writeAuditEvent(trx, actor, { action: 'key_added', merchantId, keyId: added.keyId, summary: settingsSummary(settings, expiresAt) });
    return { ...added, expiresAt };
  }));
}

/** A key's end as stored (canonical), or null. */
async function keyEnd(db: Db, keyId: string): Promise<string | null> {
  const row = await db.selectFrom('merchant_keys').select(canonicalColumn('expires_at').as('expires_at')).where('key_id', '=', keyId).executeTakeFirst();
  return row?.expires_at ?? null;
}

/** What `updateMerchantKey` changed: the fields whose value differs now (empty: nothing changed). */
export interface KeyUpdate {
  changed: string[];
}

/**
 * Changes a key's name, scopes, networks or end (`merchant update-key`); a revoked key cannot be
 * changed. Throws `merchant_not_found`, `key_not_found`, `invalid_key_id`.
 */
export async function updateMerchantKey(outer: Kysely<MerchantApiDatabase>, merchantId: string, keyId: string, settings: KeySettings, actor = LIBRARY_ACTOR): Promise<KeyUpdate> {
  if (!KEY_ID_PATTERN.test(keyId)) throw new MerchantAdminError('invalid_key_id', `${JSON.stringify(keyId)} is not a key id: they look like key_0123456789ab (see \`merchant keys ID\`).`);
  return retryOnConflict(() => outer.transaction().execute(async (db) => {
    await assertMerchantExists(db, merchantId, true);
    const select = () =>
      db
        .selectFrom('merchant_keys')
        .select(['id', 'name', 'scopes', 'allow_from', canonicalColumn('expires_at').as('expires_at')])
        .where('merchant_id', '=', merchantId)
        .where('key_id', '=', keyId)
        .where('revoked_at', 'is', null)
        .executeTakeFirst();
    const before = await select();
    if (!before) throw new MerchantAdminError('key_not_found', `Merchant "${merchantId}" has no working key ${keyId} (see \`merchant keys ${merchantId}\`).`);
    const columns = settingsColumns({ ...settings, keyId: undefined });
    if (Object.keys(columns).length > 0) await db.updateTable('merchant_keys').set(columns).where('id', '=', before.id).execute();
    const after = (await select())!;
    const changed = (['name', 'scopes', 'allow_from', 'expires_at'] as const).filter((field) => before[field] !== after[field]);
    // Nothing changed, nothing recorded: the trail holds changes.
    if (changed.length > 0) {
      const summary: Record<string, AuditValue> = { changed };
      if (changed.includes('scopes')) summary.scopes = after.scopes === null ? [...KEY_SCOPES] : after.scopes.split(',');
      if (changed.includes('allow_from')) summary.allow_from = after.allow_from === null ? [] : after.allow_from.split(',');
      if (changed.includes('expires_at')) summary.expires_at = after.expires_at;
      await writeAuditEvent(db, actor, { action: 'key_updated', merchantId, keyId, summary });
    }
    return { changed };
  }));
}

/**
 * Adds a merchant with a new random key; resolves to that key, which is
 * stored only sealed, so show it to the operator once.
 */
export async function addMerchant(db: Kysely<MerchantApiDatabase>, masterKey: MasterKey, id: string, options: { status?: 'active' | 'disabled'; key?: KeySettings; actor?: string } = {}): Promise<NewKey & { expiresAt: string | null }> {
  assertMerchantId(id);
  const apiKey = generateApiKey();
  const row = await newKeyRow(masterKey, id, apiKey, options.key);
  const expiresAt = await retryOnConflict(() => db.transaction().execute(async (trx) => {
    const existing = await trx.selectFrom('merchants').select('id').where('id', '=', id).forUpdate().executeTakeFirst();
    if (existing) throw new MerchantAdminError('merchant_exists', `Merchant "${id}" already exists.`);
    await trx.insertInto('merchants').values({ id, status: options.status ?? 'active' }).execute();
    await trx.insertInto('merchant_keys').values(row).execute();
    // The key's end as stored, so what is printed and recorded is what the servers compare.
    const end = await keyEnd(trx, row.key_id);
    await writeAuditEvent(trx, options.actor ?? LIBRARY_ACTOR, { action: 'merchant_added', merchantId: id, keyId: row.key_id, summary: { status: options.status ?? 'active', ...settingsSummary(options.key, end ?? undefined) } });
    return end;
  }));
  return { apiKey, keyId: row.key_id, fingerprint: row.fingerprint, expiresAt };
}

/**
 * Enables or disables a merchant; resolves to false when it had that status already (nothing
 * changed, nothing recorded). Throws `merchant_not_found`. Given a `Kysely`, the change and its
 * audit event are one transaction; given a transaction (the import), it runs in it and records
 * nothing of its own (the import's summary does).
 */
export async function setMerchantStatus(db: Db, id: string, status: 'active' | 'disabled', actor?: string): Promise<boolean> {
  const change = async (trx: Db): Promise<boolean> => {
    const found = await trx.selectFrom('merchants').select(['id', 'status']).where('id', '=', id).forUpdate().executeTakeFirst();
    if (!found) throw new MerchantAdminError('merchant_not_found', `No merchant "${id}".`);
    if (found.status === status) return false;
    await trx.updateTable('merchants').set({ status, updated_at: sql`UTC_TIMESTAMP(6)` }).where('id', '=', id).execute();
    if (!db.isTransaction) await writeAuditEvent(trx, actor ?? LIBRARY_ACTOR, { action: status === 'active' ? 'merchant_enabled' : 'merchant_disabled', merchantId: id });
    return true;
  };
  return db.isTransaction ? change(db) : retryOnConflict(() => db.transaction().execute(change));
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
  /** When the new key stops working, as stored (canonical UTC); null: never. */
  expiresAt: string | null;
}

/**
 * Adds a new random key to a merchant; with `revokeOld`, revokes every key it had; with
 * `expireOldInSeconds`, lets them work until then. Resolves to the new key and what changed.
 */
export async function rotateMerchantKey(db: Kysely<MerchantApiDatabase>, masterKey: MasterKey, id: string, options: RotateOptions & { key?: KeySettings; actor?: string } = {}): Promise<RotateResult> {
  if (options.revokeOld && options.expireOldInSeconds !== undefined) throw new TypeError('rotateMerchantKey: revokeOld and expireOldInSeconds exclude each other.');
  const apiKey = generateApiKey();
  const row = await newKeyRow(masterKey, id, apiKey, options.key);
  return retryOnConflict(() => db.transaction().execute(async (trx) => {
    const merchant = await trx.selectFrom('merchants').select('id').where('id', '=', id).forUpdate().executeTakeFirst();
    if (!merchant) throw new MerchantAdminError('merchant_not_found', `No merchant "${id}".`);
    const working = await workingKeys(trx, id).select('k.key_id').execute();
    const oldKeyIds = working.map((key) => key.key_id);
    let oldKeysExpireAt: string | undefined;
    if (options.revokeOld && oldKeyIds.length > 0) {
      await trx.updateTable('merchant_keys').set({ revoked_at: sql`UTC_TIMESTAMP(6)` }).where('key_id', 'in', oldKeyIds).execute();
    } else if (options.expireOldInSeconds !== undefined) {
      // The end is read once and written as read: what is printed is what is stored, to the microsecond.
      oldKeysExpireAt = (await sql<{ end: string }>`SELECT DATE_FORMAT(UTC_TIMESTAMP(6) + INTERVAL ${options.expireOldInSeconds} SECOND, '%Y-%m-%dT%H:%i:%s.%f+00:00') AS end`.execute(trx)).rows[0]!.end;
      const end = toSqlDatetime(oldKeysExpireAt);
      if (oldKeyIds.length > 0) {
        await trx
          .updateTable('merchant_keys')
          .set({ expires_at: sql`LEAST(COALESCE(expires_at, ${end}), ${end})` })
          .where('key_id', 'in', oldKeyIds)
          .execute();
      }
    }
    await trx.insertInto('merchant_keys').values(row).execute();
    const newEnd = await keyEnd(trx, row.key_id);
    const old: Record<string, AuditValue> = options.revokeOld ? { revoked_key_ids: oldKeyIds } : options.expireOldInSeconds !== undefined ? { expiring_key_ids: oldKeyIds, old_keys_expire_at: oldKeysExpireAt ?? null } : {};
    await writeAuditEvent(trx, options.actor ?? LIBRARY_ACTOR, { action: 'key_rotated', merchantId: id, keyId: row.key_id, summary: { ...old, ...settingsSummary(options.key, newEnd) } });
    return { apiKey, keyId: row.key_id, fingerprint: row.fingerprint, revoked: options.revokeOld ? oldKeyIds.length : 0, oldKeyIds, oldKeysExpireAt, expiresAt: newEnd };
  }));
}

/** The keys of a merchant that work now: not revoked, not past their end. */
export function workingKeys(db: Db, merchantId: string) {
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
      canonicalColumn('last_used_at').as('last_used_at'),
      'name',
      'scopes',
      'allow_from',
      'mode',
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
    const info = keyInfoOf({ ...row, created_at: row.created_at });
    keys.push({ key_id: row.key_id, fingerprint, name: row.name, scopes: info.scopes, created_at: row.created_at, expires_at: row.expires_at, last_used_at: row.last_used_at, revoked_at: row.revoked_at, allow_from: info.allow_from, active: Number(row.active) === 1, mode: info.mode });
  }
  return keys;
}

/** Revokes one key by its public id; resolves to false when it was revoked already. Throws `merchant_not_found`, `key_not_found`. */
export async function revokeMerchantKey(outer: Kysely<MerchantApiDatabase>, merchantId: string, keyId: string, actor = LIBRARY_ACTOR): Promise<boolean> {
  if (!KEY_ID_PATTERN.test(keyId)) throw new MerchantAdminError('invalid_key_id', `${JSON.stringify(keyId)} is not a key id: they look like key_0123456789ab (see \`merchant keys ID\`).`);
  return retryOnConflict(() => outer.transaction().execute(async (db) => {
    await assertMerchantExists(db, merchantId, true);
    const key = await db.selectFrom('merchant_keys').select(['id', 'revoked_at']).where('merchant_id', '=', merchantId).where('key_id', '=', keyId).forUpdate().executeTakeFirst();
    if (!key) throw new MerchantAdminError('key_not_found', `Merchant "${merchantId}" has no key ${keyId} (see \`merchant keys ${merchantId}\`).`);
    if (key.revoked_at !== null) return false;
    await db.updateTable('merchant_keys').set({ revoked_at: sql`UTC_TIMESTAMP(6)` }).where('id', '=', key.id).where('revoked_at', 'is', null).execute();
    await writeAuditEvent(db, actor, { action: 'key_revoked', merchantId, keyId });
    return true;
  }));
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
export async function deleteMerchant(db: Kysely<MerchantApiDatabase>, merchantId: string, actor = LIBRARY_ACTOR): Promise<DeletedMerchant> {
  await assertMerchantExists(db, merchantId);
  const deleted: DeletedMerchant = { keys: 0, shares: 0, users: 0 };
  for (;;) {
    const batch = await retryOnConflict(() => db.transaction().execute(async (trx) => {
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
    }));
    deleted.shares += batch;
    if (batch < DELETE_BATCH) break;
  }
  await retryOnConflict(() => db.transaction().execute(async (trx) => {
    const keys = await trx.deleteFrom('merchant_keys').where('merchant_id', '=', merchantId).executeTakeFirst();
    deleted.keys = Number(keys.numDeletedRows);
    await trx.deleteFrom('used_salts').where('merchant_id', '=', merchantId).execute();
    // Its test dataset's changes (docs/test-mode.md) and its test salts, kept under their own name.
    await trx.deleteFrom('test_user_changes').where('merchant_id', '=', merchantId).execute();
    await trx.deleteFrom('used_salts').where('merchant_id', '=', testSaltNamespace(merchantId)).execute();
    // Webhook events hold the merchant's view of its users: they go with it (its endpoints and their
    // deliveries follow the merchant row by foreign key). Not indexed by merchant: a rare command, a bounded table.
    await trx.deleteFrom('webhook_events').where('merchant_id', '=', merchantId).execute();
    await trx.deleteFrom('merchants').where('id', '=', merchantId).execute();
    await writeAuditEvent(trx, actor, { action: 'merchant_deleted', merchantId, summary: { keys: deleted.keys, shares: deleted.shares, users: deleted.users } });
  }));
  return deleted;
}

async function assertMerchantExists(db: Db, id: string, lock = false): Promise<void> {
  const select = db.selectFrom('merchants').select('id').where('id', '=', id);
  const found = await (lock ? select.forUpdate() : select).executeTakeFirst();
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
  const added = new Set<string>();
  for (const [i, key] of merchant.keys.entries()) {
    if (active.has(key) || added.has(key)) continue;
    if (revoked.has(key)) {
      result.keysLeftRevoked++;
      continue;
    }
    // A seed key given as an object keeps its name, scopes, networks and end (a plain one: every scope).
    const details = merchant.keyDetails?.[i];
    await addMerchantKey(trx, masterKey, merchant.id, key, {
      ...(details?.name !== undefined && { name: details.name }),
      ...(details?.limits?.scopes !== undefined && { scopes: details.limits.scopes }),
      ...(details?.limits?.allowFrom !== undefined && { allowFrom: details.limits.allowFrom }),
      ...(details?.limits?.expiresAt !== undefined && { expiresAt: details.limits.expiresAt }),
      ...(details?.limits?.mode === 'test' && { mode: 'test' as const }),
    });
    added.add(key);
    result.keysAdded++;
  }
  return result;
}
