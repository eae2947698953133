/**
 * Strict query-string decoding (docs/protocol.md#signing and #failures). `URLSearchParams`
 * turns bad percent-encoding and invalid UTF-8 into U+FFFD silently; a
 * signature over such a value could never be checked honestly, so here they
 * are a 400 naming the problem.
 */
import { MerchantApiError } from '../errors.js';

/** Longest query string accepted, in characters of the (encoded) URL. */
export const MAX_QUERY_LENGTH = 8192;
/** Most parameters accepted in one query. */
export const MAX_QUERY_PAIRS = 256;

/**
 * Form-decodes `search` (without the leading `?`) into pairs in request
 * order: `+` is a space, `%XX` sequences must form valid UTF-8, and no key or
 * value may contain NUL. Empty segments (`a=1&&b=2`) are skipped.
 */
export function parseQuery(search: string): [string, string][] {
  if (search.length > MAX_QUERY_LENGTH) {
    throw new MerchantApiError('uri_too_long', `The query string is longer than ${MAX_QUERY_LENGTH} characters.`);
  }
  const pairs: [string, string][] = [];
  if (search === '') return pairs;
  let start = 0;
  while (start <= search.length) {
    let end = search.indexOf('&', start);
    if (end === -1) end = search.length;
    if (end > start) {
      if (pairs.length === MAX_QUERY_PAIRS) {
        throw new MerchantApiError('malformed_request', `The query string has more than ${MAX_QUERY_PAIRS} parameters.`);
      }
      const eq = search.indexOf('=', start);
      const split = eq === -1 || eq > end ? end : eq;
      pairs.push([decodeComponent(search, start, split), split === end ? '' : decodeComponent(search, split + 1, end)]);
    }
    start = end + 1;
  }
  return pairs;
}

function decodeComponent(search: string, from: number, to: number): string {
  const text = search.slice(from, to);
  return strictDecode(text.includes('+') ? text.replaceAll('+', ' ') : text, 'query string');
}

/** Decodes one path segment strictly (docs/protocol.md#endpoints), or throws a 400. */
export function decodePathSegment(segment: string): string {
  return strictDecode(segment, 'path');
}

function strictDecode(text: string, where: string): string {
  let decoded = text;
  if (decoded.includes('%')) {
    try {
      decoded = decodeURIComponent(decoded);
    } catch {
      throw new MerchantApiError('malformed_request', `The ${where} has invalid percent-encoding or invalid UTF-8.`);
    }
  }
  if (decoded.includes('\u0000')) throw new MerchantApiError('malformed_request', `The ${where} contains a NUL byte.`);
  return decoded;
}
