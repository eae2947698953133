/**
 * What the schema of the current database holds, read from `information_schema` (the same on
 * MySQL 8 and MariaDB): the checks by which a migration step finds its statement already applied
 * (resumable.ts).
 */
import { sql, type Kysely } from 'kysely';

/** True when `table` exists in the current database. */
export async function tableExists(db: Kysely<any>, table: string): Promise<boolean> {
  const { rows } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${table}`.execute(db);
  return Number(rows[0]?.n ?? 0) > 0;
}

/** True when `table` has every one of `columns`. */
export async function columnsExist(db: Kysely<any>, table: string, ...columns: string[]): Promise<boolean> {
  const { rows } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${table} AND COLUMN_NAME IN (${sql.join(columns)})`.execute(db);
  return Number(rows[0]?.n ?? 0) === columns.length;
}

/** True when `table` has none of `columns` (or does not exist). */
export async function columnsAbsent(db: Kysely<any>, table: string, ...columns: string[]): Promise<boolean> {
  const { rows } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM information_schema.COLUMNS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${table} AND COLUMN_NAME IN (${sql.join(columns)})`.execute(db);
  return Number(rows[0]?.n ?? 0) === 0;
}

/** True when `table` has an index (or primary or unique key) named `index`. */
export async function indexExists(db: Kysely<any>, table: string, index: string): Promise<boolean> {
  const { rows } = await sql<{ n: number | string }>`SELECT COUNT(*) AS n FROM information_schema.STATISTICS
    WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ${table} AND INDEX_NAME = ${index}`.execute(db);
  return Number(rows[0]?.n ?? 0) > 0;
}
