/**
 * A DNS server of the test's own (node:dgram, UDP port 53 on an address of 127/8 nobody else
 * uses), and a process run with it as its only name server: `unshare -m` with a resolv.conf of
 * its own bind-mounted on /etc/resolv.conf (needs root, as the suites run; `dnsNamespaceAvailable`
 * says whether this machine allows it). Names in `answers` get their A and AAAA records with
 * `ttl`; names `hang` matches are never answered (a query is counted and dropped: the resolver
 * waits for its timeout); any other name is NXDOMAIN. Every query is counted by name and type.
 */
import { spawnSync } from 'node:child_process';
import { createSocket, type Socket } from 'node:dgram';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { isIPv4 } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface DnsRecords {
  a?: string[];
  aaaa?: string[];
  /** Seconds; default 300. */
  ttl?: number;
}

export interface TestDnsServer {
  /** The address it listens on. */
  address: string;
  /** 53 unless asked for another (0: any free one); a resolv.conf names no port. */
  port: number;
  /** Answers by name (lower case, no trailing dot); changed at will. */
  answers: Map<string, DnsRecords>;
  /** Names never answered. */
  hang: (name: string) => boolean;
  /** Queries received, `name/A` or `name/AAAA` → count. */
  queries: Map<string, number>;
  /** A resolv.conf naming this server only, the system's default timeouts (5 s, 2 attempts). */
  resolvConf: string;
  /** `[command, args]` that runs `command args` in a mount namespace whose /etc/resolv.conf is `resolvConf`. */
  wrap(command: string, args: string[]): [string, string[]];
  close(): Promise<void>;
}

const TYPE_A = 1;
const TYPE_AAAA = 28;

/** The question's name, type and where the question ends; undefined for a malformed message. */
function readQuestion(message: Buffer): { name: string; type: number; end: number } | undefined {
  if (message.length < 12 || message.readUInt16BE(4) !== 1) return undefined;
  const labels: string[] = [];
  let offset = 12;
  for (;;) {
    if (offset >= message.length) return undefined;
    const length = message[offset]!;
    offset++;
    if (length === 0) break;
    if (length > 63 || offset + length > message.length) return undefined;
    labels.push(message.toString('latin1', offset, offset + length));
    offset += length;
  }
  if (offset + 4 > message.length) return undefined;
  return { name: labels.join('.').toLowerCase(), type: message.readUInt16BE(offset), end: offset + 4 };
}

function ipv6Bytes(address: string): Buffer {
  const [head = '', tail = ''] = address.split('::');
  const left = head === '' ? [] : head.split(':');
  const right = tail === '' ? [] : tail.split(':');
  const groups = address.includes('::') ? [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right] : left;
  const bytes = Buffer.alloc(16);
  groups.forEach((group, i) => bytes.writeUInt16BE(parseInt(group, 16), i * 2));
  return bytes;
}

function answer(query: Buffer, question: { type: number; end: number }, records: DnsRecords | undefined): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(query.readUInt16BE(0), 0);
  // QR, the query's RD, RA; NXDOMAIN for a name it does not know.
  header.writeUInt16BE(0x8000 | (query.readUInt16BE(2) & 0x0100) | 0x0080 | (records === undefined ? 3 : 0), 2);
  header.writeUInt16BE(1, 4);
  const addresses = records === undefined ? [] : question.type === TYPE_A ? records.a ?? [] : question.type === TYPE_AAAA ? records.aaaa ?? [] : [];
  header.writeUInt16BE(addresses.length, 6);
  const parts = [header, query.subarray(12, question.end)];
  for (const address of addresses) {
    const data = isIPv4(address) ? Buffer.from(address.split('.').map(Number)) : ipv6Bytes(address);
    const record = Buffer.alloc(12);
    record.writeUInt16BE(0xc00c, 0); // the question's name
    record.writeUInt16BE(question.type, 2);
    record.writeUInt16BE(1, 4); // IN
    record.writeUInt32BE(records!.ttl ?? 300, 6);
    record.writeUInt16BE(data.length, 10);
    parts.push(record, data);
  }
  return Buffer.concat(parts);
}

/** Whether this process may make a mount namespace and bind-mount over /etc/resolv.conf (root on Linux). */
export function dnsNamespaceAvailable(): boolean {
  if (process.platform !== 'linux') return false;
  const probe = spawnSync('unshare', ['-m', 'sh', '-c', 'mount --bind /etc/hostname /etc/resolv.conf'], { stdio: 'ignore' });
  return probe.status === 0;
}

/** Starts the server on a free address of 127/8, port 53 (or `port`). */
export async function startDnsServer(options: { answers?: Record<string, DnsRecords>; hang?: (name: string) => boolean; port?: number } = {}): Promise<TestDnsServer> {
  let socket: Socket | undefined;
  let address = '';
  for (let tries = 0; socket === undefined; tries++) {
    address = `127.${53 + Math.floor(Math.random() * 150)}.${Math.floor(Math.random() * 250) + 1}.${Math.floor(Math.random() * 250) + 1}`;
    const candidate = createSocket('udp4');
    try {
      await new Promise<void>((resolve, reject) => {
        candidate.once('error', reject);
        candidate.bind(options.port ?? 53, address, () => resolve());
      });
      socket = candidate;
    } catch (error) {
      candidate.close();
      if (tries >= 20) throw error;
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'merchant-api-dns-'));
  const resolvConf = join(dir, 'resolv.conf');
  writeFileSync(resolvConf, `nameserver ${address}\n`);
  const server: TestDnsServer = {
    address,
    port: socket.address().port,
    answers: new Map(Object.entries(options.answers ?? {})),
    hang: options.hang ?? (() => false),
    queries: new Map(),
    resolvConf,
    wrap: (command, args) => ['unshare', ['-m', 'sh', '-c', 'mount --bind "$0" /etc/resolv.conf && exec "$@"', resolvConf, command, ...args]],
    close: async () => {
      await new Promise<void>((resolve) => socket!.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  socket.on('message', (message, remote) => {
    const question = readQuestion(message);
    if (question === undefined) return;
    const key = `${question.name}/${question.type === TYPE_A ? 'A' : question.type === TYPE_AAAA ? 'AAAA' : question.type}`;
    server.queries.set(key, (server.queries.get(key) ?? 0) + 1);
    if (server.hang(question.name)) return;
    socket!.send(answer(message, question, server.answers.get(question.name)), remote.port, remote.address);
  });
  return server;
}
