/**
 * A merchant's changes to its own keys on MySQL (`Storage.createKey` and the rest,
 * docs/protocol.md#managing-keys): new keys random and sealed with the master key as
 * `merchant add-key` seals them, each change audited in its own transaction with the key that
 * made it (`key_id`, the actor `merchant:ID key:KEY_ID`; the key changed is in the summary).
 *
 * The rules that read the merchant's other keys (the most working keys, the last key with
 * `keys:manage`) are checked inside the transaction after the merchant's row is locked and written
 * (`updated_at`): two changes of one merchant's keys at once run one after the other on one
 * server, and on a Galera cluster the second to commit fails certification on that row and runs
 * again (`retryOnConflict`), then seeing the first. So two revocations of the last two managing
 * keys cannot both pass.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import { MerchantApiError } from '../../../errors.js';
import type { CreatedMerchantKey, KeyChangeOptions, KeyInfo, KeyPatch, KeyRotation, NewMerchantKey, RotatedMerchantKey } from '../../contract.js';
import { TEST_KEY_PREFIX } from '../../key-limits.js';
import { cannotGive, LAST_KEY_MANAGER, MAX_ACTIVE_KEYS, TOO_MANY_KEYS } from '../../key-changes.js';
import { generateApiKey, type MasterKey } from '../../sql/key-sealing.js';
import { LIBRARY_ACTOR, newKeyRow, settingsSummary, workingKeys } from '../admin/merchant-admin.js';
import { writeAuditEvent, type AuditValue } from '../admin/audit.js';
import type { MerchantApiDatabase } from '../schema.js';
import { canonicalColumn, isStorableId, storageError, toSqlDatetime } from '../sql-values.js';
import { retryOnConflict } from '../write-conflicts.js';
import { allowFromColumn, keyInfoOf } from './key-rows.js';

type Db = Kysely<MerchantApiDatabase>;
type Trx = Transaction<MerchantApiDatabase>;

/** Runs one change in a transaction retried on a write conflict; the API's own refusals pass through, a driver failure is a 503. */
async function change<T>(db: Db, what: string, body: (trx: Trx) => Promise<T>): Promise<T> {
  try {
    return await retryOnConflict(() => db.transaction().execute(body));
  } catch (error) {
    if (error instanceof MerchantApiError) throw error;
    throw storageError(error, what);
  }
}

/** Locks the merchant's row by writing it (see the file's comment); false when there is no such merchant. */
async function lockMerchant(trx: Trx, merchantId: string): Promise<boolean> {
  const found = await trx.selectFrom('merchants').select('id').where('id', '=', merchantId).forUpdate().executeTakeFirst();
  if (!found) return false;
  await trx.updateTable('merchants').set({ updated_at: sql`UTC_TIMESTAMP(6)` }).where('id', '=', merchantId).execute();
  return true;
}

/** The merchant's working keys, with what the rules read: id, scopes column. */
function workingRows(trx: Trx, merchantId: string) {
  return workingKeys(trx, merchantId).select(['k.id', 'k.key_id', 'k.name', 'k.scopes', 'k.allow_from', 'k.mode', canonicalColumn('k.expires_at').as('expires_at')]).orderBy('k.id').execute();
}

/** One key as listed, read in the transaction of its change. */
async function keyInfo(trx: Trx, keyId: string): Promise<KeyInfo> {
  const row = await trx
    .selectFrom('merchant_keys as k')
    .select(['k.key_id', 'k.name', 'k.scopes', 'k.allow_from', 'k.mode', canonicalColumn<string>('k.created_at').as('created_at'), canonicalColumn('k.expires_at').as('expires_at'), canonicalColumn('k.last_used_at').as('last_used_at')])
    .where('k.key_id', '=', keyId)
    .executeTakeFirstOrThrow();
  return keyInfoOf(row);
}

/** Who made the change: the actor, and its key for the row's `key_id`. */
function actorOf(options: KeyChangeOptions | undefined): { actor: string; keyId: string | null } {
  return { actor: options?.actor ?? LIBRARY_ACTOR, keyId: options?.keyId ?? null };
}

/** True for a scopes column (NULL: every scope) that holds `keys:manage`. */
function managesKeys(scopes: string | null): boolean {
  return scopes === null || scopes.split(',').includes('keys:manage');
}

/** `Storage.createKey` on MySQL: undefined when the merchant is gone. */
export async function createMerchantKey(db: Db, masterKey: MasterKey, request: NewMerchantKey): Promise<CreatedMerchantKey | undefined> {
  const mode = request.mode ?? 'live';
  const secret = mode === 'test' ? `${TEST_KEY_PREFIX}${generateApiKey()}` : generateApiKey();
  const settings = { name: request.name, scopes: request.scopes, allowFrom: request.allowFrom, expiresAt: request.expiresAt, mode };
  const row = await newKeyRow(masterKey, request.merchantId, secret, settings);
  const { actor, keyId } = actorOf(request);
  return change(db, 'key creation', async (trx) => {
    if (!(await lockMerchant(trx, request.merchantId))) return undefined;
    if ((await workingRows(trx, request.merchantId)).length >= MAX_ACTIVE_KEYS) throw TOO_MANY_KEYS;
    await trx.insertInto('merchant_keys').values(row).execute();
    const info = await keyInfo(trx, row.key_id);
    await writeAuditEvent(trx, actor, { action: 'key_added', merchantId: request.merchantId, keyId, summary: { new_key_id: row.key_id, ...settingsSummary(settings, info.expires_at) } });
    return { ...info, secret };
  });
}

/** `Storage.rotateKey` on MySQL: undefined when the merchant has no working key with this id. */
export async function rotateMerchantKeyById(db: Db, masterKey: MasterKey, rotation: KeyRotation): Promise<RotatedMerchantKey | undefined> {
  const { merchantId, rotatedKeyId } = rotation;
  if (!isStorableId(merchantId)) return undefined;
  const { actor, keyId } = actorOf(rotation);
  const overlap = rotation.oldExpiresAt > rotation.now;
  return change(db, 'key rotation', async (trx) => {
    if (!(await lockMerchant(trx, merchantId))) return undefined;
    const working = await workingRows(trx, merchantId);
    const old = working.find((key) => key.key_id === rotatedKeyId);
    if (old === undefined) return undefined;
    const oldInfo = keyInfoOf({ ...old, created_at: '', last_used_at: null });
    const lacking = oldInfo.scopes.find((scope) => !rotation.mayGive.includes(scope));
    if (lacking !== undefined) throw cannotGive(lacking);
    if (overlap && working.length >= MAX_ACTIVE_KEYS) throw TOO_MANY_KEYS;
    // The new key: the old one's name, scopes, networks and mode (sealed here: inside the transaction, a retry seals again).
    const secret = oldInfo.mode === 'test' ? `${TEST_KEY_PREFIX}${generateApiKey()}` : generateApiKey();
    const settings = { name: old.name, scopes: oldInfo.scopes, allowFrom: oldInfo.allow_from, expiresAt: rotation.expiresAt, mode: oldInfo.mode };
    const row = await newKeyRow(masterKey, merchantId, secret, settings);
    let oldEnd: string;
    if (overlap) {
      // An earlier end of the old key stays: a rotation never makes a key last longer.
      oldEnd = old.expires_at !== null && old.expires_at < rotation.oldExpiresAt ? old.expires_at : rotation.oldExpiresAt;
      await trx.updateTable('merchant_keys').set({ expires_at: toSqlDatetime(oldEnd) }).where('id', '=', old.id).execute();
    } else {
      oldEnd = rotation.now;
      await trx.updateTable('merchant_keys').set({ revoked_at: sql`UTC_TIMESTAMP(6)` }).where('id', '=', old.id).execute();
    }
    await trx.insertInto('merchant_keys').values(row).execute();
    const info = await keyInfo(trx, row.key_id);
    const summary: Record<string, AuditValue> = { new_key_id: row.key_id, ...(overlap ? { expiring_key_ids: [old.key_id], old_keys_expire_at: oldEnd } : { revoked_key_ids: [old.key_id] }), ...settingsSummary(settings, info.expires_at) };
    await writeAuditEvent(trx, actor, { action: 'key_rotated', merchantId, keyId, summary });
    return { ...info, secret, old_key_id: old.key_id, old_key_expires_at: oldEnd };
  });
}

/** `Storage.revokeKey` on MySQL: false when the merchant has no working key with this id; the last key with `keys:manage` is 409. */
export async function revokeMerchantKeyById(db: Db, merchantId: string, revokedKeyId: string, options?: KeyChangeOptions): Promise<boolean> {
  if (!isStorableId(merchantId)) return false;
  const { actor, keyId } = actorOf(options);
  return change(db, 'key revocation', async (trx) => {
    if (!(await lockMerchant(trx, merchantId))) return false;
    const working = await workingRows(trx, merchantId);
    const revoked = working.find((key) => key.key_id === revokedKeyId);
    if (revoked === undefined) return false;
    if (managesKeys(revoked.scopes) && !working.some((key) => key !== revoked && managesKeys(key.scopes))) throw LAST_KEY_MANAGER;
    await trx.updateTable('merchant_keys').set({ revoked_at: sql`UTC_TIMESTAMP(6)` }).where('id', '=', revoked.id).execute();
    await writeAuditEvent(trx, actor, { action: 'key_revoked', merchantId, keyId, summary: { key_id: revoked.key_id } });
    return true;
  });
}

/** `Storage.updateKey` on MySQL: the key after, or undefined when the merchant has no working key with this id. Nothing changed, nothing recorded. */
export async function updateMerchantKeyById(db: Db, merchantId: string, changedKeyId: string, patch: KeyPatch, options?: KeyChangeOptions): Promise<KeyInfo | undefined> {
  if (!isStorableId(merchantId)) return undefined;
  const { actor, keyId } = actorOf(options);
  return change(db, 'key update', async (trx) => {
    if (!(await lockMerchant(trx, merchantId))) return undefined;
    const key = (await workingRows(trx, merchantId)).find((row) => row.key_id === changedKeyId);
    if (key === undefined) return undefined;
    const columns: { name?: string | null; allow_from?: string | null } = {};
    if (patch.name !== undefined && patch.name !== key.name) columns.name = patch.name;
    if (patch.allowFrom !== undefined && allowFromColumn(patch.allowFrom) !== key.allow_from) columns.allow_from = allowFromColumn(patch.allowFrom);
    if (Object.keys(columns).length > 0) {
      await trx.updateTable('merchant_keys').set(columns).where('id', '=', key.id).execute();
      const changed = Object.keys(columns);
      const summary: Record<string, AuditValue> = { key_id: key.key_id, changed, ...(columns.allow_from !== undefined && { allow_from: [...(patch.allowFrom ?? [])] }) };
      await writeAuditEvent(trx, actor, { action: 'key_updated', merchantId, keyId, summary });
    }
    return keyInfo(trx, key.key_id);
  });
}
