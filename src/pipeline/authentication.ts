/**
 * Authentication as a step of the request: a route with HTTP Basic is
 * authenticated before its handler runs, which then runs inside the limits
 * around the handler; a signed route checks its signature in its handler
 * (src/routes/validate-signature.ts). Both mark the merchant authenticated
 * through `deps.authenticated`: the limits after authentication, then the
 * `onAuthenticated` hooks.
 */
import { basicKeyRefused, basicOutcome, checkBasicAuth } from '../auth/basic-auth.js';
import type { Unverified } from '../auth/merchant-check.js';
import type { RequestContext } from '../http/context.js';
import { HookAnswer, type MerchantApiHooks } from '../http/hooks.js';
import type { LimitPoints } from '../limits/limit.js';
import type { HandlerDeps, Route } from '../routes/route.js';
import { keyModeOf, type Merchant } from '../storage/contract.js';
import { NO_TEST_KEY_CHANGES, TEST_MODE_DISABLED } from '../testmode/mode-check.js';
import { answerWith, type Answer } from './answer.js';
import { conditional } from './conditional.js';
import { idempotencyStep, takesIdempotencyKey } from './idempotency.js';

/** Runs a route's handler, authenticated first where the route says so. Throws for errors. */
export type RunRoute = (ctx: RequestContext, route: Route, path: string, search: string, origin: string, params: Record<string, string>) => Answer | Promise<Answer>;

/** Not async: a route without Basic authentication costs no promise of its own here. */
export function routeRunner(deps: HandlerDeps, aroundHandler: LimitPoints['aroundHandler']): RunRoute {
  const withIdempotencyKey = idempotencyStep(deps);
  /** The handler of a Basic route, once the check answered. */
  async function authorized(ctx: RequestContext, route: Route, path: string, search: string, origin: string, params: Record<string, string>, checked: Merchant | Unverified): Promise<Answer> {
    // The key that matched may not be usable here (expired, outside its networks, without the
    // route's scope): decided before the merchant counts as authenticated. A Basic route needs
    // `users:read` unless its table entry names another (the webhook endpoints: `webhooks:manage`).
    if (typeof checked !== 'string') {
      const scope = route.scope ?? 'users:read';
      const refused = deps.keys.refusal(checked, ctx.keyIndex, scope, ctx.clientAddress);
      if (refused !== undefined) throw basicKeyRefused(ctx, refused, scope);
    }
    const merchant = basicOutcome(ctx, checked);
    // A test key's request sees the test dataset from here on (docs/test-mode.md): `deps.storage(ctx)` reads the mode.
    if (keyModeOf(merchant, ctx.keyIndex) === 'test') {
      if (!deps.testMode.enabled) throw TEST_MODE_DISABLED;
      ctx.mode = 'test';
      // Before a body is read; the test view of the storage refuses key changes too. (The webhook
      // routes run: the test view acts on the merchant's test endpoints only.)
      if (route.scope === 'keys:manage') throw NO_TEST_KEY_CHANGES;
    }
    const release = aroundHandler?.(ctx, merchant.id, route.limit);
    try {
      const hooked = deps.authenticated(ctx, merchant.id);
      if (hooked) await hooked;
      const input = { path, search, origin, params, merchant };
      // A GET pays one comparison here: only a route that changes something takes `Idempotency-Key`.
      const handled =
        route.method !== 'GET' && takesIdempotencyKey(route)
          ? await withIdempotencyKey(ctx, route, merchant.id, path, search, async () => route.handle(ctx, input, deps))
          : await route.handle(ctx, input, deps);
      const answer = route.etag ? conditional(ctx, handled) : handled;
      // A copy: handlers may answer with a shared constant reply.
      return release ? answerWith(answer, answer.status, answer.body, answer.headers, release) : answer;
    } catch (error) {
      release?.();
      throw error;
    }
  }

  return (ctx, route, path, search, origin, params) => {
    if (route.auth !== 'basic') return route.handle(ctx, { path, search, origin, params, merchant: undefined }, deps);
    // A value when the storage holds the merchant in memory (src/auth/merchant-check.ts): no promise to wait for, no closure.
    const checked = checkBasicAuth(ctx, deps.storage(ctx));
    if (!(checked instanceof Promise)) return authorized(ctx, route, path, search, origin, params, checked);
    return checked.then((answered) => authorized(ctx, route, path, search, origin, params, answered));
  };
}

/** `deps.authenticated`: marks the merchant, runs the limits after authentication, then the `onAuthenticated` hooks (which may answer instead). */
export function authenticatedStep(afterAuthentication: LimitPoints['afterAuthentication'], onAuthenticated: MerchantApiHooks['onAuthenticated']): HandlerDeps['authenticated'] {
  return (ctx, merchantId) => {
    ctx.merchantId = merchantId;
    afterAuthentication?.(ctx, merchantId);
    if (!onAuthenticated) return;
    return Promise.resolve(onAuthenticated(ctx)).then((answer) => {
      if (answer) throw new HookAnswer(answer);
    });
  };
}
