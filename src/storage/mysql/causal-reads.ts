/**
 * Reads that must see the cluster's latest commit (docs/mysql.md#galera-cluster). A Galera node
 * applies the other nodes' write sets a moment after they commit, so a read there may miss a
 * merchant or a key just added on another node; the merchant cache would then keep that miss for
 * its whole time (measured: a merchant added through node 1 still 404 on node 2 two seconds later).
 * The reads that decide what the cache holds, a merchant with its keys and the list of merchant
 * ids, run as `SET STATEMENT wsrep_sync_wait=1 FOR SELECT …` on a Galera node: the node first
 * applies every write set committed anywhere before the read. They are rare (once per merchant per
 * key cache time, and on a key miss once a second), so the wait costs the hot path nothing. On a
 * server that is no Galera node (`wsrep_on` off, or MySQL, which has no such variable) the reads
 * run as they are.
 */
import { CompiledQuery, sql, type Compilable, type Kysely, type RawBuilder } from 'kysely';

export class CausalReads {
  readonly #db: Kysely<any>;
  #galera: Promise<boolean> | undefined;

  constructor(db: Kysely<any>) {
    this.#db = db;
  }

  /** Whether the server is a Galera node; asked once, again only after a failed ask. */
  isGalera(): Promise<boolean> {
    this.#galera ??= sql<{ on: string | number }>`SELECT @@wsrep_on AS ${sql.ref('on')}`.execute(this.#db).then(
      ({ rows }) => Number(rows[0]?.on ?? 0) === 1 || String(rows[0]?.on).toUpperCase() === 'ON',
      (error: unknown) => {
        // MySQL has no wsrep variables: no Galera. Anything else (the server unreachable): ask again next time.
        if ((error as { code?: unknown } | null)?.code === 'ER_UNKNOWN_SYSTEM_VARIABLE') return false;
        this.#galera = undefined;
        throw error;
      },
    );
    return this.#galera;
  }

  /** Runs `query`, on a Galera node after the node caught up with every commit in the cluster. */
  async execute<R>(query: Compilable<R>): Promise<R[]> {
    const compiled = query.compile();
    if (!(await this.isGalera())) return (await this.#db.executeQuery(compiled)).rows as R[];
    const waited = CompiledQuery.raw(`SET STATEMENT wsrep_sync_wait=1 FOR ${compiled.sql}`, [...compiled.parameters]);
    return (await this.#db.executeQuery<R>(waited)).rows;
  }

  /** `execute` for a raw `sql` query. */
  executeRaw<R>(query: RawBuilder<R>): Promise<R[]> {
    return this.execute<R>({ compile: () => query.compile(this.#db) as CompiledQuery<R> });
  }
}
