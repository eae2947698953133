/** The methods a path answers, for `Allow` and the 405: each of its route's own, and HEAD wherever GET is (the pipeline answers HEAD from GET). */
export function allowedMethods(method: string): string {
  return method === 'GET' ? 'GET, HEAD' : method;
}
