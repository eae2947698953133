/**
 * Migration `0006_replica_heartbeat`: the heartbeat that measures how far a read replica is
 * behind (docs/mysql.md#read-replicas), as pt-heartbeat does. One row (`id = 1`): every serving
 * instance with a replica writes the primary's clock (`UTC_TIMESTAMP(6)`) into it about once a
 * second (the last write wins), so the table stays one row and the writes one per instance
 * per check interval whatever the number of instances; each instance reads the row on the
 * replica, where it is as old as what the replica has applied.
 */
import { sql } from 'kysely';
import { defineMigration, schemaStep } from './resumable.js';
import { tableExists } from './schema-facts.js';

export const replicaHeartbeat = defineMigration('0006_replica_heartbeat', {
  up: [
    schemaStep(
      'create replica_heartbeat',
      (db) => tableExists(db, 'replica_heartbeat'),
      async (db) => {
        await sql.raw(`CREATE TABLE replica_heartbeat (
      id TINYINT UNSIGNED NOT NULL,
      beat_at DATETIME(6) NOT NULL,
      PRIMARY KEY (id)
    ) ENGINE=InnoDB DEFAULT CHARSET=ascii`).execute(db);
      },
    ),
  ],
  down: [
    {
      name: 'drop replica_heartbeat',
      run: async (db) => {
        await sql.raw('DROP TABLE IF EXISTS replica_heartbeat').execute(db);
      },
    },
  ],
});
