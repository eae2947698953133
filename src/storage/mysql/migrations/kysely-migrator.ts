/**
 * Kysely's `Migrator`, from whichever release of the peer is installed:
 * 0.28 exports it from `kysely`, 0.29 only from `kysely/migration` (a
 * subpath 0.28 does not have). A named import of either would fail to link on
 * the other release, for every command that loads the storage, so the class
 * is looked up on the namespace and the subpath is imported only when needed.
 * The types are our own, in the shape both releases share, so that the
 * declarations of `merchant-api/storage/mysql` mean the same with either.
 */
import * as kysely from 'kysely';
import type { Kysely } from 'kysely';

/** One schema change: what Kysely's `Migration` is in 0.28 and 0.29. */
export interface Migration {
  up(db: Kysely<any>): Promise<void>;
  down?(db: Kysely<any>): Promise<void>;
}

export interface MigrationProvider {
  getMigrations(): Promise<Record<string, Migration>>;
}

export interface MigrationResult {
  readonly migrationName: string;
  readonly direction: 'Up' | 'Down';
  readonly status: 'Success' | 'Error' | 'NotExecuted';
}

export interface MigrationResultSet {
  readonly error?: unknown;
  readonly results?: MigrationResult[];
}

export interface MigrationInfo {
  readonly name: string;
  readonly migration: Migration;
  readonly executedAt: Date | undefined;
}

export interface MigratorProps {
  readonly db: Kysely<any>;
  readonly provider: MigrationProvider;
  readonly migrationTableName?: string;
  readonly migrationLockTableName?: string;
}

/** The part of Kysely's `Migrator` merchant-api uses and offers. */
export interface MerchantApiMigrator {
  getMigrations(): Promise<readonly MigrationInfo[]>;
  migrateToLatest(): Promise<MigrationResultSet>;
  migrateTo(targetMigrationName: string): Promise<MigrationResultSet>;
  migrateUp(): Promise<MigrationResultSet>;
  migrateDown(): Promise<MigrationResultSet>;
}

type MigratorClass = new (props: MigratorProps) => MerchantApiMigrator;

// A variable, so that neither TypeScript (with 0.28's types) nor a bundler resolves the subpath ahead of time.
const MIGRATION_SUBPATH = 'kysely/migration';
let loaded: Promise<MigratorClass> | undefined;

/** The installed Kysely's `Migrator` class. */
export function loadMigratorClass(): Promise<MigratorClass> {
  loaded ??= (async () => {
    const fromRoot = (kysely as Record<string, unknown>)['Migrator'];
    if (typeof fromRoot === 'function') return fromRoot as MigratorClass;
    const module = (await import(MIGRATION_SUBPATH)) as { Migrator?: unknown };
    if (typeof module.Migrator !== 'function') throw new Error('kysely: no Migrator in kysely or kysely/migration; merchant-api supports kysely 0.28 and 0.29.');
    return module.Migrator as MigratorClass;
  })();
  return loaded;
}

/** A `MerchantApiMigrator` made at once, whose Kysely `Migrator` is loaded on its first call. */
export function lazyMigrator(props: MigratorProps): MerchantApiMigrator {
  let migrator: Promise<MerchantApiMigrator> | undefined;
  const instance = () => (migrator ??= loadMigratorClass().then((Migrator) => new Migrator(props)));
  return {
    getMigrations: async () => (await instance()).getMigrations(),
    migrateToLatest: async () => (await instance()).migrateToLatest(),
    migrateTo: async (name) => (await instance()).migrateTo(name),
    migrateUp: async () => (await instance()).migrateUp(),
    migrateDown: async () => (await instance()).migrateDown(),
  };
}
