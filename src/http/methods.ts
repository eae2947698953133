/** The methods a route may have: reads, and the writes of the merchant's webhook endpoints and keys. */
export type RouteMethod = 'GET' | 'POST' | 'DELETE' | 'PATCH';

/**
 * The methods a path answers, for `Allow` and the 405: each of its routes' own, and HEAD wherever
 * GET is (the pipeline answers HEAD from GET). One method or several (a path with GET and POST).
 */
export function allowedMethods(methods: string | readonly string[]): string {
  const list = typeof methods === 'string' ? [methods] : methods;
  return list.flatMap((method) => (method === 'GET' ? ['GET', 'HEAD'] : [method])).join(', ');
}

/** `GET, HEAD` as `GET and HEAD`, `GET, HEAD, POST` as `GET, HEAD and POST`: the 405's message. */
export function methodsInWords(allow: string): string {
  const at = allow.lastIndexOf(', ');
  return at < 0 ? allow : `${allow.slice(0, at)} and ${allow.slice(at + 2)}`;
}
