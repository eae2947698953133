/**
 * One MariaDB of the suite's own (test/support/galera.ts `startPlainMariadb`, its own datadir and
 * port) with the settings docs/mysql.md#durability asks of a single primary: the binary log on,
 * `innodb_flush_log_at_trx_commit=1`, `sync_binlog=1`. `serve` checks them at start: silent when
 * they hold, a `mysql_durability_relaxed` event for 2 and for `sync_binlog=0`, a refusal (exit 2)
 * for 0. Then mariadbd is SIGKILLed while signed URLs are being accepted, started again on the same
 * datadir, and every URL that got a 200 is sent again: none is accepted a second time. The test
 * says how long the server refused service.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createMysqlKysely, generateMasterKey, importSeed, migrateToLatest, parseMasterKey } from '../../../src/storage/mysql/index.js';
import { durabilityVerdict } from '../../../src/cli/commands/mysql-durability.js';
import { plainMariadbAvailable, startPlainMariadb, type GaleraNode } from '../../support/galera.js';
import { CLEAN_ENV, CLI, runProcess, startServer, type ServerProcess } from '../../support/processes.js';
import { MERCHANTS } from '../../support/seeds.js';
import { firstAnswer, replayAll, startSignedLoad } from '../../support/signed-load.js';

const PUBLIC_URL = 'http://merchant-api.test';
const { main } = MERCHANTS;

describe('the durability verdict of serve', () => {
  it('warns, and refuses nothing, when the server will not show its settings', () => {
    const lines: string[] = [];
    const io = { out: (line: string) => lines.push(line), err: (line: string) => lines.push(line), env: {} } as unknown as Parameters<typeof durabilityVerdict>[1];
    expect(durabilityVerdict({ findings: [], unreadable: 'ER_SPECIFIC_ACCESS_DENIED_ERROR' }, io, undefined)).toBeUndefined();
    expect(lines).toEqual([
      'Warning: mysql_durability_unknown: check that innodb_flush_log_at_trx_commit=1 (and sync_binlog=1 with a binary log) yourself: the server would not show innodb_flush_log_at_trx_commit and sync_binlog (ER_SPECIFIC_ACCESS_DENIED_ERROR).',
    ]);
  });
});

describe.skipIf(!plainMariadbAvailable())('serve on one MariaDB killed with SIGKILL', () => {
  let server: { node: GaleraNode; stop(): Promise<void> };
  let env: Record<string, string>;

  beforeAll(async () => {
    // The binary log on, as on a primary with replicas: then sync_binlog matters too.
    server = await startPlainMariadb({ flushLogAtTrxCommit: 1, extraArguments: ['--log-bin=bin', '--server-id=1', '--sync-binlog=1'] });
    const name = `crash_${randomBytes(4).toString('hex')}`;
    await server.node.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4`);
    const masterKeyText = generateMasterKey();
    const db = createMysqlKysely(server.node.url(name));
    try {
      await migrateToLatest(db);
      await importSeed(db, parseMasterKey(masterKeyText), { merchants: [{ id: main.id, status: 'active', keys: [...main.keys] }], users: [] });
    } finally {
      await db.destroy();
    }
    // No throttle: the replays are failed authentications, and a block would hide what the salts say.
    env = { DATABASE_URL: server.node.url(name), MASTER_KEY: masterKeyText, PUBLIC_URL, ACCESS_LOG: 'false', FAIR_SHARE: 'false', THROTTLE_AUTH: 'false', STORAGE_TIMEOUT: '2000' };
  }, 120_000);
  afterAll(async () => {
    await server?.stop();
  }, 60_000);

  /** `serve` with `settings` set globally for its start, then the recommended ones again. */
  const startedWith = async (settings: string, run: () => Promise<void>) => {
    await server.node.query(`SET GLOBAL ${settings}`);
    try {
      await run();
    } finally {
      await server.node.query('SET GLOBAL innodb_flush_log_at_trx_commit = 1, GLOBAL sync_binlog = 1');
    }
  };

  it('starts silently on the recommended settings, warns on innodb_flush_log_at_trx_commit=2 and sync_binlog=0, and refuses 0 (exit 2)', async () => {
    const quiet = await startServer('node', CLI.node, env, ['serve']);
    await quiet.stop();
    expect(quiet.output()).not.toMatch(/mysql_durability/);

    await startedWith('innodb_flush_log_at_trx_commit = 2, GLOBAL sync_binlog = 0', async () => {
      const relaxed = await startServer('node', CLI.node, env, ['serve']);
      await relaxed.stop();
      const events = relaxed
        .output()
        .split('\n')
        .filter((line) => line.includes('"mysql_durability_relaxed"'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(events.map((e) => [e.level, e.setting, e.value])).toEqual([
        ['warn', 'innodb_flush_log_at_trx_commit', 2],
        ['warn', 'sync_binlog', 0],
      ]);
      expect(events[0]!.problem).toMatch(/a crash of the machine \(power loss, kernel panic\) loses up to a second of salts .* \(set innodb_flush_log_at_trx_commit=1\)$/);
      expect(events[1]!.problem).toMatch(/\(set sync_binlog=1\)$/);
    });

    await startedWith('innodb_flush_log_at_trx_commit = 0', async () => {
      const { code, output } = await runProcess(process.execPath, [CLI.node, 'serve'], { ...CLEAN_ENV, ...env });
      expect(output).toMatch(/serve: MySQL would forget recorded salts in a crash: innodb_flush_log_at_trx_commit is 0: .*a crash of the server process loses up to a second of commits.* \(set innodb_flush_log_at_trx_commit=1\)\. Refusing to start\./);
      expect(code).toBe(2);
    });
  }, 120_000);

  it('accepts no URL twice after mariadbd is SIGKILLed while accepting, and started again', async () => {
    const served: ServerProcess = await startServer('node', CLI.node, env, ['serve']);
    const load = startSignedLoad(() => [served.url], { merchantId: main.id, key: main.keys[0], publicUrl: PUBLIC_URL });
    try {
      await vi.waitFor(() => expect(load.accepted.length).toBeGreaterThanOrEqual(200), { timeout: 60_000, interval: 100 });
      const killedAt = performance.now();
      await server.node.kill();
      await vi.waitFor(() => expect(firstAnswer(load.answers, killedAt, 503)).toBeDefined(), { timeout: 20_000, interval: 50 });
      const refusedAt = firstAnswer(load.answers, killedAt, 503)!.at;
      const acceptedBefore = load.accepted.length;
      // Started again at once, as a supervisor (systemd's Restart=always) does: InnoDB's crash recovery runs first.
      await server.node.restart();
      const readyAt = performance.now();
      await vi.waitFor(() => expect(firstAnswer(load.answers, readyAt, 200)).toBeDefined(), { timeout: 60_000, interval: 50 });
      await load.stop();
      // The first 200 after the first refusal: answers in flight at the kill may still be 200s.
      const back = firstAnswer(load.answers, refusedAt, 200)!.at;
      const replays = await replayAll(load.accepted, () => served.url);
      const twice = replays.filter((status) => status === 200).length;
      console.log(
        `mysql crash: ${acceptedBefore} URL(s) accepted before the SIGKILL; service refused for ${((back - killedAt) / 1000).toFixed(1)} s from the kill ` +
          `(mariadbd started again at once; it answered its own admin connection ${((readyAt - killedAt) / 1000).toFixed(1)} s after the kill); ` +
          `${twice} of ${load.accepted.length} replays accepted again`,
      );
      expect(replays.filter((status) => status !== 400)).toEqual([]);
    } finally {
      await load.stop();
      await served.stop();
    }
  }, 180_000);
});
