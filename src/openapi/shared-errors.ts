/**
 * The answers every route can give besides its own outcomes: malformed
 * requests, 405, 408, 431, 500, and, by what the route does, 401, 403, 414,
 * 429 and 503; and the shared `NotFound` of `components.responses`.
 */
import type { MerchantApiErrorCode } from '../errors.js';
import { MAX_QUERY_LENGTH } from '../http/query.js';
import { methodsInWords } from '../http/methods.js';
import { codesWithStatus, envelopeError } from './error-codes.js';
import { adapterResponse, header, response, schemaRef } from './fragments.js';
import type { DocumentedRoute, Json, OperationDoc } from './operation.js';

/** The body of an error the handler answers on `route`, in the route's shape. */
function routeError(route: DocumentedRoute, codes: readonly MerchantApiErrorCode[]): Json {
  return route.errorShape === 'signature' ? schemaRef('SignatureError') : envelopeError(codes);
}

/**
 * The body of an error that the handler or, before it runs, the runtime
 * adapter may answer: the adapters know no route, so theirs is always the envelope.
 */
function routeOrAdapterError(route: DocumentedRoute, codes: readonly MerchantApiErrorCode[], adapterCodes: readonly MerchantApiErrorCode[]): Json {
  if (route.errorShape === 'envelope') return envelopeError([...new Set([...codes, ...adapterCodes])]);
  return { oneOf: [schemaRef('SignatureError'), envelopeError(adapterCodes)] };
}

const ADAPTER_400 =
  'the runtime adapter refused a request it cannot hand on: more than one Host line, a missing or bad Host, a bad request target, or ' +
  '(Node) a request its HTTP parser refuses. Adapter answers are in the envelope shape on every path. Bun and Deno answer some of ' +
  'these themselves with a bare status line and no body (docs/runtimes.md).';

function badRequestDescription(operation: OperationDoc): string {
  return operation.badRequest ? `${operation.badRequest} Or, before the handler runs, ${ADAPTER_400}` : `Before the handler runs, ${ADAPTER_400}`;
}

/**
 * What `route` can answer besides its own outcomes. `allowed` is the `Allow`
 * of its path, given by the caller so that this file needs only the route's shape.
 */
export function sharedErrors(route: DocumentedRoute, operation: OperationDoc, allowed: string): Record<string, Json> {
  const errors: Record<string, Json> = {
    '400': response(
      badRequestDescription(operation),
      routeOrAdapterError(route, operation.badRequestCodes ?? [], ['malformed_request']),
    ),
    '405': response(
      `Answered to every method other than ${methodsInWords(allowed)} on this path. OpenAPI has no operation for ` +
        'such methods, so this answer is listed on each operation of the path.',
      routeError(route, codesWithStatus(405)),
      [],
      { Allow: header('The methods this path answers.', { type: 'string', const: allowed }, true) },
    ),
    '408': adapterResponse(
      'Node only: the request did not arrive within the server\'s header or request timeout. Answered by the adapter, in the envelope shape, code `request_timeout`.',
      envelopeError(['request_timeout']),
    ),
    '431': adapterResponse(
      'The request line and headers are larger than the runtime accepts (Node and Bun: 16 KiB; Deno answers 400). Node answers in the ' +
        'envelope shape, code `headers_too_large`; Bun answers a bare status line with no body.',
      envelopeError(['headers_too_large']),
    ),
    '417': adapterResponse(
      'An `Expect` header other than `100-continue`, on every runtime. Answered by the adapter, in the envelope shape, code `expectation_failed`.',
      envelopeError(['expectation_failed']),
    ),
    '500': response(
      'An unexpected failure (a bug). The body says nothing about it. Should the runtime itself fail, the Bun and Deno adapters answer in the envelope shape.',
      routeOrAdapterError(route, codesWithStatus(500), ['internal_error']),
    ),
  };
  if (operation.readsQuery) {
    errors['414'] = response(`The query string is longer than ${MAX_QUERY_LENGTH} characters, as sent (encoded).`, routeError(route, codesWithStatus(414)));
  }
  if (route.auth === 'basic') {
    errors['401'] = response(
      'Missing, malformed, unknown or wrong credentials: always the same answer, which does not tell which. Checked before the parameters.',
      routeError(route, codesWithStatus(401)),
      ['WWW-Authenticate'],
    );
    errors['403'] = response(
      `The merchant is disabled (its key is right), the key lacks the scope \`${route.scope ?? 'users:read'}\` (\`insufficient_scope\`, the message names it), or the key may not be used from this address (\`address_not_allowed\`).`,
      routeError(route, codesWithStatus(403)),
    );
  }
  if (route.auth !== 'none') {
    errors['429'] = response(
      [
        'Too many failed authentications from this address, or for this merchant from this address (docs/security.md#throttling): ' +
          'refused before any key is compared or any storage read, until `Retry-After` seconds have passed.',
        operation.tooManyRequests,
        'Also, while the instance is busy: the merchant used more than its share of it lately (docs/security.md#fair-sharing, ' +
          '`RateLimit-Policy: "fair-share"`); retry after `Retry-After` seconds.',
      ]
        .filter(Boolean)
        .join(' '),
      routeError(route, codesWithStatus(429)),
      ['Retry-After', 'RateLimit-Policy', 'RateLimit'],
    );
  }
  if (operation.usesStorage || route.auth !== 'none') {
    errors['503'] = response(
      'The storage failed or missed its deadline (`storageTimeout`, default 5000 ms). Try again after `Retry-After` seconds.',
      routeError(route, codesWithStatus(503)),
      ['Retry-After'],
    );
  }
  return errors;
}

/** `components.responses`: answers that operations name by `$ref`. */
export const SHARED_RESPONSES: Record<string, Json> = {
  NotFound: response(
    'No user with this id is shared with this merchant. Any path that is not in this document answers the same shape, ' +
      'with the message `No such endpoint.`',
    envelopeError(codesWithStatus(404)),
  ),
};
