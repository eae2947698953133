/**
 * The MySQL error mapping: every driver failure leaves the storage as a
 * `StorageUnavailableError` whose message names no value (docs/protocol.md#storage-and-secrets)
 * but says what to do. No Kysely or mysql2 import: the command line loads it
 * (through src/cli-internal.ts) for commands that need neither.
 */
import { StorageUnavailableError } from '../../errors.js';

/** MySQL error codes that mean the server is gone, slow or refusing us: the 503 family. */
const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'PROTOCOL_CONNECTION_LOST',
  'PROTOCOL_SEQUENCE_TIMEOUT',
  'ER_CONNECTION_KILLED',
  'ER_CON_COUNT_ERROR',
  'ER_SERVER_SHUTDOWN',
  'ER_LOCK_WAIT_TIMEOUT',
  'ER_LOCK_DEADLOCK',
]);

/** The MySQL error code of `error`, if it has one. */
export function mysqlErrorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * Wraps a driver error. The cause keeps the code and errno only: mysql2
 * errors carry the SQL text with its values, and ER_DUP_ENTRY echoes a value.
 */
export function storageError(error: unknown, operation: string): Error {
  if (error instanceof StorageUnavailableError) return error;
  const code = mysqlErrorCode(error);
  const errno = (error as { errno?: unknown } | null)?.errno;
  const cause = Object.assign(new Error(`${code ?? 'unknown'}${typeof errno === 'number' ? ` (errno ${errno})` : ''}`), { code, errno });
  let hint = '';
  if (code === 'ER_NO_SUCH_TABLE' || code === 'ER_BAD_FIELD_ERROR') hint = ': the schema is missing or old, run `merchant-api migrate`';
  else if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') hint = ': the MySQL host name does not resolve (DNS)';
  // 1047: a Galera node that is not Synced (joining, or cut off from the primary component) refuses every query.
  else if (code === 'ER_UNKNOWN_COM_ERROR') hint = ': this Galera node refuses queries (not Synced, or wsrep_reject_queries set); another node answers until it has rejoined';
  else if (code !== undefined && UNREACHABLE.has(code)) hint = ': MySQL is unreachable or too slow';
  else if ((error as Error | null)?.message === 'Pool is closed.') hint = ': the pool is closed';
  // The driver's code stays on the cause: the error's own code is `storage_unavailable`, which
  // the renderer answers as the generic 503 with Retry-After, and the access log, hooks and traces
  // report; only the operator's `storage_unavailable` event reads the cause's code (describeError).
  return new StorageUnavailableError(`MySQL ${operation} failed (${code ?? 'no code'})${hint}.`, { cause });
}
