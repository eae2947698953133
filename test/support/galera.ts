/**
 * A real 3-node MariaDB Galera Cluster of the suite's own (docs/mysql.md#galera-cluster):
 * `mariadb-install-db` into temporary datadirs, `mariadbd` run as the `mysql` user (as root the
 * rsync state transfer fails with "Permission denied"), node 1 bootstrapping with
 * `--wsrep-new-cluster`, each node on free ports for SQL, group communication, IST and SST,
 * `wsrep_provider` from Debian's `galera-4`, `wsrep_sst_method=rsync`. Each node is waited for
 * until `wsrep_local_state_comment` is `Synced`; the cluster is stopped by PID in reverse order
 * and its directories deleted. Without galera-4, rsync or the MariaDB server binaries the suite
 * skips loudly locally and fails in CI (`.ci/run` installs them).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createConnection, type Connection } from 'mysql2/promise';
import { freePort } from './ports.js';
import { sleep } from './sleep.js';
import { inCi } from './ci.js';

const MARIADBD = process.env.MARIADBD ?? '/usr/sbin/mariadbd';
const INSTALL_DB = process.env.MARIADB_INSTALL_DB ?? '/usr/bin/mariadb-install-db';
export const GALERA_PROVIDER = process.env.GALERA_PROVIDER ?? '/usr/lib/galera/libgalera_smm.so';
const RSYNC = '/usr/bin/rsync';
/** The user mariadbd runs as: rsync SST as root fails, and a root mariadbd refuses to start without `--user`. */
const SERVER_USER = 'mysql';

function missing(): string[] {
  const gone = [MARIADBD, INSTALL_DB, GALERA_PROVIDER, RSYNC].filter((path) => !existsSync(path));
  if (spawnSync('id', ['-u', SERVER_USER]).status !== 0) gone.push(`the user ${SERVER_USER}`);
  return gone;
}

/** True when a cluster can start here; in CI a missing piece throws instead of skipping. */
export function galeraAvailable(): boolean {
  const gone = missing();
  if (gone.length === 0) return true;
  if (inCi()) throw new Error(`The Galera suites must run in CI, but ${gone.join(', ')} is missing (.ci/run installs galera-4 and rsync).`);
  console.warn(['', `!!! Galera suites SKIPPED: ${gone.join(', ')} missing`, '!!! Install them with: apt-get install galera-4 rsync mariadb-server', ''].join('\n'));
  return false;
}

export interface GaleraNode {
  /** 1, 2 or 3. */
  readonly index: number;
  readonly port: number;
  /** mysql:// URL of `database` on this node, as root. */
  url(database: string): string;
  /** A query on this node's own admin connection (multiple statements allowed). */
  query<T = any>(text: string): Promise<T[]>;
  /** True while the mariadbd process runs. */
  readonly running: boolean;
  /** SIGKILL: the process is gone at once, as when its machine fails. */
  kill(): Promise<void>;
  /** Starts the node again after `kill` (it rejoins by IST or SST) and waits until it is Synced. */
  restart(): Promise<void>;
}

export interface GaleraCluster {
  readonly nodes: readonly [GaleraNode, GaleraNode, GaleraNode];
  /** Creates `database` (on node 1; Galera replicates the DDL everywhere). */
  createDatabase(name: string): Promise<void>;
  stop(): Promise<void>;
}

interface Ports {
  sql: number;
  gcomm: number;
  ist: number;
  sst: number;
}

class Node implements GaleraNode {
  #child: ChildProcess | undefined;
  #output = '';
  #connection: Connection | undefined;

  constructor(
    readonly index: number,
    readonly dir: string,
    readonly ports: Ports,
    readonly clusterAddress: string,
  ) {}

  get port(): number {
    return this.ports.sql;
  }

  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  url(database: string): string {
    return `mysql://root@127.0.0.1:${this.ports.sql}/${database}`;
  }

  install(): void {
    const data = join(this.dir, 'data');
    const installed = spawnSync(INSTALL_DB, ['--no-defaults', `--datadir=${data}`, `--tmpdir=${this.dir}`, '--auth-root-authentication-method=normal', '--skip-test-db', `--user=${SERVER_USER}`], {
      encoding: 'utf8',
    });
    if (installed.status !== 0) throw new Error(`mariadb-install-db failed for Galera node ${this.index}: ${installed.stderr}`);
  }

  async start(bootstrap: boolean): Promise<void> {
    const { sql } = this.ports;
    this.#output = '';
    const child = spawn(
      MARIADBD,
      [
        '--no-defaults',
        `--user=${SERVER_USER}`,
        `--datadir=${join(this.dir, 'data')}`,
        `--port=${sql}`,
        '--bind-address=127.0.0.1',
        `--socket=${join(this.dir, 's.sock')}`,
        // A tmpdir of its own: at start mariadbd deletes every #sql file in its tmpdir (see mariadb-replica.ts).
        `--tmpdir=${this.dir}`,
        `--pid-file=${join(this.dir, 'p.pid')}`,
        `--log-error=${join(this.dir, 'error.log')}`,
        '--skip-name-resolve',
        '--innodb-buffer-pool-size=32M',
        '--innodb-log-file-size=16M',
        // The suites' throughput, not durability: Galera's durability is the other nodes.
        '--innodb-flush-log-at-trx-commit=2',
        '--character-set-server=utf8mb4',
        '--collation-server=utf8mb4_unicode_ci',
        '--binlog-format=ROW',
        '--default-storage-engine=InnoDB',
        ...(this.clusterAddress === '' ? [] : this.#wsrepArguments(bootstrap)),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    this.#child = child;
    child.stdout!.on('data', (chunk: Buffer) => (this.#output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (this.#output += chunk.toString()));
    await this.#waitSynced(child);
  }

  #wsrepArguments(bootstrap: boolean): string[] {
    const { sql, gcomm, ist, sst } = this.ports;
    return [
      // Galera's requirement: interleaved AUTO_INCREMENT values (it sets auto_increment_increment to the node count).
      '--innodb-autoinc-lock-mode=2',
      '--wsrep-on=ON',
      `--wsrep-provider=${GALERA_PROVIDER}`,
      '--wsrep-cluster-name=merchant-api-test',
      `--wsrep-cluster-address=${this.clusterAddress}`,
      `--wsrep-node-name=node${this.index}`,
      `--wsrep-node-address=127.0.0.1:${gcomm}`,
      `--wsrep-node-incoming-address=127.0.0.1:${sql}`,
      `--wsrep-provider-options=gmcast.listen_addr=tcp://127.0.0.1:${gcomm};ist.recv_addr=127.0.0.1:${ist};gcache.size=32M;evs.inactive_timeout=PT6S;evs.suspect_timeout=PT3S`,
      `--wsrep-sst-receive-address=127.0.0.1:${sst}`,
      '--wsrep-sst-method=rsync',
      '--wsrep-slave-threads=2',
      ...(bootstrap ? ['--wsrep-new-cluster'] : []),
    ];
  }

  async #waitSynced(child: ChildProcess): Promise<void> {
    for (let waited = 0; ; waited += 200) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`Galera node ${this.index} exited before it was Synced:\n${this.#log()}`);
      if (waited > 90_000) throw new Error(`Galera node ${this.index} was not Synced within 90 s:\n${this.#log()}`);
      try {
        if (this.clusterAddress === '') {
          await this.query('SELECT 1');
          return;
        }
        const [row] = await this.query<{ Value: string }>("SHOW STATUS LIKE 'wsrep_local_state_comment'");
        if (row?.Value === 'Synced') return;
      } catch {
        await this.#dropConnection();
      }
      await sleep(200);
    }
  }

  #log(): string {
    const file = join(this.dir, 'error.log');
    const read = existsSync(file) ? spawnSync('tail', ['-n', '40', file], { encoding: 'utf8' }).stdout : '';
    return `${this.#output}\n${read}`;
  }

  async query<T = any>(text: string): Promise<T[]> {
    this.#connection ??= await createConnection({ host: '127.0.0.1', port: this.ports.sql, user: 'root', multipleStatements: true, connectTimeout: 3000 });
    return (await this.#connection.query(text))[0] as T[];
  }

  async #dropConnection(): Promise<void> {
    const connection = this.#connection;
    this.#connection = undefined;
    connection?.destroy();
  }

  async kill(): Promise<void> {
    await this.#dropConnection();
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGKILL');
    await exited;
  }

  async restart(): Promise<void> {
    await this.kill();
    await this.start(false);
  }

  /** SIGTERM (a clean leave of the cluster), SIGKILL after 20 s. */
  async stop(): Promise<void> {
    await this.#dropConnection();
    const child = this.#child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    await exited;
    clearTimeout(timer);
  }
}

async function distinctFreePorts(count: number): Promise<number[]> {
  const ports = new Set<number>();
  while (ports.size < count) ports.add(await freePort());
  return [...ports];
}

/** Starts a 3-node cluster; rejects (after stopping whatever started) when a node does not reach Synced. */
export async function startGaleraCluster(): Promise<GaleraCluster> {
  const root = mkdtempSync(join(tmpdir(), 'merchant-api-galera-'));
  // mariadbd runs as mysql: it must reach its datadir through the temporary directory.
  chmodSync(root, 0o755);
  const free = await distinctFreePorts(12);
  const ports: Ports[] = [0, 1, 2].map((i) => ({ sql: free[i * 4]!, gcomm: free[i * 4 + 1]!, ist: free[i * 4 + 2]!, sst: free[i * 4 + 3]! }));
  const clusterAddress = `gcomm://${ports.map((p) => `127.0.0.1:${p.gcomm}`).join(',')}`;
  const nodes = ports.map((p, i) => {
    const dir = join(root, `node${i + 1}`);
    mkdirSync(dir);
    const { uid, gid } = userIds(SERVER_USER);
    chownSync(dir, uid, gid);
    return new Node(i + 1, dir, p, clusterAddress);
  }) as [Node, Node, Node];
  const stop = async () => {
    for (const node of [...nodes].reverse()) await node.stop();
    rmSync(root, { recursive: true, force: true });
  };
  try {
    for (const node of nodes) node.install();
    await nodes[0].start(true);
    // One joiner at a time: two rsync transfers at once from one donor wait for each other anyway.
    await nodes[1].start(false);
    await nodes[2].start(false);
    return {
      nodes,
      async createDatabase(name) {
        await nodes.find((node) => node.running)!.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
        // DDL commits on every node in one order, but a node applies it from its queue: until it has,
        // a connection to it naming the database fails (seen under load). Wait for every running node.
        for (const node of nodes.filter((n) => n.running)) {
          const deadline = Date.now() + 15_000;
          while ((await node.query(`SELECT 1 FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = '${name}'`)).length === 0) {
            if (Date.now() > deadline) throw new Error(`Galera node on port ${node.ports.sql} did not apply CREATE DATABASE ${name} within 15 s`);
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
        }
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/**
 * One MariaDB without Galera, with the nodes' settings otherwise (buffer pool, log flushing; its
 * default AUTO_INCREMENT lock mode): the reference of the Galera benchmark (bench/galera.ts), same binary, same machine.
 */
export async function startPlainMariadb(): Promise<{ node: GaleraNode; stop(): Promise<void> }> {
  const root = mkdtempSync(join(tmpdir(), 'merchant-api-plain-'));
  chmodSync(root, 0o755);
  const dir = join(root, 'node');
  mkdirSync(dir);
  const { uid, gid } = userIds(SERVER_USER);
  chownSync(dir, uid, gid);
  const [sql] = await distinctFreePorts(1);
  const node = new Node(0, dir, { sql: sql!, gcomm: 0, ist: 0, sst: 0 }, '');
  const stop = async () => {
    await node.stop();
    rmSync(root, { recursive: true, force: true });
  };
  try {
    node.install();
    await node.start(false);
    return { node, stop };
  } catch (error) {
    await stop();
    throw error;
  }
}

function userIds(name: string): { uid: number; gid: number } {
  const uid = Number(spawnSync('id', ['-u', name], { encoding: 'utf8' }).stdout.trim());
  const gid = Number(spawnSync('id', ['-g', name], { encoding: 'utf8' }).stdout.trim());
  return { uid, gid };
}
