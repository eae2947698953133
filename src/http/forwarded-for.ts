/**
 * The client's address in `X-Forwarded-For` (docs/protocol.md#forwarded-addresses), read behind a
 * trusted proxy (`trustProxy`) by every runtime's adapter alike: the pipeline's context reads it here
 * and nowhere else. The last entry is the one the nearest proxy appended; the entries before it are
 * whatever the client chose to send. Proxies write an address in one of these forms, each read as
 * the address alone: `203.0.113.7`, `203.0.113.7:41234` (a proxy that appends the port),
 * `2001:db8::7`, `[2001:db8::7]` and `[2001:db8::7]:41234`. Anything else names no client, and
 * the request is refused (400) rather than taken as the proxy's own address, which a key's
 * networks could allow (`127.0.0.1/32`).
 */
import { isIP } from 'node:net';
import { MerchantApiError } from '../errors.js';

/** The answer to a request whose `X-Forwarded-For` names no address, behind a trusted proxy. */
export const UNREADABLE_FORWARDED_FOR = new MerchantApiError(
  'malformed_request',
  'The X-Forwarded-For header\'s last entry is not a client address (a.b.c.d, a.b.c.d:port, an IPv6 address, [IPv6] or [IPv6]:port): this server trusts the proxy in front of it to append one.',
);

const PORT = /^\d{1,5}$/;

/** A port as a proxy writes it: decimal, 0-65535. */
function isPort(text: string): boolean {
  return PORT.test(text) && Number(text) <= 65_535;
}

/** One entry as an address without its port, or undefined when it is none of the forms above. */
export function forwardedEntryAddress(entry: string): string | undefined {
  if (entry.startsWith('[')) {
    // Without a `]`, `rest` is the whole entry, which begins with `[`: refused below.
    const close = entry.indexOf(']');
    const address = entry.slice(1, close);
    const rest = entry.slice(close + 1);
    if (isIP(address) !== 6 || (rest !== '' && !(rest.startsWith(':') && isPort(rest.slice(1))))) return undefined;
    return address;
  }
  // One colon: IPv4 with a port (an IPv6 address has at least two); none or several: the entry whole. One isIP either way.
  const colon = entry.indexOf(':');
  if (colon < 0 || colon !== entry.lastIndexOf(':')) return isIP(entry) !== 0 ? entry : undefined;
  const address = entry.slice(0, colon);
  return isPort(entry.slice(colon + 1)) && isIP(address) === 4 ? address : undefined;
}

/**
 * The client address of an `X-Forwarded-For` value: its last entry (trimmed) read as above, or
 * undefined when that entry is empty or unreadable (the request is then a 400, never the peer's).
 */
export function forwardedForAddress(header: string): string | undefined {
  return forwardedEntryAddress(header.slice(header.lastIndexOf(',') + 1).trim());
}
