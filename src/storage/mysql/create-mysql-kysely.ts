/**
 * Builds a `Kysely` on a `mysql2` pool from a `mysql://` URL, for the
 * standalone server and the CLI. Library users may bring their own Kysely:
 * the storage never depends on these settings for correctness (it formats
 * timestamps in SQL), only for failure behaviour (docs/protocol.md#failures).
 */
import { Kysely, MysqlDialect, type MysqlPool, type MysqlPoolConnection } from 'kysely';
import { createPool, type Pool, type PoolConnection, type PoolOptions, type QueryOptions } from 'mysql2';
import { openInfile } from './admin/infile.js';
import type { MerchantApiDatabase } from './schema.js';
import { registerDirectRunner, type RunStatement, type StatementResult } from './statements/statement-runner.js';

/** Options of `createMysqlKysely`; URL query parameters of the same names override the defaults too. */
export interface MysqlKyselyOptions {
  /** Pool size (default 10: a larger pool gained nothing, docs/benchmarks.md#figures-behind-choices-in-the-code). */
  connectionLimit?: number;
  /** Milliseconds to open a connection before giving up (default 5000). */
  connectTimeout?: number;
  /**
   * Milliseconds a query may take (default 5000; 0 = none, for migrations and
   * imports). A connection whose query timed out is destroyed, not reused:
   * its state is unknown and a half-dead socket would hang the next query.
   */
  queryTimeout?: number;
  /** Passed to mysql2 as is (TLS to a managed database, for example). */
  ssl?: PoolOptions['ssl'];
}

/**
 * A `Kysely<MerchantApiDatabase>` on a new `mysql2` pool. Destroy it
 * (`db.destroy()`) to end the pool.
 *
 * @example
 * const db = createMysqlKysely('mysql://app:secret@db.internal:3306/merchant_api');
 * const storage = new MysqlStorage({ db, masterKey: parseMasterKey(process.env.MASTER_KEY) });
 */
export function createMysqlKysely(url: string, options: MysqlKyselyOptions = {}): Kysely<MerchantApiDatabase> {
  const config = parseMysqlUrl(url, options);
  const pool = createMysqlPool(config);
  const wrapped = new WeakMap<PoolConnection, MysqlPoolConnection>();
  const timedPool: MysqlPool = {
    getConnection(callback) {
      pool.getConnection((error, connection) => {
        if (error) return callback(error, undefined as never);
        let wrapper = wrapped.get(connection);
        if (!wrapper) wrapped.set(connection, (wrapper = withQueryTimeout(connection, config.queryTimeout)));
        callback(null, wrapper);
      });
    },
    end(callback) {
      pool.end(callback);
    },
  };
  const db = new Kysely<MerchantApiDatabase>({ dialect: new MysqlDialect({ pool: timedPool }) });
  registerDirectRunner(db, directRunner(pool, config.queryTimeout));
  poolSizes.set(db, config.connectionLimit);
  return db;
}

const poolSizes = new WeakMap<object, number>();

/** The connections of a Kysely built by `createMysqlKysely`; undefined for any other. */
export function poolSizeOf(db: object): number | undefined {
  return poolSizes.get(db);
}

/**
 * The `mysql2` pool under `createMysqlKysely`, with its session settings; also what
 * `bench:mysql` reads through as its raw reference, so both use the same pool.
 */
export function createMysqlPool(config: MysqlConfig): Pool {
  const pool = createPool({
    host: config.host,
    port: config.port,
    user: config.user,
    password: config.password,
    database: config.database,
    charset: 'utf8mb4_unicode_ci',
    // No value passes through a JS Date (it keeps only milliseconds) and no BIGINT through a float.
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
    decimalNumbers: false,
    timezone: 'Z',
    connectionLimit: config.connectionLimit,
    maxIdle: config.connectionLimit,
    idleTimeout: 60_000,
    connectTimeout: config.connectTimeout,
    enableKeepAlive: true,
    keepAliveInitialDelay: 10_000,
    // Imports bulk-load with LOAD DATA LOCAL INFILE from memory; no file is ever read from disk.
    infileStreamFactory: openInfile,
    ...(config.ssl === undefined ? {} : { ssl: config.ssl }),
  });
  pool.on('connection', (connection) => {
    // Strict, so a value that does not fit fails instead of being cut; UTC, so
    // UTC_TIMESTAMP and any implicit conversion agree with what we store.
    connection.query(
      "SET SESSION sql_mode = 'STRICT_ALL_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION', time_zone = '+00:00'",
      (error) => {
        if (error) connection.destroy();
      },
    );
    // The server stops a statement too when the query timeout passes, so no
    // query keeps a connection (and its locks) busy after its caller gave
    // up: MariaDB's max_statement_time (seconds), else MySQL's
    // max_execution_time (milliseconds, SELECT only).
    if (config.queryTimeout > 0) {
      connection.query(`SET SESSION max_statement_time = ${config.queryTimeout / 1000}`, (error: { errno?: number } | null) => {
        if (error?.errno === 1193) connection.query(`SET SESSION max_execution_time = ${config.queryTimeout}`, () => undefined);
      });
    }
  });
  return pool;
}

/** The hot statements straight on the pool (`statement-runner.ts`), under the same timeout rule as Kysely's queries. */
function directRunner(pool: Pool, timeout: number): RunStatement {
  return <R>(text: string, parameters: readonly unknown[], options?: { prepared?: boolean }) =>
    new Promise<StatementResult<R>>((resolve, reject) => {
      pool.getConnection((error, connection) => {
        if (error) return reject(error);
        const done = (failure: { code?: string } | null, result: unknown) => {
          if (failure?.code === 'PROTOCOL_SEQUENCE_TIMEOUT') connection.destroy();
          else connection.release();
          if (failure) return reject(failure);
          resolve(Array.isArray(result) ? { rows: result as R[], affectedRows: 0 } : { rows: [], affectedRows: (result as { affectedRows: number }).affectedRows });
        };
        const command: QueryOptions = timeout > 0 ? { sql: text, timeout } : { sql: text };
        if (options?.prepared === false) connection.query(command, parameters as never, done as never);
        else connection.execute(command, parameters as never, done as never);
      });
    });
}

function withQueryTimeout(connection: PoolConnection, timeout: number): MysqlPoolConnection {
  return {
    query(sql: string, parameters: unknown[], callback?: (error: unknown, result: any) => void): any {
      const options = timeout > 0 ? { sql, timeout } : { sql };
      if (!callback) return connection.query(options, parameters);
      connection.query(options, parameters, (error: any, result: any) => {
        if (error?.code === 'PROTOCOL_SEQUENCE_TIMEOUT') connection.destroy();
        callback(error, result);
      });
    },
    release() {
      connection.release();
    },
  } as MysqlPoolConnection;
}

export interface MysqlConfig {
  host: string;
  port: number;
  user: string;
  password: string;
  database: string | undefined;
  connectionLimit: number;
  connectTimeout: number;
  queryTimeout: number;
  ssl: PoolOptions['ssl'] | undefined;
}

/**
 * Reads `mysql://user:password@host:port/database?connectionLimit=10&connectTimeout=5000&queryTimeout=5000&ssl=true`.
 * Throws a message that never repeats the password.
 */
export function parseMysqlUrl(url: string, options: MysqlKyselyOptions = {}): MysqlConfig {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new TypeError('DATABASE_URL must be a URL like mysql://user:password@host:3306/database');
  }
  if (parsed.protocol !== 'mysql:' && parsed.protocol !== 'mariadb:') {
    throw new TypeError(`DATABASE_URL must start with mysql:// (got ${parsed.protocol}//)`);
  }
  const query = parsed.searchParams;
  const number = (name: keyof MysqlKyselyOptions, fallback: number): number => {
    const text = query.get(name);
    const value = text === null ? (options[name] as number | undefined) ?? fallback : Number(text);
    if (!Number.isInteger(value) || value < 0) throw new TypeError(`DATABASE_URL parameter ${name} must be a whole number`);
    return value;
  };
  const sslParam = query.get('ssl');
  const ssl = sslParam === null ? options.ssl : sslParam === 'true' ? { rejectUnauthorized: true } : sslParam === 'false' ? undefined : parseSsl(sslParam);
  const database = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
  return {
    host: parsed.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1',
    port: parsed.port === '' ? 3306 : Number(parsed.port),
    user: decodeURIComponent(parsed.username) || 'root',
    password: decodeURIComponent(parsed.password),
    database: database === '' ? undefined : database,
    connectionLimit: Math.max(1, number('connectionLimit', 10)),
    connectTimeout: number('connectTimeout', 5000),
    queryTimeout: number('queryTimeout', 5000),
    ssl,
  };
}

function parseSsl(text: string): PoolOptions['ssl'] {
  try {
    return JSON.parse(text) as PoolOptions['ssl'];
  } catch {
    throw new TypeError('DATABASE_URL parameter ssl must be true, false or a JSON object of mysql2 ssl options');
  }
}
