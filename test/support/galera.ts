/**
 * A real 3-node MariaDB Galera Cluster of the suite's own (docs/mysql.md#galera-cluster):
 * `mariadb-install-db` into temporary datadirs, `mariadbd` run as the `mysql` user (as root the
 * rsync state transfer fails with "Permission denied"), node 1 bootstrapping with
 * `--wsrep-new-cluster`, each node on free ports for SQL, group communication, IST and SST,
 * `wsrep_provider` from Debian's `galera-4`, `wsrep_sst_method=rsync`. Each node is waited for
 * until `wsrep_local_state_comment` is `Synced`; the cluster is stopped by PID in reverse order
 * and its directories deleted. Without galera-4, rsync or the MariaDB server binaries the suite
 * skips loudly locally and fails in CI (`.ci/run` installs them).
 *
 * The nodes run with the settings docs/mysql.md#durability recommends (`innodb_flush_log_at_trx_commit=1`);
 * a suite may ask for another value to show what it costs. For the crash tests a cluster can be
 * killed whole and started again from its most advanced node (`--wsrep-recover`, as an operator
 * does), and with `isolatable` node 3 runs in a network namespace of the suite's own, its Galera
 * traffic on a veth pair of its own that `partition()` takes down (its SQL on a second pair, so
 * that its server still reaches it, as a server on the same machine would).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
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

function missing(paths = [MARIADBD, INSTALL_DB, GALERA_PROVIDER, RSYNC]): string[] {
  const gone = paths.filter((path) => !existsSync(path));
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

/** True when a MariaDB of the suite's own (`startPlainMariadb`) can start here; in CI a missing piece throws instead of skipping. */
export function plainMariadbAvailable(): boolean {
  const gone = missing([MARIADBD, INSTALL_DB]);
  if (gone.length === 0) return true;
  if (inCi()) throw new Error(`The MariaDB crash suites must run in CI, but ${gone.join(', ')} is missing (.ci/run installs mariadb-server).`);
  console.warn(['', `!!! MariaDB crash suites SKIPPED: ${gone.join(', ')} missing`, '!!! Install them with: apt-get install mariadb-server', ''].join('\n'));
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

/** Where a node's state stands, as `--wsrep-recover` reads it from InnoDB after a crash. */
export interface RecoveredPosition {
  index: number;
  uuid: string;
  seqno: number;
}

export interface GaleraOptions {
  /** `innodb_flush_log_at_trx_commit` of every node: 1 (the default, docs/mysql.md#durability) or what a test shows the cost of. */
  flushLogAtTrxCommit?: 0 | 1 | 2;
  /** Run node 3 in a network namespace of its own, so that `partition()` can cut it off (root, `ip netns`). */
  isolatable?: boolean;
}

export interface GaleraCluster {
  readonly nodes: readonly [GaleraNode, GaleraNode, GaleraNode];
  /** Creates `database` (on node 1; Galera replicates the DDL everywhere). */
  createDatabase(name: string): Promise<void>;
  /**
   * After every node was killed: reads each node's position with `--wsrep-recover` (grastate.dat
   * says seqno -1 after a crash), bootstraps the most advanced one, then starts the others, which
   * catch up from it. Resolves with the positions read and the node bootstrapped.
   */
  recoverAfterCrash(): Promise<{ positions: RecoveredPosition[]; bootstrapped: number }>;
  /** With `isolatable`: takes node 3's Galera link down (its SQL link stays up), or brings it up again. */
  partition(): void;
  heal(): void;
  stop(): Promise<void>;
}

interface Ports {
  sql: number;
  gcomm: number;
  ist: number;
  sst: number;
}

/** Where a node listens: SQL, and Galera's own traffic (group communication, IST, SST). */
interface Addresses {
  sql: string;
  galera: string;
  /** The network namespace the node runs in, if not the suite's own. */
  netns?: string;
}

const LOOPBACK: Addresses = { sql: '127.0.0.1', galera: '127.0.0.1' };

class Node implements GaleraNode {
  #child: ChildProcess | undefined;
  #output = '';
  #connection: Connection | undefined;

  constructor(
    readonly index: number,
    readonly dir: string,
    readonly ports: Ports,
    readonly clusterAddress: string,
    readonly flushLogAtTrxCommit: 0 | 1 | 2 = 1,
    readonly addresses: Addresses = LOOPBACK,
    readonly extraArguments: readonly string[] = [],
  ) {}

  get port(): number {
    return this.ports.sql;
  }

  get running(): boolean {
    return this.#child !== undefined && this.#child.exitCode === null && this.#child.signalCode === null;
  }

  url(database: string): string {
    return `mysql://root@${this.addresses.sql}:${this.ports.sql}/${database}`;
  }


  install(): void {
    const data = join(this.dir, 'data');
    const installed = spawnSync(INSTALL_DB, ['--no-defaults', `--datadir=${data}`, `--tmpdir=${this.dir}`, '--auth-root-authentication-method=normal', '--skip-test-db', `--user=${SERVER_USER}`], {
      encoding: 'utf8',
    });
    if (installed.status !== 0) throw new Error(`mariadb-install-db failed for Galera node ${this.index}: ${installed.stderr}`);
  }

  async start(bootstrap: boolean): Promise<void> {
    this.#output = '';
    const [command, args] = this.#command(this.#serverArguments(bootstrap));
    const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.#child = child;
    child.stdout!.on('data', (chunk: Buffer) => (this.#output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (this.#output += chunk.toString()));
    await this.#waitSynced(child);
  }

  /** mariadbd, inside the node's network namespace when it has one (`ip netns exec` execs it: the PID is mariadbd's). */
  #command(args: string[]): [string, string[]] {
    return this.addresses.netns === undefined ? [MARIADBD, args] : ['ip', ['netns', 'exec', this.addresses.netns, MARIADBD, ...args]];
  }

  /**
   * The node's position after a crash: mariadbd `--wsrep-recover` recovers InnoDB, writes the
   * position it holds to its log and exits.
   */
  async recoverPosition(): Promise<RecoveredPosition> {
    const log = join(this.dir, 'recover.log');
    rmSync(log, { force: true });
    const args = this.#serverArguments(false).map((arg) => (arg.startsWith('--log-error=') ? `--log-error=${log}` : arg));
    const [command, argv] = this.#command([...args, '--wsrep-recover']);
    const child = spawn(command, argv, { stdio: 'ignore' });
    const code = await new Promise((resolve) => child.once('exit', resolve));
    const text = existsSync(log) ? readFileSync(log, 'utf8') : '';
    const match = /WSREP: Recovered position: ([0-9a-f-]{36}):(-?\d+)/.exec(text);
    if (!match) throw new Error(`Galera node ${this.index}: --wsrep-recover (exit ${code}) printed no position:\n${text.slice(-3000)}`);
    return { index: this.index, uuid: match[1]!, seqno: Number(match[2]) };
  }

  /** grastate.dat says the node may bootstrap the cluster (after a crash every node says 0). */
  markSafeToBootstrap(): void {
    const file = join(this.dir, 'data', 'grastate.dat');
    writeFileSync(file, readFileSync(file, 'utf8').replace(/safe_to_bootstrap:\s*0/, 'safe_to_bootstrap: 1'));
  }

  #serverArguments(bootstrap: boolean): string[] {
    const { sql } = this.ports;
    return [
      '--no-defaults',
      `--user=${SERVER_USER}`,
      `--datadir=${join(this.dir, 'data')}`,
      `--port=${sql}`,
      `--bind-address=${this.addresses.sql}`,
      `--socket=${join(this.dir, 's.sock')}`,
      // A tmpdir of its own: at start mariadbd deletes every #sql file in its tmpdir (see mariadb-replica.ts).
      `--tmpdir=${this.dir}`,
      `--pid-file=${join(this.dir, 'p.pid')}`,
      `--log-error=${join(this.dir, 'error.log')}`,
      '--skip-name-resolve',
      '--innodb-buffer-pool-size=32M',
      '--innodb-log-file-size=16M',
      // docs/mysql.md#durability: with 2 (or 0) a commit is acknowledged before it is on disk, and
      // when every node fails at once the cluster loses it (Jepsen, MDEV-38977).
      `--innodb-flush-log-at-trx-commit=${this.flushLogAtTrxCommit}`,
      '--character-set-server=utf8mb4',
      '--collation-server=utf8mb4_unicode_ci',
      '--binlog-format=ROW',
      '--default-storage-engine=InnoDB',
      ...(this.clusterAddress === '' ? [] : this.#wsrepArguments(bootstrap)),
      ...this.extraArguments,
    ];
  }

  #wsrepArguments(bootstrap: boolean): string[] {
    const { sql, gcomm, ist, sst } = this.ports;
    const { galera } = this.addresses;
    return [
      // Galera's requirement: interleaved AUTO_INCREMENT values (it sets auto_increment_increment to the node count).
      '--innodb-autoinc-lock-mode=2',
      '--wsrep-on=ON',
      `--wsrep-provider=${GALERA_PROVIDER}`,
      '--wsrep-cluster-name=merchant-api-test',
      `--wsrep-cluster-address=${this.clusterAddress}`,
      `--wsrep-node-name=node${this.index}`,
      `--wsrep-node-address=${galera}:${gcomm}`,
      `--wsrep-node-incoming-address=${this.addresses.sql}:${sql}`,
      `--wsrep-provider-options=gmcast.listen_addr=tcp://${galera}:${gcomm};ist.recv_addr=${galera}:${ist};gcache.size=32M;evs.inactive_timeout=PT6S;evs.suspect_timeout=PT3S`,
      `--wsrep-sst-receive-address=${galera}:${sst}`,
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
    this.#connection ??= await createConnection({ host: this.addresses.sql, port: this.ports.sql, user: 'root', multipleStatements: true, connectTimeout: 3000 });
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
export async function startGaleraCluster(options: GaleraOptions = {}): Promise<GaleraCluster> {
  const root = mkdtempSync(join(tmpdir(), 'merchant-api-galera-'));
  // mariadbd runs as mysql: it must reach its datadir through the temporary directory.
  chmodSync(root, 0o755);
  const free = await distinctFreePorts(12);
  const ports: Ports[] = [0, 1, 2].map((i) => ({ sql: free[i * 4]!, gcomm: free[i * 4 + 1]!, ist: free[i * 4 + 2]!, sst: free[i * 4 + 3]! }));
  let isolation: Isolation | undefined;
  const stopNodes: Node[] = [];
  const stop = async () => {
    for (const node of [...stopNodes].reverse()) await node.stop();
    isolation?.remove();
    rmSync(root, { recursive: true, force: true });
  };
  try {
    if (options.isolatable) isolation = createIsolation();
    const addresses: Addresses[] = isolation ? [isolation.host, isolation.host, isolation.isolated] : [LOOPBACK, LOOPBACK, LOOPBACK];
    const clusterAddress = `gcomm://${ports.map((p, i) => `${addresses[i]!.galera}:${p.gcomm}`).join(',')}`;
    const nodes = ports.map((p, i) => {
      const dir = join(root, `node${i + 1}`);
      mkdirSync(dir);
      const { uid, gid } = userIds(SERVER_USER);
      chownSync(dir, uid, gid);
      return new Node(i + 1, dir, p, clusterAddress, options.flushLogAtTrxCommit ?? 1, addresses[i]);
    }) as [Node, Node, Node];
    stopNodes.push(...nodes);
    for (const node of nodes) node.install();
    await nodes[0].start(true);
    // Node 3 is reached over its own link (not as localhost): root may connect from anywhere. The
    // joiners' state transfer copies the grant.
    if (isolation) await nodes[0].query("CREATE USER IF NOT EXISTS 'root'@'%'; GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION");
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
      async recoverAfterCrash() {
        if (nodes.some((node) => node.running)) throw new Error('recoverAfterCrash: kill every node first');
        const positions = await Promise.all(nodes.map((node) => node.recoverPosition()));
        const uuids = new Set(positions.map((p) => p.uuid));
        if (uuids.size !== 1) throw new Error(`the nodes recovered different cluster states: ${[...uuids].join(', ')}`);
        // The most advanced node holds every commit any node acknowledged and flushed; the first of equals wins.
        const best = positions.reduce((a, b) => (b.seqno > a.seqno ? b : a));
        const first = nodes[best.index - 1]!;
        first.markSafeToBootstrap();
        await first.start(true);
        for (const node of nodes.filter((n) => n !== first)) await node.start(false);
        return { positions, bootstrapped: best.index };
      },
      partition() {
        if (!isolation) throw new Error('partition() needs startGaleraCluster({ isolatable: true })');
        isolation.cut(true);
      },
      heal() {
        if (!isolation) throw new Error('heal() needs startGaleraCluster({ isolatable: true })');
        isolation.cut(false);
      },
      stop,
    };
  } catch (error) {
    await stop();
    throw error;
  }
}

/** A network namespace for node 3, with a Galera link and an SQL link to the suite's own namespace. */
interface Isolation {
  host: Addresses;
  isolated: Addresses;
  cut(down: boolean): void;
  remove(): void;
}

function ip(...args: string[]): void {
  const result = spawnSync('ip', args, { encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`ip ${args.join(' ')} failed: ${result.stderr}`);
}

/**
 * Two veth pairs into a namespace of the suite's own, on a random 10.x.y.0/29: the Galera link
 * (.1 here, .2 there) and the SQL link (.5 here, .6 there). Taking the Galera link down is a
 * partition: packets vanish and open connections hang, as when a switch fails; nothing resets them.
 */
function createIsolation(): Isolation {
  const tag = randomBytes(3).toString('hex');
  const netns = `merchant-api-galera-${tag}`;
  const [a, b] = [200 + (randomBytes(1)[0]! % 50), randomBytes(1)[0]! & 0xf8];
  const net = (last: number) => `10.${a}.${b}.${last}`;
  const galeraHere = `mgg${tag}`;
  const sqlHere = `mgs${tag}`;
  ip('netns', 'add', netns);
  try {
    ip('-n', netns, 'link', 'set', 'lo', 'up');
    for (const [here, there, first] of [
      [galeraHere, 'galera0', 1],
      [sqlHere, 'sql0', 5],
    ] as const) {
      ip('link', 'add', here, 'type', 'veth', 'peer', 'name', there, 'netns', netns);
      ip('addr', 'add', `${net(first)}/30`, 'dev', here);
      ip('link', 'set', here, 'up');
      ip('-n', netns, 'addr', 'add', `${net(first + 1)}/30`, 'dev', there);
      ip('-n', netns, 'link', 'set', there, 'up');
    }
  } catch (error) {
    spawnSync('ip', ['netns', 'del', netns]);
    throw error;
  }
  return {
    host: { sql: '127.0.0.1', galera: net(1) },
    isolated: { sql: net(6), galera: net(2), netns },
    cut: (down) => ip('link', 'set', galeraHere, down ? 'down' : 'up'),
    // Deleting the namespace deletes its ends of the pairs, and with them ours.
    remove: () => void spawnSync('ip', ['netns', 'del', netns]),
  };
}

/**
 * One MariaDB without Galera, with the nodes' settings otherwise (buffer pool, log flushing; its
 * default AUTO_INCREMENT lock mode): the reference of the Galera benchmark (bench/galera.ts), same binary, same machine,
 * and the single server of the crash tests (`extraArguments` such as a binary log).
 */
export async function startPlainMariadb(options: { flushLogAtTrxCommit?: 0 | 1 | 2; extraArguments?: string[] } = {}): Promise<{ node: GaleraNode; stop(): Promise<void> }> {
  const root = mkdtempSync(join(tmpdir(), 'merchant-api-plain-'));
  chmodSync(root, 0o755);
  const dir = join(root, 'node');
  mkdirSync(dir);
  const { uid, gid } = userIds(SERVER_USER);
  chownSync(dir, uid, gid);
  const [sql] = await distinctFreePorts(1);
  const node = new Node(0, dir, { sql: sql!, gcomm: 0, ist: 0, sst: 0 }, '', options.flushLogAtTrxCommit ?? 1, LOOPBACK, options.extraArguments);
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
