/**
 * The one log event of every administrative change (`merchant ...`, `throttle unblock`,
 * `import`): a JSON line on standard error, in the server's log format, so that whoever
 * collects the logs also sees who changed which merchant or block. It says what changed, by
 * ids (merchant ids, key ids, addresses), never a key.
 */
import { createJsonLogger } from '../../index.js';
import type { CliIo } from '../io.js';

/** Every event an administrative change writes: docs/cli.md lists them, test/cli/mysql-keys.test.ts sees each one hold no key. */
export const ADMIN_EVENTS = ['merchant_added', 'merchant_status_set', 'merchant_key_rotated', 'merchant_key_revoked', 'merchant_deleted', 'import_completed', 'import_stopped', 'throttle_unblocked', 'merchant_key_added', 'merchant_key_updated', 'user_erased'] as const;
/** The events of `webhook ...` (docs/webhooks.md#operations); test/webhooks/webhook-cli.test.ts sees each one hold no secret. */
export const WEBHOOK_ADMIN_EVENTS = ['webhook_endpoint_added', 'webhook_endpoint_removed', 'webhook_secret_rotated', 'webhook_endpoint_enabled', 'webhook_redelivered'] as const;
export type AdminEvent = (typeof ADMIN_EVENTS)[number] | (typeof WEBHOOK_ADMIN_EVENTS)[number];

/** Writes one `info` event: `{"event":"merchant_key_revoked","merchant_id":...,"msg":...}`. */
export function logAdminChange(io: CliIo, event: AdminEvent, fields: Record<string, unknown>, message: string): void {
  const logger = createJsonLogger({ write: (lines) => io.err(lines.slice(0, -1)) });
  logger.info({ event, ...fields, admin: true }, message);
  logger.flush();
}
