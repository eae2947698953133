/** Which addresses the shared throttle stores; without Kysely, so the command line loads it for commands that need no peer. */

/**
 * Addresses shared: printable ASCII up to 64 characters. The throttle gives
 * its address key (an IPv4 address, or an IPv6 network such as
 * `2001:db8:1:2::/64`: src/limits/address-key.ts), which fits whenever the client's address is an IP; others stay counted locally.
 */
export function isShareableAddress(address: string): boolean {
  return /^[\x21-\x7e]{1,64}$/.test(address);
}
