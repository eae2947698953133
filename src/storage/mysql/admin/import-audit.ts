/**
 * What an import changed for each merchant, for the audit trail: "what changed for merchant M"
 * is `audit list --merchant M`, so beside its one `import_completed` (or `import_stopped`) event an
 * import writes one `merchant_users_imported` event for each merchant whose users it inserted or
 * changed, with the counts (docs/cli.md#the-audit-trail). Counts only: never an id of a user.
 */
import type { Kysely, Transaction } from 'kysely';
import type { MerchantApiDatabase } from '../schema.js';
import { writeAuditEvents, type AuditEvent } from './audit.js';
import type { UpsertCounts } from './user-upsert.js';

export class MerchantImportCounts {
  readonly #counts: UpsertCounts['byMerchant'] = new Map();

  /** Adds what one committed batch did. */
  add(byMerchant: UpsertCounts['byMerchant']): void {
    for (const [merchantId, batch] of byMerchant) {
      const total = this.#counts.get(merchantId);
      if (!total) this.#counts.set(merchantId, { ...batch });
      else {
        total.inserted += batch.inserted;
        total.updated += batch.updated;
        total.unchanged += batch.unchanged;
      }
    }
  }

  /** One event per merchant whose users changed, in merchant order; none for a merchant the import left as it was. */
  events(kind: 'seed' | 'users'): AuditEvent[] {
    return [...this.#counts]
      .filter(([, counts]) => counts.inserted + counts.updated > 0)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([merchantId, counts]) => ({
        action: 'merchant_users_imported',
        merchantId,
        summary: { format: kind, users_inserted: counts.inserted, users_updated: counts.updated, users_unchanged: counts.unchanged },
      }));
  }

  /** Writes `events(kind)`: in the import's transaction where it has one (a seed), else after its last batch. */
  write(db: Kysely<MerchantApiDatabase> | Transaction<MerchantApiDatabase>, actor: string, kind: 'seed' | 'users'): Promise<void> {
    return writeAuditEvents(db, actor, this.events(kind));
  }
}
