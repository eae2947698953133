/**
 * One attempt of a request: its abort controller (linked to the caller's
 * signals), its clock (`timeoutMs`, or what is left of the call's deadline),
 * and the reading of its body, each piece of which must come within that
 * clock. Whatever an attempt throws is the client's error, or the caller's
 * abort reason.
 */
import { MerchantClientError, MerchantTimeoutError, networkError } from './errors.js';
import type { RetryPolicy } from './retry.js';

/** The request an error names. */
export interface Target {
  method: string;
  /** What errors and `onRetry` show: no signature, no credentials. */
  url: string;
  /** The JSON body of a change (the webhook endpoints). */
  body?: string;
  /** A change: sent once, never retried (its answer lost, it may have been made). */
  once?: boolean;
  /** A change sent with an `Idempotency-Key`: retried as a read, and while its first attempt still runs (409 `idempotency_in_progress`). */
  idempotent?: boolean;
}

/** One attempt's abort controller, timeout and listeners. */
export class Attempt {
  readonly controller = new AbortController();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private timedOutAs: 'request' | 'deadline' | undefined;
  private readonly cleanups: (() => void)[] = [];

  constructor(
    private readonly external: readonly AbortSignal[],
    private readonly timeoutMs: number,
    private readonly deadline: number,
  ) {
    for (const signal of external) {
      if (signal.aborted) {
        this.controller.abort(signal.reason);
        break;
      }
      const onAbort = () => this.controller.abort(signal.reason);
      signal.addEventListener('abort', onAbort, { once: true });
      this.cleanups.push(() => signal.removeEventListener('abort', onAbort));
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** Starts the clock: `timeoutMs`, or what is left of the deadline if that is sooner. */
  arm(): void {
    this.disarm();
    const left = this.deadline - Date.now();
    const kind = left < this.timeoutMs ? 'deadline' : 'request';
    this.timer = setTimeout(() => {
      this.timedOutAs = kind;
      this.controller.abort(new Error('timeout'));
    }, Math.max(0, Math.min(left, this.timeoutMs)));
  }

  disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  finish(): void {
    this.disarm();
    for (const cleanup of this.cleanups.splice(0)) cleanup();
  }

  /** The caller's abort reason, when a caller's signal ended the attempt. */
  callerAbort(): { reason: unknown } | undefined {
    const aborted = this.external.find((signal) => signal.aborted);
    return aborted && this.timedOutAs === undefined ? { reason: aborted.reason } : undefined;
  }

  /** Turns whatever a fetch or a body read threw into the client's error (or the caller's abort reason). */
  failure(error: unknown, target: Target, policy: RetryPolicy, timeoutMs: number): unknown {
    const caller = this.callerAbort();
    if (caller) return caller.reason;
    if (this.timedOutAs) return new MerchantTimeoutError(target, this.timedOutAs === 'request' ? { kind: 'request', timeoutMs } : { kind: 'deadline', timeoutMs: policy.deadlineMs });
    if (error instanceof MerchantClientError) return error;
    return networkError(error, target);
  }
}

/** The body as text; each piece must come within the timeout. */
export async function readText(response: Response, attempt: Attempt, target: Target, policy: RetryPolicy, timeoutMs: number): Promise<string> {
  if (!response.body) return '';
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let text = '';
  try {
    for (;;) {
      attempt.arm();
      const { done, value } = await reader.read();
      if (done) return text + decoder.decode();
      text += decoder.decode(value, { stream: true });
    }
  } catch (error) {
    await reader.cancel().catch(() => undefined);
    throw attempt.failure(error, target, policy, timeoutMs);
  } finally {
    attempt.disarm();
  }
}
