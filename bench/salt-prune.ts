/**
 * `npm run bench:salts`: does salt pruning on MySQL keep pace with new
 * salts? Records fresh salts through the MySQL storage at a fixed rate
 * (default 2,000/s for 600 s with the default 300 s window) and samples the
 * size of `used_salts`; the goal is at most 1.2 x rate x window rows at any
 * time. `--rate=N --seconds=S --window=W` scale it (a shorter window fills
 * sooner: the same dynamics in less time). Needs MariaDB at MYSQL_URL.
 */
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { MysqlStorage } from '../src/storage/mysql/index.js';
import { createTestDatabase } from '../test/support/mysql.js';

const { values } = parseArgs({ options: { rate: { type: 'string', default: '2000' }, seconds: { type: 'string', default: '600' }, window: { type: 'string', default: '300' } } });
const rate = Number(values.rate);
const seconds = Number(values.seconds);
const window = Number(values.window);
const bound = 1.2 * rate * window;

const database = await createTestDatabase();
const storage = new MysqlStorage({ db: database.db, masterKey: database.masterKey });
const count = async () => Number((await sql<{ n: string }>`SELECT COUNT(*) AS n FROM used_salts`.execute(database.db)).rows[0]!.n);

console.log(`recording ${rate} salts/s for ${seconds} s, window ${window} s; goal: used_salts <= ${bound.toLocaleString('en')} rows (1.2 x rate x window)`);
const started = Date.now();
let sent = 0;
let peak = 0;
let failures = 0;
const samples: string[] = [];
let nextSample = started;
try {
  while (Date.now() - started < seconds * 1000) {
    // One tick of 100 ms: the tick's share of salts, 50 at a time in flight.
    const tickEnd = Date.now() + 100;
    const due = Math.floor(((Date.now() - started) / 1000) * rate) - sent;
    for (let i = 0; i < due; i += 50) {
      const batch = Array.from({ length: Math.min(50, due - i) }, () => {
        const now = Math.floor(Date.now() / 1000);
        return storage.recordSalt({ merchantId: 'bench', salt: `s-${sent++}`, expiresAt: now + window, now }).catch(() => failures++);
      });
      await Promise.all(batch);
    }
    if (Date.now() >= nextSample) {
      const rows = await count();
      peak = Math.max(peak, rows);
      samples.push(`${Math.round((Date.now() - started) / 1000)}s: ${rows}`);
      console.log(`t=${Math.round((Date.now() - started) / 1000)} s  sent ${sent}  used_salts ${rows}  (${((rows / bound) * 100).toFixed(0)}% of the goal)`);
      nextSample += Math.max(5000, (seconds * 1000) / 20);
    }
    const wait = tickEnd - Date.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
  }
  const end = await count();
  peak = Math.max(peak, end);
  const achieved = sent / ((Date.now() - started) / 1000);
  console.log(`\nsent ${sent} (${Math.round(achieved)}/s achieved), ${failures} failures; peak used_salts ${peak}, at the end ${end}`);
  console.log(`peak vs goal (1.2 x rate x window = ${bound}): ${(peak / (achieved * window)).toFixed(2)} x rate x window -> ${peak <= bound ? 'met' : 'MISSED'}`);
} finally {
  await storage.close();
  await database.drop();
}
