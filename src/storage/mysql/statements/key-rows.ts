/**
 * A key's limits and metadata as `merchant_keys` holds them (migration 0007), read and written in
 * one place: scopes and networks as comma-separated text (NULL: every scope, anywhere), and the
 * batched `last_used_at` write.
 */
import { sql, type Kysely } from 'kysely';
import type { KeyInfo, KeyUse } from '../../contract.js';
import { KEY_SCOPES, limitsNothing, type KeyLimits, type KeyScope } from '../../key-limits.js';
import type { MerchantApiDatabase } from '../schema.js';
import { toSqlDatetime } from '../sql-values.js';

/** The `scopes` column of a key with these scopes: NULL for every scope (as every key before 0007). */
export function scopesColumn(scopes: readonly KeyScope[] | undefined): string | null {
  return scopes === undefined || KEY_SCOPES.every((scope) => scopes.includes(scope)) ? null : KEY_SCOPES.filter((scope) => scopes.includes(scope)).join(',');
}

/** The `allow_from` column of these (canonical) networks: NULL for anywhere. */
export function allowFromColumn(networks: readonly string[] | undefined): string | null {
  return networks === undefined || networks.length === 0 ? null : networks.join(',');
}

function scopesOf(column: string | null): KeyScope[] {
  if (column === null) return [...KEY_SCOPES];
  const named = column.split(',');
  return KEY_SCOPES.filter((scope) => named.includes(scope));
}

function networksOf(column: string | null): string[] {
  return column === null || column === '' ? [] : column.split(',');
}

/** The limits of a key row, or undefined when it has none (`expiresAt` canonical). */
export function keyLimitsOf(scopes: string | null, allowFrom: string | null, expiresAt: string | null, mode: string | null = 'live'): KeyLimits | undefined {
  const limits: KeyLimits = {
    ...(mode === 'test' && { mode: 'test' as const }),
    ...(scopes !== null && { scopes: Object.freeze(scopesOf(scopes)) }),
    ...(allowFrom !== null && allowFrom !== '' && { allowFrom: Object.freeze(networksOf(allowFrom)) }),
    ...(expiresAt !== null && { expiresAt }),
  };
  return limitsNothing(limits) ? undefined : Object.freeze(limits);
}

/** A key row (timestamps already canonical) as `KeyInfo`. */
export function keyInfoOf(row: { key_id: string; name: string | null; scopes: string | null; allow_from: string | null; created_at: string; expires_at: string | null; last_used_at: string | null; mode: string }): KeyInfo {
  return {
    key_id: row.key_id,
    name: row.name,
    scopes: scopesOf(row.scopes),
    created_at: row.created_at,
    expires_at: row.expires_at,
    last_used_at: row.last_used_at,
    allow_from: networksOf(row.allow_from),
    mode: row.mode === 'test' ? 'test' : 'live',
  };
}

/**
 * One `UPDATE` for a batch of uses: each key's `last_used_at` becomes the later of what it holds
 * and the use (instances write in any order, and a late batch never moves it back).
 */
export async function recordKeyUses(db: Kysely<MerchantApiDatabase>, uses: readonly KeyUse[]): Promise<void> {
  const latest = new Map<string, string>();
  for (const use of uses) {
    const held = latest.get(use.keyId);
    if (held === undefined || held < use.at) latest.set(use.keyId, use.at);
  }
  if (latest.size === 0) return;
  const cases = sql.join([...latest].map(([keyId, at]) => sql`WHEN ${keyId} THEN ${toSqlDatetime(at)}`), sql` `);
  const ids = sql.join([...latest.keys()].map((keyId) => sql`${keyId}`));
  await sql`UPDATE merchant_keys SET last_used_at = GREATEST(COALESCE(last_used_at, '1000-01-01'), CAST(CASE key_id ${cases} END AS DATETIME(6))) WHERE key_id IN (${ids})`.execute(db);
}
