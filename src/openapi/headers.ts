/** `components.headers`: every response header the document names, described once. */
import { header } from './fragments.js';
import type { Json } from './operation.js';

export function headers(): Json {
  return {
    'Cache-Control': header('Every answer, errors included.', { type: 'string', const: 'no-store' }, true),
    'X-Request-Id': header(
      "The request's own `X-Request-Id` when valid, else a new UUID; on every answer of the handler (not on those the runtime adapters give before it runs).",
      { type: 'string', minLength: 1, maxLength: 128 },
    ),
    'WWW-Authenticate': header('The challenge of HTTP Basic.', { type: 'string', const: 'Basic realm="merchant", charset="UTF-8"' }, true),
    'Retry-After': header('Seconds to wait before trying again.', { type: 'string', pattern: '^[0-9]+$', examples: ['1'] }, true),
    'RateLimit-Policy': header(
      'On a 429, the limit that was passed; on every answer of an authenticated listing, the listing slots too, first (draft-ietf-httpapi-ratelimit-headers; docs/protocol.md#ratelimit-fields).',
      { type: 'string', minLength: 1, examples: ['"auth-merchant";q=10;w=300', '"listings";q=4;qu="concurrent-requests"'] },
      true,
    ),
    RateLimit: header(
      'On a 429, nothing left of the limit until it resets (`r=0`, `t` seconds); on a listing, the slots left while it runs (draft-ietf-httpapi-ratelimit-headers).',
      { type: 'string', minLength: 1, examples: ['"auth-merchant";r=0;t=300', '"listings";r=3'] },
      true,
    ),
    Link: header('Only when there is a next page: its URL, with the same limit and filters.', { type: 'string', pattern: '^<[^>]+>; rel="next"$' }),
    ETag: header(
      'The entity tag of this body: strong, the SHA-256 of its exact bytes (base64url, quoted), or weak (`W/`) on a page with a `next_cursor`, ' +
        'which is sealed afresh each time: of its records and the position its cursor names. Send it back as `If-None-Match` to get 304 ' +
        'while the answer is unchanged. Not on the streamed list (docs/protocol.md#conditional-requests).',
      { type: 'string', pattern: '^(W/)?"[A-Za-z0-9_-]{43}"$' },
    ),
    'Idempotent-Replayed': header(
      'On an answer given again for an `Idempotency-Key` already answered (docs/protocol.md#safe-retries): the status and body are those of the first request.',
      { type: 'string', const: 'true' },
    ),
    'Content-Length': header('HEAD: the length of the GET body, wherever it is known (not for the streamed list).', { type: 'string', pattern: '^[0-9]+$' }),
  };
}
