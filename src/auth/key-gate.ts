/**
 * The check of a key after it matched (docs/security.md#key-scopes-and-allowlists), a small step
 * of its own beside the comparison of credentials (merchant-check.ts): an expired key is
 * answered as one that does not match, a client outside the key's networks is refused (a
 * failure for the throttle), a key without the endpoint's scope is refused naming it. A key that
 * may be used is noted for `last_used_at` (key-use.ts).
 *
 * A merchant whose keys have no limits (`keyLimits` absent: every scope, anywhere, no end) costs
 * one property read here; a limited key's networks are parsed once per loaded key (a `WeakMap`
 * on its limits object, which the storages never change), so a request at most looks its client
 * address up (parsed once per address), and only for a key with an allowlist.
 */
import type { KeyLimits, KeyScope, Merchant } from '../storage/contract.js';
import { networksContain, parseIpAddress, parseNetwork, type IpAddress, type IpNetwork } from '../storage/key-limits.js';
import type { KeyUseRecorder } from './key-use.js';

/** Why a matched key may not be used here. */
export type KeyRefusal = 'expired' | 'address_not_allowed' | 'insufficient_scope';

/** A key's limits as the check reads them. */
interface CompiledLimits {
  scopes: readonly KeyScope[] | undefined;
  networks: readonly IpNetwork[] | undefined;
  /** Epoch ms after which the key no longer matches; Infinity: never. */
  endsAt: number;
}

const compiled = new WeakMap<KeyLimits, CompiledLimits>();

/**
 * Client addresses as words, memoised: a client sends from the same address request after
 * request. Bounded: cleared when full, so neither many clients nor made-up addresses pile up.
 */
const addresses = new Map<string, IpAddress | null>();
const MAX_CACHED_ADDRESSES = 4096;

function addressOf(text: string): IpAddress | undefined {
  let address = addresses.get(text);
  if (address === undefined) {
    if (addresses.size >= MAX_CACHED_ADDRESSES) addresses.clear();
    address = parseIpAddress(text) ?? null;
    addresses.set(text, address);
  }
  return address ?? undefined;
}

function compile(limits: KeyLimits): CompiledLimits {
  let networks: IpNetwork[] | undefined;
  if (limits.allowFrom !== undefined && limits.allowFrom.length > 0) {
    networks = [];
    // The storages keep only networks that parse; one that does not (a hand-edited row) matches nobody.
    for (const text of limits.allowFrom) {
      const network = parseNetwork(text);
      if (typeof network !== 'string') networks.push(network);
    }
  }
  const endsAt = limits.expiresAt === undefined ? Infinity : Date.parse(limits.expiresAt);
  const result = { scopes: limits.scopes, networks, endsAt: Number.isNaN(endsAt) ? -Infinity : endsAt };
  compiled.set(limits, result);
  return result;
}

export class KeyGate {
  constructor(
    private readonly now: () => number,
    private readonly recorder: KeyUseRecorder | undefined,
  ) {}

  /**
   * Undefined when the merchant's key `keyIndex` (the one that matched) may be used from
   * `clientAddress` for `scope`, and then its use is noted; else why not, checked in this order:
   * expired, address, scope (a client outside the allowlist learns nothing of the key's scopes).
   */
  refusal(merchant: Merchant, keyIndex: number, scope: KeyScope, clientAddress: string | undefined): KeyRefusal | undefined {
    const limits = merchant.keyLimits?.[keyIndex];
    const now = this.now();
    if (limits !== undefined) {
      const rules = compiled.get(limits) ?? compile(limits);
      if (now >= rules.endsAt) return 'expired';
      if (rules.networks !== undefined) {
        const address = clientAddress === undefined ? undefined : addressOf(clientAddress);
        if (address === undefined || !networksContain(rules.networks, address)) return 'address_not_allowed';
      }
      if (rules.scopes !== undefined && !rules.scopes.includes(scope)) return 'insufficient_scope';
    }
    const keyId = merchant.keyIds?.[keyIndex];
    if (keyId !== undefined) this.recorder?.note(merchant.id, keyId, now);
    return undefined;
  }
}
