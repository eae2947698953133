/**
 * Erasure (docs/cli.md#erasure): a person's shares with one merchant or with every merchant go,
 * and the person's record with the last of them. Each erasure is one transaction with its audit
 * event; what it says is counts, never a field. Afterwards the user answers 404 for the merchant
 * and is absent from its lists, exports and `updated_since` results: the share row is what every
 * read joins on.
 */
import { type Kysely, type Transaction } from 'kysely';
import type { MerchantApiDatabase } from '../schema.js';
import { writeAuditEvent, writeAuditEvents } from './audit.js';
import { erasureSubject } from './erasure-subject.js';
import type { MasterKey } from '../../sql/key-sealing.js';
import { LIBRARY_ACTOR } from './merchant-admin.js';
import { retryOnConflict } from '../write-conflicts.js';
import { eraseWebhookEvents, writeUnsharedEvent } from '../webhooks/outbox-writes.js';
import { writeShareRemovals } from '../statements/share-removals.js';
import { compareCodePoints } from '../../order.js';

/** One share: which merchant saw the person under which id. */
export interface ErasedShare {
  merchantId: string;
  sharedUserId: string;
}

/** What an erasure removed (or, dry, would remove). */
export interface ErasureResult {
  /** Shares removed. */
  shares: number;
  /** Person records removed: those no share remained for. */
  users: number;
  /** Merchants that lost a share. */
  merchants: number;
}

/** The shares to remove and the person rows they belong to. */
interface Found {
  shares: (ErasedShare & { userId: string })[];
}

/**
 * The shares `sharedUserId` names: with `merchantId`, that one share; without, every share of
 * every person any merchant shares under that id (the person with every merchant, whatever id
 * each one uses).
 */
async function findShares(trx: Transaction<MerchantApiDatabase>, sharedUserId: string, merchantId: string | undefined): Promise<Found> {
  let named = trx.selectFrom('user_shares').select(['merchant_id', 'shared_user_id', 'user_id']).where('shared_user_id', '=', sharedUserId);
  if (merchantId !== undefined) named = named.where('merchant_id', '=', merchantId);
  const direct = await named.forUpdate().execute();
  if (merchantId !== undefined || direct.length === 0) return { shares: direct.map(share) };
  const userIds = [...new Set(direct.map((row) => String(row.user_id)))];
  const every = await trx.selectFrom('user_shares').select(['merchant_id', 'shared_user_id', 'user_id']).where('user_id', 'in', userIds).forUpdate().execute();
  return { shares: every.map(share) };
}

function share(row: { merchant_id: string; shared_user_id: string; user_id: string | number }) {
  return { merchantId: row.merchant_id, sharedUserId: row.shared_user_id, userId: String(row.user_id) };
}

/**
 * Removes `shares` in the transaction `trx`, and every person record no share remains for;
 * resolves to how many records went. The one place every erasure removes shares (`user erase`,
 * `import --erase`): what must happen with each removed (merchant_id, shared_user_id) pair
 * inside the erasure's transaction happens here: its events leave the webhook outbox and a
 * `user.unshared` event is written for the merchant's endpoints that receive it, and the removal's
 * tombstone for the change feed (`include_removed=true`, docs/protocol.md#removals).
 */
export async function removeShares(trx: Transaction<MerchantApiDatabase>, shares: readonly (ErasedShare & { userId: string })[]): Promise<number> {
  if (shares.length === 0) return 0;
  for (const { merchantId, sharedUserId } of shares) {
    await trx.deleteFrom('user_shares').where('merchant_id', '=', merchantId).where('shared_user_id', '=', sharedUserId).execute();
    // The outbox keeps no copy of the person's record, and the merchant hears of the removal
    // (`user.unshared`, docs/webhooks.md): in this transaction, so neither happens without the other.
    await eraseWebhookEvents(trx, merchantId, sharedUserId);
    await writeUnsharedEvent(trx, merchantId, sharedUserId);
  }
  // Tombstones for poll-only merchants, one stamp per merchant, after its shares are gone.
  const byMerchant = new Map<string, string[]>();
  for (const { merchantId, sharedUserId } of shares) byMerchant.set(merchantId, [...(byMerchant.get(merchantId) ?? []), sharedUserId]);
  // In merchant id order, as an import locks them.
  for (const [merchantId, ids] of [...byMerchant].sort(([a], [b]) => compareCodePoints(a, b))) await writeShareRemovals(trx, merchantId, ids);
  const userIds = [...new Set(shares.map((s) => s.userId))];
  const gone = await trx
    .deleteFrom('users')
    .where('id', 'in', userIds)
    .where(({ not, exists, selectFrom }) => not(exists(selectFrom('user_shares as s').select('s.user_id').whereRef('s.user_id', '=', 'users.id'))))
    .executeTakeFirst();
  return Number(gone.numDeletedRows);
}

/** How many person records would go with `shares`: those with no share left besides them. */
async function usersLeftWithout(trx: Transaction<MerchantApiDatabase>, shares: readonly (ErasedShare & { userId: string })[]): Promise<number> {
  const userIds = [...new Set(shares.map((s) => s.userId))];
  if (userIds.length === 0) return 0;
  const rows = await trx.selectFrom('user_shares').select(['user_id', 'merchant_id', 'shared_user_id']).where('user_id', 'in', userIds).execute();
  const removed = new Set(shares.map((s) => `${s.merchantId}\u0000${s.sharedUserId}`));
  const keeps = new Set(rows.filter((row) => !removed.has(`${row.merchant_id}\u0000${row.shared_user_id}`)).map((row) => String(row.user_id)));
  return userIds.filter((id) => !keeps.has(id)).length;
}

/**
 * Erases the person shared as `sharedUserId`: with `merchantId`, the share with that merchant;
 * without, the person's shares with every merchant. `dryRun` says what would go and changes
 * nothing (and records nothing). One transaction, with its audit event.
 */
/**
 * What the audit trail records of an erasure beside its counts: with the master key, the
 * `subject` (a keyed hash of the shared user id: erasure-subject.ts); an operator's `reason`.
 */
export interface ErasureRecordOptions {
  actor?: string;
  masterKey?: MasterKey;
  reason?: string;
}

export async function eraseUser(db: Kysely<MerchantApiDatabase>, sharedUserId: string, options: { merchantId?: string; dryRun?: boolean } & ErasureRecordOptions = {}): Promise<ErasureResult> {
  // A transaction that lost a write conflict (a deadlock, a Galera certification failure) erased nothing: run it again.
  return retryOnConflict(() => db.transaction().execute(async (trx) => {
    const { shares } = await findShares(trx, sharedUserId, options.merchantId);
    const merchants = new Set(shares.map((s) => s.merchantId)).size;
    if (options.dryRun) return { shares: shares.length, users: await usersLeftWithout(trx, shares), merchants };
    const users = await removeShares(trx, shares);
    const result = { shares: shares.length, users, merchants };
    // An erasure that found nothing changed nothing, and is not recorded.
    if (shares.length > 0) await writeAuditEvent(trx, options.actor ?? LIBRARY_ACTOR, { action: 'user_erased', merchantId: options.merchantId ?? null, summary: { scope: options.merchantId === undefined ? 'every_merchant' : 'one_merchant', ...result, ...recorded(options, sharedUserId) } });
    return result;
  }));
}

/**
 * Erases a batch of (merchant, shared id) pairs (`import --erase`): each pair's share, and the
 * person records left without one. One transaction per batch, with one audit event of its counts.
 */
export async function eraseShares(db: Kysely<MerchantApiDatabase>, pairs: readonly ErasedShare[], options: { dryRun?: boolean } & ErasureRecordOptions = {}): Promise<ErasureResult> {
  // A transaction that lost a write conflict (a deadlock, a Galera certification failure) erased nothing: run it again.
  return retryOnConflict(() => db.transaction().execute(async (trx) => {
    const found: (ErasedShare & { userId: string })[] = [];
    for (const { merchantId, sharedUserId } of pairs) {
      const row = await trx.selectFrom('user_shares').select(['merchant_id', 'shared_user_id', 'user_id']).where('merchant_id', '=', merchantId).where('shared_user_id', '=', sharedUserId).forUpdate().executeTakeFirst();
      if (row) found.push(share(row));
    }
    const merchants = new Set(found.map((s) => s.merchantId)).size;
    if (options.dryRun) return { shares: found.length, users: await usersLeftWithout(trx, found), merchants };
    const users = await removeShares(trx, found);
    const result = { shares: found.length, users, merchants };
    if (found.length > 0) {
      const actor = options.actor ?? LIBRARY_ACTOR;
      await writeAuditEvent(trx, actor, { action: 'users_erased', summary: { requested: pairs.length, ...result, ...(options.reason === undefined ? {} : { reason: options.reason }) } });
      // With the master key, one event per share, so that each person's erasure can be found by its subject.
      if (options.masterKey) await writeAuditEvents(trx, actor, found.map(({ merchantId, sharedUserId }) => ({ action: 'user_erased', merchantId, summary: { scope: 'one_merchant', via: 'import_erase', shares: 1, ...recorded(options, sharedUserId) } })));
    }
    return result;
  }));
}

/** The subject (with a master key) and the reason (if given) of an erasure's audit event. */
function recorded(options: ErasureRecordOptions, sharedUserId: string): Record<string, string> {
  return {
    ...(options.masterKey ? { subject: erasureSubject(options.masterKey, sharedUserId) } : {}),
    ...(options.reason === undefined ? {} : { reason: options.reason }),
  };
}
