/**
 * Conversions between the API's canonical values and MySQL's, in one place,
 * plus the error mapping: every failure leaves the storage as a
 * `StorageUnavailableError` whose message names no value (docs/protocol.md#storage-and-secrets:
 * nothing secret or personal in a log) but says what to do.
 */
import { sql, type RawBuilder } from 'kysely';
import { createHash } from 'node:crypto';
import { MAX_ID_LENGTH } from '../contract.js';

/** `2019-12-12T12:19:17.193961+00:00` -> `2019-12-12 12:19:17.193961` (both UTC). */
export function toSqlDatetime(canonical: string): string {
  return `${canonical.slice(0, 10)} ${canonical.slice(11, 26)}`;
}

/** `2019-12-12 12:19:17.193` (UTC, up to 6 fraction digits) -> `2019-12-12T12:19:17.193000+00:00`. */
export function fromSqlDatetime(text: string): string {
  const [date, time = '00:00:00'] = text.split(' ');
  const [whole, fraction = ''] = time.split('.');
  return `${date}T${whole}.${fraction.padEnd(6, '0').slice(0, 6)}+00:00`;
}

/** The canonical form of a UTC `DATETIME(6)` column, formatted by the server so no driver setting can lose digits. */
export function canonicalColumn<T extends string | null = string | null>(column: string): RawBuilder<T> {
  return sql<T>`DATE_FORMAT(${sql.ref(column)}, '%Y-%m-%dT%H:%i:%s.%f+00:00')`;
}

/** Unix seconds -> `DATETIME(6)` text in UTC. */
export function unixToSqlDatetime(seconds: number): string {
  const whole = Math.floor(seconds);
  const micros = String(Math.round((seconds - whole) * 1e6)).padStart(6, '0');
  return `${new Date(whole * 1000).toISOString().slice(0, 19).replace('T', ' ')}.${micros}`;
}

/** True when `id` can be a stored merchant id or shared_user_id (longer ones cannot exist). */
export function isStorableId(id: string): boolean {
  return id.length > 0 && id.length <= MAX_ID_LENGTH;
}

/**
 * The form a salt is stored in. Salts up to `MAX_ID_LENGTH` are kept whole
 * (never cut: measured a cut salt accepted twice). A longer
 * one is kept as a tagged SHA-256, so the storage accepts every salt the
 * handler does; only the merchant's own salts could ever meet the tag.
 */
export function storedSalt(salt: string): string {
  if (salt.length <= MAX_ID_LENGTH) return salt;
  return `\u0001sha256:${createHash('sha256').update(salt, 'utf8').digest('base64url')}`;
}

// The error mapping lives apart, without Kysely, so the command line can load it without the peers.
export { mysqlErrorCode, storageError } from './storage-error.js';
