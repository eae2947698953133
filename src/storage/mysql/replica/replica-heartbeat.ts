/**
 * The heartbeat that measures a replica's lag (docs/mysql.md#read-replicas), as pt-heartbeat
 * does: `writeHeartbeat` stores the primary's clock in `replica_heartbeat` on the primary, and
 * `readHeartbeat` reads that row on the replica. The row on the replica is as old as what the
 * replica has applied, whatever its threads believe: a link frozen with its sockets open, or
 * stopped replication, shows as a beat that stops advancing, where `Seconds_Behind_Master`
 * said 0. Both times are the primary's clock, so no two machines' clocks are ever compared.
 */
import { sql, type Kysely } from 'kysely';

/** `DATETIME(6)` text (`YYYY-MM-DD HH:MM:SS[.ffffff]`, UTC) as microseconds since the epoch. */
export function datetimeMicros(text: string): number {
  const match = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$/.exec(text);
  if (match === null) throw new Error(`not a DATETIME: ${JSON.stringify(text)}`);
  const [, y, mo, d, h, mi, s, fraction = ''] = match;
  return Date.UTC(+y!, +mo! - 1, +d!, +h!, +mi!, +s!) * 1000 + Number(fraction.padEnd(6, '0'));
}

/**
 * Writes a beat on the primary: its clock now (every instance writes the same row, the last
 * write wins). Answers the beat, in microseconds of the primary's clock. Not GREATEST: a beat
 * read a moment earlier by another instance and committed after this one only overstates the lag
 * (everything committed before its time is still before it in the binary log), while a greatest
 * value would let a beat from before a step back of the primary's clock mask the lag until the
 * clock caught up.
 */
export async function writeHeartbeat(primaryDb: Kysely<any>): Promise<number> {
  const { rows } = await sql<{ now: string }>`SELECT UTC_TIMESTAMP(6) AS now`.execute(primaryDb);
  const now = rows[0]!.now;
  // The value read, not UTC_TIMESTAMP(6) again: the caller knows exactly what it wrote.
  await sql`INSERT INTO replica_heartbeat (id, beat_at) VALUES (1, ${now})
    ON DUPLICATE KEY UPDATE beat_at = VALUES(beat_at)`.execute(primaryDb);
  return datetimeMicros(now);
}

/** The beat the replica has applied, in microseconds of the primary's clock; undefined before the first beat arrived. */
export async function readHeartbeat(replicaDb: Kysely<any>): Promise<number | undefined> {
  const { rows } = await sql<{ beat_at: string }>`SELECT beat_at FROM replica_heartbeat WHERE id = 1`.execute(replicaDb);
  return rows[0] === undefined ? undefined : datetimeMicros(rows[0].beat_at);
}
