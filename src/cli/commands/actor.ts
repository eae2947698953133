/**
 * Who an administrative change is recorded as (docs/cli.md#the-audit-trail): `--actor`, else
 * `MERCHANT_API_ACTOR`, else the operating system's user, else `unknown`. A name, never a secret:
 * the audit trail keeps it for as long as `AUDIT_RETENTION`.
 */
import { userInfo } from 'node:os';
import type { CliIo } from '../io.js';

/** The `--actor` option every command that changes something takes. */
export const ACTOR_OPTION = { actor: { type: 'string' } } as const;

export function actorOf(values: Record<string, string | boolean | undefined>, io: CliIo): string {
  const given = values.actor;
  if (typeof given === 'string' && given.trim() !== '') return given.trim();
  const env = io.env.MERCHANT_API_ACTOR;
  if (env !== undefined && env.trim() !== '') return env.trim();
  try {
    return userInfo().username || 'unknown';
  } catch {
    // No user name for this uid (a container without /etc/passwd entry).
    return 'unknown';
  }
}
