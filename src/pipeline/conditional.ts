/**
 * Conditional reads (docs/protocol.md#conditional-requests): a route whose
 * table entry says `etag` answers its whole 200 bodies with a strong `ETag`,
 * the SHA-256 of the body's exact bytes, and a request whose `If-None-Match`
 * names it gets 304 with no body. A streamed answer (the whole list) has no
 * tag: its bytes are known only at its end, after its status and headers.
 * A page whose body holds a freshly sealed cursor (a new nonce each time)
 * has a weak tag, of its records and of the position the cursor names
 * (`Reply.validator`): two answers with that tag say the same thing.
 * The handler runs either way (the storage is read and the body written):
 * the tag is of what it would send now, so a 304 is never stale.
 */
import type { RequestContext } from '../http/context.js';
import { entityTag } from '../signing/crypto.js';
import { isWholeBody } from '../http/responses.js';
import { answerWith, type Answer } from './answer.js';

/** The answer with its `ETag`, or the 304 that replaces it when the client already holds that body. */
export function conditional(ctx: RequestContext, answer: Answer): Answer {
  if (answer.status !== 200 || !isWholeBody(answer.body)) return answer;
  const opaque = entityTag(answer.validator ?? answer.body);
  const tag = answer.validator === undefined ? opaque : `W/${opaque}`;
  const headers = answer.headers === undefined ? { etag: tag } : { ...answer.headers, etag: tag };
  const wanted = ctx.header('if-none-match');
  if (wanted !== null && noneMatchHolds(wanted, opaque)) return answerWith(answer, 304, '', headers, answer.release);
  return answerWith(answer, answer.status, answer.body, headers, answer.release);
}

/**
 * True when `If-None-Match` names the tag whose opaque part (quotes included,
 * no `W/`) is `tag`, or is `*` (RFC 9110 §13.1.2: the weak comparison, so the
 * strong and the weak form of one tag both match). Tags are split on
 * commas outside quotes; a malformed member simply matches nothing.
 */
export function noneMatchHolds(field: string, tag: string): boolean {
  if (field.trim() === '*') return true;
  let start = 0;
  let quoted = false;
  for (let i = 0; i <= field.length; i++) {
    const c = field.charCodeAt(i);
    if (c === 0x22) quoted = !quoted;
    else if (i === field.length || (c === 0x2c && !quoted)) {
      let member = field.slice(start, i).trim();
      if (member.startsWith('W/')) member = member.slice(2);
      if (member === tag) return true;
      start = i + 1;
    }
  }
  return false;
}
