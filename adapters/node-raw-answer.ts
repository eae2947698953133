/**
 * The Node adapter's answers made where Node has no request object (a
 * request its parser refused, a Host the Fetch API cannot take, a connection
 * over a cap): the pipeline answers a stand-in Request, so the answer is the
 * one error renderer's, with its access line and metric count, and it is
 * written on the socket as raw HTTP/1.1.
 */
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { MerchantApi, MerchantApiError } from '../src/index.js';

/** What is known of a request the adapter answers without a Request of Node's. */
export interface StandIn {
  /** The client's request id, when it could be read from what arrived. */
  header?: (name: string) => string | null;
  /** The method from the request line, when it could be read. */
  method?: string;
  /** The connection cap that refused the connection (RequestInfo.connectionLimit). */
  connectionLimit?: string;
  /** The answer will not be sent (RequestInfo.unsent). */
  unsent?: boolean;
}

/**
 * The pipeline's answer to a refusal made before any Request exists: a
 * stand-in Request carries the method and scheme, the socket its address.
 */
export function refuseWithoutRequest(api: MerchantApi, refusal: MerchantApiError, socket: Socket | undefined, standIn: StandIn = {}): Promise<Response> {
  const scheme = (socket as { encrypted?: boolean } | undefined)?.encrypted ? 'https' : 'http';
  const method = standIn.method ?? 'GET';
  // The Fetch API refuses to build these methods; the access line then says GET.
  const usable = /^(CONNECT|TRACE|TRACK)$/.test(method) ? 'GET' : method;
  return api.fetch(new Request(`${scheme}://localhost/`, { method: usable }), {
    refusal,
    clientAddress: socket?.remoteAddress,
    clientPort: socket?.remotePort,
    header: standIn.header ?? (() => null),
    connectionLimit: standIn.connectionLimit,
    unsent: standIn.unsent,
  });
}

/** Writes `response` on the socket as raw HTTP/1.1 and ends the connection after it. */
export async function endWithAnswer(socket: Socket, response: Response): Promise<void> {
  const body = await response.text();
  let head = `HTTP/1.1 ${response.status} ${STATUS_CODES[response.status]}\r\n`;
  response.headers.forEach((value, name) => (head += `${name}: ${value}\r\n`));
  if (!socket.destroyed) socket.end(`${head}connection: close\r\n\r\n${body}`);
}
