/**
 * The `/metrics` endpoint of a metrics listener, for one process's registry
 * (metrics.ts) and for the primary of several workers (cli/worker-metrics.ts):
 * `GET` or `HEAD /metrics` answers what `render` gives; anything else 404 or 405.
 */
export async function answerScrape(request: Request, render: () => Promise<{ text: string; contentType: string }>): Promise<Response> {
  const { pathname } = new URL(request.url);
  if (pathname !== '/metrics') return new Response('Not found. Metrics are at /metrics.\n', { status: 404, headers: { 'content-type': 'text/plain' } });
  if (request.method !== 'GET' && request.method !== 'HEAD') return new Response('Only GET.\n', { status: 405, headers: { allow: 'GET, HEAD' } });
  const { text, contentType } = await render();
  return new Response(request.method === 'HEAD' ? null : text, { headers: { 'content-type': contentType, 'cache-control': 'no-store' } });
}
