/**
 * The 200 of one page of a listing (users, or the change feed): `{"status":"ok","data":[…],
 * "next_cursor":…,"errors":[]}`, its items encoded to UTF-8 once for the body and for its tag. A
 * page whose cursor is sealed afresh on every answer (a new nonce) is tagged, weakly, by its items
 * and the position that cursor names (docs/protocol.md#conditional-requests).
 */
import { joinBytes, reply, utf8Bytes, type Reply } from '../http/responses.js';

export function pageReply(itemsJson: string, nextCursor: string, headers: Record<string, string> | undefined, nextPosition: object | undefined): Reply {
  const data = utf8Bytes(itemsJson);
  const answer = reply(200, joinBytes('{"status":"ok","data":[', data, `],"next_cursor":${nextCursor},"errors":[]}`), headers);
  if (nextPosition !== undefined) answer.validator = joinBytes('{"data":[', data, `],"next":${JSON.stringify(nextPosition)}}`);
  return answer;
}
