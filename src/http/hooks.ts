/**
 * Hooks: where an embedding team hangs its own quota, metrics or tracing
 * (docs/observability.md#hooks). Several sets may be given; each point runs
 * them in the order given.
 */
import type { RequestContext } from './context.js';
import type { StorageOperation } from '../storage/contract.js';

/** How a request ended, once its body has been handed over in full (or aborted). */
export interface RequestSummary {
  status: number;
  /** Bytes of the body sent. */
  bytes: number;
  /** From arrival to the last byte handed to the runtime. */
  durationMs: number;
  /** True when a streamed body failed part-way and was cut. */
  aborted: boolean;
}

type MaybeResponse = void | Response | Promise<void | Response>;

export interface MerchantApiHooks {
  /** Before routing work; `ctx.route` is known. Return a `Response` to answer with it instead. */
  onRequest?(ctx: RequestContext): MaybeResponse;
  /**
   * Once the merchant is authenticated (`ctx.merchantId` is set): Basic auth, or a signature that verifies with a `ts`
   * inside the window, before its salt is recorded. Return a `Response` to answer with it instead.
   */
  onAuthenticated?(ctx: RequestContext): MaybeResponse;
  /** With the response about to be sent; return a `Response` to send that instead. */
  onResponse?(ctx: RequestContext, response: Response): void | Response;
  /** For every error answer (4xx and 5xx), with what was thrown. */
  onError?(ctx: RequestContext, error: unknown): void;
  /** Once the body has been handed over in full, or cut. */
  onFinish?(ctx: RequestContext, summary: RequestSummary): void;
  /** As a storage call starts; the function returned is called when it ends, with its error if it failed. */
  onStorageCall?(ctx: RequestContext, operation: StorageOperation): void | ((error?: unknown) => void);
}

/** A `Response` a hook answered with, carried past the handler to be sent as it is. */
export class HookAnswer {
  constructor(readonly response: Response) {}
}

/** The hooks of several sets as one set; a point none of them uses stays undefined (and costs nothing). */
export function composeHooks(sets: readonly MerchantApiHooks[]): MerchantApiHooks {
  const all = <K extends keyof MerchantApiHooks>(name: K) => sets.map((set) => set[name]?.bind(set)).filter((hook) => hook !== undefined) as NonNullable<MerchantApiHooks[K]>[];
  const composed: MerchantApiHooks = {};
  const shortCircuit = (name: 'onRequest' | 'onAuthenticated') => {
    const hooks = all(name);
    if (hooks.length === 0) return undefined;
    if (hooks.length === 1) return hooks[0];
    return async (ctx: RequestContext) => {
      for (const hook of hooks) {
        const answer = await hook(ctx);
        if (answer) return answer;
      }
    };
  };
  composed.onRequest = shortCircuit('onRequest');
  composed.onAuthenticated = shortCircuit('onAuthenticated');
  const onResponse = all('onResponse');
  if (onResponse.length) {
    composed.onResponse = (ctx, response) => {
      let current = response;
      for (const hook of onResponse) current = hook(ctx, current) ?? current;
      return current;
    };
  }
  const onError = all('onError');
  if (onError.length) composed.onError = (ctx, error) => onError.forEach((hook) => hook(ctx, error));
  const onFinish = all('onFinish');
  if (onFinish.length === 1) composed.onFinish = onFinish[0];
  else if (onFinish.length) {
    composed.onFinish = (ctx, summary) => {
      for (const hook of onFinish) hook(ctx, summary);
    };
  }
  const onStorageCall = all('onStorageCall');
  // One hook (tracing alone, or metrics alone) is called as it is; several without an array per call
  // unless more than one of them wants to hear the end (every storage call of every request runs this).
  if (onStorageCall.length === 1) {
    const [hook] = onStorageCall as [NonNullable<MerchantApiHooks['onStorageCall']>];
    composed.onStorageCall = (ctx, operation) => {
      const end = hook(ctx, operation);
      return typeof end === 'function' ? end : undefined;
    };
  } else if (onStorageCall.length) {
    composed.onStorageCall = (ctx, operation) => {
      let only: ((error?: unknown) => void) | undefined;
      let ends: ((error?: unknown) => void)[] | undefined;
      for (const hook of onStorageCall) {
        const end = hook(ctx, operation);
        if (typeof end !== 'function') continue;
        if (only === undefined) only = end;
        else (ends ??= [only]).push(end);
      }
      return ends === undefined ? only : (error?: unknown) => ends.forEach((end) => end(error));
    };
  }
  return composed;
}
