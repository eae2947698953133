/**
 * The `Expect` request header (RFC 9110 section 10.1.1): the API reads no
 * request body, and no expectation but `100-continue` exists, so any other is
 * answered 417 by every adapter, as JSON through the pipeline (Node's own
 * answer is a bare status line; Bun and Deno ignore it).
 */
import { MerchantApiError } from '../src/index.js';

export const EXPECTATION_FAILED = new MerchantApiError('expectation_failed', 'Only the expectation 100-continue is supported.');

/** The 417 for an `Expect` header other than `100-continue`, else undefined. */
export function unmetExpectation(expect: string | null): MerchantApiError | undefined {
  return expect === null || expect.trim().toLowerCase() === '100-continue' ? undefined : EXPECTATION_FAILED;
}
