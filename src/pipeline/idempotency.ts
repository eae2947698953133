/**
 * `Idempotency-Key` (docs/protocol.md#safe-retries): a request of a route that takes one (every
 * POST of the merchant API: `takesIdempotencyKey`, from the route table) and carries the header
 * runs its handler at most once per key, merchant and 24 hours. Runs after authentication and the
 * scope check (the key is the merchant's own) and before the handler:
 *
 * - the key is claimed in the storage, with a fingerprint of the request (SHA-256 of its method,
 *   path with query, and body), so every instance on the storage sees it;
 * - a key already answered with the same fingerprint answers the stored answer again, byte for
 *   byte, marked `Idempotent-Replayed: true`, and the handler does not run;
 * - a key answered or running for another request (another fingerprint) is 422
 *   `idempotency_mismatch`; one whose request still runs is 409 `idempotency_in_progress` with
 *   `Retry-After: 1` (a claim left by a dead instance holds for the rest of its lease, `IDEMPOTENCY_LEASE_MS`);
 * - what the handler answers is stored when a retry should get it again: every answer below 500
 *   but 408 and 429 (`keepsAnswer`), errors included (Stripe's rule: the request ran and decided).
 *   A 5xx, a 408 or 429, a streamed answer or one larger than `MAX_STORED_ANSWER_BYTES` releases
 *   the key, so the retry runs.
 *
 * A request without the header runs as before; a GET never comes here (one comparison of the
 * method in authentication.ts).
 */
import { createHash } from 'node:crypto';
import { MerchantApiError } from '../errors.js';
import type { RequestContext } from '../http/context.js';
import { errorReply } from '../http/error-reply.js';
import { IDEMPOTENCY_KEY_RULE, isIdempotencyKey } from '../http/idempotency-key.js';
import { MAX_JSON_BODY_BYTES } from '../http/json-body.js';
import { byteLength, isWholeBody } from '../http/responses.js';
import { describeError } from '../observe/logger.js';
import type { DocumentedRoute } from '../openapi/operation.js';
import type { HandlerDeps } from '../routes/route.js';
import type { StoredAnswer } from '../storage/idempotency.js';
import type { Answer } from './answer.js';

/** How long a key and its answer are kept, from its first request: 24 hours. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
/** How long a claim holds while its request runs: past it, a claim left by a dead instance is taken over. */
export const IDEMPOTENCY_LEASE_MS = 60_000;
/** Largest answer kept (UTF-8 bytes of its body): today's POST answers are a few hundred bytes. */
export const MAX_STORED_ANSWER_BYTES = 64 * 1024;
export { takesIdempotencyKey } from '../openapi/operation.js';

/** True for an answer a retry with the same key gets again: it ran and decided (below 500, but a timeout or a limit's refusal). */
export function keepsAnswer(status: number): boolean {
  return status < 500 && status !== 408 && status !== 429;
}

const INVALID_KEY = new MerchantApiError('invalid_parameter', `Idempotency-Key must be ${IDEMPOTENCY_KEY_RULE}.`, { param: 'Idempotency-Key' });
const NOT_KEPT = new MerchantApiError('not_implemented', 'The storage behind this server keeps no idempotency keys: send the request without Idempotency-Key.');
const MISMATCH = new MerchantApiError(
  'idempotency_mismatch',
  'This Idempotency-Key was used within the last 24 hours for another request (another path or body): use a new key for a new request.',
  { param: 'Idempotency-Key' },
);

/** Headers of an answer that belong to one request, not to the answer kept. */
const PER_REQUEST = new Set(['ratelimit', 'ratelimit-policy', 'x-request-id', 'idempotent-replayed']);

/** Runs a handler under the request's `Idempotency-Key`, if it has one. */
export type WithIdempotencyKey = (ctx: RequestContext, route: DocumentedRoute, merchantId: string, path: string, search: string, handle: () => Promise<Answer>) => Promise<Answer>;

export function idempotencyStep(deps: HandlerDeps): WithIdempotencyKey {
  const kept = deps.idempotencyKeys;
  return async (ctx, route, merchantId, path, search, handle) => {
    const key = ctx.header('idempotency-key');
    if (key === null) return handle();
    if (!isIdempotencyKey(key)) throw INVALID_KEY;
    if (!kept) throw NOT_KEPT;
    const body = await bufferedBody(ctx);
    const fingerprint = createHash('sha256').update(`${ctx.method}\u0000${path}${search === '' ? '' : `?${search}`}\u0000`).update(body).digest('hex');
    const view = deps.storage(ctx);
    const outcome = await view.claimIdempotencyKey({ merchantId, key, fingerprint, now: deps.now(), leaseMs: IDEMPOTENCY_LEASE_MS, ttlMs: IDEMPOTENCY_TTL_MS });
    if (outcome.state === 'completed') return replayed(outcome.answer);
    if (outcome.state === 'mismatch') throw MISMATCH;
    // A second: a request runs well under one, so the retry then usually gets its answer. A claim
    // left by an instance that died holds the key until its lease ends (the message says when).
    if (outcome.state === 'running') {
      const leaseEnds = Math.max(1, Math.ceil(outcome.retryAfterMs / 1000));
      throw new MerchantApiError('idempotency_in_progress', `A request with this Idempotency-Key is still running: retry shortly to get its answer (its claim ends within ${leaseEnds} seconds).`, { param: 'Idempotency-Key', retryAfter: 1 });
    }
    const { token } = outcome;
    const keep = async (answer: StoredAnswer | undefined): Promise<void> => {
      try {
        if (answer === undefined) await view.releaseIdempotencyKey({ merchantId, key, token });
        else await view.completeIdempotencyKey({ merchantId, key, token, answer });
      } catch (error) {
        // The handler's answer still goes out: the client has it and need not retry. Unstored, the
        // key is freed when its lease ends; a retry before then is 409, after it runs again.
        deps.logger.warn({ event: 'idempotency_key_not_stored', request_id: ctx.requestId, merchant_id: merchantId, ...describeError(error) });
      }
    };
    let answer: Answer;
    try {
      answer = await handle();
    } catch (error) {
      const rendered = error instanceof MerchantApiError ? errorReply(error, route.errorShape) : undefined;
      await keep(rendered && keepsAnswer(rendered.status) ? storable(rendered) : undefined);
      throw error;
    }
    await keep(keepsAnswer(answer.status) ? storable(answer) : undefined);
    return answer;
  };
}

/** The answer as kept, or undefined when it cannot be (streamed, too large). */
function storable(answer: Answer): StoredAnswer | undefined {
  if (!isWholeBody(answer.body) || byteLength(answer.body) > MAX_STORED_ANSWER_BYTES) return undefined;
  const headers: Record<string, string> = {};
  if (answer.headers) for (const [name, value] of Object.entries(answer.headers)) if (!PER_REQUEST.has(name.toLowerCase())) headers[name.toLowerCase()] = value;
  return { status: answer.status, headers, body: answer.body };
}

function replayed(answer: StoredAnswer): Answer {
  return { status: answer.status, body: answer.body, headers: { ...answer.headers, 'idempotent-replayed': 'true' } };
}

const EMPTY = new Uint8Array(0);

/**
 * The request's body, read now for the fingerprint (bounded as the handlers bound it: 413 past
 * `MAX_JSON_BODY_BYTES`), and the request handed on to the handler with the same bytes: a body can
 * be read once, and the handler reads it again.
 */
async function bufferedBody(ctx: RequestContext): Promise<Uint8Array> {
  const request = ctx.request;
  const announced = Number(request.headers.get('content-length') ?? '0');
  if (announced > MAX_JSON_BODY_BYTES || request.body === null) {
    if (announced > MAX_JSON_BODY_BYTES) throw tooLarge();
    return EMPTY;
  }
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let received = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    received += value.byteLength;
    if (received > MAX_JSON_BODY_BYTES) {
      void reader.cancel().catch(() => undefined);
      throw tooLarge();
    }
    chunks.push(value);
  }
  const whole = new Uint8Array(received);
  let at = 0;
  for (const chunk of chunks) {
    whole.set(chunk, at);
    at += chunk.byteLength;
  }
  const again = new Request(request.url, { method: request.method, headers: request.headers, body: received === 0 ? null : whole });
  // An own property: over the lazy context's getter too (src/http/context.ts).
  Object.defineProperty(ctx, 'request', { value: again, configurable: true, enumerable: true });
  return whole;
}

function tooLarge(): MerchantApiError {
  return new MerchantApiError('payload_too_large', `The body is larger than ${MAX_JSON_BODY_BYTES} bytes.`);
}
