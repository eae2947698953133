/**
 * The file of `import --erase FILE`: NDJSON, one `{"merchant_id": ..., "shared_user_id": ...}` per
 * line (blank lines skipped). Every line is checked before anything is erased, as the import
 * checks its files: a problem names its line, never quotes a value.
 */
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import type { ErasedShare } from '../../storage/mysql/index.js';
import { merchantIdProblem } from '../../cli-internal.js';

/** The most pairs one file may hold (they are kept in memory to be checked before any erasure). */
export const MAX_ERASE_PAIRS = 1_000_000;
const MAX_LINE_LENGTH = 4096;

/** The pairs of `file`, or its problems (the first 1000, all counted). */
export async function readErasePairs(file: string): Promise<{ pairs: ErasedShare[] } | { problems: string[]; count: number }> {
  const pairs: ErasedShare[] = [];
  const seen = new Set<string>();
  const problems: string[] = [];
  let count = 0;
  const report = (problem: string) => {
    count++;
    if (problems.length < 1000) problems.push(problem);
  };
  let number = 0;
  const lines = createInterface({ input: createReadStream(file, { encoding: 'utf8' }), crlfDelay: Infinity });
  for await (const line of lines) {
    number++;
    if (line.trim() === '') continue;
    if (line.length > MAX_LINE_LENGTH) {
      report(`line ${number}: longer than ${MAX_LINE_LENGTH} characters`);
      continue;
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      report(`line ${number}: not valid JSON`);
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) {
      report(`line ${number}: must be an object {"merchant_id": ..., "shared_user_id": ...}`);
      continue;
    }
    const { merchant_id: merchantId, shared_user_id: sharedUserId, ...rest } = value as Record<string, unknown>;
    const extra = Object.keys(rest);
    if (extra.length > 0) report(`line ${number}: unknown field ${JSON.stringify(extra[0]!.slice(0, 40))} (a line has merchant_id and shared_user_id only)`);
    if (typeof merchantId !== 'string' || merchantIdProblem(merchantId) !== undefined) report(`line ${number}: merchant_id: must be a merchant id (a non-empty string of at most 128 characters)`);
    if (typeof sharedUserId !== 'string' || sharedUserId.length === 0 || sharedUserId.length > 128) report(`line ${number}: shared_user_id: must be a non-empty string of at most 128 characters`);
    if (extra.length > 0 || typeof merchantId !== 'string' || typeof sharedUserId !== 'string' || merchantIdProblem(merchantId) !== undefined || sharedUserId.length === 0 || sharedUserId.length > 128) continue;
    const key = `${merchantId}\u0000${sharedUserId}`;
    if (seen.has(key)) continue;
    seen.add(key);
    if (pairs.length >= MAX_ERASE_PAIRS) {
      report(`line ${number}: more than ${MAX_ERASE_PAIRS} pairs in one file; split it`);
      break;
    }
    pairs.push({ merchantId, sharedUserId });
  }
  return count > 0 ? { problems, count } : { pairs };
}
