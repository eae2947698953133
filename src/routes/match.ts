/**
 * Finds the route for a path (below the base path). Exact patterns are one
 * map lookup; a pattern with `{name}` matches one non-empty segment, decoded
 * strictly (a bad escape is a 400, not a 404).
 */
import { MerchantApiError } from '../errors.js';
import { decodePathSegment } from '../http/query.js';
import type { Route } from './route.js';

export interface RouteMatch {
  route: Route;
  params: Record<string, string>;
}

const NO_PARAMS: Record<string, string> = Object.freeze({}) as Record<string, string>;

export type RouteMatcher = (path: string) => RouteMatch | undefined;

export function createMatcher(routes: readonly Route[]): RouteMatcher {
  const exact = new Map<string, RouteMatch>();
  const templated: { head: string; name: string; route: Route }[] = [];
  for (const route of routes) {
    const segments = route.pattern.split('/');
    const last = segments.at(-1)!;
    if (/^\{\w+\}$/.test(last) && !segments.slice(0, -1).some((s) => s.includes('{'))) {
      templated.push({ head: `${segments.slice(0, -1).join('/')}/`, name: last.slice(1, -1), route });
    } else if (route.pattern.includes('{')) {
      throw new TypeError(`Route ${route.pattern}: only a last {parameter} segment is supported.`);
    } else {
      exact.set(route.pattern, { route, params: NO_PARAMS });
      if (route.trailingSlash) exact.set(`${route.pattern}/`, { route, params: NO_PARAMS });
    }
  }
  return (path) => {
    const hit = exact.get(path);
    if (hit) return hit;
    for (const { head, name, route } of templated) {
      if (!path.startsWith(head)) continue;
      const segment = path.slice(head.length);
      if (segment === '' || segment.includes('/')) continue;
      return { route, params: { [name]: decodePathSegment(segment) } };
    }
    return undefined;
  };
}

export const NOT_FOUND = new MerchantApiError('not_found', 'No such endpoint.');
