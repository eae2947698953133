/**
 * Finds the route for a path (below the base path). Exact patterns are one
 * map lookup; each `{name}` of a pattern matches one non-empty segment, decoded
 * strictly (a bad escape is a 400, not a 404).
 */
import { MerchantApiError } from '../errors.js';
import { decodePathSegment } from '../http/query.js';
import type { Route } from './route.js';

export interface RouteMatch {
  /** The first route of the path in the table. */
  route: Route;
  params: Record<string, string>;
  /** Every route of the path, one per method (`GET` and `POST` of `/merchant/webhooks`): the pipeline picks by method. */
  routes: readonly Route[];
}

const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;

export type RouteMatcher = (path: string) => RouteMatch | undefined;

export function createMatcher(routes: readonly Route[]): RouteMatcher {
  const exact = new Map<string, RouteMatch>();
  // A pattern with parameters: its segments, each a literal or a `{name}` (one non-empty segment).
  const templated: { segments: string[]; names: (string | undefined)[]; route: Route; routes: readonly Route[] }[] = [];
  // The routes of one pattern, in table order (one per method).
  const byPattern = new Map<string, Route[]>();
  for (const route of routes) {
    const same = byPattern.get(route.pattern);
    if (same === undefined) byPattern.set(route.pattern, [route]);
    else if (same.some((r) => r.method === route.method)) throw new TypeError(`Route ${route.method} ${route.pattern} is in the table twice.`);
    else same.push(route);
  }
  for (const [pattern, same] of byPattern) {
    const route = same[0]!;
    if (pattern.includes('{')) {
      const segments = pattern.split('/');
      const names = segments.map((s) => /^\{(\w+)\}$/.exec(s)?.[1]);
      if (segments.some((s, i) => names[i] === undefined && s.includes('{'))) throw new TypeError(`Route ${pattern}: a {parameter} must be a whole segment.`);
      templated.push({ segments, names, route, routes: same });
    } else {
      exact.set(pattern, { route, params: NO_PARAMS, routes: same });
      if (route.trailingSlash) exact.set(`${pattern}/`, { route, params: NO_PARAMS, routes: same });
    }
  }
  return (path) => {
    const hit = exact.get(path);
    if (hit) return hit;
    for (const { segments, names, route, routes } of templated) {
      const params = matchSegments(path, segments, names);
      if (params) return { route, params, routes };
    }
    return undefined;
  };
}

/**
 * The parameters of `path` when it has the pattern's segments (literals
 * equal, each `{name}` one non-empty segment), else undefined: walked in
 * place, without splitting the path into an array per request.
 */
function matchSegments(path: string, segments: readonly string[], names: readonly (string | undefined)[]): Record<string, string> | undefined {
  const last = segments.length - 1;
  let start = 0;
  let params: Record<string, string> | undefined;
  for (let i = 0; i <= last; i++) {
    let end = path.indexOf('/', start);
    if (end === -1) end = path.length;
    // The last segment ends the path; any other ends at a slash.
    if ((i === last) !== (end === path.length)) return undefined;
    const name = names[i];
    if (name === undefined) {
      const literal = segments[i]!;
      if (end - start !== literal.length || !path.startsWith(literal, start)) return undefined;
    } else {
      if (end === start) return undefined;
      (params ??= {})[name] = path.slice(start, end);
    }
    start = end + 1;
  }
  // Decoded once the whole path matched: a bad escape in a path of another shape stays a 404.
  if (params) for (const name in params) params[name] = decodePathSegment(params[name]!);
  return params ?? NO_PARAMS;
}

export const NOT_FOUND = new MerchantApiError('not_found', 'No such endpoint.');
