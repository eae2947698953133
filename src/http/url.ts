/**
 * The request URL in the pieces the pipeline needs, without building a
 * `URL`: the Request constructor already normalised it (dot segments, host
 * case, default port), and a `URL` per request was a visible cost.
 */

/** Scheme and authority, the path still percent-encoded, and the query without `?`. */
export function splitUrl(url: string): { origin: string; path: string; search: string } {
  const pathStart = url.indexOf('/', url.indexOf('//') + 2);
  if (pathStart === -1) return { origin: url.replace(/[?#].*$/, ''), path: '/', search: '' };
  let end = url.indexOf('#', pathStart);
  if (end === -1) end = url.length;
  const q = url.indexOf('?', pathStart);
  return q === -1 || q > end
    ? { origin: url.slice(0, pathStart), path: url.slice(pathStart, end), search: '' }
    : { origin: url.slice(0, pathStart), path: url.slice(pathStart, q), search: url.slice(q + 1, end) };
}

/**
 * The route of a request's path, and the path as the merchant called it
 * (what its signature and `Link` URLs cover), given the base path:
 *
 * - a path under `basePath` is matched below it, and is itself the public path;
 * - any other path is taken as one a host stripped the mount prefix from
 *   (Hono's `app.mount`) and is served as `basePath + path`, unless
 *   `pathAsSent` says the URL is the one the client sent (merchant-api's own
 *   servers and Node listener): then it is outside the mount, a 404.
 *
 * A path under `basePath` whose rest matches no route is tried as stripped
 * too, so that a base path sharing its first segment with a route
 * (`/merchant`, then `/merchant/users` stripped) still finds its route.
 */
export function matchPath<T>(match: (path: string) => T | undefined, path: string, basePath: string, pathAsSent: boolean): { found: T; path: string } | undefined {
  if (!basePath) {
    const found = match(path);
    return found && { found, path };
  }
  const below = stripBasePath(path, basePath);
  if (below) {
    const found = match(below);
    if (found) return { found, path };
  }
  if (pathAsSent) return undefined;
  const found = match(path);
  return found && { found, path: basePath + path };
}

/** The path below the base path, or '' when the request is not under it. */
function stripBasePath(path: string, basePath: string): string {
  if (!basePath) return path;
  if (!path.startsWith(basePath) || (path.length > basePath.length && path[basePath.length] !== '/')) return '';
  return path.slice(basePath.length) || '/';
}

/** A mount path as the pipeline compares it: '' for none, else `/a/b` without a trailing slash. */
export function normaliseBasePath(basePath: string | undefined): string {
  if (basePath === undefined || basePath === '' || basePath === '/') return '';
  if (!basePath.startsWith('/') || /[?#]/.test(basePath)) throw new TypeError(`basePath "${basePath}" must be a path starting with "/".`);
  return new URL(basePath.replace(/\/+$/, ''), 'http://x').pathname;
}

/** A `.` or `..` segment, plain or percent-encoded (`%2e`, `.%2E`), in a path. */
const DOT_SEGMENT = /\/(?:\.|%2e){1,2}(?=[/?#]|$)/i;

/**
 * True when the path of a request target, as the client sent it (origin- or
 * absolute-form), has a `.` or `..` segment. URL parsers resolve them away,
 * so only an adapter that sees the raw target can tell.
 */
export function hasDotSegment(target: string): boolean {
  if (!target.includes('.') && !target.includes('%')) return false;
  const query = target.search(/[?#]/);
  return DOT_SEGMENT.test(query === -1 ? target : target.slice(0, query));
}
