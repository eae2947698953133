/**
 * What arrived of a request head that Node's HTTP parser refused (too large,
 * malformed, too slow), so that the adapter's answer can carry the method and
 * the `X-Request-Id` the client sent.
 *
 * Node hands its `clientError` only the chunk it was parsing (`rawPacket`),
 * and nothing at all for a request timeout. Over plain HTTP the parser reads
 * the socket itself, in reads of up to 64 KiB, so no chunk reaches
 * JavaScript; its last read usually holds the whole head, and a head that
 * came in several reads, or too slowly (408), keeps its id out of reach:
 * copying every read into JavaScript to keep it would cost every request.
 * Over TLS every chunk already passes through JavaScript, one TLS record of
 * at most 16 KiB each, so an oversized head's id, near its start, is in an
 * earlier chunk than the one refused: there the chunks of the head being
 * read are kept (references, at most the header limit's worth, dropped as
 * soon as the head is parsed).
 */
import { maxHeaderSize as NODE_MAX_HEADER_SIZE, type IncomingMessage, type Server } from 'node:http';
import type { Socket } from 'node:net';

interface Head {
  chunks: Buffer[];
  bytes: number;
}

/** The chunks of the head being read, per TLS connection. */
const heads = new WeakMap<Socket, Head>();

/** Keeps, on each TLS connection of `server`, the chunks of the request head being read. */
export function keepRequestHeads(server: Server): void {
  // The server's own header limit when it was given one, else Node's (--max-http-header-size).
  const limit = (server as { maxHeaderSize?: number }).maxHeaderSize ?? NODE_MAX_HEADER_SIZE;
  server.on('secureConnection', (socket: Socket) => {
    const head: Head = { chunks: [], bytes: 0 };
    heads.set(socket, head);
    // Before the parser's own listener, so the chunk it refuses is kept too.
    socket.prependListener('data', (chunk: Buffer) => {
      // A head is refused once it passes the limit: what came after is not needed.
      if (head.bytes > limit) return;
      head.chunks.push(chunk);
      head.bytes += chunk.length;
    });
  });
  const parsed = (req: IncomingMessage) => {
    const head = heads.get(req.socket);
    if (head) {
      head.chunks = [];
      head.bytes = 0;
    }
  };
  // The head is whole: what follows is a body or the next request.
  server.on('request', parsed);
  server.on('checkExpectation', parsed);
}

/** What arrived of the refused head on `socket`, as Latin-1 text: the chunks kept (TLS), else the chunk Node handed over. */
export function refusedHead(socket: Socket, rawPacket: Buffer | undefined): string {
  const head = heads.get(socket);
  if (head !== undefined && head.chunks.length > 0) return Buffer.concat(head.chunks).toString('latin1');
  return rawPacket?.toString('latin1') ?? '';
}
