/**
 * Where the handler reports what an operator must see: storage failures and
 * unexpected errors. Fields are codes and names only: never a key, a salt,
 * a credential or a user field (docs/protocol.md#storage-and-secrets).
 */
export interface Logger {
  info(event: string, fields?: Record<string, unknown>): void;
  warn(event: string, fields?: Record<string, unknown>): void;
  error(event: string, fields?: Record<string, unknown>): void;
}

/** One JSON line per event on the console: `{"level":"error","event":"storage_unavailable",...}`. */
export const consoleLogger: Logger = {
  info: (event, fields) => console.log(line('info', event, fields)),
  warn: (event, fields) => console.warn(line('warn', event, fields)),
  error: (event, fields) => console.error(line('error', event, fields)),
};

/** Logs nothing. */
export const silentLogger: Logger = { info() {}, warn() {}, error() {} };

function line(level: string, event: string, fields?: Record<string, unknown>): string {
  return JSON.stringify({ time: new Date().toISOString(), level, event, ...fields });
}

/**
 * What may be logged of an error: its name and code (`ECONNREFUSED`,
 * `ER_ACCESS_DENIED_ERROR`), never its message, which for a database error
 * can quote the values of the statement.
 */
export function describeError(error: unknown): { error: string; code?: string } {
  if (!(error instanceof Error)) return { error: typeof error };
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' ? { error: error.name, code } : { error: error.name };
}
