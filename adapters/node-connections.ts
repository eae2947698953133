/**
 * The Node adapter's connection caps (docs/runtimes.md#connection-limits):
 * at most `maxConnections` at once, and at most `maxConnectionsPerAddress`
 * from one client (an IPv6 one by its network, `addressKey`), so that one
 * client opening thousands of idle connections (or reopening them as fast as
 * they are closed) holds a few of the server's, not all of them.
 *
 * A connection over a cap is refused before Node's HTTP server sees it: the
 * server's own connection listener (the HTTP parser; over TLS the handshake
 * first) never runs for it, so nothing sent on it is parsed or served, and
 * over TLS it costs no handshake. Every refusal goes through the pipeline as
 * a 429 (`too_many_requests`, `Retry-After: 1`): one access line, one count
 * in the metrics and in `merchant_api_throttled_total`, as every limit.
 * Over plain HTTP the answer is written at once, unread, and the connection
 * closed; over TLS the connection is closed unanswered (an answer needs the
 * handshake, docs/security.md#connection-caps), and its access line says
 * `"bytes":0,"aborted":true`.
 */
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import { MerchantApiError, type MerchantApi } from '../src/index.js';
import { addressKey } from '../src/limits/address-key.js';
import { endWithAnswer, refuseWithoutRequest } from './node-raw-answer.js';

export interface ConnectionCaps {
  maxConnections: number;
  maxConnectionsPerAddress: number;
  /** IPv6 clients count per network of this prefix length. */
  ipv6Prefix: number;
  /** The server speaks TLS: a refused connection is closed before its handshake, unanswered. */
  tls: boolean;
  /** Told when an address reaches `maxConnectionsPerAddress`; once until it holds fewer again. */
  onCapped?: (clientAddress: string, limit: number) => void;
}

/** How long a refused connection may stay open after its answer, for the client to read it: then it is cut. */
const REFUSED_LINGER_MS = 1000;

/**
 * Refused connections being answered at once, at most: each stays open until
 * the client has read its answer (at most REFUSED_LINGER_MS), so a flood of
 * them would otherwise hold as many sockets as the caps spare. Past this,
 * one is closed unanswered, still logged and counted.
 */
const ANSWERING_AT_MOST = 1000;

interface Refusal {
  error: MerchantApiError;
  /** Its reason in `merchant_api_throttled_total`. */
  limit: string;
}

/** Puts the caps in front of the server's own handling of new connections. Call once, before `listen`. */
export function capConnections(server: Server, api: MerchantApi, caps: ConnectionCaps): void {
  const { maxConnections, maxConnectionsPerAddress: perAddress, ipv6Prefix, onCapped } = caps;
  const tooMany: Refusal = { error: new MerchantApiError('too_many_requests', 'The server has too many connections at once; retry later.', { retryAfter: 1 }), limit: 'connections' };
  const tooManyFromAddress: Refusal = {
    error: new MerchantApiError('too_many_requests', `Too many connections from this address at once (at most ${perAddress}); close one or retry later.`, { retryAfter: 1 }),
    limit: 'connections_per_address',
  };
  // With a per-address cap no lower than the whole, the whole is the only cap (behind a proxy every connection is the proxy's).
  const countAddresses = perAddress < maxConnections;
  let open = 0;
  const byAddress = new Map<string, number>();
  // Addresses told about since they reached the cap.
  const capped = new Set<string>();
  let answering = 0;

  /** Counts the connection in, or answers which cap refuses it. */
  function admit(socket: Socket): Refusal | undefined {
    if (open >= maxConnections) return tooMany;
    let address: string | undefined;
    // A socket already closed by its peer has no address left: counted in the whole only.
    if (countAddresses && socket.remoteAddress !== undefined) {
      address = addressKey(socket.remoteAddress, ipv6Prefix);
      const held = byAddress.get(address) ?? 0;
      if (held >= perAddress) {
        if (!capped.has(address)) {
          capped.add(address);
          onCapped?.(address, perAddress);
        }
        return tooManyFromAddress;
      }
      byAddress.set(address, held + 1);
    }
    open++;
    socket.once('close', () => {
      open--;
      if (address === undefined) return;
      const left = byAddress.get(address)! - 1;
      if (left === 0) byAddress.delete(address);
      else byAddress.set(address, left);
      if (left < perAddress) capped.delete(address);
    });
    return undefined;
  }

  /**
   * Answers a refused connection with the pipeline's 429, written at once,
   * unread; what the client sends is drained, so that the close is not a
   * reset that loses the answer, and the connection is cut after
   * REFUSED_LINGER_MS whatever the client does. Over TLS, or with
   * ANSWERING_AT_MOST answers under way, it is closed at once instead, and
   * the answer only logged and counted.
   */
  function refuse(socket: Socket, refusal: Refusal): void {
    socket.on('error', () => socket.destroy());
    const unsent = caps.tls || answering >= ANSWERING_AT_MOST;
    // Reads the socket's address first: a destroyed socket may no longer tell it.
    const answered = refuseWithoutRequest(api, refusal.error, socket, { connectionLimit: refusal.limit, unsent });
    if (unsent) {
      socket.destroy();
      void answered.catch(() => undefined);
      return;
    }
    answering++;
    socket.resume();
    const cut = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS);
    cut.unref();
    socket.once('close', () => {
      answering--;
      clearTimeout(cut);
    });
    void answered.then((response) => endWithAnswer(socket, response)).catch(() => socket.destroy());
  }

  // The server's own connection listeners (the HTTP parser; over TLS the
  // handshake) run only for a connection the caps admit.
  const own = server.listeners('connection') as ((socket: Socket) => void)[];
  server.removeAllListeners('connection');
  server.on('connection', (socket: Socket) => {
    const refusal = admit(socket);
    if (refusal) refuse(socket, refusal);
    else for (const listener of own) listener.call(server, socket);
  });
}
