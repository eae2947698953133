/**
 * The one log event of every administrative change (`merchant ...`, `throttle unblock`,
 * `import`): a JSON line on standard error, in the server's log format, so that whoever
 * collects the logs also sees who changed which merchant or block. It says what changed, by
 * ids (merchant ids, key ids, addresses), never a key.
 */
import { createJsonLogger } from '../../index.js';
import type { CliIo } from '../io.js';

/** Writes one `info` event: `{"event":"merchant_key_revoked","merchant_id":...,"msg":...}`. */
export function logAdminChange(io: CliIo, event: string, fields: Record<string, unknown>, message: string): void {
  const logger = createJsonLogger({ write: (lines) => io.err(lines.slice(0, -1)) });
  logger.info({ event, ...fields, admin: true }, message);
  logger.flush();
}
