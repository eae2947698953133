/**
 * HTTP Basic authentication of merchants (SPEC section 3). Every failure,
 * whether missing, malformed, unknown merchant or wrong key, is the same 401,
 * so a caller learns nothing about which merchant ids exist.
 */
import { constantTimeEqual } from './crypto.js';
import { MerchantApiError } from './errors.js';
import type { Merchant, Storage } from './storage.js';

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The one 401 every authentication failure answers. */
export const UNAUTHORIZED = new MerchantApiError('unauthorized', 'Valid merchant credentials are required (HTTP Basic: merchant id and API key).');

/** The credentials of an `Authorization: Basic` header, or undefined if malformed. */
export function parseBasicAuth(header: string | null): { id: string; key: string } | undefined {
  if (header === null || header.length > 4096) return undefined;
  const space = header.indexOf(' ');
  if (space === -1 || header.slice(0, space).toLowerCase() !== 'basic') return undefined;
  const encoded = header.slice(space + 1).trim();
  if (!BASE64.test(encoded) || encoded.length % 4 === 1) return undefined;
  let decoded: string;
  try {
    decoded = utf8.decode(Uint8Array.from(atob(encoded), (c) => c.charCodeAt(0)));
  } catch {
    return undefined;
  }
  const colon = decoded.indexOf(':');
  if (colon <= 0 || decoded.includes('\u0000')) return undefined;
  return { id: decoded.slice(0, colon), key: decoded.slice(colon + 1) };
}

/**
 * The merchant the request authenticates as. Throws the 401 for any
 * credential problem, and 403 for a disabled merchant with a valid key.
 */
export async function authenticate(request: Request, storage: Storage): Promise<Merchant> {
  const credentials = parseBasicAuth(request.headers.get('authorization'));
  if (!credentials || credentials.key === '') throw UNAUTHORIZED;
  const merchant = await storage.getMerchant(credentials.id);
  if (!merchant) throw UNAUTHORIZED;
  let matched = false;
  for (const key of merchant.keys) if (constantTimeEqual(key, credentials.key)) matched = true;
  if (!matched) throw UNAUTHORIZED;
  if (merchant.status !== 'active') throw new MerchantApiError('merchant_disabled', 'This account is disabled.');
  return merchant;
}
