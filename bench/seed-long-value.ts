/**
 * `node --import tsx bench/seed-long-value.ts [MiB…]`: a seed document with one very long element
 * (issue 34 §6), fed to the streamed reader in 64 KiB chunks as a file's read stream would, with
 * the cap raised above it. Reports the bytes copied to join pieces (`Buffer.concat`, counted) per
 * input byte, and the time against `JSON.parse` of the whole document in the same run (rough:
 * the machine is shared). Shapes: one long string, one object of
 * many members, one object holding a long run of whitespace.
 */
import { Buffer } from 'node:buffer';
import { readSeedElements } from '../src/storage/seed/seed-stream.js';

const sizes = process.argv.slice(2).map(Number).filter((n) => n > 0);
const MiB = 2 ** 20;
const CHUNK = 64 * 1024;

function documentOf(shape: string, bytes: number): Buffer {
  if (shape === 'string') return Buffer.from(`{"merchants":[],"users":[{"merchant_id":"m","note":"${'x'.repeat(bytes)}"}]}`);
  if (shape === 'whitespace') return Buffer.from(`{"merchants":[],"users":[{"merchant_id":"m",${' '.repeat(bytes)}"a":1}]}`);
  const members: string[] = [];
  for (let i = 0, length = 0; length < bytes; i++) {
    const member = `"k${i}":[${i},"v"]`;
    members.push(member);
    length += member.length + 1;
  }
  return Buffer.from(`{"merchants":[],"users":[{"merchant_id":"m",${members.join(',')}}]}`);
}

const concat = Buffer.concat;
let copied = 0;
Buffer.concat = ((list: readonly Uint8Array[], total?: number) => {
  const out = concat(list, total);
  copied += out.length;
  return out;
}) as typeof Buffer.concat;

for (const size of sizes.length > 0 ? sizes : [16, 64]) {
  for (const shape of (process.env.SHAPES ?? 'string,object,whitespace').split(',')) {
    const document = documentOf(shape, size * MiB);
    async function* chunks() {
      for (let at = 0; at < document.length; at += CHUNK) yield document.subarray(at, at + CHUNK);
    }
    copied = 0;
    let users = 0;
    const started = performance.now();
    await readSeedElements(chunks(), 'json', {
      merchant() {},
      user() { users++; },
      notArray() {},
      unknownMember() {},
      badLine() {},
      longLine() {},
    }, 2 * size * MiB);
    const ms = performance.now() - started;
    // The floor: the runtime's own JSON.parse of the whole document, in the same run.
    const parseStarted = performance.now();
    JSON.parse(document.toString('utf8'));
    const parseMs = performance.now() - parseStarted;
    console.log(`${shape.padEnd(10)} ${String(size).padStart(3)} MiB element: ${users} user, ${(copied / MiB).toFixed(0)} MiB copied (${(copied / document.length).toFixed(1)} per input byte), ${(ms / 1000).toFixed(2)} s; JSON.parse of the whole ${(parseMs / 1000).toFixed(2)} s`);
  }
}
