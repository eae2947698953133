/**
 * How the hot statements reach MySQL: one user by its key and one salt (docs/benchmarks.md#mysql).
 * On a Kysely built by `createMysqlKysely` they go straight to its `mysql2` pool as prepared
 * statements (binary protocol: the server parses each once per connection), under the same
 * query timeout: Kysely's compile and connection layers and the text protocol cost the read a
 * large part of a raw prepared primary-key read's rate. On any other Kysely the same SQL text runs through
 * Kysely, so a caller's own pool keeps working unchanged. Only the fixed statement texts of this
 * package are prepared, so each connection holds a handful of server-side statements at most.
 */
import { CompiledQuery, type Kysely } from 'kysely';

/** Rows of a SELECT; affected rows of a write (0 for a SELECT). */
export interface StatementResult<R> {
  rows: R[];
  affectedRows: number;
}

/**
 * Runs one statement with `?` placeholders. `prepared: false` sends it as text: for statements
 * whose text varies (a multi-row INSERT), which would otherwise fill the statement cache.
 */
export type RunStatement = <R>(sql: string, parameters: readonly unknown[], options?: { prepared?: boolean }) => Promise<StatementResult<R>>;

const direct = new WeakMap<object, RunStatement>();

/** Called by `createMysqlKysely`: statements on `db` may bypass Kysely through `run`. */
export function registerDirectRunner(db: Kysely<any>, run: RunStatement): void {
  direct.set(db, run);
}

/** The runner for `db`: direct when `createMysqlKysely` built it, else through Kysely. */
export function statementRunner(db: Kysely<any>): RunStatement {
  return (
    direct.get(db) ??
    (async <R>(text: string, parameters: readonly unknown[]) => {
      const result = await db.executeQuery<R>(CompiledQuery.raw(text, [...parameters]));
      return { rows: result.rows as R[], affectedRows: Number(result.numAffectedRows ?? 0n) };
    })
  );
}
