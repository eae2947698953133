/**
 * The `Idempotency-Key` of the client's POSTs (docs/protocol.md#safe-retries): one per logical call,
 * the caller's or a random UUID, sent unchanged on every retry of that call, so the server runs the
 * change once and a retry gets its answer (a new endpoint's secret included). With it, a POST is
 * retried as a read is: on 503, 429, a connection failure, and while the first attempt still runs
 * on the server (409 `idempotency_in_progress`).
 */

/** The server's rule (src/pipeline/idempotency.ts): 1-255 printable ASCII characters. */
const RULE = /^[\x20-\x7e]{1,255}$/;

/** The key of one call: `given` when the caller passed one (checked), else a new random UUID. */
export function idempotencyKeyOf(given: string | undefined): string {
  if (given === undefined) return globalThis.crypto.randomUUID();
  if (typeof given !== 'string' || !RULE.test(given)) throw new TypeError('idempotencyKey must be 1-255 printable ASCII characters (space to ~), such as a UUID.');
  return given;
}
