/**
 * Imports into MySQL (docs/mysql.md#imports): the seed document, and NDJSON of user records
 * (one `{"merchant_id": ..., ...14 keys}` per line) for files too large to hold in memory.
 * Nothing is half-written:
 * - a seed document is validated whole, then written in ONE transaction;
 * - an NDJSON file is read once, validated and written as it streams: batches of valid users,
 *   one transaction each, written while the next batch is read. A bad line stops the writing
 *   before its batch; the batches before it stay. Every write is an upsert, so running the
 *   import again (fixed, or after the process died) completes it. A key repeated in the file
 *   keeps its last record, and the summary counts such lines (usersRepeated).
 */
import type { Kysely } from 'kysely';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { parseSeedUser, type Seed, type SeedUser } from '../../seed/seed.js';
import { DEFAULT_MAX_LINE_BYTES, LineSplitter } from '../../seed/seed-stream.js';
import { LIBRARY_ACTOR, upsertSeedMerchant } from './merchant-admin.js';
import { writeAuditEvent } from './audit.js';
import { MerchantImportCounts } from './import-audit.js';
import type { MasterKey } from '../../sql/key-sealing.js';
import { API_KEY_MAX_LENGTH, type MerchantApiDatabase } from '../schema.js';
import { readIdAllocation, UserBatch, type IdAllocation } from './new-users.js';
import { retryOnConflict } from '../write-conflicts.js';
import { upsertUsers, userFieldProblem, withSharingMerchants } from './user-upsert.js';
import { redact } from './redact.js';

export { redact };

/** What an import changed. */
export interface ImportSummary {
  merchantsCreated: number;
  merchantsUpdated: number;
  /** Existing merchants whose status the import changed (`setStatus` only). */
  merchantStatusesChanged: number;
  /** Existing merchants whose status differs from the file's, left as it was (without `setStatus`). */
  merchantStatusesKept: number;
  keysAdded: number;
  keysLeftRevoked: number;
  usersInserted: number;
  /** Users whose record changed (their `updated_at` moved). */
  usersUpdated: number;
  /** Users already there with the same record, left as they were (`updated_at` too). */
  usersUnchanged: number;
  /**
   * NDJSON only, and only when it happened: lines whose merchant and `shared_user_id` an earlier
   * line of the file had (the last record is kept), and the first such line with the line it
   * repeats. Looked for among the first 1,000,000 distinct users of a file.
   */
  usersRepeated?: number;
  firstRepeatedLine?: number;
  firstRepeatedLineRepeats?: number;
}

/** Options of the imports. */
export interface ImportOptions {
  /** Users per batch: per transaction, and per bulk statement (default 25000). */
  batchSize?: number;
  /**
   * Called after each batch with users written so far and the total; for an NDJSON file read
   * in one pass the total is estimated from the bytes written until the last call.
   */
  onProgress?: (done: number, total: number) => void;
  /**
   * Seed imports: give existing merchants the file's status. Default false: an existing
   * merchant keeps its status (an operator may have disabled it); new ones take the file's.
   */
  setStatus?: boolean;
  /** The longest line of an NDJSON file, in bytes (default 1 MiB): a longer line is a problem named by its number, never held. */
  maxLineBytes?: number;
  /** Who imports, for the audit trail (docs/cli.md#the-audit-trail); default `library`. */
  actor?: string;
}

/** The import's summary as the audit trail keeps it: counts only. */
function auditSummary(kind: 'seed' | 'users', summary: ImportSummary, extra: Record<string, number> = {}) {
  return {
    kind,
    merchants_created: summary.merchantsCreated,
    merchants_updated: summary.merchantsUpdated,
    merchant_statuses_changed: summary.merchantStatusesChanged,
    keys_added: summary.keysAdded,
    users_inserted: summary.usersInserted,
    users_updated: summary.usersUpdated,
    users_unchanged: summary.usersUnchanged,
    ...extra,
  };
}

/**
 * Users per batch unless told otherwise: a LOAD DATA of this size takes about a second. Measured
 * (docs/benchmarks.md): 25,000 rather than 10,000 writes a million users with 40 batches instead of
 * 100, and so 60% fewer of the few statements and commits each batch adds to its two loads.
 */
export const DEFAULT_BATCH_SIZE = 25_000;
const MAX_PROBLEMS = 1000;
/** The first batch of an NDJSON import, when `batchSize` is larger; each next one doubles up to `batchSize`. */
const FIRST_BATCH_SIZE = 2_500;

/**
 * An input that fails validation: every problem, with its line or place. Nothing was written,
 * unless `imported` says what batches before the first problem's batch were.
 */
export class ImportValidationError extends Error {
  override name = 'ImportValidationError';
  constructor(
    readonly problems: string[],
    /** How many problems there were (only the first 1000 are kept). */
    readonly problemCount = problems.length,
    /** What was imported before the first problem stopped the writing, through which line. */
    readonly imported?: { summary: ImportSummary; throughLine: number },
  ) {
    super(
      imported
        ? `Stopped after line ${imported.throughLine} (${imported.summary.usersInserted + imported.summary.usersUpdated + imported.summary.usersUnchanged} users imported): ${problemCount} problem(s); first: ${problems[0] ?? ''}`
        : `Nothing imported: ${problemCount} problem(s); first: ${problems[0] ?? ''}`,
    );
  }
}

const emptySummary = (): ImportSummary => ({ merchantsCreated: 0, merchantsUpdated: 0, merchantStatusesChanged: 0, merchantStatusesKept: 0, keysAdded: 0, keysLeftRevoked: 0, usersInserted: 0, usersUpdated: 0, usersUnchanged: 0 });

/**
 * Imports a validated seed (`parseSeed`) in one transaction. `masterKey`
 * seals the merchants' keys; a seed without merchants needs none.
 */
export async function importSeed(db: Kysely<MerchantApiDatabase>, masterKey: MasterKey | undefined, seed: Seed, options: ImportOptions = {}): Promise<ImportSummary> {
  if (!masterKey && seed.merchants.length > 0) throw new TypeError('importSeed: a master key is needed to seal the merchants\' keys.');
  const problems: string[] = [];
  seed.merchants.forEach((merchant, i) => {
    // Bytes, not characters: the sealed form of the longest key must fit `sealed_key`.
    if (merchant.keys.some((key) => new TextEncoder().encode(key).length > API_KEY_MAX_LENGTH)) problems.push(`merchants[${i}].keys: a key is longer than ${API_KEY_MAX_LENGTH} bytes`);
  });
  seed.users.forEach((user, i) => {
    const problem = userFieldProblem(user);
    if (problem) problems.push(`users[${i}].${problem}`);
  });
  if (problems.length > 0) throw new ImportValidationError(problems.slice(0, 1000), problems.length);
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  // Merchants other than the seed's that share its changed users: locked by every batch (user-upsert.ts).
  const alsoLock = new Set<string>();
  const write = () => db.transaction().execute(async (trx) => {
    const summary = emptySummary();
    const byMerchant = new MerchantImportCounts();
    for (const merchant of seed.merchants) {
      const result = await upsertSeedMerchant(trx, masterKey!, merchant, { setStatus: options.setStatus });
      summary[result.created ? 'merchantsCreated' : 'merchantsUpdated']++;
      if (result.statusChanged) summary.merchantStatusesChanged++;
      if (result.statusKept) summary.merchantStatusesKept++;
      summary.keysAdded += result.keysAdded;
      summary.keysLeftRevoked += result.keysLeftRevoked;
    }
    const allocation = await readIdAllocation(trx);
    for (let start = 0; start < seed.users.length; start += batchSize) {
      const result = await upsertUsers(trx, seed.users.slice(start, start + batchSize), allocation, alsoLock);
      summary.usersInserted += result.inserted;
      summary.usersUpdated += result.updated;
      summary.usersUnchanged += result.unchanged;
      byMerchant.add(result.byMerchant);
      options.onProgress?.(Math.min(start + batchSize, seed.users.length), seed.users.length);
    }
    // One transaction: the import and its record commit together.
    await writeAuditEvent(trx, options.actor ?? LIBRARY_ACTOR, { action: 'import_completed', summary: auditSummary('seed', summary) });
    await byMerchant.write(trx, options.actor ?? LIBRARY_ACTOR, 'seed');
    return summary;
  });
  // A transaction that lost a write conflict (a deadlock, or a Galera certification failure) wrote nothing: run it again.
  return retryOnConflict(() => withSharingMerchants(alsoLock, write));
}

/**
 * Imports an NDJSON file of user records in one streamed pass: each line is validated as it is
 * read, and every `batchSize` valid users (the first batches smaller: 2,500, doubling up to it) are
 * written in one transaction while the next batch is read. The first problem (a bad line, a merchant that does not exist) stops the writing: the
 * batches before it stay imported, nothing from the batch holding it on is written, and the rest
 * of the file is still read so that every problem is reported. Throws `ImportValidationError`
 * listing bad lines by number, with what was imported before them.
 */
export async function importUserFile(db: Kysely<MerchantApiDatabase>, path: string, options: ImportOptions = {}): Promise<ImportSummary> {
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  const maxLineBytes = options.maxLineBytes ?? DEFAULT_MAX_LINE_BYTES;
  const problems = new FileProblems();
  const merchants = new MerchantCheck(db, problems);
  const writer = new BatchWriter(db, (await stat(path)).size, problems, merchants, options.onProgress);
  const repeats = new RepeatedUsers();
  const ready: Batch[] = [];
  let open = emptyBatch();
  // The first batches are smaller (2,500 users, then twice as many each time up to batchSize): the
  // writing starts once a few thousand lines are read rather than a whole batch, and overlaps the reading sooner.
  let nextSize = Math.min(batchSize, FIRST_BATCH_SIZE);
  const lines = new LineSplitter((line, number) => {
    open.bytes += line.length + 1;
    const found: string[] = [];
    const user = parseLine(line, number, found);
    // A bad line spoils the batch being read: from its first line on, nothing is written.
    for (const problem of found) problems.report(problem, open.users.size > 0 ? open.first : number);
    if (!user || merchants.isMissing(user.merchant_id)) return;
    repeats.note(user, number);
    // Merchants are checked for every valid line, also once the writing stopped: all problems are reported.
    merchants.note(user.merchant_id, number);
    if (number >= problems.stopLine) return;
    if (open.users.size === 0) open.first = number;
    open.users.add(user);
    open.last = number;
    if (open.users.size >= nextSize) {
      ready.push(open);
      open = emptyBatch();
      nextSize = Math.min(batchSize, nextSize * 2);
    }
  }, maxLineBytes, (number) => problems.report(`line ${number}: longer than ${maxLineBytes} bytes, the most one line may be`, open.users.size > 0 ? open.first : number));
  // Small reads: the event loop turns between them, so the database's answers for the batch being
  // written are taken at once and the reading and the writing overlap.
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 16 })) {
    lines.push(chunk as Buffer);
    for (let batch = ready.shift(); batch; batch = ready.shift()) await writer.write(batch);
  }
  lines.end();
  for (const batch of [...ready, open]) await writer.write(batch);
  await writer.finished();
  await merchants.check();
  // Each batch is a transaction of its own (a file of any size): the record of what they did follows the last.
  const actor = options.actor ?? LIBRARY_ACTOR;
  if (problems.count > 0) {
    if (writer.done > 0) {
      await db.transaction().execute(async (trx) => {
        await writeAuditEvent(trx, actor, { action: 'import_stopped', summary: auditSummary('users', writer.summary, { through_line: writer.writtenThroughLine, problems: problems.count }) });
        await writer.byMerchant.write(trx, actor, 'users');
      });
    }
    throw new ImportValidationError(problems.sorted(), problems.count, writer.done > 0 ? { summary: writer.summary, throughLine: writer.writtenThroughLine } : undefined);
  }
  options.onProgress?.(writer.done, writer.done);
  await db.transaction().execute(async (trx) => {
    await writeAuditEvent(trx, actor, { action: 'import_completed', summary: auditSummary('users', writer.summary) });
    await writer.byMerchant.write(trx, actor, 'users');
  });
  return { ...writer.summary, ...repeats.summary() };
}

/**
 * The users a file names twice. The import keeps the last record of each (an upsert), which is
 * right for an export written as changes happened, but a file that repeats ids by mistake (two
 * exports joined) should not pass unnoticed: the summary says how many lines did, and where the
 * first was. Bounded: the ids of the first 1,000,000 distinct users are kept (about 60 MB at most).
 */
class RepeatedUsers {
  static readonly MAX_KEPT = 1_000_000;
  /** First line of each user seen, by merchant, then id: the parsed id strings themselves, no joined key (60 MB for a million, measured, against 157 MB joined). */
  readonly #firstLine = new Map<string, Map<string, number>>();
  #kept = 0;
  #count = 0;
  #first: { line: number; repeats: number } | undefined;

  note(user: SeedUser, line: number): void {
    let ids = this.#firstLine.get(user.merchant_id);
    const earlier = ids?.get(user.shared_user_id);
    if (earlier !== undefined) {
      this.#count++;
      this.#first ??= { line, repeats: earlier };
    } else if (this.#kept < RepeatedUsers.MAX_KEPT) {
      if (!ids) this.#firstLine.set(user.merchant_id, (ids = new Map()));
      ids.set(user.shared_user_id, line);
      this.#kept++;
    }
  }

  summary(): Pick<ImportSummary, 'usersRepeated' | 'firstRepeatedLine' | 'firstRepeatedLineRepeats'> {
    return this.#first ? { usersRepeated: this.#count, firstRepeatedLine: this.#first.line, firstRepeatedLineRepeats: this.#first.repeats } : {};
  }
}

/** Users read from consecutive lines, written in one transaction. */
interface Batch {
  users: UserBatch;
  /** The line numbers of its first and last user, and the bytes of the lines it was read from. */
  first: number;
  last: number;
  bytes: number;
}

const emptyBatch = (): Batch => ({ users: new UserBatch(), first: 0, last: 0, bytes: 0 });

/** The problems of a file (the first 1000 kept, all counted), and the line from which nothing is written. */
class FileProblems {
  readonly #kept: string[] = [];
  count = 0;
  /** No batch holding this line or a later one is written: the first line of the batch a problem was found in. */
  stopLine = Infinity;

  report(problem: string, line: number): void {
    this.count++;
    if (this.#kept.length < MAX_PROBLEMS) this.#kept.push(problem);
    this.stopLine = Math.min(this.stopLine, line);
  }

  sorted(): string[] {
    return this.#kept.sort(byLineNumber);
  }
}

/** Whether the merchants the file names exist, asked in bulk before each write: a missing one is a problem of the first line naming it. */
class MerchantCheck {
  readonly #db: Kysely<MerchantApiDatabase>;
  readonly #problems: FileProblems;
  readonly #known = new Set<string>();
  readonly #missing = new Set<string>();
  /** The first line naming each merchant not checked yet. */
  readonly #unchecked = new Map<string, number>();

  constructor(db: Kysely<MerchantApiDatabase>, problems: FileProblems) {
    this.#db = db;
    this.#problems = problems;
  }

  isMissing(merchantId: string): boolean {
    return this.#missing.has(merchantId);
  }

  note(merchantId: string, line: number): void {
    if (!this.#known.has(merchantId) && !this.#unchecked.has(merchantId)) this.#unchecked.set(merchantId, line);
  }

  async check(): Promise<void> {
    if (this.#unchecked.size === 0) return;
    const ids = [...this.#unchecked.keys()];
    for (let i = 0; i < ids.length; i += 1000) {
      const rows = await this.#db.selectFrom('merchants').select('id').where('id', 'in', ids.slice(i, i + 1000)).execute();
      for (const row of rows) this.#known.add(row.id);
    }
    for (const [id, line] of this.#unchecked) {
      if (this.#known.has(id)) continue;
      this.#missing.add(id);
      this.#problems.report(`line ${line}: merchant_id: no such merchant (add it first); later lines may name it too`, line);
    }
    this.#unchecked.clear();
  }
}

/** Writes batches one after another, each while the next is read, and counts what they changed. */
class BatchWriter {
  readonly #db: Kysely<MerchantApiDatabase>;
  readonly #fileSize: number;
  readonly #problems: FileProblems;
  readonly #merchants: MerchantCheck;
  readonly #onProgress: ImportOptions['onProgress'];
  readonly summary = emptySummary();
  /** What the committed batches did for each merchant. */
  readonly byMerchant = new MerchantImportCounts();
  done = 0;
  writtenThroughLine = 0;
  #bytesWritten = 0;
  #allocation: IdAllocation | undefined;
  // Merchants other than a batch's own that share the file's changed users: every later batch locks them too (user-upsert.ts).
  readonly #alsoLock = new Set<string>();
  #writing: Promise<void> = Promise.resolve();

  constructor(db: Kysely<MerchantApiDatabase>, fileSize: number, problems: FileProblems, merchants: MerchantCheck, onProgress: ImportOptions['onProgress']) {
    this.#db = db;
    this.#fileSize = fileSize;
    this.#problems = problems;
    this.#merchants = merchants;
    this.#onProgress = onProgress;
  }

  /** Writes the batch (after the previous one) unless a problem at or before its lines stopped the writing. */
  async write({ users, last, bytes }: Batch): Promise<void> {
    await this.#writing;
    await this.#merchants.check();
    if (last >= this.#problems.stopLine || users.size === 0) return;
    // Not awaited here: the next batch is read and validated while this one is written.
    this.#writing = (async () => {
      const db = this.#db;
      const allocation = (this.#allocation ??= await readIdAllocation(db));
      const result = await retryOnConflict(() => withSharingMerchants(this.#alsoLock, () => db.transaction().execute((trx) => upsertUsers(trx, users, allocation, this.#alsoLock))));
      this.summary.usersInserted += result.inserted;
      this.summary.usersUpdated += result.updated;
      this.summary.usersUnchanged += result.unchanged;
      this.byMerchant.add(result.byMerchant);
      this.done += users.size;
      this.writtenThroughLine = last;
      this.#bytesWritten += bytes;
      this.#onProgress?.(this.done, Math.max(this.done, Math.round((this.done * this.#fileSize) / Math.max(this.#bytesWritten, 1))));
    })();
    this.#writing.catch(() => undefined);
  }

  finished(): Promise<void> {
    return this.#writing;
  }
}

/** One NDJSON line: a user, or undefined with problems (blank lines are skipped silently). */
function parseLine(line: string, number: number, problems: string[]): SeedUser | undefined {
  if (line.trim() === '') return undefined;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    problems.push(`line ${number}: not valid JSON`);
    return undefined;
  }
  const found: string[] = [];
  const user = parseSeedUser(value, `line ${number}`, found);
  // parseSeedUser quotes offending values; an operator's log must not hold user fields.
  for (const problem of found) problems.push(redact(problem).replace(/^line (\d+)\./, 'line $1: '));
  if (!user) return undefined;
  const tooLong = userFieldProblem(user);
  if (tooLong) {
    problems.push(`line ${number}: ${tooLong}`);
    return undefined;
  }
  return user;
}


function byLineNumber(a: string, b: string): number {
  return Number(/^line (\d+)/.exec(a)?.[1] ?? 0) - Number(/^line (\d+)/.exec(b)?.[1] ?? 0);
}
