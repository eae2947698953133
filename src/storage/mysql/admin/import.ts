/**
 * Imports into MySQL (docs/mysql.md#imports): the seed document, and NDJSON of user records
 * (one `{"merchant_id": ..., ...14 keys}` per line) for files too large to hold in memory.
 * Nothing is half-written:
 * - a seed document is validated whole, then written in ONE transaction;
 * - an NDJSON file is read once, validated and written as it streams: batches of valid users,
 *   one transaction each, written while the next batch is read. A bad line stops the writing
 *   before its batch; the batches before it stay. Every write is an upsert, so running the
 *   import again (fixed, or after the process died) completes it. A key repeated in the file
 *   keeps its last record.
 */
import type { Kysely } from 'kysely';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { parseSeedUser, type Seed, type SeedUser } from '../../seed/seed.js';
import { LineSplitter } from '../../seed/seed-stream.js';
import { upsertSeedMerchant } from './merchant-admin.js';
import type { MasterKey } from '../../sql/key-sealing.js';
import { API_KEY_MAX_LENGTH, type MerchantApiDatabase } from '../schema.js';
import { readIdAllocation, UserBatch, type IdAllocation } from './new-users.js';
import { upsertUsers, userFieldProblem, withSharingMerchants } from './user-upsert.js';

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
}

/** Options of the imports. */
export interface ImportOptions {
  /** Users per batch: per transaction, and per bulk statement (default 10000). */
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
}

/** Users per batch unless told otherwise: a LOAD DATA of this size takes well under a second. */
export const DEFAULT_BATCH_SIZE = 10_000;
const MAX_PROBLEMS = 1000;

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
      options.onProgress?.(Math.min(start + batchSize, seed.users.length), seed.users.length);
    }
    return summary;
  });
  return withSharingMerchants(alsoLock, write);
}

/**
 * Imports an NDJSON file of user records in one streamed pass: each line is validated as it is
 * read, and every `batchSize` valid users are written in one transaction while the next batch is
 * read. The first problem (a bad line, a merchant that does not exist) stops the writing: the
 * batches before it stay imported, nothing from the batch holding it on is written, and the rest
 * of the file is still read so that every problem is reported. Throws `ImportValidationError`
 * listing bad lines by number, with what was imported before them.
 */
export async function importUserFile(db: Kysely<MerchantApiDatabase>, path: string, options: ImportOptions = {}): Promise<ImportSummary> {
  const batchSize = options.batchSize ?? DEFAULT_BATCH_SIZE;
  const size = (await stat(path)).size;
  const summary = emptySummary();
  const problems: string[] = [];
  let problemCount = 0;
  // No batch holding this line or a later one is written: the first line of the batch a problem was found in.
  let stopLine = Infinity;
  const report = (problem: string, line: number) => {
    problemCount++;
    if (problems.length < MAX_PROBLEMS) problems.push(problem);
    stopLine = Math.min(stopLine, line);
  };
  // Merchants: known to exist, known not to, and the first line naming each one not checked yet.
  const known = new Set<string>();
  const missing = new Set<string>();
  const unchecked = new Map<string, number>();
  const checkMerchants = async () => {
    const ids = [...unchecked.keys()];
    for (let i = 0; i < ids.length; i += 1000) {
      const rows = await db.selectFrom('merchants').select('id').where('id', 'in', ids.slice(i, i + 1000)).execute();
      for (const row of rows) known.add(row.id);
    }
    for (const [id, line] of unchecked) {
      if (known.has(id)) continue;
      missing.add(id);
      report(`line ${line}: merchant_id: no such merchant (add it first); later lines may name it too`, line);
    }
    unchecked.clear();
  };

  interface Batch {
    users: UserBatch;
    /** The line numbers of its first and last user, and the bytes of the lines it was read from. */
    first: number;
    last: number;
    bytes: number;
  }
  const ready: Batch[] = [];
  let open: Batch = { users: new UserBatch(), first: 0, last: 0, bytes: 0 };
  let allocation: IdAllocation | undefined;
  // Merchants other than a batch's own that share the file's changed users: every later batch locks them too (user-upsert.ts).
  const alsoLock = new Set<string>();
  let bytesWritten = 0;
  let done = 0;
  let writtenThroughLine = 0;
  let writing: Promise<void> = Promise.resolve();

  /** Writes the batch (after the previous one) unless a problem at or before its lines stopped the writing. */
  const write = async ({ users, last, bytes }: Batch) => {
    await writing;
    if (unchecked.size > 0) await checkMerchants();
    if (last >= stopLine || users.size === 0) return;
    // Not awaited here: the next batch is read and validated while this one is written.
    writing = (async () => {
      allocation ??= await readIdAllocation(db);
      const result = await withSharingMerchants(alsoLock, () => db.transaction().execute((trx) => upsertUsers(trx, users, allocation!, alsoLock)));
      summary.usersInserted += result.inserted;
      summary.usersUpdated += result.updated;
      summary.usersUnchanged += result.unchanged;
      done += users.size;
      writtenThroughLine = last;
      bytesWritten += bytes;
      options.onProgress?.(done, Math.max(done, Math.round((done * size) / Math.max(bytesWritten, 1))));
    })();
    writing.catch(() => undefined);
  };

  const lines = new LineSplitter((line, number) => {
    open.bytes += line.length + 1;
    const found: string[] = [];
    const user = parseLine(line, number, found);
    // A bad line spoils the batch being read: from its first line on, nothing is written.
    for (const problem of found) report(problem, open.users.size > 0 ? open.first : number);
    if (!user || missing.has(user.merchant_id)) return;
    // Merchants are checked for every valid line, also once the writing stopped: all problems are reported.
    if (!known.has(user.merchant_id) && !unchecked.has(user.merchant_id)) unchecked.set(user.merchant_id, number);
    if (number >= stopLine) return;
    if (open.users.size === 0) open.first = number;
    open.users.add(user);
    open.last = number;
    if (open.users.size >= batchSize) {
      ready.push(open);
      open = { users: new UserBatch(), first: 0, last: 0, bytes: 0 };
    }
  });
  // Small reads: the event loop turns between them, so the database's answers for the batch being
  // written are taken at once and the reading and the writing overlap.
  for await (const chunk of createReadStream(path, { highWaterMark: 1 << 16 })) {
    lines.push(chunk as Buffer);
    for (let batch = ready.shift(); batch; batch = ready.shift()) await write(batch);
  }
  lines.end();
  for (const batch of [...ready, open]) await write(batch);
  await writing;
  if (unchecked.size > 0) await checkMerchants();
  if (problemCount > 0) throw new ImportValidationError(problems.sort(byLineNumber), problemCount, done > 0 ? { summary, throughLine: writtenThroughLine } : undefined);
  options.onProgress?.(done, done);
  return summary;
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

/** Replaces quoted values in a validation message (they may be personal data). */
export function redact(message: string): string {
  return message.replace(/"(?:[^"\\]|\\.)*"/g, 'the value');
}

function byLineNumber(a: string, b: string): number {
  return Number(/^line (\d+)/.exec(a)?.[1] ?? 0) - Number(/^line (\d+)/.exec(b)?.[1] ?? 0);
}
