/**
 * Imports into MySQL: the seed document, and NDJSON of user records
 * (one `{"merchant_id": ..., ...14 keys}` per line) for files too large to
 * hold in memory. Nothing is half-written:
 * - a seed document is validated whole, then written in ONE transaction;
 * - an NDJSON file is read twice: the first pass validates every line (and
 *   that each merchant exists) and writes nothing if any line is bad; the
 *   second writes batches, one transaction each. Every write is an upsert,
 *   so if the process dies in the second pass, running the import again
 *   completes it. A key repeated in the file keeps its last record.
 */
import type { Kysely } from 'kysely';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { parseSeedUser, type Seed, type SeedUser } from '../seed.js';
import { upsertSeedMerchant } from './merchant-admin.js';
import type { MasterKey } from './key-sealing.js';
import { API_KEY_MAX_LENGTH, type MerchantApiDatabase } from './schema.js';
import { readIdAllocation, upsertUsers, userFieldProblem } from './user-upsert.js';

/** What an import changed. */
export interface ImportSummary {
  merchantsCreated: number;
  merchantsUpdated: number;
  keysAdded: number;
  keysLeftRevoked: number;
  usersInserted: number;
  usersUpdated: number;
}

/** Options of the imports. */
export interface ImportOptions {
  /** Users per statement batch (default 1000). */
  batchSize?: number;
  /** Called after each batch with users written so far and the total. */
  onProgress?: (done: number, total: number) => void;
}

/** An input that fails validation: every problem, with its line or place. Nothing was written. */
export class ImportValidationError extends Error {
  override name = 'ImportValidationError';
  constructor(
    readonly problems: string[],
    /** How many problems there were (only the first 1000 are kept). */
    readonly problemCount = problems.length,
  ) {
    super(`Nothing imported: ${problemCount} problem(s); first: ${problems[0] ?? ''}`);
  }
}

const emptySummary = (): ImportSummary => ({ merchantsCreated: 0, merchantsUpdated: 0, keysAdded: 0, keysLeftRevoked: 0, usersInserted: 0, usersUpdated: 0 });

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
  const batchSize = options.batchSize ?? 1000;
  return db.transaction().execute(async (trx) => {
    const summary = emptySummary();
    for (const merchant of seed.merchants) {
      const result = await upsertSeedMerchant(trx, masterKey!, merchant);
      summary[result.created ? 'merchantsCreated' : 'merchantsUpdated']++;
      summary.keysAdded += result.keysAdded;
      summary.keysLeftRevoked += result.keysLeftRevoked;
    }
    const allocation = await readIdAllocation(trx);
    for (let start = 0; start < seed.users.length; start += batchSize) {
      const result = await upsertUsers(trx, seed.users.slice(start, start + batchSize), allocation);
      summary.usersInserted += result.inserted;
      summary.usersUpdated += result.updated;
      options.onProgress?.(Math.min(start + batchSize, seed.users.length), seed.users.length);
    }
    return summary;
  });
}

/**
 * Imports an NDJSON file of user records (see the file comment for the two
 * passes). Throws `ImportValidationError` listing bad lines by number.
 */
export async function importUserFile(db: Kysely<MerchantApiDatabase>, path: string, options: ImportOptions = {}): Promise<ImportSummary> {
  const { total, problems, problemCount, merchants } = await validateUserFile(path);
  const known = new Set<string>();
  const ids = [...merchants.keys()];
  for (let i = 0; i < ids.length; i += 1000) {
    const rows = await db.selectFrom('merchants').select('id').where('id', 'in', ids.slice(i, i + 1000)).execute();
    for (const row of rows) known.add(row.id);
  }
  let count = problemCount;
  for (const [id, line] of merchants) {
    if (known.has(id)) continue;
    count++;
    if (problems.length < 1000) problems.push(`line ${line}: merchant_id: no such merchant (add it first); later lines may name it too`);
  }
  if (count > 0) throw new ImportValidationError(problems.sort(byLineNumber), count);

  const batchSize = options.batchSize ?? 1000;
  const summary = emptySummary();
  const allocation = await readIdAllocation(db);
  let batch: SeedUser[] = [];
  let done = 0;
  const flush = async () => {
    const users = batch;
    batch = [];
    const result = await db.transaction().execute((trx) => upsertUsers(trx, users, allocation));
    summary.usersInserted += result.inserted;
    summary.usersUpdated += result.updated;
    done += users.length;
    options.onProgress?.(done, total);
  };
  for await (const { line, number } of readLines(path)) {
    const scratch: string[] = [];
    const user = parseLine(line, number, scratch);
    // The file changed since the first pass: stop, having written only whole batches.
    if (scratch.length > 0) throw new ImportValidationError([`${scratch[0]} (the file changed during the import)`]);
    if (!user) continue;
    batch.push(user);
    if (batch.length >= batchSize) await flush();
  }
  if (batch.length > 0) await flush();
  return summary;
}

/** Pass one: every line validated, merchant ids with the first line naming them. */
async function validateUserFile(path: string): Promise<{ total: number; problems: string[]; problemCount: number; merchants: Map<string, number> }> {
  const problems: string[] = [];
  const merchants = new Map<string, number>();
  let total = 0;
  let problemCount = 0;
  for await (const { line, number } of readLines(path)) {
    const scratch: string[] = [];
    const user = parseLine(line, number, scratch);
    problemCount += scratch.length;
    if (problems.length < 1000) problems.push(...scratch.slice(0, 1000 - problems.length));
    if (!user) continue;
    total++;
    if (!merchants.has(user.merchant_id)) merchants.set(user.merchant_id, number);
  }
  return { total, problems, problemCount, merchants };
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

async function* readLines(path: string): AsyncGenerator<{ line: string; number: number }> {
  const lines = createInterface({ input: createReadStream(path, { encoding: 'utf8' }), crlfDelay: Infinity });
  let number = 0;
  for await (const line of lines) {
    number++;
    yield { line: number === 1 ? line.replace(/^\uFEFF/, '') : line, number };
  }
}

function byLineNumber(a: string, b: string): number {
  return Number(/^line (\d+)/.exec(a)?.[1] ?? 0) - Number(/^line (\d+)/.exec(b)?.[1] ?? 0);
}
