/**
 * Writing a batch's new users and their shares (docs/mysql.md#import), for millions of rows: with
 * `LOAD DATA LOCAL INFILE` from memory (`infile.ts`), two statements a batch, checked for the row
 * count and for warnings (LOCAL turns errors into warnings); where the server or the pool refuses
 * LOCAL INFILE, with multi-row INSERTs. Ids: one LOAD DATA or multi-row INSERT gets consecutive
 * AUTO_INCREMENT values when `innodb_autoinc_lock_mode` is 0 or 1 (MySQL/MariaDB documented
 * behaviour); under mode 2 new users are inserted one at a time.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import type { SeedUser } from '../../seed/seed.js';
import { InfileWriter, registerInfile, releaseInfile } from './infile.js';
import { USER_FIELDS, type MerchantApiDatabase } from '../schema.js';
import { mysqlErrorCode, toSqlDatetime } from '../sql-values.js';
import { shareValues, userColumns, userValues } from './user-rows.js';

type Trx = Transaction<MerchantApiDatabase>;

/** How the server hands out AUTO_INCREMENT values, and how bulk writes work on this pool. */
export interface IdAllocation {
  /** True when a multi-row INSERT gets consecutive ids (innodb_autoinc_lock_mode 0 or 1). */
  consecutive: boolean;
  /** `auto_increment_increment` (1 unless replication spreads ids). */
  step: bigint;
  /**
   * Whether LOAD DATA LOCAL INFILE works here: undefined until the first bulk write finds out,
   * then remembered for the rest of the import. Set false to use multi-row INSERTs only.
   */
  localInfile?: boolean;
  /**
   * Whether the shares' LOAD DATA may skip the foreign key checks (`SET STATEMENT
   * foreign_key_checks=0 FOR`): on MariaDB outside a Galera cluster only. The batch has locked
   * the rows of its merchants (`lockMerchants`, which fails the batch when one is gone) and
   * inserted the users the shares name, in the same transaction, so each check would look up a
   * row the batch holds. Galera keeps them: there the check is what certifies the merchant's row
   * against a delete on another node (a `FOR UPDATE` lock is local to its node). MySQL has no
   * per-statement form for LOAD DATA and keeps them too.
   */
  skipForeignKeyChecks?: boolean;
}

/** Reads the server's id allocation once per import. */
export async function readIdAllocation(db: Trx | Kysely<MerchantApiDatabase>): Promise<IdAllocation> {
  const { rows } = await sql<{ mode: string | number; step: string | number; version: string }>`SELECT @@innodb_autoinc_lock_mode AS mode, @@auto_increment_increment AS step, VERSION() AS version`.execute(db);
  const row = rows[0];
  const allocation: IdAllocation = { consecutive: Number(row?.mode ?? 2) < 2, step: BigInt(row?.step ?? 1) };
  if (/mariadb/i.test(row?.version ?? '')) {
    // @@wsrep_on exists on every MariaDB (OFF without a cluster), on MySQL it does not.
    const { rows: [wsrep] } = await sql<{ on: string | number }>`SELECT @@wsrep_on AS ${sql.ref('on')}`.execute(db);
    allocation.skipForeignKeyChecks = Number(wsrep?.on ?? 1) === 0;
  }
  return allocation;
}

/**
 * A batch of users with its LOAD DATA text written as the users are added, on the guess that all
 * of them are new (a first import): the text is ready when the batch is written, off the path
 * between the database's answers. A key repeated in the batch keeps its last record.
 */
export class UserBatch {
  /** The users by merchant and id, the last record of a repeated key. */
  readonly byMerchant = new Map<string, Map<string, SeedUser>>();
  readonly #users = new InfileWriter();
  readonly #shares = new InfileWriter();
  #count = 0;
  #repeated = false;

  get size(): number {
    return this.#count;
  }

  add(user: SeedUser): void {
    let users = this.byMerchant.get(user.merchant_id);
    if (!users) this.byMerchant.set(user.merchant_id, (users = new Map()));
    if (users.has(user.shared_user_id)) this.#repeated = true;
    users.set(user.shared_user_id, user);
    // The share's user_id is its row number here; LOAD DATA turns it into the id (see loadShares).
    this.#users.row(userValues(user));
    this.#shares.row(shareValues(user, this.#count));
    this.#count++;
  }

  /** The prepared text, when every user of the batch is new: all `users`, once each, in order. */
  prepared(news: number): { users: Buffer[]; shares: Buffer[] } | undefined {
    return !this.#repeated && news === this.#count ? { users: this.#users.finish(), shares: this.#shares.finish() } : undefined;
  }
}

/** Inserts `users`, all new, with their shares stamped `stamp`; `prepared`: their LOAD DATA text, when written already. */
export async function insertNewUsers(trx: Trx, users: SeedUser[], allocation: IdAllocation, stamp: string, prepared?: { users: Buffer[]; shares: Buffer[] }): Promise<void> {
  const text = prepared ?? loadDataText(users);
  const first = await loadUsers(trx, text.users, users.length, allocation);
  if (first === undefined) {
    await insertShares(trx, users, await insertUsers(trx, users, allocation), stamp);
    return;
  }
  if (allocation.consecutive) {
    await loadShares(trx, text.shares, users.length, first, allocation, stamp);
    return;
  }
  // Interleaved allocation (lock mode 2, as Galera requires): the ids the LOAD DATA got are read
  // back rather than assumed. Alone on the table they are still one step apart, and the shares go
  // by LOAD DATA as above; interleaved with another writer's, by multi-row INSERTs with exact ids.
  const ids = await readBackIds(trx, users, first);
  if (ids.every((id, i) => id === first + BigInt(i) * allocation.step)) await loadShares(trx, text.shares, users.length, first, allocation, stamp);
  else await insertShares(trx, users, ids, stamp);
}

/**
 * The ids of the users one LOAD DATA (or multi-row INSERT) just wrote, in file order, from its first id on. Every id it got
 * is at least `first` and grows with the row (one statement takes its values in order), and the
 * transaction's snapshot, taken by the reads before it, shows no other writer's newer rows. The rows
 * are checked against the batch all the same (e-mail addresses, in order), so a mapping that could
 * put a share on another person's row fails the batch instead.
 */
async function readBackIds(trx: Trx, users: SeedUser[], first: bigint): Promise<bigint[]> {
  const ids: bigint[] = [];
  for (let offset = 0; offset < users.length; offset += 10_000) {
    const want = Math.min(10_000, users.length - offset);
    const from = offset === 0 ? first : ids[ids.length - 1]! + 1n;
    const rows = await trx.selectFrom('users').select(['id', 'email_address']).where('id', '>=', from.toString()).orderBy('id').limit(want).execute();
    rows.forEach((row, i) => {
      if (row.email_address !== users[offset + i]!.email_address) throw new Error('The ids read back after LOAD DATA do not match the batch (another writer interleaved): the batch is rolled back.');
      ids.push(BigInt(row.id));
    });
    if (rows.length !== want) throw new Error(`LOAD DATA into users: ${ids.length} of ${users.length} ids read back: the batch is rolled back.`);
  }
  return ids;
}

const USER_COLUMN_LIST = USER_FIELDS.join(', ');

/** The LOAD DATA text of `users`, all new, in order. */
function loadDataText(users: SeedUser[]): { users: Buffer[]; shares: Buffer[] } {
  const usersFile = new InfileWriter();
  const sharesFile = new InfileWriter();
  users.forEach((user, i) => {
    usersFile.row(userValues(user));
    sharesFile.row(shareValues(user, i));
  });
  return { users: usersFile.finish(), shares: sharesFile.finish() };
}

/** LOAD DATA of the new users; their first id, or undefined when LOCAL INFILE is not available. */
async function loadUsers(trx: Trx, text: Buffer[], rows: number, allocation: IdAllocation): Promise<bigint | undefined> {
  if (allocation.localInfile === false) return undefined;
  const loaded = await loadData(trx, text, 'users', USER_COLUMN_LIST, rows, allocation);
  return loaded === undefined ? undefined : BigInt(loaded);
}

/** LOAD DATA of the shares: row number `@row` of the batch gets the user id `first + @row * step`, each the batch's stamp. */
async function loadShares(trx: Trx, text: Buffer[], rows: number, first: bigint, allocation: IdAllocation, stamp: string): Promise<void> {
  // The stamp is `DATETIME(6)` text the server wrote (digits, '-', ':', '.', ' '): safe to inline.
  const set = `user_id = ${first} + @row * ${allocation.step}, updated_at = '${stamp}'`;
  await loadData(trx, text, 'user_shares', 'merchant_id, shared_user_id, @row, is_active, date_joined', rows, allocation, set, allocation.skipForeignKeyChecks === true);
}

/**
 * One LOAD DATA LOCAL INFILE of `chunks` into `table (columns) SET set`. Resolves to
 * LAST_INSERT_ID() after it, or undefined (and `allocation.localInfile = false`) when the server
 * or the pool refuses LOCAL INFILE. Throws when fewer rows went in or anything was warned about:
 * LOCAL makes the server skip duplicates and cut values with a warning instead of failing.
 */
export async function loadData(trx: Trx, chunks: Buffer[], table: string, columns: string, rows: number, allocation: IdAllocation, set?: string, withoutForeignKeyChecks = false): Promise<string | undefined> {
  const name = registerInfile(chunks);
  let result;
  try {
    // The format InfileWriter writes: tab-separated, backslash escapes, \N for NULL, one row a line.
    const format = String.raw`FIELDS TERMINATED BY '\t' ESCAPED BY '\\' LINES TERMINATED BY '\n'`;
    const prefix = withoutForeignKeyChecks ? 'SET STATEMENT foreign_key_checks = 0 FOR ' : '';
    result = await sql.raw(`${prefix}LOAD DATA LOCAL INFILE '${name}' INTO TABLE ${table} CHARACTER SET utf8mb4 ${format} (${columns})${set ? ` SET ${set}` : ''}`).execute(trx);
  } catch (error) {
    if (allocation.localInfile !== true && localInfileRefused(error)) {
      allocation.localInfile = false;
      return undefined;
    }
    throw error;
  } finally {
    releaseInfile(name);
  }
  allocation.localInfile = true;
  const { rows: [after] } = await sql<{ id: string | number; warnings: string | number }>`SELECT LAST_INSERT_ID() AS id, @@warning_count AS warnings`.execute(trx);
  if (result.numAffectedRows !== BigInt(rows) || Number(after?.warnings ?? 0) > 0) {
    throw new Error(`LOAD DATA into ${table} wrote ${result.numAffectedRows ?? 0} of ${rows} rows with ${after?.warnings ?? '?'} warning(s) (a duplicate key, or a value that does not fit): the batch is rolled back.`);
  }
  return String(after!.id);
}

/** True for the errors that mean "no LOCAL INFILE here" (server setting, client flag, pool without our factory). */
function localInfileRefused(error: unknown): boolean {
  const errno = (error as { errno?: unknown } | null)?.errno;
  const code = mysqlErrorCode(error);
  return errno === 1148 || errno === 3948 || code === 'ER_NOT_ALLOWED_COMMAND' || /LOCAL INFILE|streamFactory/i.test((error as Error | null)?.message ?? '');
}

/** Multi-row INSERTs of the new users (2000 a statement, within max_allowed_packet); their ids, computed or read back. */
async function insertUsers(trx: Trx, users: SeedUser[], allocation: IdAllocation): Promise<bigint[]> {
  const ids: bigint[] = [];
  for (let i = 0; i < users.length; i += 2000) {
    const chunk = users.slice(i, i + 2000);
    // One statement gets consecutive ids: its first id, then one step each.
    const result = await trx.insertInto('users').values(chunk.map(userColumns)).executeTakeFirstOrThrow();
    const first = result.insertId;
    if (first === undefined || result.numInsertedOrUpdatedRows !== BigInt(chunk.length)) throw new Error('The users INSERT did not report its ids.');
    // Interleaved allocation: read back, as after LOAD DATA.
    if (!allocation.consecutive) ids.push(...(await readBackIds(trx, chunk, first)));
    else for (let j = 0n; j < BigInt(chunk.length); j++) ids.push(first + j * allocation.step);
  }
  return ids;
}

async function insertShares(trx: Trx, users: SeedUser[], ids: bigint[], stamp: string): Promise<void> {
  for (let i = 0; i < users.length; i += 5000) {
    await trx
      .insertInto('user_shares')
      .values(
        users.slice(i, i + 5000).map((user, j) => ({
          merchant_id: user.merchant_id,
          shared_user_id: user.shared_user_id,
          user_id: ids[i + j]!.toString(),
          is_active: user.deactivated_at === null ? 1 : 0,
          date_joined: toSqlDatetime(user.date_joined),
          updated_at: stamp,
        })),
      )
      .execute();
  }
}
