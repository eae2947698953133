/**
 * The 200 of one page of a listing (users, or the change feed): `{"status":"ok","data":[…],
 * "next_cursor":…,"errors":[]}`. A page whose cursor is sealed afresh on every answer (a new
 * nonce) is tagged, weakly, by its items and the position that cursor names
 * (docs/protocol.md#conditional-requests): those texts are hashed in parts, never joined into a
 * copy. The body stays text, which the host encodes as it writes it: UTF-8 bytes made here are
 * memory outside V8's heap, whose growth (tens of KB a page) sets off collections of the whole
 * heap, and beside a large heap (a million users, many salts) a page cost twice as much
 * (docs/benchmarks.md#pages-beside-a-large-heap-6-december-2026).
 */
import { reply, type Reply } from '../http/responses.js';

export function pageReply(itemsJson: string, nextCursor: string, headers: Record<string, string> | undefined, nextPosition: object | undefined): Reply {
  const answer = reply(200, `{"status":"ok","data":[${itemsJson}],"next_cursor":${nextCursor},"errors":[]}`, headers);
  if (nextPosition !== undefined) answer.validator = ['{"data":[', itemsJson, `],"next":${JSON.stringify(nextPosition)}}`];
  return answer;
}
