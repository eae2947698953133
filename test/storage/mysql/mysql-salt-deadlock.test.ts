/**
 * Salts InnoDB picked as the victim of a deadlock (instances racing for the same salts, seen
 * in the two-pool race of mysql.test.ts under load) are recorded again, not answered 503:
 * InnoDB rolled back only the statement it chose, which changed nothing. The statements go
 * to a runner of our own, so the deadlock comes exactly where the test puts it.
 */
import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import { SaltWriter } from '../../../src/storage/mysql/statements/salts.js';
import { registerDirectRunner, type RunStatement } from '../../../src/storage/mysql/statements/statement-runner.js';
import { CONFLICT_PAUSE_MAX_MS, CONFLICT_RETRY_MS, writeConflictCounts } from '../../../src/storage/mysql/write-conflicts.js';

const deadlock = () => Object.assign(new Error('Deadlock found when trying to get lock; try restarting transaction'), { code: 'ER_LOCK_DEADLOCK', errno: 1213 });
const now = 1_700_000_000;

/** A writer whose statements `answer` decides: throw to fail one, return to let it through. */
function writerWith(answer: (sql: string, parameters: readonly unknown[], call: number) => void) {
  const statements: string[] = [];
  const db = {} as Kysely<any>;
  const run: RunStatement = async (text, parameters) => {
    statements.push(`${text.startsWith('INSERT') ? 'insert' : text} ${parameters.filter((_, i) => i % 3 === 1).join(',')}`);
    answer(text, parameters, statements.length);
    return { rows: [], affectedRows: parameters.length / 3 };
  };
  registerDirectRunner(db, run);
  // One statement at a time: what arrives while one runs goes together in the next batch.
  return { writer: new SaltWriter(db, { concurrency: 1 }), statements };
}

const record = (writer: SaltWriter, salt: string) => writer.record({ merchantId: 'shop', salt, expiresAt: now + 300, now });

describe('salts on MySQL: a deadlock victim', () => {
  it('records each salt of a batch that InnoDB rolled back to break a deadlock', async () => {
    const { writer, statements } = writerWith((_, parameters) => {
      if (parameters.length > 3) throw deadlock();
    });
    const answers = Promise.all([record(writer, 'first'), record(writer, 'b'), record(writer, 'a')]);
    expect(await answers).toEqual([true, true, true]);
    expect(statements).toEqual(['insert first', 'insert a,b', 'insert a', 'insert b']);
  });

  it('runs a single salt statement again after a deadlock, for a bounded time', async () => {
    let victims = 2;
    const again = writerWith(() => {
      if (victims-- > 0) throw deadlock();
    });
    expect(await record(again.writer, 'lucky')).toBe(true);
    expect(again.statements).toEqual(['insert lucky', 'insert lucky', 'insert lucky']);

    // Losing many times in a row (sixty writers of one row on a busy machine): still recorded, where a count of 4 retries gave a 503.
    let many = 12;
    const contended = writerWith(() => {
      if (many-- > 0) throw deadlock();
    });
    expect(await record(contended.writer, 'contended')).toBe(true);
    expect(contended.statements).toHaveLength(13);

    const never = writerWith(() => {
      throw deadlock();
    });
    const before = writeConflictCounts();
    const started = performance.now();
    await expect(record(never.writer, 'unlucky')).rejects.toMatchObject({ code: 'ER_LOCK_DEADLOCK' });
    // Tried until CONFLICT_RETRY_MS had passed (less the last pause it would not take): then the error is the storage's 503, as any other.
    expect(CONFLICT_RETRY_MS).toBe(2000);
    expect(performance.now() - started).toBeGreaterThanOrEqual(CONFLICT_RETRY_MS - CONFLICT_PAUSE_MAX_MS);
    // Never a spin: the pauses double to CONFLICT_PAUSE_MAX_MS, at least half of it each (1 + 2 + 4 + 8 + 16 ms, then 25 ms each).
    const tries = never.statements.length;
    expect(tries).toBeGreaterThan(1);
    expect(tries).toBeLessThanOrEqual(5 + Math.ceil((CONFLICT_RETRY_MS - 31) / (CONFLICT_PAUSE_MAX_MS / 2)) + 1);
    // Each conflict is counted for merchant_api_storage_write_conflicts_total: the retried ones, and the one that gave up.
    expect(writeConflictCounts()).toEqual({ retried: before.retried + tries - 1, failed: before.failed + 1 });
  });
});
