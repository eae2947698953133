/**
 * Idle connections for bench/abuse-connections.ts, from a process of their
 * own (one process may hold only as many sockets as its file-descriptor
 * limit): opens --count connections to --port that never send a byte, keeps
 * them, and prints one JSON line a second (opened, open, refused or failed,
 * closed by the server) until stdin closes.
 */
import { connect, type Socket } from 'node:net';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { port: { type: 'string' }, count: { type: 'string' } } });
const port = Number(values.port);
const count = Number(values.count);
const sockets = new Set<Socket>();
let opened = 0;
let failed = 0;
let closedByServer = 0;
let stopping = false;

function open(): Promise<void> {
  return new Promise((done) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      opened++;
      sockets.add(socket);
      done();
    });
    socket.on('error', () => {
      if (!sockets.has(socket)) {
        failed++;
        done();
      }
    });
    socket.on('data', () => {});
    socket.once('close', () => {
      if (sockets.delete(socket) && !stopping) closedByServer++;
    });
  });
}

const report = () => console.log(JSON.stringify({ opened, open: sockets.size, failed, closedByServer }));
const timer = setInterval(report, 1000);
process.stdin.on('end', () => {
  stopping = true;
  clearInterval(timer);
  for (const socket of sockets) socket.destroy();
  report();
  process.exit(0);
}).resume();
// 200 connects at a time: as fast as the server accepts them.
for (let i = 0; i < count; i += 200) await Promise.all(Array.from({ length: Math.min(200, count - i) }, open));
report();
