/**
 * Pre-signed `/validatesignature` paths, one per line, each with its own
 * salt: the load generator cannot compute HMAC-SHA224 per request in wrk's
 * Lua, so they are signed here (docs/protocol.md#signing) against the `publicUrl` all
 * bench servers share, with a `ts` an hour ahead and the servers' wide tolerance.
 */
import { createHmac } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { once } from 'node:events';
import { MERCHANT_ID, MERCHANT_KEY, PUBLIC_URL } from './servers/data.mjs';

// Every character of these is unreserved, so pct() is the identity on them and
// the canonical query is simply the sorted "k=v" pairs.
const ENCODED_BASE = encodeURIComponent(`${PUBLIC_URL}/validatesignature`);

/** One signed path; `index` makes the salt unique within the file. */
export function signedPath(index: number, ts: number, run: string): string {
  const salt = `${run}-${index.toString(36).padStart(8, '0')}`;
  const query = `cp=${MERCHANT_ID}&salt=${salt}&ts=${ts}`;
  const message = `GET&${ENCODED_BASE}&${encodeURIComponent(query)}`;
  const hmac = createHmac('sha224', MERCHANT_KEY).update(message).digest('hex');
  return `/validatesignature?${query}&hmac=${hmac}`;
}

/**
 * Writes `count` signed paths to `file`, all of the same length (wrk/paths.lua
 * indexes them by offset); the salts carry `run` so separate files never collide.
 */
export async function writeSignedPaths(file: string, count: number): Promise<void> {
  // An hour ahead, well inside the servers' tolerance: a memory store refuses
  // a ts from before it started, and the servers start after the signing.
  const ts = Math.floor(Date.now() / 1000) + 3600;
  const run = Date.now().toString(36);
  const width = signedPath(0, ts, run).length;
  if (signedPath(count - 1, ts, run).length !== width) throw new Error('signed paths must all have the same length');
  const out = createWriteStream(file);
  const chunk: string[] = [];
  for (let i = 0; i < count; i++) {
    chunk.push(signedPath(i, ts, run));
    if (chunk.length === 10_000 || i === count - 1) {
      if (!out.write(`${chunk.join('\n')}\n`)) await once(out, 'drain');
      chunk.length = 0;
    }
  }
  out.end();
  await once(out, 'finish');
}
