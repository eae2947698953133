/**
 * The retry loop of the client: a request sent, and sent again as the
 * policy of ./retry.ts says, each time as a new `Attempt` (./attempt.ts),
 * within `maxRetries` and the call's deadline. A failed answer is decoded by
 * ./decode-error.ts; a JSON answer is read and checked by `call`.
 */
import { Attempt, readText, type Target } from './attempt.js';
import { errorOf, requestIdOf } from './decode-error.js';
import { MerchantResponseError, MerchantClientError } from './errors.js';
import { backoffMs, isRetryableFailure, isRetryableStatus, retryAfterMs, sleep, type RetryPolicy } from './retry.js';

export interface TransportOptions {
  fetch: typeof fetch;
  /** Sent with every request, before each request's own. */
  headers: Record<string, string>;
  timeoutMs: number;
  policy: RetryPolicy;
  /** The client's signal: aborts every call. */
  signal: AbortSignal | undefined;
}

export class Transport {
  readonly timeoutMs: number;
  readonly policy: RetryPolicy;

  constructor(private readonly options: TransportOptions) {
    this.timeoutMs = options.timeoutMs;
    this.policy = options.policy;
  }

  /** Turns whatever a body read of `attempt` threw into the client's error (or the caller's abort reason). */
  failure(attempt: Attempt, error: unknown, target: Target): unknown {
    return attempt.failure(error, target, this.policy, this.timeoutMs);
  }

  /** One JSON answer: sent, retried as the policy says, read, and checked by `accept`. */
  async call<T>(target: Target, url: () => string, headers: Record<string, string>, signal: AbortSignal | undefined, accept: (body: unknown) => T): Promise<T> {
    return this.send(target, url, headers, signal, async (response, attempt) => {
      const text = await readText(response, attempt, target, this.policy, this.timeoutMs);
      let body: unknown;
      try {
        body = JSON.parse(text);
        return accept(body);
      } catch (error) {
        throw new MerchantResponseError(
          { status: response.status, code: 'invalid_response', message: `The answer of ${target.url} is not the documented JSON: ${(error as Error).message}`, requestId: requestIdOf(response), body: body ?? text, headers: response.headers },
          target,
          { cause: error },
        );
      }
    });
  }

  /**
   * Sends a request and retries it: on 503 and 429 (after `Retry-After`, else
   * a backoff), on 409 `idempotency_in_progress` of a keyed change, and on connection failures, within `maxRetries` and the call's
   * deadline. `url()` is called for each attempt, so a signed URL is signed
   * again. With `consume`, reading the body is part of the attempt (a body cut
   * off is retried too) and its result is returned; without, the response is
   * handed over with its attempt still open, to be streamed.
   */
  send(target: Target, url: () => string, headers: Record<string, string>, signal: AbortSignal | undefined): Promise<{ response: Response; attempt: Attempt }>;
  send<T>(target: Target, url: () => string, headers: Record<string, string>, signal: AbortSignal | undefined, consume: (response: Response, attempt: Attempt) => Promise<T>): Promise<T>;
  async send<T>(
    target: Target,
    url: () => string,
    headers: Record<string, string>,
    signal: AbortSignal | undefined,
    consume?: (response: Response, attempt: Attempt) => Promise<T>,
  ): Promise<T | { response: Response; attempt: Attempt }> {
    const policy = this.policy;
    const deadline = Date.now() + policy.deadlineMs;
    const external = [this.options.signal, signal].filter((s): s is AbortSignal => s !== undefined);
    for (let retry = 0; ; retry++) {
      // Aborted already: not even a first attempt (a custom fetch may not look at the signal).
      const aborted = external.find((s) => s.aborted);
      if (aborted) throw aborted.reason;
      const attempt = new Attempt(external, this.timeoutMs, deadline);
      let failure: MerchantClientError;
      let retryAfter: number | undefined;
      try {
        attempt.arm();
        let response: Response;
        try {
          const init: RequestInit = { method: target.method, headers: { ...this.options.headers, ...headers }, signal: attempt.signal, redirect: 'manual' };
          if (target.body !== undefined) init.body = target.body;
          response = await this.options.fetch(url(), init);
        } catch (error) {
          throw attempt.failure(error, target, policy, this.timeoutMs);
        } finally {
          attempt.disarm();
        }
        // 204 is an answer only to a change (a DELETE, the test reset: consumed by its caller); to a read it is no documented answer.
        if (response.ok && (response.status !== 204 || (target.method !== 'GET' && consume))) {
          if (!consume) {
            if (!response.body) throw new MerchantResponseError({ status: response.status, code: 'invalid_response', message: `The answer of ${target.url} has no body.`, requestId: requestIdOf(response), headers: response.headers }, target);
            return { response, attempt };
          }
          const result = await consume(response, attempt);
          attempt.finish();
          return result;
        }
        const error = await errorOf(response, attempt, target, policy, this.timeoutMs);
        // A retry of a keyed change that reached the server while its first attempt runs there: its answer comes shortly.
        const running = target.idempotent === true && error instanceof MerchantResponseError && error.code === 'idempotency_in_progress';
        if (!isRetryableStatus(response.status) && !running) throw error;
        failure = error;
        retryAfter = retryAfterMs(response.headers.get('retry-after'), Date.now());
      } catch (error) {
        attempt.finish();
        if (!(error instanceof MerchantClientError) || !isRetryableFailure(error)) throw error;
        failure = error;
      }
      attempt.finish();
      if (retry >= policy.maxRetries || target.once) throw failure;
      const delay = retryAfter ?? backoffMs(policy, retry + 1);
      // A wait longer than maxDelayMs (a Retry-After of minutes), or one that would end past the
      // deadline, is not worth starting: the last answer, with its retryAfter, is the best one to give.
      if (delay > policy.maxDelayMs || Date.now() + delay >= deadline) throw failure;
      policy.onRetry?.({ retry: retry + 1, delayMs: delay, method: target.method, url: target.url, status: failure instanceof MerchantResponseError ? failure.status : undefined, error: failure });
      await sleep(delay, external);
    }
  }
}
