/**
 * Loads the memory storage from a seed file as a stream (docs/protocol.md#the-seed-document):
 * each merchant and user is validated and indexed as it is parsed (`seed-stream.ts`), and the
 * sorted lists are built once at the end, so memory holds the records and little else, and the
 * number of users is bounded by memory only, not by V8's longest string.
 * Problems are named like `parseSeed` names them (`users[3].date_joined: ...`, or `line 4: ...`
 * in NDJSON), never quoting a user's field; nothing is served unless the whole file is valid.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import type { SeedMerchant } from '../seed/seed.js';
import { parseSeedMerchant, parseUserRecord, SeedError, unknownMemberProblem } from '../seed/seed.js';
import { readSeedElements, seedFormatOf, type SeedFormat, type SeedPlace } from '../seed/seed-stream.js';
import { MemoryUserIndex } from './users.js';
import { MemoryStorage, type MemoryStorageOptions } from './memory-storage.js';

/** Options of `loadMemoryStorage`: the memory storage's own, and the file's format. */
export interface LoadMemoryStorageOptions extends MemoryStorageOptions {
  /** `json` (a seed document) or `ndjson`; by default from the name (`.ndjson`, `.jsonl`). */
  format?: SeedFormat;
  /**
   * The `updated_at` of users the seed gives none (canonical). Default: the file's modification
   * time, so every process that loads the file (each of `WORKERS`) stamps them alike and a
   * cursor of `order=updated_at` from one goes on in another.
   */
  updatedAt?: string;
  /** The longest seed record read, in bytes: an NDJSON line or an element of the document (default 1 MiB). */
  maxRecordBytes?: number;
}

/** Problems kept for the error (the rest are counted). */
const KEPT_PROBLEMS = 1000;

/**
 * Reads the seed file `file` into a new memory storage, with what it holds. Throws `SeedError`
 * listing the problems (the first 1000, all counted), `SeedSyntaxError` for a document that is
 * not JSON, and the file system's error (with its `code`) for a file it cannot read.
 *
 * @example
 * const { storage, merchants, users } = await loadMemoryStorage('seed.json');
 */
export async function loadMemoryStorage(
  file: string | URL,
  options: LoadMemoryStorageOptions = {},
): Promise<{ storage: MemoryStorage; merchants: number; users: number }> {
  const { format = seedFormatOf(String(file)), updatedAt, maxRecordBytes, ...storageOptions } = options;
  // Read from the file system, not the clock: every process loading this file gets the same.
  const stamp = updatedAt ?? MemoryUserIndex.stampOf(Number((await stat(file, { bigint: true })).mtimeNs / 1000n));
  return readMemoryStorage(createReadStream(file, { highWaterMark: 1 << 20 }), format, storageOptions, stamp, maxRecordBytes);
}

/**
 * `loadMemoryStorage` from any source of bytes (a stream, a response body, chunks in a test);
 * `updatedAt` and `maxRecordBytes` as in `LoadMemoryStorageOptions` (`updatedAt` default: the load time).
 */
export async function readMemoryStorage(
  chunks: AsyncIterable<Uint8Array>,
  format: SeedFormat,
  storageOptions: MemoryStorageOptions = {},
  updatedAt?: string,
  maxRecordBytes?: number,
): Promise<{ storage: MemoryStorage; merchants: number; users: number }> {
  const merchants: SeedMerchant[] = [];
  const merchantIds = new Set<string>();
  const index = new MemoryUserIndex(undefined, updatedAt);
  const problems: string[] = [];
  let problemCount = 0;
  const scratch: string[] = [];
  const report = (found: string[]) => {
    problemCount += found.length;
    for (const problem of found) if (problems.length < KEPT_PROBLEMS) problems.push(problem);
  };
  // Problems of one element land in `scratch`, then go to `report` with their place's form.
  const flush = (line: number | undefined) => {
    if (scratch.length === 0) return;
    report(line === undefined ? scratch : scratch.map((problem) => problem.replace(/^(line \d+)\./, '$1: ')));
    scratch.length = 0;
  };
  // Members other than merchants and users, reported at the end unless the arrays themselves are wrong.
  const unknownMembers: string[] = [];
  let notArrays = false;
  // Users whose merchant had not appeared yet (a document may list users first): checked at the end.
  const pending: Array<{ merchantId: string; at: string }> = [];
  // NDJSON places read `line 4: field: ...`, as `merchant-api import` writes them.
  const at = (kind: 'merchants' | 'users', place: SeedPlace) => (place.line === undefined ? `${kind}[${place.index}]` : `line ${place.line}`);

  const seen = await readSeedElements(chunks, format, {
    merchant(value, place) {
      const where = at('merchants', place);
      const merchant = parseSeedMerchant(value, where, scratch);
      if (merchant) {
        if (merchantIds.has(merchant.id)) scratch.push(`${where}.id: "${merchant.id}" appears twice`);
        merchantIds.add(merchant.id);
        merchants.push(merchant);
      }
      flush(place.line);
    },
    user(value, place) {
      const where = at('users', place);
      const user = parseUserRecord(value, where, scratch);
      if (user) {
        if (!merchantIds.has(user.merchantId)) pending.push({ merchantId: user.merchantId, at: where });
        if (!index.add(user.merchantId, user.record, user.updatedAt)) scratch.push(`${where}.shared_user_id: appears twice for merchant "${user.merchantId}"`);
      }
      flush(place.line);
    },
    notArray(key) {
      notArrays = true;
      report([`"${key}" must be an array`]);
    },
    unknownMember(key) {
      const problem = unknownMemberProblem(key);
      if (problem) unknownMembers.push(problem);
    },
    badLine(line) {
      report([`line ${line}: not valid JSON`]);
    },
    longLine(line, max) {
      report([`line ${line}: longer than ${max} bytes, the most one seed record may be`]);
    },
  }, maxRecordBytes);
  if (format === 'json' && !seen.merchants) report(['"merchants" must be an array']);
  // As parseSeed: a document without its two arrays is not a seed at all (package.json given as
  // SEED_FILE), and that is the one problem to name, not each of its members.
  else if (!notArrays) report(unknownMembers);
  for (const { merchantId, at: where } of pending) {
    if (!merchantIds.has(merchantId)) report([format === 'json' ? `${where}.merchant_id: no merchant "${merchantId}" in the seed` : `${where}: merchant_id: no merchant "${merchantId}" in the seed`]);
  }
  if (problemCount > 0) throw new SeedError(problems, problemCount);
  index.seal();
  return { storage: new MemoryStorage({ merchants, users: index }, storageOptions), merchants: merchants.length, users: index.size };
}
