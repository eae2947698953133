/**
 * The MySQL commands' database access, and how their failures read: one line that says what to do, never a key, a user field or SQL.
 */
import type { Kysely } from 'kysely';
import { StorageUnavailableError } from '../../index.js';
import {
  createMysqlKysely,
  ImportValidationError,
  MasterKeyError,
  MerchantAdminError,
  type MerchantApiDatabase,
  type MysqlKyselyOptions,
} from '../../storage/mysql/index.js';
import { storageError } from '../../cli-internal.js';
import type { MysqlConfig } from '../config.js';
import type { CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';

/** DATABASE_URL, or a usage error saying what it looks like. */
export function databaseUrl(config: MysqlConfig): string {
  if (!config.databaseUrl) throw new CliUsageError('DATABASE_URL is not set: e.g. DATABASE_URL=mysql://user:password@127.0.0.1:3306/merchant_api');
  if (URL.canParse(config.databaseUrl) && /^\/?$/.test(new URL(config.databaseUrl).pathname)) {
    throw new CliUsageError('DATABASE_URL names no database: add it as the path, e.g. mysql://user:password@127.0.0.1:3306/merchant_api');
  }
  return config.databaseUrl;
}

/** Runs `work` on a Kysely for DATABASE_URL and ends the pool afterwards. */
export async function withDatabase<T>(config: MysqlConfig, work: (db: Kysely<MerchantApiDatabase>) => Promise<T>, options: MysqlKyselyOptions = {}): Promise<T> {
  let db: Kysely<MerchantApiDatabase>;
  try {
    // Administration may run long statements (migrations, big batches): no query timeout.
    db = createMysqlKysely(databaseUrl(config), { connectionLimit: 2, queryTimeout: 0, ...options });
  } catch (error) {
    if (error instanceof TypeError) throw new CliUsageError(error.message);
    throw error;
  }
  try {
    return await work(db);
  } finally {
    await db.destroy().catch(() => undefined);
  }
}

/** Runs a command body; known failures become one line on stderr and exit code 1. */
export async function runMysqlCommand(io: CliIo, operation: string, body: () => Promise<number>): Promise<number> {
  try {
    return await body();
  } catch (error) {
    if (error instanceof CliUsageError) throw error;
    const problem = configurationProblem(error, io.env.DATABASE_URL);
    // A configuration problem, as a bad variable is: exit 2 (docs/cli.md).
    if (problem) throw new CliUsageError(`${operation} failed: ${problem}`);
    io.err(`${operation} failed: ${failureMessage(error, operation)}`);
    return 1;
  }
}

/**
 * A driver error that DATABASE_URL (or `options.variable`) causes, named with its database, user and
 * host (never its password); undefined for any other error. With
 * `dnsAgainIsTransient` (serve, which keeps running and retries), EAI_AGAIN,
 * a resolver that did not answer, is left to the caller as an outage: only
 * ENOTFOUND says the name does not exist.
 */
export function configurationProblem(error: unknown, url: string | undefined, options: { dnsAgainIsTransient?: boolean; variable?: string } = {}): string | undefined {
  const variable = options.variable ?? 'DATABASE_URL';
  if (!url || !URL.canParse(url)) return undefined;
  const { host, hostname, username, pathname } = new URL(url);
  const user = decodeURIComponent(username);
  const database = decodeURIComponent(pathname.slice(1));
  const codes = [error, (error as { cause?: unknown } | null)?.cause].map((e) => (e as { code?: unknown } | null | undefined)?.code);
  const code = codes.find((c): c is string => typeof c === 'string' && c !== 'storage_unavailable');
  switch (code) {
    case 'ER_BAD_DB_ERROR':
      return `the database "${database}" does not exist on ${host} (${variable}): create it, or fix the name.`;
    case 'ER_ACCESS_DENIED_ERROR':
      return `access denied for user "${user}" on ${host} (${variable}): a wrong user or password.`;
    case 'ER_DBACCESS_DENIED_ERROR':
      return `user "${user}" may not use the database "${database}" on ${host} (${variable}): grant it the privileges (docs/mysql.md).`;
    case 'EAI_AGAIN':
      if (options.dnsAgainIsTransient) return undefined;
    // falls through
    case 'ENOTFOUND':
      return `the host "${hostname}" of ${variable} is not found (DNS ${code}).`;
    default:
      return undefined;
  }
}

function failureMessage(error: unknown, operation: string): string {
  if (error instanceof MerchantAdminError || error instanceof MasterKeyError || error instanceof StorageUnavailableError) return error.message;
  if (error instanceof ImportValidationError) return error.message;
  // A driver error: its text may quote SQL values, so only its code goes out.
  return storageError(error, operation).message;
}
