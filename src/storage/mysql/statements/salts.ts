/**
 * Replay protection on MySQL (docs/protocol.md#signing): a salt is recorded by a
 * plain INSERT on the primary key `(merchant_id, salt)`, so of two instances
 * racing with one salt exactly one wins. Not `INSERT IGNORE`: it also hides
 * truncation and bad values (docs/protocol.md#storage-and-secrets). ER_DUP_ENTRY is the replay,
 * unless the existing record has expired, which one conditional UPDATE
 * takes over atomically.
 *
 * Salts that arrive while earlier ones are being written go together in one multi-row INSERT
 * (`SaltWriter`, `statement-batcher.ts`): one statement and one commit for many requests, so the insert rate under
 * load is no longer one round trip and one log flush per request (docs/benchmarks.md#mysql). A
 * batch is all or nothing: when it succeeds every salt in it was new; when one of them exists
 * (a replay, or an expired record not yet pruned) the batch inserted nothing and each salt is
 * then recorded alone, so every request gets the answer it would have got alone.
 *
 * Instances racing for the same salts can deadlock in InnoDB (seen with two pools racing over
 * duplicates and expired takeovers). InnoDB then rolls back the one statement it chose, which
 * changed nothing: a batch chosen so is recorded salt by salt, and a single statement is run
 * again, for up to CONFLICT_RETRY_MS (2 s), instead of answering 503 for a request that did
 * nothing wrong. On a Galera node the same error is a certification failure: another node recorded
 * the same salt (or an overlapping batch) first. Run again, the INSERT meets that row: the loser
 * answers "salt already used", never 503 and never a second success (`write-conflicts.ts`).
 */
import type { Kysely } from 'kysely';
import type { SaltRecord } from '../../contract.js';
import type { MerchantApiDatabase } from '../schema.js';
import { mysqlErrorCode, storedSalt, unixToSqlDatetime } from '../sql-values.js';
import { StatementBatcher, type BatchOptions, type Waiting } from '../../sql/statement-batcher.js';
import { statementRunner, type RunStatement } from './statement-runner.js';
import { retryOnConflict } from '../write-conflicts.js';

type Db = Kysely<MerchantApiDatabase>;

interface SaltRow {
  merchant_id: string;
  salt: string;
  expires_at: string;
}

interface Salt {
  row: SaltRow;
  now: string;
}

const INSERT_ONE = 'INSERT INTO used_salts (merchant_id, salt, expires_at) VALUES (?, ?, ?)';

/** Records salts, those that wait for MySQL together in one multi-row INSERT (`statement-batcher.ts`). */
export class SaltWriter {
  readonly #db: Db;
  readonly #run: RunStatement;
  readonly #batcher: StatementBatcher<Salt, boolean>;

  /** Defaults: 2 statements in flight, 100 salts each, 10000 waiting. */
  constructor(db: Db, options: Partial<BatchOptions> = {}) {
    this.#db = db;
    this.#run = statementRunner(db);
    this.#batcher = new StatementBatcher((batch) => this.#write(batch), { concurrency: 2, maxBatch: 100, maxWaiting: 10_000, database: 'MySQL', ...options });
  }

  /** True when the salt is new (or only expired), false for a replay. */
  record({ merchantId, salt, expiresAt, now }: SaltRecord): Promise<boolean> {
    return this.#batcher.add({ row: { merchant_id: merchantId, salt: storedSalt(salt), expires_at: unixToSqlDatetime(expiresAt) }, now: unixToSqlDatetime(now) });
  }

  async #write(batch: Waiting<Salt, boolean>[]): Promise<void> {
    if (batch.length === 1) {
      const [only] = batch as [Waiting<Salt, boolean>];
      only.resolve(await recordOne(this.#db, this.#run, only.item.row, only.item.now));
      return;
    }
    // Key order, as InnoDB would take the locks anyway: two batches never wait on each other in a cycle.
    batch.sort((a, b) => compareRows(a.item.row, b.item.row));
    const parameters: string[] = [];
    for (const { item } of batch) parameters.push(item.row.merchant_id, item.row.salt, item.row.expires_at);
    try {
      // Text, not prepared: the statement's text varies with the batch size.
      await this.#run(`${INSERT_ONE}${', (?, ?, ?)'.repeat(batch.length - 1)}`, parameters, { prepared: false });
    } catch (error) {
      const code = mysqlErrorCode(error);
      if (code !== 'ER_DUP_ENTRY' && code !== 'ER_LOCK_DEADLOCK') throw error;
      // Nothing was inserted: each salt alone, for its own answer.
      await Promise.all(batch.map((each) => recordOne(this.#db, this.#run, each.item.row, each.item.now).then(each.resolve, each.reject)));
      return;
    }
    for (const each of batch) each.resolve(true);
  }
}

function compareRows(a: SaltRow, b: SaltRow): number {
  if (a.merchant_id !== b.merchant_id) return a.merchant_id < b.merchant_id ? -1 : 1;
  return a.salt < b.salt ? -1 : a.salt > b.salt ? 1 : 0;
}

/** Records one salt: the INSERT, and on a duplicate the takeover of an expired record. */
async function recordOne(db: Db, run: RunStatement, row: SaltRow, nowSql: string): Promise<boolean> {
  // Two rounds at most: the second only when a prune deleted the expired row between our statements.
  for (let round = 0; round < 2; round++) {
    try {
      await retryOnConflict(() => run(INSERT_ONE, [row.merchant_id, row.salt, row.expires_at]));
      return true;
    } catch (error) {
      if (mysqlErrorCode(error) !== 'ER_DUP_ENTRY') throw error;
    }
    // InnoDB re-reads the locked row for the WHERE: of two takers one matches.
    const taken = await retryOnConflict(() =>
      db
        .updateTable('used_salts')
        .set({ expires_at: row.expires_at })
        .where('merchant_id', '=', row.merchant_id)
        .where('salt', '=', row.salt)
        .where('expires_at', '<', nowSql)
        .executeTakeFirst(),
    );
    if (taken.numUpdatedRows > 0n) return true;
    const existing = await db
      .selectFrom('used_salts')
      .select('merchant_id')
      .where('merchant_id', '=', row.merchant_id)
      .where('salt', '=', row.salt)
      .executeTakeFirst();
    if (existing) return false;
  }
  return false;
}

/** Bounds of one prune run. */
export interface PruneOptions {
  /** Rows per DELETE (default 1000): short statements, short locks. */
  batchSize?: number;
  /** DELETEs per run (default 20); the rest waits for the next run. */
  maxBatches?: number;
}

/**
 * Deletes salts that expired before `now` (Unix seconds), oldest first, in
 * batches, so pruning a backlog never holds a long lock. Resolves to the count.
 */
export async function pruneExpiredSalts(db: Kysely<MerchantApiDatabase>, now: number, options: PruneOptions = {}): Promise<number> {
  const batchSize = options.batchSize ?? 1000;
  const maxBatches = options.maxBatches ?? 20;
  const before = unixToSqlDatetime(now);
  let deleted = 0;
  for (let batch = 0; batch < maxBatches; batch++) {
    const result = await db.deleteFrom('used_salts').where('expires_at', '<', before).orderBy('expires_at').limit(batchSize).executeTakeFirst();
    const count = Number(result.numDeletedRows);
    deleted += count;
    if (count < batchSize) break;
  }
  return deleted;
}
