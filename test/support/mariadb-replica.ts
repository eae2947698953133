/**
 * A real MariaDB primary and a replica of it, for the read-replica suite
 * (docs/mysql.md#read-replicas): two private `mariadbd` processes in
 * temporary directories on free ports, the primary with a binary log, the
 * replica replicating from it by GTID. Stopped and deleted afterwards. Needs
 * the MariaDB server binaries (`mariadbd`, `mariadb-install-db`), which the
 * MySQL suites' server brings; without them the suite skips loudly locally
 * and fails in CI.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { createConnection, type Connection } from 'mysql2/promise';
import { freePort } from './ports.js';
import { sleep } from './sleep.js';
import { inCi } from './ci.js';

const MARIADBD = process.env.MARIADBD ?? '/usr/sbin/mariadbd';
const INSTALL_DB = process.env.MARIADB_INSTALL_DB ?? '/usr/bin/mariadb-install-db';

export function replicaAvailable(): boolean {
  if (existsSync(MARIADBD) && existsSync(INSTALL_DB)) return true;
  if (inCi()) throw new Error(`The read-replica suite must run in CI, but ${MARIADBD} or ${INSTALL_DB} is missing.`);
  console.warn(['', `!!! Read-replica suite SKIPPED: ${MARIADBD} or ${INSTALL_DB} is missing`, '!!! Install them with: apt-get install mariadb-server', ''].join('\n'));
  return false;
}

export interface MariadbServer {
  port: number;
  /** mysql:// URL of `database` on this server, as root. */
  url(database: string): string;
  query(text: string): Promise<unknown>;
  kill(): Promise<void>;
}

async function startServer(dir: string, serverId: number, extra: string[]): Promise<{ server: MariadbServer; child: ChildProcess }> {
  const data = join(dir, 'data');
  const installed = spawnSync(INSTALL_DB, ['--no-defaults', `--datadir=${data}`, `--tmpdir=${dir}`, '--auth-root-authentication-method=normal', '--skip-test-db', `--user=${userInfo().username}`], { encoding: 'utf8' });
  if (installed.status !== 0) throw new Error(`mariadb-install-db failed: ${installed.stderr}`);
  const port = await freePort();
  const child = spawn(
    MARIADBD,
    [
      '--no-defaults', `--user=${userInfo().username}`, `--datadir=${data}`, `--port=${port}`, '--bind-address=127.0.0.1', `--socket=${join(dir, 's.sock')}`,
      // A tmpdir of its own: at start mariadbd deletes every #sql file in its tmpdir, which in /tmp
      // would include the temporary tables of the machine's own MariaDB, serving the other suites.
      `--tmpdir=${dir}`,
      `--pid-file=${join(dir, 'p.pid')}`, `--server-id=${serverId}`, '--skip-name-resolve', '--innodb-buffer-pool-size=16M', '--innodb-log-file-size=8M',
      '--character-set-server=utf8mb4', '--collation-server=utf8mb4_unicode_ci', ...extra,
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  for (let waited = 0; !/ready for connections/.test(output); waited += 50) {
    if (child.exitCode !== null || waited > 20_000) throw new Error(`mariadbd on ${port} did not start:\n${output}`);
    await sleep(50);
  }
  let connection: Connection | undefined;
  const server: MariadbServer = {
    port,
    url: (database) => `mysql://root@127.0.0.1:${port}/${database}`,
    async query(text) {
      connection ??= await createConnection({ host: '127.0.0.1', port, user: 'root', multipleStatements: true });
      return (await connection.query(text))[0];
    },
    async kill() {
      await connection?.end().catch(() => undefined);
      connection = undefined;
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
  return { server, child };
}

export interface ReplicatedPair {
  primary: MariadbServer;
  replica: MariadbServer;
  /** Resolves once the replica has applied everything the primary has written so far. */
  caughtUp(): Promise<void>;
  stop(): Promise<void>;
}

export async function startPrimaryAndReplica(): Promise<ReplicatedPair> {
  const dirs = [mkdtempSync(join(tmpdir(), 'merchant-api-primary-')), mkdtempSync(join(tmpdir(), 'merchant-api-replica-'))];
  const started: MariadbServer[] = [];
  const stop = async () => {
    await Promise.all(started.map((server) => server.kill()));
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  };
  try {
    const { server: primary } = await startServer(dirs[0]!, 1, ['--log-bin=bin', '--binlog-format=ROW']);
    started.push(primary);
    const { server: replica } = await startServer(dirs[1]!, 2, []);
    started.push(replica);
    await replica.query(`CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=${primary.port}, MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=slave_pos, MASTER_CONNECT_RETRY=1; START SLAVE;`);
    const caughtUp = async () => {
      const [row] = (await primary.query('SELECT @@gtid_binlog_pos AS pos')) as { pos: string }[];
      const [waited] = (await replica.query(`SELECT MASTER_GTID_WAIT('${row!.pos}', 20) AS result`)) as { result: number }[];
      if (Number(waited!.result) !== 0) throw new Error('the replica did not catch up within 20 s');
    };
    await caughtUp();
    return { primary, replica, caughtUp, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}
