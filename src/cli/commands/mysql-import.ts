/**
 * `merchant-api import FILE`: the seed document (merchants, keys,
 * users; one transaction) or NDJSON of user records (`.ndjson`/`.jsonl`, or
 * `--format ndjson`; validated and written in one streamed pass, in batches).
 * Prints progress on a terminal, bad lines with their number, and a summary.
 */
import { constants } from 'node:fs';
import { access, readFile, stat } from 'node:fs/promises';
import { parseSeed, SeedError } from '../../storage/memory/index.js';
import { eraseShares, importSeed, importUserFile, ImportValidationError, type ErasureRecordOptions, type ErasureResult, type ImportSummary } from '../../storage/mysql/index.js';
import { ACTOR_OPTION, actorOf } from './actor.js';
import { erasureRecordOf, REASON_OPTION } from './erasure-record.js';
import { readErasePairs } from './erase-file.js';
import { redact } from '../../cli-internal.js';
import type { CliCommand, CliIo } from '../io.js';
import { CliUsageError } from '../usage-error.js';
import type { MysqlConfig } from '../config.js';
import { runMysqlCommand, withDatabase } from './mysql-env.js';
import { BATCH_SIZE } from './option-limits.js';
import { logAdminChange } from './admin-log.js';
import { parseCommandArgs } from './parse-args.js';

const MAX_BATCH_SIZE = BATCH_SIZE.max;
const USAGE = `Usage: merchant-api import FILE [--format seed|ndjson] [--batch-size N] [--set-status] [--actor NAME]
       merchant-api import --erase FILE [--batch-size N] [--dry-run] [--actor NAME] [--reason TEXT]
  seed:   {"merchants": [...], "users": [...]} as in examples/seed.json (default)
  ndjson: one user record with its "merchant_id" per line (default for .ndjson and .jsonl)
  --erase FILE     NDJSON of {"merchant_id": ..., "shared_user_id": ...} lines: erase each share, and the
                   user record once no share remains (every line is checked first; --dry-run counts only;
                   the audit trail keeps a keyed hash of each id, and --reason)
  --batch-size N   users per transaction, ${BATCH_SIZE.default} by default, ${BATCH_SIZE.min} to ${MAX_BATCH_SIZE} (with --erase: pairs)
  --set-status     seed: give merchants that exist already the file's status (default: they keep theirs)`;

/** How many problems are printed before "and N more". */
const SHOWN_PROBLEMS = 20;

/** The `import` command. */
export const importCommand: CliCommand = async (args, io, config) => {
  const parsed = parseCommandArgs(args, { format: { type: 'string' }, 'batch-size': { type: 'string' }, 'set-status': { type: 'boolean' }, erase: { type: 'boolean' }, 'dry-run': { type: 'boolean' }, ...ACTOR_OPTION, ...REASON_OPTION }, USAGE);
  if (parsed === 'help') {
    io.out(USAGE);
    return 0;
  }
  const actor = actorOf(parsed.values, io);
  const [file, ...extra] = parsed.positionals;
  if (parsed.values.erase) {
    if (file === undefined || extra.length > 0) throw new CliUsageError(USAGE);
    if (parsed.values.format !== undefined || parsed.values['set-status']) throw new CliUsageError(`--erase takes neither --format nor --set-status.\n${USAGE}`);
    const dryRun = Boolean(parsed.values['dry-run']);
    return eraseFile(io, config, file, batchSizeOf(parsed.values['batch-size'] as string | undefined), dryRun, { actor, ...erasureRecordOf(parsed.values, config, dryRun) });
  }
  if (parsed.values['dry-run']) throw new CliUsageError(`--dry-run applies to --erase only.\n${USAGE}`);
  if (parsed.values.reason !== undefined) throw new CliUsageError(`--reason applies to --erase only.\n${USAGE}`);
  if (file === undefined || extra.length > 0) throw new CliUsageError(USAGE);
  const format = (parsed.values.format as string | undefined) ?? (/\.(nd)?jsonl?$/i.test(file) && !/\.json$/i.test(file) ? 'ndjson' : 'seed');
  if (format !== 'seed' && format !== 'ndjson') throw new CliUsageError(`--format must be seed or ndjson.\n${USAGE}`);
  const batchSize = batchSizeOf(parsed.values['batch-size'] as string | undefined);
  const setStatus = Boolean(parsed.values['set-status']);
  if (setStatus && format !== 'seed') throw new CliUsageError(`--set-status applies to seed imports only (an NDJSON file holds no merchants).\n${USAGE}`);
  const unreadable = await readProblem(file);
  if (unreadable !== undefined) {
    io.err(`import ${file} failed: ${unreadable}; nothing was imported.`);
    return 1;
  }

  const started = performance.now();
  const onProgress = progressReporter(io);
  return runMysqlCommand(io, `import ${file}`, async () => {
    try {
      const summary = format === 'seed' ? await importSeedFile(config, file, batchSize, setStatus, onProgress, actor) : await withDatabase(config, (db) => importUserFile(db, file, { batchSize, onProgress, actor }));
      io.progress?.('');
      logAdminChange(io, 'import_completed', { file, format, ...snakeCase(summary) }, 'import written');
      io.out(`Imported ${file} in ${((performance.now() - started) / 1000).toFixed(1)} s: ${describe(summary)}.`);
      return 0;
    } catch (error) {
      io.progress?.('');
      if (error instanceof SeedError || error instanceof ImportValidationError) {
        const problems = error instanceof SeedError ? error.problems.map(redact) : error.problems;
        const count = error instanceof SeedError ? problems.length : error.problemCount;
        for (const problem of problems.slice(0, SHOWN_PROBLEMS)) io.err(`${file}: ${problem}`);
        if (count > SHOWN_PROBLEMS) io.err(`${file}: ... and ${count - SHOWN_PROBLEMS} more problem(s).`);
        const imported = error instanceof ImportValidationError ? error.imported : undefined;
        if (imported) {
          logAdminChange(io, 'import_stopped', { file, format, through_line: imported.throughLine, ...snakeCase(imported.summary) }, 'import stopped at a bad line; the batches before it are written');
          // One streamed pass: the batches before the first problem are in; the import is an upsert, so running it again is safe.
          io.err(`Lines 1 to ${imported.throughLine} were imported (${imported.summary.usersInserted} user(s) inserted, ${imported.summary.usersUpdated} updated); nothing after them was written: fix the ${count} problem(s) above and run the import again.`);
        } else {
          io.err(`Nothing was imported: fix the ${count} problem(s) above and run the import again.`);
        }
        return 1;
      }
      throw error;
    }
  });
};

function batchSizeOf(text = String(BATCH_SIZE.default)): number {
  if (!/^\d+$/.test(text) || Number(text) < BATCH_SIZE.min || Number(text) > MAX_BATCH_SIZE) throw new CliUsageError(`--batch-size must be a whole number from ${BATCH_SIZE.min} to ${MAX_BATCH_SIZE}.`);
  return Number(text);
}

/**
 * `import --erase FILE`: every line checked first (nothing is erased from a file with a problem),
 * then the pairs erased in batches, each batch one transaction with its audit event.
 */
async function eraseFile(io: CliIo, config: MysqlConfig, file: string, batchSize: number, dryRun: boolean, record: ErasureRecordOptions): Promise<number> {
  const unreadable = await readProblem(file);
  if (unreadable !== undefined) {
    io.err(`import --erase ${file} failed: ${unreadable}; nothing was erased.`);
    return 1;
  }
  const read = await readErasePairs(file);
  if ('problems' in read) {
    for (const problem of read.problems.slice(0, SHOWN_PROBLEMS)) io.err(`${file}: ${problem}`);
    if (read.count > SHOWN_PROBLEMS) io.err(`${file}: ... and ${read.count - SHOWN_PROBLEMS} more problem(s).`);
    io.err(`Nothing was erased: fix the ${read.count} problem(s) above and run it again.`);
    return 1;
  }
  const { pairs } = read;
  const onProgress = progressReporter(io, 'erasing', 'pairs');
  return runMysqlCommand(io, `import --erase ${file}`, () =>
    withDatabase(config, async (db) => {
      const total: ErasureResult = { shares: 0, users: 0, merchants: 0 };
      const merchants = new Set<string>();
      for (let start = 0; start < pairs.length; start += batchSize) {
        const batch = pairs.slice(start, start + batchSize);
        const result = await eraseShares(db, batch, { dryRun, ...record });
        total.shares += result.shares;
        total.users += result.users;
        for (const pair of batch) merchants.add(pair.merchantId);
        onProgress(Math.min(start + batchSize, pairs.length), pairs.length);
      }
      io.progress?.('');
      if (!dryRun && total.shares > 0) logAdminChange(io, 'user_erased', { file, pairs: pairs.length, shares: total.shares, users: total.users }, 'users erased');
      const verb = dryRun ? 'Would remove' : 'Removed';
      io.out(`${verb} ${total.shares} share(s) of the ${pairs.length} pair(s) in ${file} (${pairs.length - total.shares} had no share) and ${total.users} user record(s) no share remained for${dryRun ? '; nothing changed (--dry-run)' : ''}.`);
      return 0;
    }),
  );
}

async function importSeedFile(config: MysqlConfig, file: string, batchSize: number, setStatus: boolean, onProgress: (done: number, total: number) => void, actor: string): Promise<ImportSummary> {
  let document: unknown;
  try {
    document = JSON.parse(await readFile(file, 'utf8'));
  } catch (error) {
    const reason = error instanceof SyntaxError ? 'is not valid JSON (for one record per line use --format ndjson)' : `cannot be read (${(error as NodeJS.ErrnoException).code ?? 'error'})`;
    throw new ImportValidationError([`the file ${reason}`]);
  }
  const seed = parseSeed(document);
  // Sealing keys needs the master key; a users-only seed does not.
  const key = seed.merchants.length > 0 ? config.masterKey() : undefined;
  return withDatabase(config, (db) => importSeed(db, key, seed, { batchSize, onProgress, setStatus, actor }));
}

/** The summary's counts under the log's snake_case names. */
function snakeCase(summary: ImportSummary): Record<string, number> {
  return Object.fromEntries(Object.entries(summary).map(([name, value]) => [name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), value]));
}

/** Why `file` cannot be imported before any database work (missing, a directory, unreadable), or undefined. */
async function readProblem(file: string): Promise<string | undefined> {
  try {
    if (!(await stat(file)).isFile()) return 'it is not a file';
    await access(file, constants.R_OK);
    return undefined;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return 'no such file';
    if (code === 'EACCES' || code === 'EPERM') return 'the file cannot be read (permission denied)';
    return `the file cannot be read (${code ?? 'error'})`;
  }
}

function describe(summary: ImportSummary): string {
  const statuses =
    summary.merchantStatusesChanged > 0
      ? ` (${summary.merchantStatusesChanged} status(es) changed)`
      : summary.merchantStatusesKept > 0
        ? ` (${summary.merchantStatusesKept} kept a status other than the file's: --set-status applies the file's)`
        : '';
  const parts = [
    `${summary.merchantsCreated} merchant(s) created, ${summary.merchantsUpdated} updated${statuses}`,
    `${summary.keysAdded} key(s) added`,
    `${summary.usersInserted} user(s) inserted, ${summary.usersUpdated} updated, ${summary.usersUnchanged} unchanged`,
  ];
  if (summary.keysLeftRevoked > 0) parts.push(`${summary.keysLeftRevoked} key(s) in the file were revoked before and stay revoked`);
  if (summary.usersRepeated) {
    parts.push(`${summary.usersRepeated} line(s) repeated a user of an earlier line, the last record kept (first: line ${summary.firstRepeatedLine} repeats line ${summary.firstRepeatedLineRepeats})`);
  }
  return parts.join('; ');
}

/** A progress line at most every 200 ms, only on a terminal. */
function progressReporter(io: CliIo, doing = 'importing', what = 'users'): (done: number, total: number) => void {
  let last = 0;
  const started = performance.now();
  return (done, total) => {
    if (!io.progress) return;
    const at = performance.now();
    if (at - last < 200 && done < total) return;
    last = at;
    const rate = Math.round(done / Math.max((at - started) / 1000, 0.001));
    io.progress(`${doing}: ${done}/${total} ${what} (${total ? Math.floor((done / total) * 100) : 100}%, ${rate}/s)`);
  };
}
