/**
 * Every answer the handler writes. Handlers return a `Reply` (status, JSON
 * text or a stream of JSON text, headers); the pipeline turns it into the
 * `Response`, once, for GET and HEAD alike. Errors become replies in
 * `error-reply.ts`.
 */

/** Which JSON shape an endpoint answers errors in. */
export type ErrorShape = 'signature' | 'envelope';

export interface Reply {
  status: number;
  /**
   * JSON text, whole, or in pieces for an answer streamed as it is read.
   */
  body: WholeBody | AsyncIterable<string>;
  headers?: Record<string, string>;
  /**
   * On a route with `etag`: what the tag is of, when the body changes on
   * every answer though what it says does not (a page's freshly sealed
   * cursor); the tag is then weak (docs/protocol.md#conditional-requests).
   * Texts are taken as the UTF-8 bytes of each, in order.
   */
  validator?: WholeBody | readonly string[];
}

/** A body known whole before the answer starts: its JSON text. */
export type WholeBody = string;

export function isWholeBody(body: Reply['body']): body is WholeBody {
  return typeof body === 'string';
}

export function reply(status: number, body: Reply['body'], headers?: Record<string, string>): Reply {
  return headers === undefined ? { status, body } : { status, body, headers };
}

const utf8 = new TextEncoder();

/**
 * The `Response` of a reply. HEAD gets the headers of GET, Content-Length
 * included where the length is known, and no body. `done` learns the bytes
 * handed over once the body is complete (or, for a stream, cut).
 */
export function toResponse(reply: Reply, head: boolean, extra?: Record<string, string>, done?: (bytes: number, aborted: boolean) => void, inFlight?: Set<() => void>): Response {
  const headers = replyHeaders(reply, extra);
  const { body } = reply;
  if (reply.status === 204 || reply.status === 304) {
    // No content, or not modified: no body, and neither its type nor its length (RFC 9110 §8.6, §15.4.5).
    delete headers['content-type'];
    done?.(0, false);
    return new Response(null, { status: reply.status, headers });
  }
  if (isWholeBody(body)) {
    fixLength(headers, body, head, done);
    return new Response(head ? null : body, { status: reply.status, headers });
  }
  if (head) {
    // The length of a stream is not known in advance. An unread empty stream
    // rather than null: Bun and Deno write Content-Length: 0 for a null body,
    // a wrong length rather than none; given a stream they frame HEAD as GET.
    void body[Symbol.asyncIterator]().return?.();
    done?.(0, false);
    return new Response(new ReadableStream({ pull: (c) => c.close() }, { highWaterMark: 0 }), { status: reply.status, headers });
  }
  return new Response(streamOf(body, done, inFlight), { status: reply.status, headers });
}

/** The headers of a reply, `extra` (the pipeline's) last. A fresh object each time: @hono/node-server's Response writes Content-Length into it. */
export function replyHeaders(reply: Reply, extra?: Record<string, string>): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json', 'cache-control': 'no-store' };
  if (reply.headers) Object.assign(headers, reply.headers);
  if (extra) Object.assign(headers, extra);
  return headers;
}

/** Content-Length of a whole body, known here once (Node's server would otherwise measure it again); `done` learns the bytes sent: none for HEAD. */
export function fixLength(headers: Record<string, string>, body: WholeBody, head: boolean, done?: (bytes: number, aborted: boolean) => void): void {
  const length = byteLength(body);
  headers['content-length'] = String(length);
  done?.(head ? 0 : length, false);
}

/**
 * A pull stream over JSON pieces: one piece per read, so a slow client holds
 * back the storage reads. A failure part-way aborts the stream rather than
 * closing it: the client sees a truncated body, never a valid-looking short list.
 * While it runs, `inFlight` holds a function that cuts it (a shutdown that
 * stops waiting for it); `done` is called once, however it ends.
 */
function streamOf(pieces: AsyncIterable<string>, done?: (bytes: number, aborted: boolean) => void, inFlight?: Set<() => void>): ReadableStream<Uint8Array> {
  const iterator = pieces[Symbol.asyncIterator]();
  let bytes = 0;
  let finished = false;
  const finish = (aborted: boolean) => {
    if (finished) return false;
    finished = true;
    inFlight?.delete(cut);
    done?.(bytes, aborted);
    return true;
  };
  let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
  function cut(): void {
    if (!finish(true)) return;
    // The runtime ends the response unfinished, and the storage reads stop.
    controller?.error(new Error('The response was cut: the server is shutting down.'));
    void Promise.resolve(iterator.return?.()).catch(() => undefined);
  }
  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        inFlight?.add(cut);
      },
      async pull(controller) {
        let next: IteratorResult<string>;
        try {
          next = await iterator.next();
        } catch (error) {
          if (finish(true)) controller.error(error);
          return;
        }
        if (finished) return;
        if (next.done) {
          finish(false);
          controller.close();
          return;
        }
        const chunk = utf8.encode(next.value);
        bytes += chunk.byteLength;
        controller.enqueue(chunk);
      },
      async cancel() {
        finish(true);
        await iterator.return?.();
      },
    },
    { highWaterMark: 0 },
  );
}

const NativeBuffer = (globalThis as { Buffer?: { byteLength(text: string): number } }).Buffer;

/** UTF-8 length of a string: Node's and Bun's native count where there is one, else by encoding. */
export const byteLength: (text: string) => number = NativeBuffer ? (text) => NativeBuffer.byteLength(text) : (text) => utf8.encode(text).byteLength;
