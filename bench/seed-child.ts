/**
 * One measurement of `npm run bench:seed` in a process of its own, so that its RSS is its own:
 *   plain-json FILE     JSON.parse of the whole file read as a stream (the reference)
 *   plain-ndjson FILE   readline + JSON.parse of each line (the reference for NDJSON)
 *   load FILE           loadMemoryStorage (the streamed loader), then a settle
 * Prints one JSON line: users, ms, baseline/peak/settled RSS in bytes.
 * Run with --expose-gc so the settled figure is after a full collection.
 */
import { createReadStream } from 'node:fs';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { loadMemoryStorage } from '../src/storage/memory/index.js';

const [mode, file] = process.argv.slice(2);
const status = (field: 'VmRSS' | 'VmHWM') => Number(new RegExp(`${field}:\\s+(\\d+) kB`).exec(readFileSync('/proc/self/status', 'utf8'))![1]) * 1024;
const gc = (globalThis as { gc?: () => void }).gc;

gc?.();
const baseline = status('VmRSS');
const started = performance.now();
let users = 0;
let keep: unknown;
if (mode === 'plain-json') {
  const chunks: Buffer[] = [];
  for await (const chunk of createReadStream(file!)) chunks.push(chunk as Buffer);
  const document = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { users: unknown[] };
  chunks.length = 0;
  users = document.users.length;
  keep = document;
} else if (mode === 'plain-ndjson') {
  const values: unknown[] = [];
  for await (const line of createInterface({ input: createReadStream(file!, { encoding: 'utf8' }), crlfDelay: Infinity })) {
    if (line !== '') values.push(JSON.parse(line));
  }
  users = values.length - 1; // the merchant line
  keep = values;
} else if (mode === 'load') {
  const loaded = await loadMemoryStorage(file!);
  users = loaded.users;
  keep = loaded.storage;
} else {
  throw new Error(`unknown mode ${mode}`);
}
const ms = performance.now() - started;
const peak = status('VmHWM');
// Settled: after full collections and a pause, with the result still held.
for (let i = 0; i < 3; i++) {
  gc?.();
  await sleep(500);
}
const settled = status('VmRSS');
process.stdout.write(`${JSON.stringify({ mode, users, ms: Math.round(ms), baseline, peak, settled, heapUsed: process.memoryUsage().heapUsed, kept: keep !== undefined })}\n`);
