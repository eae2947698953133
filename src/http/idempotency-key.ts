/**
 * What an `Idempotency-Key` header may be (docs/protocol.md#safe-retries): said once, for the
 * pipeline's check (src/pipeline/idempotency.ts) and the OpenAPI document's parameter.
 */

/** Longest key. */
export const MAX_IDEMPOTENCY_KEY_LENGTH = 255;

/** The rule a key must follow, as the 400 and the document name it. */
export const IDEMPOTENCY_KEY_RULE = `1-${MAX_IDEMPOTENCY_KEY_LENGTH} printable ASCII characters (space to ~), such as a UUID`;

const PRINTABLE_ASCII = /^[\x20-\x7e]+$/;

/** True when `key` follows the rule. */
export function isIdempotencyKey(key: string): boolean {
  return key.length <= MAX_IDEMPOTENCY_KEY_LENGTH && PRINTABLE_ASCII.test(key);
}
