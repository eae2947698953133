/**
 * What a limit is to the pipeline: an object that acts at one or more named
 * points of a request, and refuses by throwing a `Refusal`
 * (src/limits/refusal.ts), which the pipeline notes. A new limit implements
 * the points it needs and is listed once in src/api.ts; the pipeline and
 * the storage views never name it (docs/architecture.md#where-to-add).
 *
 * The points are composed once, when the handler is built: a point no limit
 * uses stays undefined and costs a request nothing, and one used by a single
 * limit is that limit's method, so no array is walked per request.
 */
import type { AuthScheme } from '../auth/scheme.js';
import type { RequestContext } from '../http/context.js';

/** A limit of a route's own, named by its table entry: `listings`, at most `merchantConcurrency` of one merchant's at once. */
export type RouteLimit = 'listings';

export interface Limit {
  /**
   * Before authentication: the route is known, no hook has run, no key has
   * been compared and no storage read (the failed-authentication throttle).
   * `search` is the query string, for a merchant a signed query names.
   * May answer a promise, waited for before the request goes on (a check
   * that waits for another to end); the common request answers nothing.
   */
  beforeAuthentication?(ctx: RequestContext, auth: AuthScheme, search: string): void | Promise<void>;
  /** After authentication: the merchant's credentials verified, before the `onAuthenticated` hooks (fair sharing). */
  afterAuthentication?(ctx: RequestContext, merchantId: string): void;
  /**
   * Around the handler of a route authenticated before it runs: taken as the
   * handler starts; the function returned is called once the answer is
   * finished, streamed or not, or the handler failed (listings).
   */
  aroundHandler?(ctx: RequestContext, merchantId: string, routeLimit: RouteLimit | undefined): (() => void) | undefined;
  /** Around each storage call a request makes, inside its deadline (a merchant's share of the storage's connections). */
  aroundStorageCall?<T>(ctx: RequestContext, call: () => Promise<T>): Promise<T>;
  /**
   * On the connection: an error answer is about to go out on the client's
   * connection; answers how long to hold it back, in ms (late refusals). Not
   * asked for a connection the adapter refused: it is closed after its answer.
   */
  onConnection?(ctx: RequestContext, error: unknown): number;
  /** After the answer is decided, before it is sent: counts its outcome; a promise answered is waited for (the throttle's shared store). */
  afterAnswer?(ctx: RequestContext): void | Promise<void>;
}

/** Every point of a set of limits as one function, undefined where none of them acts. */
export type LimitPoints = { [P in keyof Required<Limit>]: Required<Limit>[P] | undefined };

/** The points of `limits`, each running them in the order given. */
export function limitPoints(limits: readonly (Limit | undefined)[]): LimitPoints {
  const given = limits.filter((limit): limit is Limit => limit !== undefined);
  const at = <P extends keyof Limit>(point: P) => given.filter((limit) => limit[point] !== undefined).map((limit) => (limit[point] as NonNullable<Limit[P]> & ((...args: never[]) => unknown)).bind(limit) as NonNullable<Limit[P]>);
  return {
    beforeAuthentication: one(at('beforeAuthentication'), (all) => (ctx, auth, search) => {
      // In order: a limit that waits holds back the ones after it.
      for (let i = 0; i < all.length; i++) {
        const wait = all[i]!(ctx, auth, search);
        if (wait) return wait.then(async () => {
          for (const limit of all.slice(i + 1)) await limit(ctx, auth, search);
        });
      }
    }),
    afterAuthentication: one(at('afterAuthentication'), (all) => (ctx, merchantId) => {
      for (const limit of all) limit(ctx, merchantId);
    }),
    aroundHandler: one(at('aroundHandler'), (all) => (ctx, merchantId, routeLimit) => {
      const releases: (() => void)[] = [];
      const release = () => releases.splice(0).reverse().forEach((give) => give());
      try {
        for (const limit of all) {
          const give = limit(ctx, merchantId, routeLimit);
          if (give) releases.push(give);
        }
      } catch (error) {
        release();
        throw error;
      }
      return releases.length === 0 ? undefined : release;
    }),
    aroundStorageCall: one(at('aroundStorageCall'), (all) => (ctx, call) => all.reduceRight((inner, limit) => () => limit(ctx, inner), call)()),
    onConnection: one(at('onConnection'), (all) => (ctx, error) => Math.max(...all.map((limit) => limit(ctx, error)))),
    afterAnswer: one(at('afterAnswer'), (all) => (ctx) => {
      const waits = all.map((limit) => limit(ctx)).filter((wait) => wait !== undefined);
      return waits.length === 0 ? undefined : Promise.all(waits).then(() => undefined);
    }),
  };
}

/** No limit: undefined; one: its method as it is; several: `together`. */
function one<F>(all: F[], together: (all: F[]) => F): F | undefined {
  return all.length === 0 ? undefined : all.length === 1 ? all[0] : together(all);
}
